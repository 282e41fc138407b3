"""GGUF facts: figures against hand computation and the real SmolLM2 file."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from app.model.facts import ModelFacts
from app.model.format import format_facts_text
from app.model.gguf_facts import read_model_facts
from app.model.kv_cache import REPORTED_CACHE_TYPES
from tests.gguf_synth import write_unknown_arch_gguf

MakeGGUF = Callable[..., Path]


def hand_param_counts(
    n_layer: int, n_embd: int, n_head: int, n_head_kv: int, n_ff: int, n_vocab: int, hd_k: int, hd_v: int
) -> tuple[int, int]:
    """(elements in 2-D weights, elements in 1-D norms) of a llama-shaped model, written out by hand."""
    per_layer_2d = (
        n_embd * n_head * hd_k  # attn_q
        + n_embd * n_head_kv * hd_k  # attn_k
        + n_embd * n_head_kv * hd_v  # attn_v
        + n_head * hd_v * n_embd  # attn_output
        + 3 * n_embd * n_ff  # ffn_gate, ffn_up, ffn_down
    )
    matrices = n_layer * per_layer_2d + 2 * n_vocab * n_embd  # + token_embd + output
    norms = n_layer * 2 * n_embd + n_embd  # attn_norm, ffn_norm per layer + output_norm
    return matrices, norms


# --------------------------------------------------------------------------------------------------------------------
# Synthetic models: sizes and shapes


def test_default_synthetic_model_by_hand(make_gguf: MakeGGUF) -> None:
    facts = read_model_facts(make_gguf())
    # 2 layers, n_embd 64, 4 heads, 2 KV heads, head dim 64/4 = 16, n_ff 128, vocab 256
    # per layer: q 4096 + k 2048 + v 2048 + o 4096 + ffn 3 x 8192 + norms 128 = 36992
    assert facts.n_params == 2 * 36992 + 256 * 64 * 2 + 64 == 106816
    assert facts.weight_bytes == 106496 * 2 + 320 * 4 == 214272  # F16 matrices, F32 norms
    assert facts.architecture == "llama"
    assert facts.name == "synthetic"
    assert facts.file_type == "F16"
    assert (facts.n_layer, facts.n_embd, facts.n_head, facts.n_head_kv) == (2, 64, 4, 2)
    assert (facts.head_dim_k, facts.head_dim_v, facts.n_ff, facts.n_vocab, facts.n_ctx_train) == (16, 16, 128, 256, 512)
    assert facts.gqa_ratio == 2.0
    assert facts.swa_layers == () and facts.swa_window == 0
    assert (facts.n_expert, facts.n_expert_used) == (0, 0)
    assert facts.file_bytes == facts.extra["tensor_data_offset_bytes"] + facts.weight_bytes


@pytest.mark.parametrize(
    ("dtype", "bytes_per_matrix_value", "file_type"),
    [("F32", 4.0, "F32"), ("F16", 2.0, "F16"), ("Q8_0", 34 / 32, "Q8_0")],
)
def test_weight_bytes_by_dtype(make_gguf: MakeGGUF, dtype: str, bytes_per_matrix_value: float, file_type: str) -> None:
    dims = {"n_layer": 3, "n_embd": 64, "n_head": 4, "n_head_kv": 4, "n_ff": 96, "n_vocab": 320}
    facts = read_model_facts(make_gguf(tensor_dtype=dtype, **dims))
    matrices, norms = hand_param_counts(3, 64, 4, 4, 96, 320, 16, 16)
    assert facts.n_params == matrices + norms
    expected_bytes = int(matrices * bytes_per_matrix_value) + norms * 4
    assert facts.weight_bytes == expected_bytes
    assert facts.bits_per_weight == pytest.approx(8 * expected_bytes / (matrices + norms))
    assert facts.file_type == file_type
    assert facts.gqa_ratio == 1.0


def test_tensor_type_histogram(make_gguf: MakeGGUF) -> None:
    facts = read_model_facts(make_gguf(tensor_dtype="Q8_0", n_layer=3))
    # per layer 7 matrices + 2 norms; plus token_embd, output (matrices) and output_norm
    assert set(facts.tensor_types) == {"Q8_0", "F32"}
    q8, f32 = facts.tensor_types["Q8_0"], facts.tensor_types["F32"]
    assert (q8.n_tensors, f32.n_tensors) == (3 * 7 + 2, 3 * 2 + 1)
    matrices, norms = hand_param_counts(3, 64, 4, 2, 128, 256, 16, 16)
    assert (q8.n_elements, f32.n_elements) == (matrices, norms)
    assert (q8.n_bytes, f32.n_bytes) == (matrices // 32 * 34, norms * 4)
    assert sum(s.n_bytes for s in facts.tensor_types.values()) == facts.weight_bytes
    assert list(facts.tensor_types) == ["Q8_0", "F32"]  # largest first


def test_head_dims_from_key_and_value_length(make_gguf: MakeGGUF) -> None:
    facts = read_model_facts(make_gguf(key_length=32, value_length=24))
    assert (facts.head_dim_k, facts.head_dim_v) == (32, 24)
    matrices, norms = hand_param_counts(2, 64, 4, 2, 128, 256, 32, 24)
    assert facts.n_params == matrices + norms == 125248
    # 2 layers x 2 KV heads x (32 + 24) values x 2 bytes
    assert facts.kv_bytes_per_token("f16") == 2 * 2 * (32 * 2 + 24 * 2) == 448
    assert facts.kv_bytes_per_token("q8_0", "f16") == 2 * 2 * (32 * 34 / 32 + 24 * 2)


def test_head_dims_without_key_length_are_embd_over_heads(make_gguf: MakeGGUF) -> None:
    facts = read_model_facts(make_gguf(n_embd=96, n_head=6, n_head_kv=2))
    assert (facts.head_dim_k, facts.head_dim_v) == (16, 16)
    assert facts.kv_bytes_per_token("f16") == 2 * 2 * 16 * 2 * 2


def test_gqa_ratio_and_kv_heads_default_to_heads(make_gguf: MakeGGUF) -> None:
    assert read_model_facts(make_gguf("gqa.gguf", n_head=8, n_head_kv=2)).gqa_ratio == 4.0
    mha = read_model_facts(make_gguf("mha.gguf", n_head=4, omit_keys=["attention.head_count_kv"]))
    assert mha.n_head_kv == 4 and mha.gqa_ratio == 1.0


def test_per_layer_head_and_ff_arrays(make_gguf: MakeGGUF) -> None:
    facts = read_model_facts(make_gguf(n_head=[4, 8], n_head_kv=[2, 4], n_ff=[128, 256]))
    assert (facts.n_head, facts.n_head_kv, facts.n_ff) == (8, 4, 256)
    assert facts.extra["n_head_per_layer"] == [4, 8]
    assert facts.extra["n_head_kv_per_layer"] == [2, 4]
    assert facts.extra["n_ff_per_layer"] == [128, 256]
    assert facts.head_dim_k == 64 // 4  # llama.cpp: n_embd / heads of layer 0


def test_vocab_fallbacks(make_gguf: MakeGGUF) -> None:
    no_key = read_model_facts(make_gguf("a.gguf", n_vocab=300, omit_keys=["vocab_size"]))
    assert no_key.n_vocab == 300  # from tokenizer.ggml.tokens
    no_tokens = read_model_facts(make_gguf("b.gguf", n_vocab=300, omit_keys=["vocab_size", "tokenizer.ggml.tokens"]))
    assert no_tokens.n_vocab == 300  # from token_embd.weight


@pytest.mark.parametrize(
    ("file_type", "name"),
    [(0, "F32"), (1, "F16"), (3, "Q4_1"), (7, "Q8_0"), (15, "Q4_K_M"), (18, "Q6_K"), (32, "BF16"),
     (4, "unknown"), (1024, "unknown"), (-1, "unknown")],
)
def test_file_type_names(make_gguf: MakeGGUF, file_type: int, name: str) -> None:
    assert read_model_facts(make_gguf(file_type=file_type)).file_type == name


def test_name_falls_back_to_file_stem(make_gguf: MakeGGUF) -> None:
    assert read_model_facts(make_gguf("tiny-model.Q8_0.gguf", name=None)).name == "tiny-model.Q8_0"


def test_experts(make_gguf: MakeGGUF) -> None:
    facts = read_model_facts(make_gguf(extra_kv={"llama.expert_count": 8, "llama.expert_used_count": 2}))
    assert (facts.n_expert, facts.n_expert_used) == (8, 2)
    assert "8 (2 used per token)" in format_facts_text(facts)


def test_unknown_architecture_reads_and_is_flagged(tmp_path: Path) -> None:
    facts = read_model_facts(write_unknown_arch_gguf(tmp_path / "odd.gguf"))
    assert facts.architecture == "nosucharch"
    assert facts.n_layer == 2
    assert facts.extra["arch_known_to_gguf"] is False


def test_json_dict_round_trips_through_json(make_gguf: MakeGGUF) -> None:
    facts = read_model_facts(make_gguf(arch="gemma2", n_layer=4, sliding_window=64))
    doc = json.loads(json.dumps(facts.to_json_dict()))
    assert doc["swa_layers"] == [0, 2]
    assert doc["tensor_types"]["F16"]["n_tensors"] == 4 * 7 + 2


def test_synthetic_files_are_small(make_gguf: MakeGGUF) -> None:
    assert make_gguf(tensor_dtype="F32").stat().st_size < 1_000_000


# --------------------------------------------------------------------------------------------------------------------
# The real model


@pytest.fixture(scope="module")
def smollm2_facts(smollm2_path: Path) -> ModelFacts:
    return read_model_facts(smollm2_path)


@pytest.mark.heavy  # the real model
def test_smollm2_hparams(smollm2_facts: ModelFacts) -> None:
    f = smollm2_facts
    assert f.architecture == "llama"
    assert f.file_type == "Q4_1"
    assert (f.n_layer, f.n_head, f.n_head_kv) == (30, 9, 3)
    assert (f.head_dim_k, f.head_dim_v) == (64, 64)
    assert (f.n_embd, f.n_ff, f.n_vocab, f.n_ctx_train) == (576, 1536, 49152, 8192)
    assert f.gqa_ratio == 3.0
    assert f.swa_layers == ()


@pytest.mark.heavy  # the real model
def test_smollm2_kv_bytes(smollm2_facts: ModelFacts) -> None:
    # 30 layers x 3 KV heads x 64 dims x (K + V) x 2 bytes
    assert smollm2_facts.kv_bytes_per_token("f16") == 30 * 3 * 64 * 2 * 2 == 23040
    assert smollm2_facts.kv_bytes_per_token("q8_0") == 30 * 3 * 64 * 2 * 34 / 32


@pytest.mark.heavy  # the real model
def test_smollm2_params_and_bytes(smollm2_facts: ModelFacts) -> None:
    f = smollm2_facts
    # tied embeddings (no output.weight): embd + 30 x (q, k, v, o, 3 ffn, 2 norms) + output_norm
    per_layer = 576 * 576 + 2 * 576 * 192 + 576 * 576 + 3 * 576 * 1536 + 2 * 576
    assert f.n_params == 49152 * 576 + 30 * per_layer + 576 == 134515008
    assert {k: v.n_tensors for k, v in f.tensor_types.items()} == {"Q4_1": 210, "Q8_0": 1, "F32": 61}
    assert f.tensor_types["Q8_0"].n_bytes == 49152 * 576 // 32 * 34  # token_embd
    assert f.tensor_types["Q4_1"].n_bytes == f.tensor_types["Q4_1"].n_elements // 32 * 20
    assert f.file_bytes == f.extra["tensor_data_offset_bytes"] + f.weight_bytes == 98362432
    assert 5.5 < f.bits_per_weight < 6.0


@pytest.mark.heavy  # the real model
def test_smollm2_text_report(smollm2_facts: ModelFacts) -> None:
    text = format_facts_text(smollm2_facts)
    assert "Q4_1" in text
    assert "GQA ratio 3.00" in text
    assert "98,362,432 bytes" in text
    assert "134.52 M" in text
    assert "Sliding window    none" in text
    kv_lines = {line.split()[0]: line for line in text.splitlines() if line.startswith("  ") and line.split()}
    for cache in REPORTED_CACHE_TYPES:
        assert cache in kv_lines
    assert kv_lines["f16"].split()[1] == "22.50"  # 23040 / 1024 KiB
    assert "180.00 MiB" in kv_lines["f16"]  # 23040 x 8192 tokens
