"""Hostile GGUF files (issue #13): metadata llama.cpp would abort on, impossible counts, files that are not files,
and a property-based fuzz over header bytes. Each is one GGUFFileError line naming the file and the cause."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.model.gguf_facts import GGUFFileError, read_model_facts
from tests.gguf_synth import small_header_bytes, write_bad_metadata_gguf, write_huge_count_gguf
from tests.model.test_gguf_errors import assert_one_line_error


@pytest.mark.parametrize("metadata, cause", [
    ({"block_count": 0}, "llama.block_count is 0"),
    ({"block_count": 100000}, "llama.block_count is 100,000 but the file has tensors for 2 layers"),
    ({"block_count": 3}, "llama.block_count is 3 but the file has tensors for 2 layers"),
    ({"attention.head_count": 0}, "llama.attention.head_count is 0 but the file has attention tensors"),
    ({"attention.head_count_kv": 3}, "4 attention heads and 3 KV heads"),
    ({"attention.head_count_kv": 0}, "4 attention heads and 0 KV heads"),
    ({"attention.head_count_kv": 8}, "4 attention heads and 8 KV heads"),
    ({"attention.head_count": [4, 4, 4]}, "head_count has 3 values for 2 layers"),
    ({"embedding_length": 0}, "llama.embedding_length is 0"),
    ({"attention.key_length": 0}, "attention head size is 0"),
])
def test_metadata_llama_cpp_would_abort_on_is_refused(tmp_path: Path, metadata: dict, cause: str) -> None:
    path = write_bad_metadata_gguf(tmp_path / "bad meta.gguf", **metadata)
    assert_one_line_error(path, "bad model metadata (", cause)


def test_sane_metadata_still_reads(tmp_path: Path) -> None:
    facts = read_model_facts(write_bad_metadata_gguf(tmp_path / "ok.gguf", block_count=2))
    assert (facts.n_layer, facts.n_head, facts.n_head_kv) == (2, 4, 2)


def test_a_huge_tensor_count_is_called_impossible_not_truncated(tmp_path: Path) -> None:
    path = write_huge_count_gguf(tmp_path / "huge.gguf")
    err = assert_one_line_error(path, "tensor count 14,987,979,559,889,017,240", "impossible in a file of")
    assert "truncated" not in str(err) and "needs at least" not in str(err)


def test_a_fifo_is_not_a_regular_file_and_is_never_opened(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.gguf"
    os.mkfifo(fifo)  # opening it for reading would block: the check must come first
    err = assert_one_line_error(fifo, "not a regular file")
    assert "empty" not in str(err)


def test_dev_zero_is_not_a_regular_file() -> None:
    with pytest.raises(GGUFFileError, match=r"^/dev/zero: not a regular file"):
        read_model_facts("/dev/zero")


# --- property-based: mutated headers ------------------------------------------------------------------
_SEED = small_header_bytes(tempfile.mkdtemp(prefix="gguf-fuzz-seed-"))
_HEADER_BYTES = 4096  # the keys and tensor table of the seed: where mutations matter

_mutation = st.one_of(
    st.tuples(st.just("byte"), st.integers(0, _HEADER_BYTES - 1), st.integers(0, 255)),
    st.tuples(st.just("u64"), st.integers(0, _HEADER_BYTES - 8), st.sampled_from(
        [0, 1, 2**31, 2**32 - 1, 2**32, 2**63, 2**64 - 1, 100000, 14987979559889017240])),
    st.tuples(st.just("cut"), st.integers(0, len(_SEED)), st.just(0)),
)


def _mutate(data: bytes, mutations: list[tuple[str, int, int]]) -> bytes:
    out = bytearray(data)
    for kind, pos, value in mutations:
        if kind == "byte" and pos < len(out):
            out[pos] = value
        elif kind == "u64" and pos + 8 <= len(out):
            out[pos:pos + 8] = value.to_bytes(8, "little")
        elif kind == "cut":
            del out[pos:]
    return bytes(out)


@settings(max_examples=150, deadline=2000, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(mutations=st.lists(_mutation, min_size=1, max_size=4))
def test_fuzzed_headers_give_facts_or_one_line(tmp_path: Path, mutations: list[tuple[str, int, int]]) -> None:
    path = tmp_path / "fuzz.gguf"
    path.write_bytes(_mutate(_SEED, mutations))
    try:
        facts = read_model_facts(path)
    except GGUFFileError as e:
        assert "\n" not in str(e) and str(e).startswith(str(path))
        assert len(str(e)) < 400
    else:
        assert facts.n_layer >= 1 and facts.n_embd >= 1
