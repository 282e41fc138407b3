"""Where llama.cpp puts a model's tensors: -dev, -ts, -ot and -ncmoe as llama_model_params' C arrays.

llama-cpp-python 0.3.36 declares ``llama_model_params.devices`` and ``.tensor_buft_overrides`` as bare ``void *``
and binds none of ggml's device registry, so the arrays are built here with ctypes over ggml's public C API
(``ggml/include/ggml-backend.h``), as llama-bench builds them (``tools/llama-bench/llama-bench.cpp``:
``parse_devices_arg``, the ``-ot`` parser, ``cmd_params_instance::to_llama_mparams``). Nothing here imports
``llama_cpp``: the libraries are the ones it loaded (same paths, so the same handles).
"""

from __future__ import annotations

import ctypes
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engines.base import SPLIT_MODES, LoadConfig, SettingsError
from engines.ggml_devices import open_ggml

#: common/common.h LLM_FFN_EXPS_REGEX: a layer's MoE expert tensors (gate, up, down, fused gate_up, "ch" variants).
EXPERT_TENSORS_REGEX = r"\.ffn_(up|down|gate|gate_up)_(ch|)exps"
#: llama.cpp's llama_max_devices() (src/llama.cpp): the length llama_model_params.tensor_split must have.
MAX_DEVICES = 16
_DEVICE_TYPE_CPU = 0  # enum ggml_backend_dev_type


def expert_block_pattern(layer: int) -> str:
    """common/common.h llm_ffn_block_regex(layer, LLM_FFN_EXPS_REGEX): layer ``layer``'s expert tensors."""
    return rf"blk\.{layer}{EXPERT_TENSORS_REGEX}"


def n_cpu_moe_patterns(n_cpu_moe: int) -> list[str]:
    """The patterns llama-bench adds for ``-ncmoe N``: one per layer 0..N-1, each kept on the CPU buffer type."""
    return [expert_block_pattern(i) for i in range(max(0, n_cpu_moe))]


class TensorBuftOverride(ctypes.Structure):
    """include/llama.h ``struct llama_model_tensor_buft_override``; an array of them ends with a NULL pattern."""

    _fields_ = [("pattern", ctypes.c_char_p), ("buft", ctypes.c_void_p)]


#: Debug lines of the last load that say a tensor went to an override's buffer type (src/llama-model-loader.cpp:
#: "tensor %s (%zu MiB %s) buffer type overridden to %s"), fed by the engine's log callback.
OVERRIDDEN: list[str] = []
_OVERRIDDEN_RE = re.compile(r"tensor (\S+) \(.*\) buffer type overridden to (\S+)")


def note_log_line(msg: str) -> None:
    """Keep a tensor placed by an override (called from the log callback for every line; cheap for the others)."""
    if "buffer type overridden" in msg and (m := _OVERRIDDEN_RE.search(msg)):
        OVERRIDDEN.append(m.group(1))


class _Ggml:
    """The registry calls used, bound once per process to the libraries llama_cpp loaded."""

    def __init__(self, lib_dir: Path) -> None:
        ggml, base = open_ggml(lib_dir)  # libllama's own copies, signatures declared there
        self.dev_count, self.dev_get = ggml.ggml_backend_dev_count, ggml.ggml_backend_dev_get
        self.dev_name, self.dev_type = base.ggml_backend_dev_name, base.ggml_backend_dev_type
        self.dev_buffer_type, self.buft_name = base.ggml_backend_dev_buffer_type, base.ggml_backend_buft_name
        self.cpu_buffer_type = base.ggml_backend_cpu_buffer_type

    def devices(self) -> list[tuple[str, int, int]]:
        """(name, ggml device type, handle) of every registered device."""
        out = []
        for i in range(self.dev_count()):
            dev = self.dev_get(i)
            out.append((self.dev_name(dev).decode("utf-8", "replace"), int(self.dev_type(dev)), dev))
        return out

    def buffer_types(self) -> dict[str, int]:
        """Each device's default buffer type by name ("CPU", "Vulkan0", "CUDA0"): llama-bench's -ot list."""
        out = {}
        for _, _, dev in self.devices():
            buft = self.dev_buffer_type(dev)
            if buft:
                out[self.buft_name(buft).decode("utf-8", "replace")] = buft
        return out


_GGML: _Ggml | None = None


def _ggml(lib_dir: Path) -> _Ggml:
    global _GGML
    if _GGML is None:
        _GGML = _Ggml(lib_dir)
    return _GGML


@dataclass
class Placement:
    """The C arrays of one load, kept alive (by this object) while llama.cpp reads them."""

    devices: Any = None  # (ggml_backend_dev_t * n+1)() ending in NULL, or None: all devices
    tensor_split: Any = None  # (c_float * MAX_DEVICES)(), or None: llama.cpp's default
    overrides: Any = None  # (TensorBuftOverride * n+1)() ending in a NULL pattern, or None
    split_mode: int = 1
    keep: list[Any] = field(default_factory=list)

    def apply(self, params: Any) -> None:
        """Set ``params`` (a llama_model_params) to this placement."""
        params.split_mode = self.split_mode
        params.devices = ctypes.cast(self.devices, ctypes.c_void_p).value if self.devices is not None else None
        params.tensor_buft_overrides = (ctypes.cast(self.overrides, ctypes.c_void_p).value
                                        if self.overrides is not None else None)
        if self.tensor_split is not None:
            params.tensor_split = self.tensor_split


def build_placement(cfg: LoadConfig, lib_dir: Path) -> Placement:
    """The arrays for ``cfg``'s devices, tensor split and buffer type overrides (``-ot`` entries first, then the
    ``-ncmoe`` patterns, as llama-bench merges them). A device or buffer type this build does not have raises
    SettingsError naming the ones it has."""
    if cfg.split_mode not in SPLIT_MODES:
        raise SettingsError(f"-sm {cfg.split_mode}: not a split mode (valid: {', '.join(SPLIT_MODES)})")
    out = Placement(split_mode=SPLIT_MODES.index(cfg.split_mode))
    needs_registry = cfg.devices is not None or cfg.tensor_buft_overrides or cfg.n_cpu_moe > 0
    ggml = _ggml(lib_dir) if needs_registry else None
    if cfg.devices is not None and ggml is not None:
        out.devices = _device_array(ggml, cfg.devices)
    if any(cfg.tensor_split):
        if len(cfg.tensor_split) > MAX_DEVICES:
            raise SettingsError(f"-ts: {len(cfg.tensor_split)} proportions, at most {MAX_DEVICES}")
        out.tensor_split = (ctypes.c_float * MAX_DEVICES)(*cfg.tensor_split)
    pairs: list[tuple[str, int]] = []
    if ggml is not None and cfg.tensor_buft_overrides:
        bufts = ggml.buffer_types()
        for pattern, name in cfg.tensor_buft_overrides:
            if name not in bufts:
                raise SettingsError(f"-ot {pattern}={name}: no buffer type {name!r} in this llama.cpp build "
                                    f"(valid: {', '.join(sorted(bufts))})")
            pairs.append((pattern, bufts[name]))
    if ggml is not None and cfg.n_cpu_moe > 0:
        cpu = ggml.cpu_buffer_type()
        pairs += [(p, cpu) for p in n_cpu_moe_patterns(cfg.n_cpu_moe)]
    if pairs:
        arr = (TensorBuftOverride * (len(pairs) + 1))()
        for i, (pattern, buft) in enumerate(pairs):
            raw = pattern.encode("utf-8")
            out.keep.append(raw)
            arr[i].pattern, arr[i].buft = raw, buft
        arr[len(pairs)].pattern, arr[len(pairs)].buft = None, None
        out.overrides = arr
    return out


def _device_array(ggml: _Ggml, names: tuple[str, ...]) -> Any:
    """llama-bench's parse_devices_arg: the named GPU devices then NULL (none: NULL alone)."""
    known = {name: (kind, dev) for name, kind, dev in ggml.devices()}
    gpus = sorted(n for n, (kind, _) in known.items() if kind != _DEVICE_TYPE_CPU)
    handles = []
    for name in names:
        kind, dev = known.get(name, (None, None))
        if dev is None or kind == _DEVICE_TYPE_CPU:
            raise SettingsError(f"-dev {name}: no such GPU device in this llama.cpp build "
                                f"(devices: {', '.join(gpus) or 'none, a CPU-only build'})")
        handles.append(dev)
    arr = (ctypes.c_void_p * (len(handles) + 1))(*handles, None)
    return arr
