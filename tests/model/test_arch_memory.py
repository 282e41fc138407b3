"""What each architecture keeps per token and per sequence, read from real shapes' headers (app.model.arch_memory).

The figures are llama.cpp's, computed by hand from src/llama-hparams.cpp (n_embd_k_gqa, n_embd_r, n_embd_s) and
checked against its dry run in tests/predict/test_arch_dry_run.py (heavy); here only the header is read.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from app.model.format import format_facts_text
from app.model.gguf_facts import GGUFFileError, read_model_facts
from app.model.gguf_http import RemoteOptions, remote_facts
from tests.arch_ggufs import by_label
from tests.gguf_synth import write_bad_metadata_gguf, write_unknown_arch_gguf
from tests.model.range_server import serve

MIB = 2**20


def _facts(tmp_path: Path, label: str):  # noqa: ANN202 - ModelFacts
    return read_model_facts(by_label(label).write(tmp_path))


def test_granite_4_h_is_read_not_refused(tmp_path: Path) -> None:
    # issue #41: "bad model metadata (layer 0 has 12 attention heads and 0 KV heads)"; 0 KV heads marks a Mamba-2 layer
    facts = _facts(tmp_path, "granite-4.0-h-micro")
    assert facts.recurrent_layers == tuple(i for i in range(40) if i not in (5, 15, 25, 35))
    assert facts.kv_layers == 4
    # Mamba-2: conv (4 - 1) × (d_inner 4096 + 2 × 1 group × d_state 128), state 128 × 4096, f32, per layer
    assert (facts.state_r, facts.state_s) == (3 * (4096 + 256), 128 * 4096)
    assert facts.state_bytes == 36 * (3 * 4352 + 524288) * 4
    assert facts.kv_bytes(8192) == 4 * 8 * 64 * 2 * 2 * 8192  # 4 layers × 8 KV heads × 64 × (K, V) × f16
    assert "0 KV heads is recurrent" in str(facts.extra["memory_rule"])
    assert "Recurrent state" in format_facts_text(facts)


def test_mla_caches_the_compressed_latent_and_no_v(tmp_path: Path) -> None:
    facts = _facts(tmp_path, "deepseek-v2-lite")
    assert set(facts.kv_v_per_layer) == {0} and set(facts.kv_k_per_layer) == {576}  # kv_lora_rank 512 + rope 64
    assert facts.kv_bytes(8192) / MIB == 243.0  # the issue's llama.cpp figure (it was counted 459 with a V cache)
    assert "no V cache (MLA)" in format_facts_text(facts)


def test_pure_recurrent_models_keep_state_and_no_kv(tmp_path: Path) -> None:
    mamba2 = _facts(tmp_path, "mamba2-2.7b")
    assert mamba2.kv_layers == 0 and mamba2.kv_bytes(32768) == 0
    assert mamba2.state_bytes == 64 * (3 * (5120 + 2 * 128) + 128 * 5120) * 4  # llama.cpp: 163.94 MiB
    rwkv = _facts(tmp_path, "rwkv7-1.5b")
    assert (rwkv.state_r, rwkv.state_s) == (2 * 2048, 2048 * 64)  # token shift × 2, n_embd × wkv head size


@pytest.mark.parametrize(("label", "recurrent", "attention"), [
    ("qwen3-next-80b-a3b", 36, 12),  # every 4th layer attends (full_attention_interval)
    ("nemotron-h-8b", 24, 4),  # the MLP layers keep neither
    ("falcon-h1-1.5b", 24, 24),  # every layer both
    ("lfm2-1.2b", 10, 6),
    ("jamba-small", 14, 2),
])
def test_hybrids_split_their_layers_by_the_architectures_rule(tmp_path: Path, label: str, recurrent: int,
                                                              attention: int) -> None:
    facts = _facts(tmp_path, label)
    assert (len(facts.recurrent_layers), facts.kv_layers) == (recurrent, attention)


def test_attention_models_are_unchanged(tmp_path: Path) -> None:
    facts = _facts(tmp_path, "llama-3.1-8b")
    assert facts.kv_layers == 32 and not facts.recurrent_layers
    assert facts.kv_bytes(8192) == 32 * 8 * 128 * 2 * 2 * 8192


def test_a_plain_attention_model_with_0_kv_heads_is_still_bad_metadata(tmp_path: Path) -> None:
    path = write_bad_metadata_gguf(tmp_path / "bad.gguf", **{"attention.head_count_kv": [2, 0]})
    with pytest.raises(GGUFFileError, match="bad model metadata"):
        read_model_facts(path)


def test_an_architecture_nobody_knows_gets_a_one_line_reason(tmp_path: Path) -> None:
    facts = read_model_facts(write_unknown_arch_gguf(tmp_path / "odd.gguf"))
    assert facts.extra["memory_rule_known"] is False
    line = next(x for x in format_facts_text(facts).splitlines() if x.startswith("Memory rule"))
    assert "not an architecture this workbench knows" in line


def test_a_remote_header_is_kept_as_a_sparse_local_copy_for_the_dry_run(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GGUF_WORKBENCH_DATA_DIR", str(tmp_path / "data"))
    path = by_label("granite-4.0-h-micro").write(tmp_path)
    with serve({"/g.gguf": path}) as (base, state):
        facts = remote_facts(f"{base}/g.gguf", RemoteOptions(backoff_s=0.01))
    copy = Path(str(facts.extra["header_copy"]))
    assert copy.stat().st_size == path.stat().st_size and state.bytes_sent < 2 * MIB  # the header, then a hole
    local = read_model_facts(copy)
    assert (local.recurrent_layers, local.kv_k_per_layer, local.tensor_bytes) == (
        facts.recurrent_layers, facts.kv_k_per_layer, facts.tensor_bytes)
