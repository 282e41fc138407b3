"""Lineage in the quality reference (issue #27): a file requantized from another is never the default reference
while a file that was not requantized is in the set, whatever its bits; when every file was requantized, the
rows say what the reference was made from. Synthetic GGUF headers only; nothing is loaded."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from app.model.lineage import KEY_REQUANTIZED_FROM
from app.quality.plan import plan_quality

BUDGET = {"n_tokens": 256, "n_ctx": 128}


def test_an_original_file_is_the_reference_over_copies_with_more_bits(make_gguf: Callable[..., Path]) -> None:
    """The issue's case: a larger copy made from a quantized file (its header says so) lost to the original."""
    original = make_gguf("m.Q8_0.gguf", tensor_dtype="Q8_0")
    f16_copy = make_gguf("m.F16.gguf", tensor_dtype="F16", extra_kv={KEY_REQUANTIZED_FROM: "Q8_0"})
    f32_copy = make_gguf("m.F32.gguf", tensor_dtype="F32", extra_kv={KEY_REQUANTIZED_FROM: "Q8_0"})
    plan = plan_quality([str(f32_copy), str(f16_copy), str(original)], **BUDGET)
    assert plan.facts[0].bits_per_weight > plan.facts[2].bits_per_weight  # the copies do have more bits
    assert plan.reference == str(original)
    for i in range(3):
        cols = plan.file_columns(i)
        assert cols["reference_filename"] == "m.Q8_0.gguf" and cols["reference_requantized_from"] == ""
        assert cols["reference_is_dequantized"] is False and cols["is_reference"] is (i == 2)


def test_most_bits_still_win_among_originals(make_gguf: Callable[..., Path]) -> None:
    q8 = make_gguf("a.Q8_0.gguf", tensor_dtype="Q8_0")
    f16 = make_gguf("a.F16.gguf", tensor_dtype="F16")
    copy = make_gguf("b.F32.gguf", tensor_dtype="F32", extra_kv={KEY_REQUANTIZED_FROM: "Q4_1"})
    assert plan_quality([str(q8), str(copy), str(f16)], **BUDGET).reference == str(f16)


def test_when_every_file_was_requantized_the_rows_say_what_the_reference_came_from(
        make_gguf: Callable[..., Path]) -> None:
    """Most bits win as before; ``reference_requantized_from`` names the source type, also where the reference is a
    quantized copy (Q8_0 from Q4_1), which ``reference_is_dequantized`` (F16/F32 only) leaves at 0."""
    f16 = make_gguf("c.F16.gguf", tensor_dtype="F16", extra_kv={KEY_REQUANTIZED_FROM: "Q4_1"})
    q8 = make_gguf("c.Q8_0.gguf", tensor_dtype="Q8_0", extra_kv={KEY_REQUANTIZED_FROM: "Q4_1"})
    plan = plan_quality([str(q8), str(f16)], **BUDGET)
    assert plan.reference == str(f16)
    cols = plan.file_columns(0)
    assert cols["reference_requantized_from"] == "Q4_1" and cols["reference_is_dequantized"] is True

    q8_b = make_gguf("d.Q8_0.gguf", tensor_dtype="Q8_0", extra_kv={KEY_REQUANTIZED_FROM: "Q4_1"}, seed=1)
    plan = plan_quality([str(q8), str(q8_b)], **BUDGET)
    assert plan.reference == str(q8)  # a tie on bits: the first given
    cols = plan.file_columns(1)
    assert cols["reference_requantized_from"] == "Q4_1" and cols["reference_is_dequantized"] is False


def test_a_named_reference_is_kept_even_when_requantized(make_gguf: Callable[..., Path]) -> None:
    original = make_gguf("e.Q8_0.gguf", tensor_dtype="Q8_0")
    copy = make_gguf("e.F16.gguf", tensor_dtype="F16", extra_kv={KEY_REQUANTIZED_FROM: "Q8_0"})
    plan = plan_quality([str(original)], ref=str(copy), **BUDGET)
    assert plan.reference == str(copy)
    assert plan.file_columns(1)["reference_requantized_from"] == "Q8_0"
