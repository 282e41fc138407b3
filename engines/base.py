"""The engine protocol: load a model, build a context, run one timed test, report timestamps.

Engines know nothing of sweeps, stores or plots. They raise the typed errors below.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol


class EngineError(Exception):
    """Base of every engine error; str() is one line a user can read."""


class EngineUnavailable(EngineError):
    """The back end's library is not installed or cannot start."""


class ModelLoadError(EngineError):
    """The model file could not be loaded (unsupported architecture, corrupt tensors, ...)."""


class ContextAllocError(EngineError):
    """The context (KV cache, compute buffers) could not be allocated: out of memory."""


class SettingsError(EngineError):
    """The engine refuses this combination of settings (e.g. a quantized V cache without flash attention)."""


class DecodeError(EngineError):
    """A decode call failed mid-run."""


class InputError(EngineError):
    """The test's own input cannot be used (an unreadable or empty prompt file)."""


#: llama_split_mode's values by llama-bench's names.
SPLIT_MODES = ("none", "layer", "row", "tensor")


@dataclass(frozen=True)
class LoadConfig:
    """How a model loads and where its tensors go (llama_model_params; llama-bench's load-time flags)."""

    model_path: str
    n_gpu_layers: int = 0
    use_mmap: bool = True
    main_gpu: int = 0
    use_extra_bufts: bool = True  # llama.cpp's weight repacking into extra buffer types (llama-bench --repack)
    n_cpu_moe: int = 0  # the first N layers' MoE expert tensors stay in host memory (llama-bench -ncmoe)
    split_mode: str = "layer"  # one of SPLIT_MODES
    tensor_split: tuple[float, ...] = ()  # proportion per device; (): llama.cpp's default (by free memory)
    devices: tuple[str, ...] | None = None  # GPU devices by name; None: all (auto); (): none
    tensor_buft_overrides: tuple[tuple[str, str], ...] = ()  # (regex searched in tensor names, buffer type name)
    no_host: bool = False  # no pinned host buffers for weights in host memory (llama-bench --no-host)


#: Flash attention requests, as llama.cpp's llama_flash_attn_type (and llama-bench's ``flash_attn`` column)
FLASH_ATTN_AUTO, FLASH_ATTN_OFF, FLASH_ATTN_ON = -1, 0, 1


def resolve_n_threads(n_threads: int = 0) -> int:
    """The CPU threads a context runs with for ``ContextConfig.n_threads``: the count asked, or for 0 every logical
    CPU the OS reports (``os.cpu_count()``), as the llama.cpp engine builds it."""
    return n_threads or (os.cpu_count() or 1)


@dataclass(frozen=True)
class ContextConfig:
    n_ctx: int
    n_batch: int = 2048
    n_ubatch: int = 512
    n_threads: int = 0  # 0: engine default
    type_k: str = "f16"
    type_v: str = "f16"
    flash_attn: int = FLASH_ATTN_AUTO  # -1 auto (the engine decides), 0 off, 1 on
    n_seq_max: int = 1
    swa_full: bool = False  # llama-bench and the llama.cpp CLI use a window-sized cache for sliding-window layers
    op_offload: bool = True  # llama.cpp's default: host tensor ops may run on a GPU (llama-bench -nopo 1: False)
    offload_kqv: bool = True  # llama.cpp's default: the KV cache and attention on the GPU (llama-bench -nkvo 1: False)


@dataclass(frozen=True)
class RunSpec:
    """One timed run: fill ``n_depth`` tokens untimed, prefill ``n_prompt``, then ``n_gen`` decode steps.

    With ``n_parallel`` > 1 every sequence gets the same prompt length and all decode together.
    """

    n_prompt: int
    n_gen: int
    n_depth: int = 0
    n_parallel: int = 1
    prompt_tokens: tuple[int, ...] | None = None  # None: random token ids, like llama-bench
    seed: int = 42


@dataclass
class RunTimings:
    """Timestamps (time.perf_counter_ns) of one run; the caller derives every rate from them."""

    start_ns: int  # request start: just before the first prompt batch is submitted
    prefill_end_ns: int  # first token available (prompt evaluated and first token sampled)
    token_ns: list[int] = field(default_factory=list)  # after each decode step (all sequences)
    engine_counters: dict[str, float] = field(default_factory=dict)  # the engine's own perf counters


@dataclass(frozen=True)
class EngineInfo:
    name: str
    version: str
    build_commit: str
    backends: str  # e.g. "CPU", "CUDA"
    gpu_offload: bool  # whether this build can offload layers at all
    system_info: str = ""


@dataclass(frozen=True)
class LoadedModel:
    load_ms: float
    n_gpu_layers_effective: int
    n_vocab: int
    n_layer: int
    size_bytes: int
    n_params: int
    description: str
    extra_buffers: tuple[str, ...] = ()  # CPU extra buffer types holding weights ("CPU_REPACK", "AMX"); () if none
    n_tensors_overridden: int = 0  # tensors llama.cpp placed by a buffer type override (-ot, -ncmoe)


@dataclass(frozen=True)
class ContextInfo:
    """What the engine actually built for a context, where it differs from what was asked."""

    flash_attn: bool | None  # whether flash attention runs (auto resolved); None: the engine cannot tell
    n_threads: int = 0  # the CPU threads the context runs with (``ContextConfig.n_threads`` 0 resolved); 0: unknown


#: The name per-device reports give host memory (llama.cpp's CPU device; pinned host buffers count there too).
HOST_DEVICE = "CPU"


@dataclass(frozen=True)
class DeviceMemory:
    """One device's share of a loaded model and context, as the engine reported it (bytes)."""

    device: str  # the engine's name for it: "CPU" (host memory, pinned host buffers included), "Vulkan0", "CUDA0"
    n_layers: int = 0  # layers placed there: the repeating layers plus the output layer (n_layer + 1 in all)
    weights_bytes: float = 0.0
    kv_bytes: float = 0.0
    compute_bytes: float = 0.0

    @property
    def total_bytes(self) -> float:
        return self.weights_bytes + self.kv_bytes + self.compute_bytes

    @property
    def is_host(self) -> bool:
        return self.device == HOST_DEVICE


@dataclass(frozen=True)
class MemoryReport:
    """What the engine itself reported allocating for the loaded model and context (bytes, all devices)."""

    weights_bytes: float = 0.0
    kv_bytes: float = 0.0
    compute_bytes: float = 0.0
    devices: tuple[DeviceMemory, ...] = ()  # the same per device ("CPU" first), when the engine says

    @property
    def total_bytes(self) -> float:
        return self.weights_bytes + self.kv_bytes + self.compute_bytes


TokenCallback = Callable[[int, int], None]  # (token_index, n_past) after each decode step


class Engine(Protocol):
    def info(self) -> EngineInfo: ...

    def load(self, cfg: LoadConfig) -> LoadedModel: ...

    def new_context(self, cfg: ContextConfig) -> ContextInfo:
        """Build the context for ``cfg`` (replacing any previous one) and say what was really built."""
        ...

    def run(self, spec: RunSpec, on_token: TokenCallback | None = None) -> RunTimings: ...

    def tokenize(self, text: str) -> list[int]: ...

    def memory_report(self) -> MemoryReport | None:
        """The engine's own allocation figures for the current model and context; None if it reports none."""
        ...

    def close(self) -> None: ...
