"""The bounded GGUF reader on hand-built headers: arrays skipped (in bulk) or decoded, then the next key still read;
truncated arrays and counts no model has refused with the same errors, before anything is allocated."""

from __future__ import annotations

import struct
import tracemalloc
from pathlib import Path

import gguf
import pytest

from app.model.gguf_scan import MAX_TENSORS, CorruptHeader, Scan, ShortRead, scan_gguf
from tests.gguf_synth import write_synthetic_gguf

U32, STRING, ARRAY = 4, 8, 9


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


def _u32_array(values: list[int]) -> bytes:
    return struct.pack("<IQ", U32, len(values)) + struct.pack(f"<{len(values)}I", *values)


def _header(tmp_path: Path, kvs: list[tuple[str, int, bytes]]) -> Path:
    """A GGUF v3 file with these (key, type, encoded value) pairs and no tensors."""
    body = b"GGUF" + struct.pack("<IQQ", 3, 0, len(kvs))
    for key, vtype, value in kvs:
        body += _string(key) + struct.pack("<I", vtype) + value
    path = tmp_path / "header.gguf"
    path.write_bytes(body)
    return path


def _scan(path: Path) -> Scan:
    return scan_gguf(path, path.stat().st_size)


def test_nested_and_long_arrays_keep_their_length_and_the_next_key_reads(tmp_path: Path) -> None:
    nested = struct.pack("<IQ", ARRAY, 2) + _u32_array([1, 2, 3]) + _u32_array([4])
    long_strings = struct.pack("<IQ", STRING, 5000) + b"".join(_string(f"t{i}") for i in range(5000))
    path = _header(tmp_path, [
        ("nested", ARRAY, nested),
        ("long.u32", ARRAY, _u32_array(list(range(5000)))),
        ("long.str", ARRAY, long_strings),
        ("short.u32", ARRAY, _u32_array([7, 8, 9])),
        ("after", U32, struct.pack("<I", 42)),
    ])
    fields = _scan(path).fields
    assert (fields["nested"].contents(), len(fields["nested"].data)) == (None, 2)
    assert (fields["long.u32"].contents(), len(fields["long.u32"].data)) == (None, 5000)
    assert (fields["long.str"].contents(), len(fields["long.str"].data)) == (None, 5000)
    assert fields["short.u32"].contents() == [7, 8, 9]
    assert fields["after"].contents() == 42
    assert fields["GGUF.version"].contents() == 3


def test_unknown_type_inside_a_skipped_nested_array_is_corrupt(tmp_path: Path) -> None:
    nested = struct.pack("<IQ", ARRAY, 1) + struct.pack("<IQ", 99, 1)
    with pytest.raises(CorruptHeader, match="key 'nested' is an array of unknown type 99"):
        _scan(_header(tmp_path, [("nested", ARRAY, nested)]))


def test_array_count_beyond_the_file_is_a_short_read(tmp_path: Path) -> None:
    path = _header(tmp_path, [("long", ARRAY, struct.pack("<IQ", U32, 10**6))])
    with pytest.raises(ShortRead) as info:
        _scan(path)
    assert info.value.needed_bytes > 4 * 10**6


def test_an_impossible_array_count_is_corrupt_and_named(tmp_path: Path) -> None:
    # 10^12 u32 items need 4 TB: no truncated download explains that, so the count itself is reported (issue #13)
    path = _header(tmp_path, [("huge", ARRAY, struct.pack("<IQ", U32, 10**12))])
    with pytest.raises(CorruptHeader, match=r"array length of key 'huge' 1,000,000,000,000 .* impossible"):
        _scan(path)


# --- arrays skipped in bulk: the same bounds and errors as item by item ---------------------------------------------
def _strings_array(strings: list[bytes]) -> bytes:
    return struct.pack("<IQ", STRING, len(strings)) + b"".join(struct.pack("<Q", len(s)) + s for s in strings)


def _array_start(path: Path, key: str) -> int:
    """The offset of the first item of the array value of ``key`` (its type and count come before)."""
    data = path.read_bytes()
    name = _string(key)
    return data.index(name) + len(name) + 4 + 4 + 8


def test_string_arrays_longer_than_the_read_ahead_are_skipped_and_the_next_key_reads(tmp_path: Path) -> None:
    # 120,000 strings (3 MiB) cross the 1 MiB read-ahead several times; a 3 MiB string (longer than the buffer)
    # and a long scalar string sit among them
    strings = [f"tok{i}".encode() * (1 + i % 3) for i in range(120_000)]
    strings[60_000] = b"x" * (3 << 20)
    path = _header(tmp_path, [
        ("tokenizer.ggml.tokens", ARRAY, _strings_array(strings)),
        ("long.string", STRING, _string("y" * (2 << 20))),
        ("after", U32, struct.pack("<I", 42)),
    ])
    scan = _scan(path)
    assert len(scan.fields["tokenizer.ggml.tokens"].data) == 120_000
    assert scan.fields["long.string"].contents() == "y" * (2 << 20)
    assert scan.fields["after"].contents() == 42
    assert scan.header_bytes == path.stat().st_size


def test_a_string_array_cut_inside_a_string_needs_that_strings_end(tmp_path: Path) -> None:
    strings = [b"abcdefgh" * (1 + i % 3) for i in range(5000)]
    whole = _header(tmp_path, [("tokens", ARRAY, _strings_array(strings))])
    start = _array_start(whole, "tokens")
    ends = [start]
    for s in strings:
        ends.append(ends[-1] + 8 + len(s))
    cases = [(0, ends[0] + 3, start + 8 * len(strings))]  # too short for 5,000 lengths: the count's own bound
    for i in (2000, 4095, 4096, 4999):  # past that bound: the string the file ends in
        cases += [(i, ends[i] + 3, ends[i] + 8), (i, ends[i] + 8 + 1, ends[i + 1])]  # inside its length, its bytes
    for i, cut, expected in cases:
        cut_file = tmp_path / f"cut-{i}-{cut}.gguf"
        cut_file.write_bytes(whole.read_bytes()[:cut])
        with pytest.raises(ShortRead) as info:
            _scan(cut_file)
        assert info.value.needed_bytes == expected, (i, cut)


def test_a_file_that_grew_after_its_size_was_taken_is_read_only_up_to_that_size(tmp_path: Path) -> None:
    strings = [b"piece"] * 1000
    path = _header(tmp_path, [("tokens", ARRAY, _strings_array(strings)), ("after", U32, struct.pack("<I", 1))])
    size = path.stat().st_size
    with pytest.raises(ShortRead) as info:
        scan_gguf(path, size - 20)  # the size said before the last bytes were written: they are not read
    assert info.value.needed_bytes > size - 20


def test_an_impossible_string_length_inside_a_long_array_is_corrupt_and_named(tmp_path: Path) -> None:
    strings = [b"ok"] * 6000
    data = bytearray(_strings_array(strings))
    at = 4 + 8 + 3000 * (8 + 2)  # the 3,001st string's length
    data[at:at + 8] = struct.pack("<Q", 1 << 60)
    path = _header(tmp_path, [("tokens", ARRAY, bytes(data))])
    with pytest.raises(CorruptHeader, match=r"string length of key 'tokens' 1,152,921,504,606,846,976 .*impossible"):
        _scan(path)


def _tensor_table_header(tmp_path: Path, n_tensors: int, n_kv: int, file_bytes: int, entries: bytes = b"") -> Path:
    """A header claiming ``n_tensors`` tensors and ``n_kv`` keys, ``entries`` after it, in a sparse file of
    ``file_bytes`` (the claim fits the file's size: only a limit refuses it)."""
    path = tmp_path / "claims.gguf"
    with path.open("wb") as f:
        f.write(b"GGUF" + struct.pack("<IQQ", 3, n_tensors, n_kv) + entries)
        f.truncate(file_bytes)
    return path


def test_three_million_tensors_in_a_large_file_are_refused_before_the_table_is_read(tmp_path: Path) -> None:
    # issue #54: 3,000,000 tiny entries fit 120 MB; reading them took 57 s and 1.4 GB before a refusal
    path = _tensor_table_header(tmp_path, 3_000_000, 0, 120 * 10**6)
    tracemalloc.start()
    try:
        with pytest.raises(CorruptHeader, match=r"tensor count 3,000,000 is more than any model has \(at most 65,536"):
            _scan(path)
        peak_bytes = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak_bytes < 4 << 20  # the read-ahead buffer, not the table


def test_nine_million_keys_in_a_large_file_are_refused_before_any_is_read(tmp_path: Path) -> None:
    path = _tensor_table_header(tmp_path, 0, 9_000_000, 120 * 10**6)
    with pytest.raises(CorruptHeader, match=r"key count 9,000,000 is more than any model has \(at most 65,536\)"):
        _scan(path)


def test_a_count_at_the_limit_that_the_file_cannot_hold_is_still_a_short_read(tmp_path: Path) -> None:
    path = _tensor_table_header(tmp_path, MAX_TENSORS, 0, 4096)  # a download cut short: "truncated", as before
    with pytest.raises(ShortRead) as info:
        _scan(path)
    assert info.value.needed_bytes >= 24 + MAX_TENSORS * 24


def test_a_tensor_name_longer_than_llama_cpp_allows_is_corrupt(tmp_path: Path) -> None:
    name = b"blk.0." + b"n" * 100
    entry = struct.pack("<Q", len(name)) + name + struct.pack("<IQIQ", 1, 32, 0, 0)
    path = _tensor_table_header(tmp_path, 1, 0, 4096, entry)
    with pytest.raises(CorruptHeader, match=r"a tensor name of 106 bytes at byte 24 \(llama.cpp allows at most 63\)"):
        _scan(path)


def test_the_scan_agrees_with_the_gguf_packages_reader(tmp_path: Path) -> None:
    """Every key's value (or an array's length) and every tensor's name, type, shape and offset, as gguf's own
    GGUFReader reads them, on a file with a tokenizer longer than the decoded limit."""
    path = write_synthetic_gguf(tmp_path / "m.gguf", n_vocab=4200)
    scan = _scan(path)
    reader = gguf.GGUFReader(path)
    for key, field in reader.fields.items():
        if key in ("GGUF.tensor_count", "GGUF.kv_count"):
            continue  # the reader's own entries for the header's counts
        ours = scan.fields[key]
        assert len(ours.data) == (len(field.data) if field.types and field.types[0] == gguf.GGUFValueType.ARRAY
                                  else 1), key
        if field.types and field.types[0] != gguf.GGUFValueType.ARRAY:
            assert ours.contents() == pytest.approx(field.contents()) if isinstance(ours.contents(), float) \
                else ours.contents() == field.contents(), key
    assert [(t.name, t.tensor_type.name, t.shape, t.data_offset, t.n_bytes) for t in scan.tensors] == [
        (t.name, t.tensor_type.name, [int(d) for d in t.shape], int(t.data_offset), int(t.n_bytes))
        for t in reader.tensors]
