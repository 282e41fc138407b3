"""The bounded byte-level GGUF reader: one forward pass over the header and tensor table, no weight read.

Every read is checked against the file size first, so a short file or an absurd count raises
:class:`ShortRead` (with the bytes the layout needs) before anything is allocated; a layout that
cannot be followed, or counts no model has, raise :class:`CorruptHeader`. :mod:`app.model.gguf_facts`
turns both into one-line GGUFFileErrors.

The file is read through a read-ahead buffer and the long arrays are skipped in bulk: fixed-size items by
arithmetic, strings (a tokenizer's vocabulary and merges) in one tight pass over the buffer that reads each length
and jumps over its bytes; an item that runs past the buffer takes the checked path, which refills it or raises.
"""

from __future__ import annotations

import functools
import struct
from enum import IntEnum
from pathlib import Path
from typing import Any, BinaryIO

from app.model.gguf_constants import tables

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
#: Most tensors a header may list. llama.cpp loads at most LLAMA_MAX_LAYERS = 512 layers (src/llama-hparams.h), and
#: 128 tensors a layer is several times what any architecture names (a fused-expert MoE layer has about 20); a
#: larger count is a crafted header, refused before its table is read (3,000,000 tiny entries fit in 120 MB).
MAX_TENSORS = 1 << 16
#: Most keys a header may hold: real headers have tens (per-layer values are arrays, one key each).
MAX_KEYS = 1 << 16
#: llama.cpp refuses a tensor name of GGML_MAX_NAME (64, ggml/include/ggml.h) bytes or more (ggml/src/gguf.cpp).
MAX_TENSOR_NAME_BYTES = 63
#: Bytes read ahead of the cursor: a tokenizer's strings are skipped within the buffer, a refill per this many.
_READ_AHEAD_BYTES = 1 << 20


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
    """The layout cannot be followed (unknown type, absurd dimension count, a count no model has)."""


class Cursor:
    """Forward-only, bounds-checked reads of a GGUF header through a read-ahead buffer.

    ``pos`` is the offset of the next byte; the buffer holds the stream's bytes from ``_base`` on, and the stream
    is positioned at its end. Every read first checks ``file_bytes`` (ShortRead with the bytes the read needs), then
    that the stream really had them (a file cut while it is read, or a remote file's prefix, raise the same).
    """

    def __init__(self, f: BinaryIO, file_bytes: int, byte_order: str) -> None:
        self.f = f
        self.file_bytes = file_bytes
        self.order = byte_order
        self.pos = 0
        self._buf = b""
        self._base = 0
        self._u32 = struct.Struct(byte_order + "I").unpack_from
        self._u64 = struct.Struct(byte_order + "Q").unpack_from

    def need(self, n_bytes: int) -> None:
        if self.pos + n_bytes > self.file_bytes:
            raise ShortRead(self.pos + n_bytes)

    def _at(self, n_bytes: int) -> int:
        """Where the next ``n_bytes`` start in the buffer, read in if they are not there yet."""
        self.need(n_bytes)
        at = self.pos - self._base
        if at + n_bytes > len(self._buf):
            kept = self._buf[at:]
            self._buf = kept + self.f.read(max(n_bytes - len(kept), _READ_AHEAD_BYTES))
            self._base = self.pos
            at = 0
            if n_bytes > len(self._buf):
                raise ShortRead(self.pos + n_bytes)
        return at

    def take(self, n_bytes: int) -> bytes:
        at = self._at(n_bytes)
        self.pos += n_bytes
        return self._buf[at:at + n_bytes]

    def skip(self, n_bytes: int) -> None:
        self.need(n_bytes)
        self.pos += n_bytes
        if self.pos - self._base > len(self._buf):  # past the buffer: seek, and read from there when asked
            self.f.seek(self.pos)
            self._buf = b""
            self._base = self.pos

    def u32(self) -> int:
        at = self._at(4)
        self.pos += 4
        return int(self._u32(self._buf, at)[0])

    def u64(self) -> int:
        at = self._at(8)
        self.pos += 8
        return int(self._u64(self._buf, at)[0])

    def count(self, min_item_bytes: int, what: str = "item count") -> int:
        """A u64 count of items of at least ``min_item_bytes`` each, which must fit in the rest of the file."""
        n = self.u64()
        self.need_for(n, min_item_bytes, what)
        return n

    def need_for(self, n: int, min_item_bytes: int, what: str, most: int | None = None) -> None:
        """Room for ``n`` items: CorruptHeader when no file could hold them or there are more than ``most``,
        ShortRead when this file is too short."""
        if n * min_item_bytes > IMPOSSIBLE_BYTES and self.pos + n * min_item_bytes > self.file_bytes:
            raise CorruptHeader(f"{what} {n:,} at byte {self.pos:,} is impossible in a file of "
                                f"{self.file_bytes:,} bytes")
        if most is not None and n > most:
            raise CorruptHeader(f"{what} {n:,} is more than any model has (at most {most:,})")
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
        """Skip ``n_items`` array items of ``item_type``: fixed-size items in one step, strings in bulk."""
        if item_type in _SCALAR_BYTES:
            self.skip(n_items * _SCALAR_BYTES[item_type])
        elif item_type == _STRING_TYPE:
            self.skip_strings(n_items, key)
        else:
            for _ in range(n_items):
                self.skip_value(item_type, key)

    def skip_strings(self, n_items: int, key: str) -> None:
        """Skip ``n_items`` length-prefixed strings: those whole in the buffer in one tight pass; the one that runs
        past it is read the checked way (a refill, or ShortRead / CorruptHeader exactly as one by one)."""
        unpack = self._u64
        left = n_items
        while left:
            buf = self._buf
            at = self.pos - self._base
            end = min(len(buf), self.file_bytes - self._base)
            last_length_at = end - 8
            done = 0
            for done in range(left):  # noqa: B007 - ``done`` counts the strings passed when the loop breaks
                if at > last_length_at:
                    break
                (n_bytes,) = unpack(buf, at)
                after = at + 8 + n_bytes
                if after > end:
                    break
                at = after
            else:
                done = left
            left -= done
            self.pos = self._base + at
            if left:
                self.skip(self.count(1, f"string length of key {_shown(key)}"))
                left -= 1

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

    __slots__ = ("value", "data")

    def __init__(self, value: Any, length: int = 1) -> None:
        self.value = value
        self.data = range(length)

    def contents(self) -> Any:
        return self.value


class Tensor:
    """One tensor-table entry (dims in GGUF ``ne`` order, absolute data offset)."""

    __slots__ = ("name", "tensor_type", "shape", "n_elements", "n_bytes", "data_offset")

    def __init__(self, name: str, tensor_type: IntEnum, shape: list[int], n_elements: int,
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


@functools.cache
def _ggml_types() -> dict[int, tuple[IntEnum, int, int]]:
    """ggml type id -> (type, values per block, bytes per block), for the types whose sizes gguf knows."""
    return {int(t): (t, values, size) for t, (values, size) in tables().quant_sizes.items()}


def _read_tensor_info(cur: Cursor) -> tuple[str, IntEnum, list[int], int, int, int]:
    """(name, type, shape, elements, bytes, offset relative to the data section) of one tensor-table entry."""
    name_bytes = cur.u64()
    if name_bytes > MAX_TENSOR_NAME_BYTES:
        raise CorruptHeader(f"a tensor name of {name_bytes:,} bytes at byte {cur.pos - 8:,} (llama.cpp allows at "
                            f"most {MAX_TENSOR_NAME_BYTES})")
    name = cur.take(name_bytes).decode("utf-8", errors="replace")
    n_dims = cur.u32()
    if n_dims > _MAX_DIMS:
        raise CorruptHeader(f"tensor {_shown(name)} has {n_dims} dimensions")
    at = cur._at(8 * n_dims + 12)  # the dims, the ggml type (u32) and the data offset (u64), in one read
    shape = list(struct.unpack_from(f"{cur.order}{n_dims}Q", cur._buf, at)) if n_dims else []
    type_id, offset = struct.unpack_from(f"{cur.order}IQ", cur._buf, at + 8 * n_dims)
    cur.pos += 8 * n_dims + 12
    n_elements = 1
    for d in shape:
        n_elements *= d
    known = _ggml_types().get(type_id)
    if known is None:
        raise CorruptHeader(f"tensor {_shown(name)} has unknown ggml type {type_id}")
    ttype, block_values, block_bytes = known
    return name, ttype, shape, n_elements, n_elements * block_bytes // block_values, offset


def _alignment(fields: dict[str, Field]) -> int:
    """``general.alignment`` when it is an integer (a power of two), else GGUF's default."""
    align = fields.get("general.alignment")
    if align is None or not isinstance(align.value, int) or isinstance(align.value, bool):
        return tables().default_alignment
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
    cur.need_for(n_tensors, _MIN_TENSOR_INFO_BYTES, "tensor count", MAX_TENSORS)
    cur.need_for(n_kv, _MIN_KV_BYTES, "key count", MAX_KEYS)
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
