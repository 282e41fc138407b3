"""Choosing the reference and checking the budget, from headers only (synthetic GGUF files; nothing is loaded)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest

from app.model.lineage import KEY_REQUANTIZED_FROM
from app.quality.plan import (
    DEFAULT_TEXT_SOURCE,
    QualitySetupError,
    plan_quality,
    python_docs_text,
    reference_scratch_bytes,
)


@pytest.fixture
def pair(make_gguf: Callable[..., Path]) -> tuple[Path, Path]:
    """(an F32 file dequantized from a Q4_1, an F16 file of the same model)."""
    wide = make_gguf("m.F32.gguf", tensor_dtype="F32", extra_kv={KEY_REQUANTIZED_FROM: "Q4_1"})
    narrow = make_gguf("m.F16.gguf", tensor_dtype="F16")
    return wide, narrow


def test_the_reference_is_the_file_with_most_bits(pair: tuple[Path, Path]) -> None:
    """Most bits among the files not requantized: the true F16, not the F32 dequantized from a Q4_1 (issue #27);
    the dequantized file alone is its own reference, and its rows say so (tests/quant/test_quality_lineage.py)."""
    wide, narrow = pair
    plan = plan_quality([str(narrow), str(wide)], n_tokens=256, n_ctx=128)
    assert plan.reference == str(narrow) and plan.reference_index == 0 and plan.text_source == DEFAULT_TEXT_SOURCE
    cols = plan.file_columns(1)
    assert cols["reference_filename"] == "m.F16.gguf" and cols["reference_is_dequantized"] is False
    assert cols["requantized_from"] == "Q4_1" and not cols["is_reference"] and cols["file_type"] == "F32"
    assert plan.file_columns(0)["requantized_from"] == "" and plan.file_columns(0)["is_reference"]
    alone = plan_quality([str(wide)], n_tokens=256, n_ctx=128).file_columns(0)
    assert alone["is_reference"] and alone["reference_is_dequantized"] is True


def test_ref_chooses_and_joins_the_list(pair: tuple[Path, Path]) -> None:
    wide, narrow = pair
    assert plan_quality([str(narrow), str(wide)], ref=str(narrow), n_tokens=256, n_ctx=128).reference_index == 0
    plan = plan_quality([str(wide)], ref=str(narrow), n_tokens=256, n_ctx=128)
    assert plan.models == (str(narrow), str(wide)) and plan.reference_index == 0
    assert plan.file_columns(1)["reference_is_dequantized"] is False  # a true F16 reference


def test_budget_limits(pair: tuple[Path, Path]) -> None:
    wide, _ = pair
    with pytest.raises(QualitySetupError, match="trained context"):
        plan_quality([str(wide)], n_ctx=1024, n_tokens=2048)  # the synthetic model's trained context is 512
    with pytest.raises(QualitySetupError, match="--tokens 100"):
        plan_quality([str(wide)], n_ctx=128, n_tokens=100)
    with pytest.raises(QualitySetupError, match="no model"):
        plan_quality([])


def test_the_default_text_is_deterministic_and_long_enough() -> None:
    text = python_docs_text()
    assert text == python_docs_text() and len(text) > 200_000  # over 40,000 tokens at ~4.5 characters each


def test_scratch_space_is_checked_up_front(pair: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    # SmolLM2 at the defaults: 4 chunks of 512, 255 scored each, vocabulary 49152: about 96 MiB
    assert reference_scratch_bytes(2048, 512, 49152) == 4 * 255 * 49152 * 2
    need = reference_scratch_bytes(1024, 128, 256)  # the synthetic model's vocabulary is 256 tokens
    monkeypatch.setattr("app.quality.plan.shutil.disk_usage", lambda path: shutil_usage(need - 1))
    with pytest.raises(QualitySetupError, match="lower --tokens or set TMPDIR"):
        plan_quality([str(pair[0])], n_ctx=128, n_tokens=1024)
    monkeypatch.setattr("app.quality.plan.shutil.disk_usage", lambda path: shutil_usage(need))
    assert plan_quality([str(pair[0])], n_ctx=128, n_tokens=1024).n_tokens == 1024


def shutil_usage(free: int) -> SimpleNamespace:
    """What the plan reads of shutil.disk_usage: the free bytes."""
    return SimpleNamespace(free=free)


@pytest.mark.heavy  # the CLI in a subprocess
def test_two_models_with_the_same_vocabulary_size_but_other_tokens_are_not_compared(tmp_path: Path) -> None:
    """Issue #29 case 10: only the vocabulary's size was compared, so two different models with 32,000 tokens each
    (Llama 2 and Mistral) were scored against each other as ok. The files must tokenize the text alike."""
    import json

    from tests.cli_helpers import gguf_bench
    from tests.gguf_synth import write_synthetic_gguf

    words = ["the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "and", "runs"]
    ref = write_synthetic_gguf(tmp_path / "ref.gguf", n_vocab=300, tensor_dtype="F16")
    # the same 300 tokens, the byte tokens in another order: the same text gets other token ids
    tokens = ["<unk>", "<s>", "</s>", *(f"<0x{b:02X}>" for b in reversed(range(256)))]
    tokens += [f"\u2581tok{i}" for i in range(len(tokens), 300)]
    other = write_synthetic_gguf(tmp_path / "other.gguf", n_vocab=300, tensor_dtype="F16",
                                 extra_kv={"tokenizer.ggml.tokens": tokens})
    text = tmp_path / "t.txt"
    text.write_text(" ".join(words * 200))
    proc = gguf_bench("quality", "-m", str(ref), "-m", str(other), "--ref", str(ref), "--text", str(text),
                      "--tokens", "128", "--ctx", "64", "-t", "1", "--no-store", "-o", "json", timeout=300)
    rows = {Path(r["model_path"]).name: r for r in json.loads(proc.stdout)}
    assert rows["ref.gguf"]["status"] == "ok", proc.stderr
    assert rows["other.gguf"]["status"] == "failed" and "tokenizer" in rows["other.gguf"]["error"], rows


def test_a_huge_text_costs_only_what_the_run_reads(tmp_path: Path) -> None:
    """Issue #29 case 10: quality read the whole --text (a 1.5 GB text for a 64-token budget took 4.3 GB) but checked
    only its first 64 KiB. Now it reads, and checks, just what the run can use."""
    import resource

    from app.quality.plan import plan_quality, text_bytes_needed
    from tests.gguf_synth import write_synthetic_gguf

    model = write_synthetic_gguf(tmp_path / "m.gguf", n_ctx_train=512)
    huge = tmp_path / "huge.txt"
    with open(huge, "wb") as f:
        f.write(b"plain words " * 5000)
        f.seek(3 << 30)  # 3 GiB, sparse: the rest is NUL characters, then one invalid byte far past the budget
        f.write(b"\xff")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    plan = plan_quality([str(model)], text=str(huge), n_tokens=256, n_ctx=128)
    assert len(plan.text().encode()) <= text_bytes_needed(256)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss < 100 * 1024  # KiB
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"words " * 100 + b"\xff" + b"more " * 100)  # an invalid byte within what the run reads
    with pytest.raises(QualitySetupError, match="cannot read it as UTF-8 text"):
        plan_quality([str(model)], text=str(bad), n_tokens=256, n_ctx=128)
