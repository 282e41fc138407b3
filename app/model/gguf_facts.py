"""Read a GGUF file's header and tensor table into ModelFacts, and print them for ``gguf-bench inspect``.

Only the header and tensor table are parsed, in one bounds-checked pass; no weight is read.
Every problem with the file becomes a one-line :class:`GGUFFileError` naming the file and the cause.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any, BinaryIO

import gguf

from app.model.facts import ModelFacts, TensorTypeStat
from app.model.kv_cache import REPORTED_CACHE_TYPES

GGUF_MAGIC_BYTES = b"GGUF"
SUPPORTED_GGUF_VERSIONS: tuple[int, ...] = (2, 3)
_HEADER_FIXED_BYTES = 24  # magic u32, version u32, tensor count u64, kv count u64

#: Default sliding-window period per architecture when the file has no ``sliding_window_pattern`` key,
#: as llama.cpp sets it (``set_swa_pattern(N)``: layer i uses the window unless (i + 1) % N == 0).
SWA_DEFAULT_PERIOD: dict[str, int] = {"gemma2": 2, "gemma3": 6, "gemma3n": 5, "cohere2": 4, "gpt-oss": 2}
#: Window llama.cpp assumes when the file has no ``sliding_window`` key (only Gemma 2 has one).
SWA_DEFAULT_WINDOW: dict[str, int] = {"gemma2": 4096}


class GGUFFileError(ValueError):
    """A file that is missing, not GGUF, truncated or lacks what a model needs; ``str()`` is one line."""

    def __init__(self, path: str | os.PathLike[str], cause: str) -> None:
        self.path = str(path)
        self.cause = _one_line(cause)
        super().__init__(_one_line(f"{self.path}: {self.cause}"))

    def __reduce__(self) -> tuple[type[GGUFFileError], tuple[str, str]]:
        return (type(self), (self.path, self.cause))


def _one_line(text: str) -> str:
    return text.replace("\r", "\\r").replace("\n", "\\n")


# --------------------------------------------------------------------------------------------------------------------
# Reading


def read_model_facts(path: str | os.PathLike[str]) -> ModelFacts:
    """Facts from a GGUF file's header and tensor table; raises GGUFFileError for any bad file."""
    p = Path(path)
    file_bytes = _check_file(p)
    # One bounds-checked pass over the header and tensor table: a short file or an absurd count is reported
    # here, and only what the facts need is decoded (a 128k-token vocabulary is skipped, not parsed).
    try:
        scan = _scan(p, file_bytes)
    except _ShortRead as short:
        raise GGUFFileError(p, _truncated(file_bytes, short.needed_bytes)) from None
    except _Corrupt as bad:
        raise GGUFFileError(p, f"corrupt GGUF header ({bad})") from None
    except OSError as exc:
        raise GGUFFileError(p, f"cannot read ({exc.strerror or exc})") from None
    if scan.needed_bytes > file_bytes:
        raise GGUFFileError(p, _truncated(file_bytes, scan.needed_bytes))
    try:
        return _facts_from_reader(p, file_bytes, scan)
    except GGUFFileError:
        raise
    except Exception as exc:  # any surprise in a malformed header is still a one-line error
        raise GGUFFileError(p, f"corrupt GGUF header ({_short_reason(exc)})") from None


def _truncated(file_bytes: int, needed_bytes: int) -> str:
    return f"truncated GGUF ({file_bytes} bytes, needs at least {needed_bytes})"


def _short_reason(exc: BaseException, max_chars: int = 120) -> str:
    text = " ".join(str(exc).split()) or "no detail"
    if len(text) > max_chars:
        text = text[: max_chars - 3] + "..."
    return f"{type(exc).__name__}: {text}"


def _check_file(p: Path) -> int:
    """Size in bytes of a readable file that starts like GGUF, else GGUFFileError."""
    try:
        st = p.stat()
    except FileNotFoundError:
        raise GGUFFileError(p, "file not found") from None
    except OSError as exc:
        raise GGUFFileError(p, f"cannot read ({exc.strerror or exc})") from None
    if p.is_dir():
        raise GGUFFileError(p, "is a directory, not a GGUF file")
    file_bytes = st.st_size
    if file_bytes == 0:
        raise GGUFFileError(p, "empty file (0 bytes), not a GGUF file")
    try:
        with p.open("rb") as f:
            head = f.read(8)
    except OSError as exc:
        raise GGUFFileError(p, f"cannot read ({exc.strerror or exc})") from None
    if not head.startswith(GGUF_MAGIC_BYTES):
        if len(head) < 4 and GGUF_MAGIC_BYTES.startswith(head):
            raise GGUFFileError(p, _truncated(file_bytes, _HEADER_FIXED_BYTES))
        raise GGUFFileError(p, f"not a GGUF file (starts with {head!r})")
    if file_bytes < _HEADER_FIXED_BYTES:
        raise GGUFFileError(p, _truncated(file_bytes, _HEADER_FIXED_BYTES))
    version = int.from_bytes(head[4:8], "little")
    if version & 0xFFFF == 0:  # written big-endian
        version = int.from_bytes(head[4:8], "big")
    if version not in SUPPORTED_GGUF_VERSIONS:
        supported = " and ".join(str(v) for v in SUPPORTED_GGUF_VERSIONS)
        raise GGUFFileError(p, f"unsupported GGUF version {version} (this reader handles {supported})")
    return file_bytes


def _facts_from_reader(p: Path, file_bytes: int, reader: _Scan) -> ModelFacts:
    fields = reader.fields

    def scalar(key: str) -> Any:
        """The key's value (a list for an array), or None when absent."""
        field = fields.get(key)
        return None if field is None else field.contents()

    def required(key: str) -> Any:
        value = scalar(key)
        if value is None:
            raise GGUFFileError(p, f"GGUF has no '{key}' key (unsupported or incomplete model)")
        return value

    def as_int(key: str, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int | float) or int(value) != value or value < 0:
            raise GGUFFileError(p, f"corrupt GGUF header ('{key}' is {value!r}, expected a count)")
        return int(value)

    def int_or_layers(key: str, value: Any) -> tuple[int, list[int] | None]:
        """(max, per-layer list or None) of a key that is one count or one count per layer."""
        if isinstance(value, list):
            per_layer = [as_int(key, v) for v in value]
            return (max(per_layer) if per_layer else 0), per_layer
        return as_int(key, value), None

    arch = required("general.architecture")
    if not isinstance(arch, str) or not arch:
        raise GGUFFileError(p, f"corrupt GGUF header ('general.architecture' is {arch!r})")
    extra: dict[str, object] = {}

    n_layer = as_int(f"{arch}.block_count", required(f"{arch}.block_count"))
    n_embd = as_int(f"{arch}.embedding_length", required(f"{arch}.embedding_length"))
    n_ctx_train = as_int(f"{arch}.context_length", required(f"{arch}.context_length"))

    head_key = f"{arch}.attention.head_count"
    raw_head = scalar(head_key)
    n_head, head_layers = int_or_layers(head_key, raw_head) if raw_head is not None else (0, None)
    if head_layers is not None:
        extra["n_head_per_layer"] = head_layers

    kv_key = f"{arch}.attention.head_count_kv"
    raw_kv = scalar(kv_key)
    if raw_kv is None:
        n_head_kv, kv_layers = n_head, head_layers
    else:
        n_head_kv, kv_layers = int_or_layers(kv_key, raw_kv)
    if kv_layers is not None:
        extra["n_head_kv_per_layer"] = kv_layers

    # llama.cpp: head dim defaults to n_embd / n_head of layer 0 (the max where layer 0 has no heads)
    n_head_for_dim = head_layers[0] if head_layers and head_layers[0] else n_head
    default_head_dim = n_embd // n_head_for_dim if n_head_for_dim else 0
    raw_k = scalar(f"{arch}.attention.key_length")
    raw_v = scalar(f"{arch}.attention.value_length")
    head_dim_k = as_int(f"{arch}.attention.key_length", raw_k) if raw_k is not None else default_head_dim
    head_dim_v = as_int(f"{arch}.attention.value_length", raw_v) if raw_v is not None else default_head_dim

    ff_key = f"{arch}.feed_forward_length"
    raw_ff = scalar(ff_key)
    n_ff, ff_layers = int_or_layers(ff_key, raw_ff) if raw_ff is not None else (0, None)
    if ff_layers is not None:
        extra["n_ff_per_layer"] = ff_layers
    raw_ff_exp = scalar(f"{arch}.expert_feed_forward_length")
    if raw_ff_exp is not None:
        extra["n_ff_expert"] = as_int(f"{arch}.expert_feed_forward_length", raw_ff_exp)

    raw_expert = scalar(f"{arch}.expert_count")
    raw_expert_used = scalar(f"{arch}.expert_used_count")
    n_expert = as_int(f"{arch}.expert_count", raw_expert) if raw_expert is not None else 0
    n_expert_used = as_int(f"{arch}.expert_used_count", raw_expert_used) if raw_expert_used is not None else 0

    # tensors: histogram, totals, and the end of the last tensor's data
    tensor_types: dict[str, list[int]] = {}
    n_params = 0
    weight_bytes = 0
    data_end = reader.data_offset
    token_embd_shape: list[int] | None = None
    tensor_bytes: dict[str, int] = {}
    for t in reader.tensors:
        n_elements = int(t.n_elements)
        n_bytes = int(t.n_bytes)
        tensor_bytes[str(t.name)] = n_bytes
        n_params += n_elements
        weight_bytes += n_bytes
        stat = tensor_types.setdefault(t.tensor_type.name, [0, 0, 0])
        stat[0] += 1
        stat[1] += n_bytes
        stat[2] += n_elements
        data_end = max(data_end, int(t.data_offset) + n_bytes)
        if t.name == "token_embd.weight":
            token_embd_shape = [int(d) for d in t.shape]
    if data_end > file_bytes:
        raise GGUFFileError(p, _truncated(file_bytes, data_end))
    histogram = {
        name: TensorTypeStat(n_tensors=s[0], n_bytes=s[1], n_elements=s[2])
        for name, s in sorted(tensor_types.items(), key=lambda kv: (-kv[1][1], kv[0]))
    }

    # vocabulary: explicit key, else the token list, else token_embd's vocab dimension (GGUF ne[1])
    raw_vocab = scalar(f"{arch}.vocab_size")
    tokens_field = fields.get("tokenizer.ggml.tokens")
    if raw_vocab is not None:
        n_vocab = as_int(f"{arch}.vocab_size", raw_vocab)
    elif tokens_field is not None:
        n_vocab = len(tokens_field.data)
    elif token_embd_shape is not None and len(token_embd_shape) >= 2:
        n_vocab = token_embd_shape[1]
    else:
        n_vocab = 0

    raw_window = scalar(f"{arch}.attention.sliding_window")
    window = as_int(f"{arch}.attention.sliding_window", raw_window) if raw_window is not None else None
    pattern_key = f"{arch}.attention.sliding_window_pattern"
    raw_pattern = scalar(pattern_key)
    pattern: int | list[bool] | None
    if raw_pattern is None:
        pattern = None
    elif isinstance(raw_pattern, list):
        pattern = [bool(v) for v in raw_pattern]
    else:
        pattern = as_int(pattern_key, raw_pattern)
    swa_window, swa_layers, swa_rule = sliding_window_layers(arch, n_layer, window, pattern)
    extra["swa_rule"] = swa_rule
    if window and not swa_layers:
        extra["sliding_window_key"] = window

    file_type, file_type_id = _file_type_name(scalar("general.file_type"))
    if file_type_id is not None:
        extra["file_type_id"] = file_type_id
    name = scalar("general.name")
    extra["gguf_version"] = int(scalar("GGUF.version") or 0)
    extra["n_tensors"] = len(reader.tensors)
    extra["tensor_data_offset_bytes"] = int(reader.data_offset)
    extra["arch_known_to_gguf"] = arch in gguf.MODEL_ARCH_NAMES.values()

    return ModelFacts(
        path=str(p),
        file_bytes=file_bytes,
        architecture=arch,
        name=name if isinstance(name, str) and name else p.stem,
        file_type=file_type,
        n_params=n_params,
        weight_bytes=weight_bytes,
        tensor_types=histogram,
        n_layer=n_layer,
        n_head=n_head,
        n_head_kv=n_head_kv,
        head_dim_k=head_dim_k,
        head_dim_v=head_dim_v,
        n_embd=n_embd,
        n_ff=n_ff,
        n_vocab=n_vocab,
        n_ctx_train=n_ctx_train,
        swa_window=swa_window,
        swa_layers=swa_layers,
        n_expert=n_expert,
        n_expert_used=n_expert_used,
        extra=extra,
        tensor_bytes=tensor_bytes,
    )


def _file_type_name(value: Any) -> tuple[str, int | None]:
    """llama.cpp's LLAMA_FTYPE name for ``general.file_type`` ("Q4_K_M", "F16", ...), or "unknown"."""
    if isinstance(value, bool) or not isinstance(value, int):
        return "unknown", None
    try:
        ftype = gguf.LlamaFileType(value)
    except ValueError:
        return "unknown", value
    if ftype == gguf.LlamaFileType.GUESSED:
        return "unknown", value
    return ftype.name.removeprefix("MOSTLY_").removeprefix("ALL_"), value


def sliding_window_layers(
    arch: str, n_layer: int, window: int | None, pattern: int | Sequence[bool] | None
) -> tuple[int, tuple[int, ...], str]:
    """(window tokens, indices of the layers that use it, the rule applied), following llama.cpp.

    ``pattern`` is ``{arch}.attention.sliding_window_pattern``: a bool per layer (true = sliding window),
    or a period N (layer i uses the window unless (i + 1) % N == 0; N = 0 means every layer). Without a
    pattern, the architecture's llama.cpp default period applies (gemma2: 2, gemma3: 6, ...); an
    architecture with a window but no known pattern is counted as full attention everywhere.
    """
    if window is None:
        window = SWA_DEFAULT_WINDOW.get(arch)
        window_note = f"default window {window} for {arch}" if window else ""
    else:
        window_note = ""
    if not window:
        if window is None and pattern is not None:
            return 0, (), "sliding_window_pattern present but no sliding_window key: no sliding-window layers"
        return 0, (), "no sliding window"

    if isinstance(pattern, Sequence):
        flags = list(pattern)
        layers = tuple(i for i, use_swa in enumerate(flags[:n_layer]) if use_swa)
        rule = "per-layer sliding_window_pattern array (true = sliding window)"
        if len(flags) != n_layer:
            rule += f"; array has {len(flags)} entries for {n_layer} layers"
    else:
        if pattern is not None:
            period = pattern
            source = "sliding_window_pattern"
        elif arch in SWA_DEFAULT_PERIOD:
            period = SWA_DEFAULT_PERIOD[arch]
            source = f"llama.cpp default for {arch}"
        else:
            return 0, (), (
                f"sliding_window {window} but no sliding_window_pattern and no llama.cpp default for "
                f"'{arch}': every layer counted as full attention"
            )
        layers = swa_layers_for_period(n_layer, period)
        if period == 0:
            rule = f"period 0 ({source}): every layer uses the sliding window"
        else:
            rule = f"period {period} ({source}): layer i uses the sliding window unless (i + 1) % {period} == 0"
    if window_note:
        rule += f"; {window_note}"
    return (window, layers, rule) if layers else (0, (), rule)


def swa_layers_for_period(n_layer: int, period: int) -> tuple[int, ...]:
    """Sliding-window layers for llama.cpp's period rule (0: all layers; 1: none)."""
    if period == 0:
        return tuple(range(n_layer))
    return tuple(i for i in range(n_layer) if (i + 1) % period != 0)


# --------------------------------------------------------------------------------------------------------------------
# Layout walk: how many bytes do the header, tensor table and tensor data need?

_SCALAR_BYTES: dict[int, int] = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_STRING_TYPE = 8
_ARRAY_TYPE = 9
_UINT32_TYPE = 4
_MIN_ITEM_BYTES: dict[int, int] = {**_SCALAR_BYTES, _STRING_TYPE: 8, _ARRAY_TYPE: 12}
_MIN_KV_BYTES = 8 + 4 + 1  # key length, value type, smallest value
_MIN_TENSOR_INFO_BYTES = 8 + 4 + 4 + 8  # name length, n_dims, ggml type, offset
_MAX_DIMS = 8


class _ShortRead(Exception):
    """The layout needs more bytes than the file has."""

    def __init__(self, needed_bytes: int) -> None:
        super().__init__(needed_bytes)
        self.needed_bytes = needed_bytes


class _Corrupt(Exception):
    """The layout cannot be followed (unknown type, absurd dimension count)."""


class _Cursor:
    """Forward-only, bounds-checked reads of a GGUF header."""

    def __init__(self, f: BinaryIO, file_bytes: int, byte_order: str) -> None:
        self.f = f
        self.file_bytes = file_bytes
        self.order = byte_order
        self.pos = 0

    def need(self, n_bytes: int) -> None:
        if self.pos + n_bytes > self.file_bytes:
            raise _ShortRead(self.pos + n_bytes)

    def take(self, n_bytes: int) -> bytes:
        self.need(n_bytes)
        data = self.f.read(n_bytes)
        if len(data) < n_bytes:
            raise _ShortRead(self.pos + n_bytes)
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

    def count(self, min_item_bytes: int) -> int:
        """A u64 count of items of at least ``min_item_bytes`` each, which must fit in the rest of the file."""
        n = self.u64()
        self.need(n * min_item_bytes)
        return n

    def skip_value(self, vtype: int, key: str) -> None:
        if vtype in _SCALAR_BYTES:
            self.skip(_SCALAR_BYTES[vtype])
        elif vtype == _STRING_TYPE:
            self.skip(self.count(1))
        elif vtype == _ARRAY_TYPE:
            item_type = self.u32()
            if item_type not in _MIN_ITEM_BYTES:
                raise _Corrupt(f"key '{key}' is an array of unknown type {item_type}")
            n = self.count(_MIN_ITEM_BYTES[item_type])
            if item_type in _SCALAR_BYTES:
                self.skip(n * _SCALAR_BYTES[item_type])
            else:
                for _ in range(n):
                    self.skip_value(item_type, key)
        else:
            raise _Corrupt(f"key '{key}' has unknown value type {vtype}")


_SCALAR_FORMATS: dict[int, str] = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q",
                                    12: "d"}
#: Arrays longer than this keep only their length (tokenizer vocabularies and merges); per-layer arrays are short.
_MAX_DECODED_ITEMS = 4096


class _Field:
    """One header key's value, shaped like what the facts need: ``contents()`` and ``len(data)``."""

    def __init__(self, value: Any, length: int = 1) -> None:
        self.value = value
        self.data = range(length)

    def contents(self) -> Any:
        return self.value


class _Tensor:
    """One tensor-table entry (dims in GGUF ``ne`` order, absolute data offset)."""

    def __init__(self, name: str, tensor_type: gguf.GGMLQuantizationType, shape: list[int], n_elements: int,
                 n_bytes: int, data_offset: int) -> None:
        self.name = name
        self.tensor_type = tensor_type
        self.shape = shape
        self.n_elements = n_elements
        self.n_bytes = n_bytes
        self.data_offset = data_offset


class _Scan:
    """What one pass over a GGUF header yields: fields, tensors, where the data starts and must end."""

    def __init__(self) -> None:
        self.fields: dict[str, _Field] = {}
        self.tensors: list[_Tensor] = []
        self.data_offset = 0
        self.needed_bytes = 0


def _read_value(cur: _Cursor, vtype: int, key: str) -> _Field:
    if vtype in _SCALAR_FORMATS:
        fmt = _SCALAR_FORMATS[vtype]
        return _Field(struct.unpack(cur.order + fmt, cur.take(_SCALAR_BYTES[vtype]))[0])
    if vtype == _STRING_TYPE:
        return _Field(cur.take(cur.count(1)).decode("utf-8", errors="replace"))
    if vtype == _ARRAY_TYPE:
        item_type = cur.u32()
        if item_type not in _MIN_ITEM_BYTES:
            raise _Corrupt(f"key '{key}' is an array of unknown type {item_type}")
        n = cur.count(_MIN_ITEM_BYTES[item_type])
        if n > _MAX_DECODED_ITEMS or item_type == _ARRAY_TYPE:
            if item_type in _SCALAR_BYTES:
                cur.skip(n * _SCALAR_BYTES[item_type])
            else:
                for _ in range(n):
                    cur.skip_value(item_type, key)
            return _Field(None, n)
        if item_type in _SCALAR_FORMATS:
            fmt = f"{cur.order}{n}{_SCALAR_FORMATS[item_type]}"
            return _Field(list(struct.unpack(fmt, cur.take(n * _SCALAR_BYTES[item_type]))), n)
        return _Field([cur.take(cur.count(1)).decode("utf-8", errors="replace") for _ in range(n)], n)
    raise _Corrupt(f"key '{key}' has unknown value type {vtype}")


def _scan(p: Path, file_bytes: int) -> _Scan:
    """Header keys, tensor table and the bytes the tensor data needs (the end of the last tensor's data).

    Raises _ShortRead (with a lower bound) when the file ends inside the header or tensor table,
    and _Corrupt when the layout cannot be followed.
    """
    scan = _Scan()
    with p.open("rb") as f:
        head = f.read(8)
        order = ">" if int.from_bytes(head[4:8], "little") & 0xFFFF == 0 else "<"
        f.seek(0)
        cur = _Cursor(f, file_bytes, order)
        cur.skip(4)  # magic
        scan.fields["GGUF.version"] = _Field(cur.u32())
        n_tensors = cur.u64()
        n_kv = cur.u64()
        cur.need(n_kv * _MIN_KV_BYTES + n_tensors * _MIN_TENSOR_INFO_BYTES)
        for _ in range(n_kv):
            key = cur.take(cur.count(1)).decode("utf-8", errors="replace")
            scan.fields[key] = _read_value(cur, cur.u32(), key)
        alignment = gguf.GGUF_DEFAULT_ALIGNMENT
        align = scan.fields.get("general.alignment")
        if align is not None and isinstance(align.value, int) and not isinstance(align.value, bool):
            alignment = align.value
            if alignment == 0 or alignment & (alignment - 1):
                raise _Corrupt(f"general.alignment {alignment} is not a power of two")
        infos = []
        data_end = 0
        for _ in range(n_tensors):
            name = cur.take(cur.count(1)).decode("utf-8", errors="replace")
            n_dims = cur.u32()
            if n_dims > _MAX_DIMS:
                raise _Corrupt(f"tensor '{name}' has {n_dims} dimensions")
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
                raise _Corrupt(f"tensor '{name}' has unknown ggml type {type_id}") from None
            n_bytes = n_elements * block_bytes // block_values
            infos.append((name, ttype, shape, n_elements, n_bytes, offset))
            data_end = max(data_end, offset + n_bytes)
        scan.data_offset = -(-cur.pos // alignment) * alignment
        scan.needed_bytes = scan.data_offset + data_end
        scan.tensors = [_Tensor(n, t, sh, ne, nb, scan.data_offset + off) for n, t, sh, ne, nb, off in infos]
    return scan


# --------------------------------------------------------------------------------------------------------------------
# Text report

KIB = 1024
MIB = 1024**2
GIB = 1024**3


def format_bytes(n_bytes: float) -> str:
    """MiB below 1 GiB, else GiB, followed by the exact byte count."""
    size = f"{n_bytes / GIB:.2f} GiB" if n_bytes >= GIB else f"{n_bytes / MIB:.2f} MiB"
    return f"{size} ({int(round(n_bytes)):,} bytes)"


def format_params(n_params: int) -> str:
    """Parameters in millions below 1e9, else billions."""
    return f"{n_params / 1e9:.2f} B" if n_params >= 1e9 else f"{n_params / 1e6:.2f} M"


def _layer_ranges(layers: Sequence[int]) -> str:
    """"0-4, 6-10, 12" for a sorted list of layer indices."""
    parts: list[str] = []
    start = prev = None
    for i in layers:
        if start is None:
            start = prev = i
        elif i == prev + 1:
            prev = i
        else:
            parts.append(str(start) if start == prev else f"{start}-{prev}")
            start = prev = i
    if start is not None:
        parts.append(str(start) if start == prev else f"{start}-{prev}")
    return ", ".join(parts)


def format_facts_text(facts: ModelFacts) -> str:
    """Aligned multi-line report of a model's facts, for ``gguf-bench inspect``."""
    label_width = 18
    lines: list[str] = []

    def row(label: str, value: object) -> None:
        lines.append(f"{label:<{label_width}}{value}")

    row("File", facts.path)
    row("File size", format_bytes(facts.file_bytes))
    row("Name", facts.name)
    row("Architecture", facts.architecture)
    row("File type", facts.file_type)
    row("Parameters", f"{format_params(facts.n_params)} ({facts.n_params:,})")
    row("Weights", f"{format_bytes(facts.weight_bytes)}, {facts.bits_per_weight:.3f} bits/weight")
    row("Layers", facts.n_layer)
    row("Embedding", facts.n_embd)
    row("Feed-forward", facts.n_ff)
    gqa = f"GQA ratio {facts.gqa_ratio:.2f}" if facts.n_head_kv else "no KV heads"
    row("Attention heads", f"{facts.n_head} query, {facts.n_head_kv} KV ({gqa})")
    row("Head dims", f"K {facts.head_dim_k}, V {facts.head_dim_v}")
    row("Vocabulary", facts.n_vocab)
    row("Train context", f"{facts.n_ctx_train} tokens")
    if facts.n_expert:
        row("Experts", f"{facts.n_expert} ({facts.n_expert_used} used per token)")
    if facts.swa_layers:
        row(
            "Sliding window",
            f"{facts.swa_window} tokens on {len(facts.swa_layers)} of {facts.n_layer} layers: "
            f"{_layer_ranges(facts.swa_layers)}",
        )
    else:
        row("Sliding window", "none")

    lines.append("")
    lines.append("Tensor types")
    header = f"  {'type':<8}{'tensors':>8}{'elements':>16}{'bytes':>16}"
    lines.append(header)
    for name, stat in facts.tensor_types.items():
        lines.append(f"  {name:<8}{stat.n_tensors:>8}{stat.n_elements:>16,}{stat.n_bytes:>16,}")

    lines.append("")
    ctx = facts.n_ctx_train
    swa_note = ", sliding-window layers capped" if facts.swa_layers else ""
    lines.append(f"KV cache (K and V of the same type, {facts.n_layer} layers{swa_note})")
    lines.append(f"  {'type':<8}{'KiB/token':>12}  at {ctx} tokens (train context)")
    for cache in REPORTED_CACHE_TYPES:
        per_token = facts.kv_bytes_per_token(cache)
        at_ctx = format_bytes(facts.kv_bytes(ctx, cache)) if ctx else "n/a"
        lines.append(f"  {cache:<8}{per_token / KIB:>12.2f}  {at_ctx}")
    return "\n".join(lines)
