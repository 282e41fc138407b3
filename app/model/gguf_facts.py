"""Read a GGUF file's header and tensor table into ModelFacts, with llama.cpp's sliding-window layer rules.

Only the header and tensor table are parsed, in one bounds-checked pass (:mod:`app.model.gguf_scan`);
no weight is read. Every problem with the file becomes a one-line :class:`GGUFFileError` naming the
file and the cause. The text report for ``gguf-bench inspect`` is in :mod:`app.model.format`.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from app.model.arch_memory import memory_layout
from app.model.facts import ModelFacts, TensorTypeStat
from app.model.gguf_constants import tables
from app.model.gguf_sanity import layer_count_problem, shape_problem
from app.model.gguf_scan import IMPOSSIBLE_BYTES, CorruptHeader, Scan, ShortRead, scan_gguf
from app.model.lineage import LINEAGE_KEYS

GGUF_MAGIC_BYTES = b"GGUF"
SUPPORTED_GGUF_VERSIONS: tuple[int, ...] = (2, 3)
_HEADER_FIXED_BYTES = 24  # magic u32, version u32, tensor count u64, kv count u64

#: Default sliding-window period per architecture when the file has no ``sliding_window_pattern`` key,
#: as llama.cpp sets it (``set_swa_pattern(N)``: layer i uses the window unless (i + 1) % N == 0).
SWA_DEFAULT_PERIOD: dict[str, int] = {"gemma2": 2, "gemma3": 6, "gemma3n": 5, "cohere2": 4, "gpt-oss": 2, "afmoe": 4,
                                      "exaone4": 4, "exaone-moe": 4, "mellum": 4}
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


def read_model_facts(path: str | os.PathLike[str]) -> ModelFacts:
    """Facts from a GGUF file's header and tensor table; raises GGUFFileError for any bad file."""
    p = Path(path)
    file_bytes = _check_file(p)
    # One bounds-checked pass over the header and tensor table: a short file or an absurd count is reported
    # here, and only what the facts need is decoded (a 128k-token vocabulary is skipped, not parsed).
    try:
        scan = scan_gguf(p, file_bytes)
    except ShortRead as short:
        raise GGUFFileError(p, _truncated(file_bytes, short.needed_bytes)) from None
    except CorruptHeader as bad:
        raise GGUFFileError(p, f"corrupt GGUF header ({bad})") from None
    except OSError as exc:
        raise GGUFFileError(p, f"cannot read ({exc.strerror or exc})") from None
    return facts_from_scan(p, file_bytes, scan)


def facts_from_scan(source: str | Path, file_bytes: int, scan: Scan) -> ModelFacts:
    """Facts from a finished scan of ``source`` (a path, or a URL whose header was fetched); GGUFFileError names it."""
    if scan.needed_bytes > file_bytes:
        raise GGUFFileError(source, _truncated(file_bytes, scan.needed_bytes))
    try:
        facts = _facts_from_reader(source, file_bytes, scan)
    except GGUFFileError:
        raise
    except Exception as exc:  # any surprise in a malformed header is still a one-line error
        raise GGUFFileError(source, f"corrupt GGUF header ({_short_reason(exc)})") from None
    problem = shape_problem(facts)
    if problem:
        raise GGUFFileError(source, f"bad model metadata ({problem})")
    return facts


def _truncated(file_bytes: int, needed_bytes: int) -> str:
    if needed_bytes > IMPOSSIBLE_BYTES:  # no download was ever that long: the header's numbers are wrong
        return (f"corrupt GGUF header (its tensor table places data at byte {needed_bytes:,}, impossible for a "
                f"file of {file_bytes:,} bytes)")
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
    if not stat.S_ISREG(st.st_mode):  # a FIFO or /dev/zero: never opened (a FIFO would block), never "empty"
        raise GGUFFileError(p, "not a regular file (a device, FIFO or socket), not a GGUF file")
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


class _Keys:
    """Typed access to a scan's header keys; a missing or mistyped key is a GGUFFileError naming it."""

    def __init__(self, p: str | Path, scan: Scan) -> None:
        self.p = p
        self.fields = scan.fields

    def get(self, key: str) -> Any:
        """The key's value (a list for an array), or None when absent."""
        field = self.fields.get(key)
        return None if field is None else field.contents()

    def required(self, key: str) -> Any:
        value = self.get(key)
        if value is None:
            raise GGUFFileError(self.p, f"GGUF has no '{key}' key (unsupported or incomplete model)")
        return value

    def as_int(self, key: str, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int | float) or int(value) != value or value < 0:
            raise GGUFFileError(self.p, f"corrupt GGUF header ('{key}' is {value!r}, expected a count)")
        return int(value)

    def count(self, key: str, default: int) -> int:
        """The key as a count, or ``default`` when absent."""
        value = self.get(key)
        return self.as_int(key, value) if value is not None else default

    def int_or_layers(self, key: str, value: Any) -> tuple[int, list[int] | None]:
        """(max, per-layer list or None) of a key that is one count or one count per layer."""
        if isinstance(value, list):
            per_layer = [self.as_int(key, v) for v in value]
            return (max(per_layer) if per_layer else 0), per_layer
        return self.as_int(key, value), None


def _attention(keys: _Keys, arch: str, n_embd: int, extra: dict[str, object]) -> tuple[int, int, int, int]:
    """(n_head, n_head_kv, head_dim_k, head_dim_v); per-layer head counts go into ``extra``."""
    head_key = f"{arch}.attention.head_count"
    raw_head = keys.get(head_key)
    n_head, head_layers = keys.int_or_layers(head_key, raw_head) if raw_head is not None else (0, None)
    if head_layers is not None:
        extra["n_head_per_layer"] = head_layers

    kv_key = f"{arch}.attention.head_count_kv"
    raw_kv = keys.get(kv_key)
    if raw_kv is None:
        n_head_kv, kv_layers = n_head, head_layers
    else:
        n_head_kv, kv_layers = keys.int_or_layers(kv_key, raw_kv)
    if kv_layers is not None:
        extra["n_head_kv_per_layer"] = kv_layers

    # llama.cpp: head dim defaults to n_embd / n_head of layer 0 (the max where layer 0 has no heads)
    n_head_for_dim = head_layers[0] if head_layers and head_layers[0] else n_head
    default_head_dim = n_embd // n_head_for_dim if n_head_for_dim else 0
    head_dim_k = keys.count(f"{arch}.attention.key_length", default_head_dim)
    head_dim_v = keys.count(f"{arch}.attention.value_length", default_head_dim)
    return n_head, n_head_kv, head_dim_k, head_dim_v


def _feed_forward(keys: _Keys, arch: str, extra: dict[str, object]) -> int:
    """n_ff (the max over layers); per-layer and expert sizes go into ``extra``."""
    ff_key = f"{arch}.feed_forward_length"
    raw_ff = keys.get(ff_key)
    n_ff, ff_layers = keys.int_or_layers(ff_key, raw_ff) if raw_ff is not None else (0, None)
    if ff_layers is not None:
        extra["n_ff_per_layer"] = ff_layers
    raw_ff_exp = keys.get(f"{arch}.expert_feed_forward_length")
    if raw_ff_exp is not None:
        extra["n_ff_expert"] = keys.int_or_layers(f"{arch}.expert_feed_forward_length", raw_ff_exp)[0]
    for key, name in (("expert_shared_feed_forward_length", "n_ff_shexp"), ("expert_shared_count", "n_expert_shared")):
        raw = keys.get(f"{arch}.{key}")
        if raw is not None:
            extra[name] = keys.int_or_layers(f"{arch}.{key}", raw)[0]
    return n_ff


class _TensorTotals:
    """Histogram by type, totals, per-tensor bytes and token_embd's shape, from the tensor table."""

    def __init__(self, p: str | Path, file_bytes: int, scan: Scan) -> None:
        tensor_types: dict[str, list[int]] = {}
        self.n_params = 0
        self.weight_bytes = 0
        self.token_embd_shape: list[int] | None = None
        self.tensor_bytes: dict[str, int] = {}
        self.tensor_shapes: dict[str, tuple[str, tuple[int, ...]]] = {}
        data_end = scan.data_offset
        for t in scan.tensors:
            n_elements = int(t.n_elements)
            n_bytes = int(t.n_bytes)
            self.tensor_bytes[str(t.name)] = n_bytes
            self.tensor_shapes[str(t.name)] = (t.tensor_type.name, tuple(int(d) for d in t.shape))
            self.n_params += n_elements
            self.weight_bytes += n_bytes
            stat = tensor_types.setdefault(t.tensor_type.name, [0, 0, 0])
            stat[0] += 1
            stat[1] += n_bytes
            stat[2] += n_elements
            data_end = max(data_end, int(t.data_offset) + n_bytes)
            if t.name == "token_embd.weight":
                self.token_embd_shape = [int(d) for d in t.shape]
        if data_end > file_bytes:
            raise GGUFFileError(p, _truncated(file_bytes, data_end))
        self.histogram = {
            name: TensorTypeStat(n_tensors=s[0], n_bytes=s[1], n_elements=s[2])
            for name, s in sorted(tensor_types.items(), key=lambda kv: (-kv[1][1], kv[0]))
        }


def _vocab_size(keys: _Keys, arch: str, token_embd_shape: list[int] | None) -> int:
    """Explicit key, else the token list's length, else token_embd's vocab dimension (GGUF ne[1]), else 0."""
    raw_vocab = keys.get(f"{arch}.vocab_size")
    tokens_field = keys.fields.get("tokenizer.ggml.tokens")
    if raw_vocab is not None:
        return keys.as_int(f"{arch}.vocab_size", raw_vocab)
    if tokens_field is not None:
        return len(tokens_field.data)
    if token_embd_shape is not None and len(token_embd_shape) >= 2:
        return token_embd_shape[1]
    return 0


def _sliding_window(keys: _Keys, arch: str, n_layer: int, extra: dict[str, object]) -> tuple[int, tuple[int, ...]]:
    """(window, sliding-window layers) from the file's keys; the rule applied goes into ``extra``."""
    raw_window = keys.get(f"{arch}.attention.sliding_window")
    window = keys.as_int(f"{arch}.attention.sliding_window", raw_window) if raw_window is not None else None
    pattern_key = f"{arch}.attention.sliding_window_pattern"
    raw_pattern = keys.get(pattern_key)
    pattern: int | list[bool] | None
    if raw_pattern is None:
        pattern = None
    elif isinstance(raw_pattern, list):
        pattern = [bool(v) for v in raw_pattern]
    else:
        pattern = keys.as_int(pattern_key, raw_pattern)
    swa_window, swa_layers, swa_rule = sliding_window_layers(arch, n_layer, window, pattern)
    extra["swa_rule"] = swa_rule
    if window and not swa_layers:
        extra["sliding_window_key"] = window
    return swa_window, swa_layers


def _facts_from_reader(p: str | Path, file_bytes: int, reader: Scan) -> ModelFacts:
    keys = _Keys(p, reader)
    arch = keys.required("general.architecture")
    if not isinstance(arch, str) or not arch:
        raise GGUFFileError(p, f"corrupt GGUF header ('general.architecture' is {arch!r})")
    extra: dict[str, object] = {}

    n_layer = keys.as_int(f"{arch}.block_count", keys.required(f"{arch}.block_count"))
    problem = layer_count_problem(n_layer, arch, (str(t.name) for t in reader.tensors))
    if problem:
        raise GGUFFileError(p, f"bad model metadata ({problem})")
    n_embd = keys.as_int(f"{arch}.embedding_length", keys.required(f"{arch}.embedding_length"))
    n_ctx_train = keys.as_int(f"{arch}.context_length", keys.required(f"{arch}.context_length"))
    n_head, n_head_kv, head_dim_k, head_dim_v = _attention(keys, arch, n_embd, extra)
    n_ff = _feed_forward(keys, arch, extra)
    n_expert = keys.count(f"{arch}.expert_count", 0)
    n_expert_used = keys.count(f"{arch}.expert_used_count", 0)
    tensors = _TensorTotals(p, file_bytes, reader)
    n_vocab = _vocab_size(keys, arch, tensors.token_embd_shape)
    swa_window, swa_layers = _sliding_window(keys, arch, n_layer, extra)
    kv_heads = _layer_values(extra.get("n_head_kv_per_layer"), n_head_kv, n_layer)
    layout = memory_layout(keys.get, arch, n_layer, n_embd, kv_heads,
                           _layer_values(extra.get("n_ff_per_layer"), n_ff, n_layer), head_dim_k, head_dim_v,
                           swa_layers if swa_window else ())
    if arch in _SWA_ON_ATTENTION and keys.get(f"{arch}.attention.sliding_window"):
        # LFM2 (src/models/lfm2.cpp): a sliding_window key puts every attention layer under it
        swa_window = keys.as_int(f"{arch}.attention.sliding_window", keys.get(f"{arch}.attention.sliding_window"))
        swa_layers = tuple(i for i in range(n_layer) if layout.kv_k[i])
        extra["swa_rule"] = f"{arch}: every attention layer uses the sliding window"
    extra["memory_rule"] = layout.rule
    if not layout.known or arch not in tables().arch_names:
        extra["memory_rule_known"] = False

    file_type, file_type_id = _file_type_name(keys.get("general.file_type"))
    if file_type_id is not None:
        extra["file_type_id"] = file_type_id
    name = keys.get("general.name")
    extra["gguf_version"] = int(keys.get("GGUF.version") or 0)
    extra["n_tensors"] = len(reader.tensors)
    extra["tensor_data_offset_bytes"] = int(reader.data_offset)
    extra["arch_known_to_gguf"] = arch in tables().arch_names
    for key in LINEAGE_KEYS:  # read here, with the rest of the header: the chooser asks for every file's
        value = keys.get(key)
        if isinstance(value, str) and value:
            extra[key] = value

    return ModelFacts(
        path=str(p),
        file_bytes=file_bytes,
        architecture=arch,
        name=name if isinstance(name, str) and name else Path(p).stem,
        file_type=file_type,
        n_params=tensors.n_params,
        weight_bytes=tensors.weight_bytes,
        tensor_types=tensors.histogram,
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
        tensor_bytes=tensors.tensor_bytes,
        tensor_shapes=tensors.tensor_shapes,
        kv_k_per_layer=layout.kv_k,
        kv_v_per_layer=layout.kv_v,
        recurrent_layers=layout.recurrent_layers,
        state_r=layout.state_r,
        state_s=layout.state_s,
    )


#: architectures whose sliding window covers every attention layer (no pattern key)
_SWA_ON_ATTENTION = frozenset({"lfm2"})


def _layer_values(per_layer: object, scalar: int, n_layer: int) -> list[int]:
    """A per-layer list from ``extra`` (padded or cut to ``n_layer``), else ``scalar`` for every layer."""
    if isinstance(per_layer, list):
        return ([int(v) for v in per_layer] + [0] * n_layer)[:n_layer]
    return [scalar] * n_layer


def _file_type_name(value: Any) -> tuple[str, int | None]:
    """llama.cpp's LLAMA_FTYPE name for ``general.file_type`` ("Q4_K_M", "F16", ...), or "unknown"."""
    if isinstance(value, bool) or not isinstance(value, int):
        return "unknown", None
    try:
        ftype = tables().file_type(value)
    except ValueError:
        return "unknown", value
    if ftype == tables().file_type["GUESSED"]:
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
