"""llama.cpp's quantizer (llama_model_quantize), with per-tensor progress read from its log. Worker process only.

llama.cpp offers no progress callback for quantizing, but it logs one line per tensor as it starts it
(src/llama-quant.cpp, the main loop: ``[%4d/%4d] %-36s - [...], type = ...``); a log callback set for the
duration of the call turns those lines into progress calls, at no cost to the quantizer.
"""

from __future__ import annotations

import ctypes
import re
from collections.abc import Callable, Mapping

from engines.base import EngineError, ModelLoadError
from engines.llama_cpp_engine import (
    _init_backend,
    _on_log,
    lc,  # the one module that imports llama_cpp
)
from engines.llama_log import clear_lines, keep_line, last_error

#: Target types by their llama.cpp names (lower case, as llama-quantize takes them) -> LLAMA_FTYPE values
#: (include/llama.h, enum llama_ftype). IQ types are left out: most need an importance matrix.
QUANT_TYPES: dict[str, int] = {
    "f32": 0, "f16": 1, "bf16": 32,
    "q8_0": 7, "q6_k": 18, "q5_k_m": 17, "q5_k_s": 16, "q5_1": 9, "q5_0": 8,
    "q4_k_m": 15, "q4_k_s": 14, "q4_1": 3, "q4_0": 2,
    "q3_k_l": 13, "q3_k_m": 12, "q3_k_s": 11, "q2_k": 10, "q2_k_s": 21,
}
_TENSOR_LINE = re.compile(r"^\[\s*(\d+)/\s*(\d+)\]\s+(\S+)")

TensorProgress = Callable[[int, int, str], None]  # (tensors started, tensors in all, tensor name)


class QuantizeError(EngineError):
    """llama.cpp could not write the quantized file."""


_progress: TensorProgress | None = None


@lc.llama_log_callback
def _on_quant_log(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:  # pragma: no cover - C callback
    msg = text.decode("utf-8", "replace") if text else ""
    m = _TENSOR_LINE.match(msg)
    if m and _progress is not None:
        _progress(int(m.group(1)), int(m.group(2)), m.group(3))
    elif not m:
        keep_line(level, msg)


def _overrides(metadata: Mapping[str, str]) -> ctypes.Array[lc.llama_model_kv_override] | None:
    """String metadata written into the output's header, as llama.cpp's key-value override array (zero-terminated)."""
    if not metadata:
        return None
    arr = (lc.llama_model_kv_override * (len(metadata) + 1))()
    for item, (key, value) in zip(arr, metadata.items(), strict=False):
        item.tag = lc.LLAMA_KV_OVERRIDE_TYPE_STR
        item.key = key.encode("utf-8")[:127]
        item.value.val_str = value.encode("utf-8")[:127]
    return arr


def quantize_file(src: str, dst: str, type_name: str, *, allow_requantize: bool = False, n_threads: int = 0,
                  metadata: Mapping[str, str] | None = None, on_tensor: TensorProgress | None = None) -> None:
    """Write ``src`` quantized to ``type_name`` (a :data:`QUANT_TYPES` key) at ``dst``, ``metadata`` added.

    ``allow_requantize`` lets llama.cpp dequantize already quantized tensors first (a loss of quality on top of
    the source's). Raises QuantizeError with llama.cpp's logged cause.
    """
    global _progress
    _init_backend()
    key = type_name.lower()
    if key not in QUANT_TYPES:
        raise ValueError(f"unknown target type {type_name!r} (valid: {', '.join(QUANT_TYPES)})")
    params = lc.llama_model_quantize_default_params()
    params.ftype = QUANT_TYPES[key]
    params.nthread = n_threads
    params.allow_requantize = allow_requantize
    kv = _overrides(metadata or {})
    if kv is not None:
        params.kv_overrides = ctypes.cast(kv, ctypes.POINTER(lc.llama_model_kv_override))
    clear_lines()
    _progress = on_tensor
    lc.llama_log_set(_on_quant_log, ctypes.c_void_p(0))
    try:
        rc = lc.llama_model_quantize(src.encode("utf-8"), dst.encode("utf-8"), ctypes.byref(params))
    finally:
        lc.llama_log_set(_on_log, ctypes.c_void_p(0))
        _progress = None
    if rc != 0:
        raise QuantizeError(f"{src}: quantizing to {key} failed: {last_error(f'llama.cpp returned {rc}')}")


def quantize_model(src: str, dst: str, ftype: str, n_threads: int = 0) -> None:
    """Write ``src`` re-quantized to ``ftype`` (e.g. "Q8_0") at ``dst``: a second file of the same model.

    Re-quantizing an already quantized file loses quality, which does not matter for speed measurements.
    """
    try:
        quantize_file(src, dst, ftype, allow_requantize=True, n_threads=n_threads)
    except QuantizeError as e:
        raise ModelLoadError(str(e)) from None
