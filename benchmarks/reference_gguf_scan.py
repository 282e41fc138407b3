"""The header scanner as it was at commit c6487c9 (app/model/gguf_scan.py), kept unchanged as the baseline of
benchmarks/header_speed.py: it skipped a tokenizer's arrays one item at a time. The app does not use it.

The bounded byte-level GGUF reader: one forward pass over the header and tensor table, no weight read.

Every read is checked against the file size first, so a short file or an absurd count raises
:class:`ShortRead` (with the bytes the layout needs) before anything is allocated; a layout that
cannot be followed raises :class:`CorruptHeader`. :mod:`app.model.gguf_facts` turns both into
one-line GGUFFileErrors.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Any, BinaryIO

import gguf

_SCALAR_BYTES: dict[int, int] = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_SCALAR_FORMATS: dict[int, str] = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q",
                                    12: "d"}
_STRING_TYPE = 8
_ARRAY_TYPE = 9
_MIN_ITEM_BYTES: dict[int, int] = {**_SCALAR_BYTES, _STRING_TYPE: 8, _ARRAY_TYPE: 12}
_MIN_KV_BYTES = 8 + 4 + 1  # key length, value type, smallest value
_MIN_TENSOR_INFO_BYTES = 8 + 4 + 4 + 8  # name length, n_dims, ggml type, offset
_MAX_DIMS = 8
#: Arrays longer than this keep only their length (tokenizer vocabularies and merges); per-layer arrays are short.
_MAX_DECODED_ITEMS = 4096
#: A count whose items would need more bytes than this is impossible, not a truncated download (no GGUF header
#: comes near a tebibyte): it is reported as corrupt, with the count, rather than as "needs at least 10^19 bytes".
IMPOSSIBLE_BYTES = 1 << 40


def _shown(name: str, max_chars: int = 60) -> str:
    """A key or tensor name for a message: quoted, control characters escaped, cut to ``max_chars``."""
    text = repr(name[:max_chars])
    return text[:-1] + "...'" if len(name) > max_chars else text


class ShortRead(Exception):
    """The layout needs more bytes than the file has."""

    def __init__(self, needed_bytes: int) -> None:
        super().__init__(needed_bytes)
        self.needed_bytes = needed_bytes


class CorruptHeader(Exception):
    """The layout cannot be followed (unknown type, absurd dimension count)."""


class Cursor:
    """Forward-only, bounds-checked reads of a GGUF header."""

    def __init__(self, f: BinaryIO, file_bytes: int, byte_order: str) -> None:
        self.f = f
        self.file_bytes = file_bytes
        self.order = byte_order
        self.pos = 0

    def need(self, n_bytes: int) -> None:
        if self.pos + n_bytes > self.file_bytes:
            raise ShortRead(self.pos + n_bytes)

    def take(self, n_bytes: int) -> bytes:
        self.need(n_bytes)
        data = self.f.read(n_bytes)
        if len(data) < n_bytes:
            raise ShortRead(self.pos + n_bytes)
        self.pos += n_bytes
        return data

    def skip(self, n_bytes: int) -> None:
        self.need(n_bytes)
        self.f.seek(n_bytes, os.SEEK_CUR)
        self.pos += n_bytes

    def u32(self) -> int:
        return struct.unpack(self.order + "I", self.take(4))[0]

    def u64(self) -> int:
        return struct.unpack(self.order + "Q", self.take(8))[0]

    def count(self, min_item_bytes: int, what: str = "item count") -> int:
        """A u64 count of items of at least ``min_item_bytes`` each, which must fit in the rest of the file."""
        n = self.u64()
        self.need_for(n, min_item_bytes, what)
        return n

    def need_for(self, n: int, min_item_bytes: int, what: str) -> None:
        """Room for ``n`` items: CorruptHeader when no file could hold them, ShortRead when this one is too short."""
        if n * min_item_bytes > IMPOSSIBLE_BYTES and self.pos + n * min_item_bytes > self.file_bytes:
            raise CorruptHeader(f"{what} {n:,} at byte {self.pos:,} is impossible in a file of "
                                f"{self.file_bytes:,} bytes")
        self.need(n * min_item_bytes)

    def string(self) -> str:
        return self.take(self.count(1, "string length")).decode("utf-8", errors="replace")

    def array_header(self, key: str) -> tuple[int, int]:
        """(item type, item count) of an array value; the count must fit in the rest of the file."""
        item_type = self.u32()
        if item_type not in _MIN_ITEM_BYTES:
            raise CorruptHeader(f"key {_shown(key)} is an array of unknown type {item_type}")
        return item_type, self.count(_MIN_ITEM_BYTES[item_type], f"array length of key {_shown(key)}")

    def skip_items(self, item_type: int, n_items: int, key: str) -> None:
        """Skip ``n_items`` array items of ``item_type`` (fixed-size items in one seek)."""
        if item_type in _SCALAR_BYTES:
            self.skip(n_items * _SCALAR_BYTES[item_type])
        else:
            for _ in range(n_items):
                self.skip_value(item_type, key)

    def skip_value(self, vtype: int, key: str) -> None:
        if vtype in _SCALAR_BYTES:
            self.skip(_SCALAR_BYTES[vtype])
        elif vtype == _STRING_TYPE:
            self.skip(self.count(1, f"string length of key {_shown(key)}"))
        elif vtype == _ARRAY_TYPE:
            item_type, n_items = self.array_header(key)
            self.skip_items(item_type, n_items, key)
        else:
            raise CorruptHeader(f"key {_shown(key)} has unknown value type {vtype}")


class Field:
    """One header key's value, shaped like what the facts need: ``contents()`` and ``len(data)``."""

    def __init__(self, value: Any, length: int = 1) -> None:
        self.value = value
        self.data = range(length)

    def contents(self) -> Any:
        return self.value


class Tensor:
    """One tensor-table entry (dims in GGUF ``ne`` order, absolute data offset)."""

    def __init__(self, name: str, tensor_type: gguf.GGMLQuantizationType, shape: list[int], n_elements: int,
                 n_bytes: int, data_offset: int) -> None:
        self.name = name
        self.tensor_type = tensor_type
        self.shape = shape
        self.n_elements = n_elements
        self.n_bytes = n_bytes
        self.data_offset = data_offset


class Scan:
    """What one pass over a GGUF header yields: fields, tensors, where the data starts and must end."""

    def __init__(self) -> None:
        self.fields: dict[str, Field] = {}
        self.tensors: list[Tensor] = []
        self.data_offset = 0
        self.needed_bytes = 0
        self.header_bytes = 0  # bytes the header and tensor table occupy


def _read_value(cur: Cursor, vtype: int, key: str) -> Field:
    if vtype in _SCALAR_FORMATS:
        fmt = _SCALAR_FORMATS[vtype]
        return Field(struct.unpack(cur.order + fmt, cur.take(_SCALAR_BYTES[vtype]))[0])
    if vtype == _STRING_TYPE:
        return Field(cur.string())
    if vtype == _ARRAY_TYPE:
        item_type, n = cur.array_header(key)
        if n > _MAX_DECODED_ITEMS or item_type == _ARRAY_TYPE:
            cur.skip_items(item_type, n, key)
            return Field(None, n)
        if item_type in _SCALAR_FORMATS:
            fmt = f"{cur.order}{n}{_SCALAR_FORMATS[item_type]}"
            return Field(list(struct.unpack(fmt, cur.take(n * _SCALAR_BYTES[item_type]))), n)
        return Field([cur.string() for _ in range(n)], n)
    raise CorruptHeader(f"key {_shown(key)} has unknown value type {vtype}")


def _read_tensor_info(cur: Cursor) -> tuple[str, gguf.GGMLQuantizationType, list[int], int, int, int]:
    """(name, type, shape, elements, bytes, offset relative to the data section) of one tensor-table entry."""
    name = cur.string()
    n_dims = cur.u32()
    if n_dims > _MAX_DIMS:
        raise CorruptHeader(f"tensor {_shown(name)} has {n_dims} dimensions")
    shape = [cur.u64() for _ in range(n_dims)]
    n_elements = 1
    for d in shape:
        n_elements *= d
    type_id = cur.u32()
    offset = cur.u64()
    try:
        ttype = gguf.GGMLQuantizationType(type_id)
        block_values, block_bytes = gguf.GGML_QUANT_SIZES[ttype]
    except (ValueError, KeyError):
        raise CorruptHeader(f"tensor {_shown(name)} has unknown ggml type {type_id}") from None
    return name, ttype, shape, n_elements, n_elements * block_bytes // block_values, offset


def _alignment(fields: dict[str, Field]) -> int:
    """``general.alignment`` when it is an integer (a power of two), else GGUF's default."""
    align = fields.get("general.alignment")
    if align is None or not isinstance(align.value, int) or isinstance(align.value, bool):
        return gguf.GGUF_DEFAULT_ALIGNMENT
    alignment = align.value
    if alignment == 0 or alignment & (alignment - 1):
        raise CorruptHeader(f"general.alignment {alignment} is not a power of two")
    return alignment


def scan_gguf(p: Path, file_bytes: int) -> Scan:
    """Header keys, tensor table and the bytes the tensor data needs (the end of the last tensor's data).

    Raises ShortRead (with a lower bound) when the file ends inside the header or tensor table,
    and CorruptHeader when the layout cannot be followed.
    """
    with p.open("rb") as f:
        return scan_gguf_stream(f, file_bytes)


def scan_gguf_stream(f: BinaryIO, file_bytes: int) -> Scan:
    """:func:`scan_gguf` on an open binary stream positioned anywhere (a file, or the first bytes of a remote
    file in a BytesIO: reads past the buffer raise ShortRead like reads past the end of a file).

    ``header_bytes`` of the result is where the tensor table ends.
    """
    scan = Scan()
    f.seek(0)
    head = f.read(8)
    order = ">" if int.from_bytes(head[4:8], "little") & 0xFFFF == 0 else "<"
    f.seek(0)
    cur = Cursor(f, file_bytes, order)
    cur.skip(4)  # magic
    scan.fields["GGUF.version"] = Field(cur.u32())
    n_tensors = cur.u64()
    n_kv = cur.u64()
    cur.need_for(n_tensors, _MIN_TENSOR_INFO_BYTES, "tensor count")
    cur.need_for(n_kv, _MIN_KV_BYTES, "key count")
    cur.need(n_kv * _MIN_KV_BYTES + n_tensors * _MIN_TENSOR_INFO_BYTES)
    for _ in range(n_kv):
        key = cur.string()
        scan.fields[key] = _read_value(cur, cur.u32(), key)
    alignment = _alignment(scan.fields)
    infos = [_read_tensor_info(cur) for _ in range(n_tensors)]
    data_end = max((offset + n_bytes for *_, n_bytes, offset in infos), default=0)
    scan.header_bytes = cur.pos
    scan.data_offset = -(-cur.pos // alignment) * alignment
    scan.needed_bytes = scan.data_offset + data_end
    scan.tensors = [Tensor(n, t, sh, ne, nb, scan.data_offset + off) for n, t, sh, ne, nb, off in infos]
    return scan
