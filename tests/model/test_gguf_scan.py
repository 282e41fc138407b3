"""The bounded GGUF reader on hand-built headers: arrays skipped or decoded, then the next key still read."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from app.model.gguf_scan import CorruptHeader, Scan, ShortRead, scan_gguf

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
