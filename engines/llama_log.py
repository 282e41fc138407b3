"""llama.cpp's log, kept in memory and read back: the cause of a failure, buffer sizes, flash attention decisions.

The llama.cpp engine's log callback feeds ``keep_line``; nothing here calls into llama.cpp.
"""

from __future__ import annotations

import collections
import re

from engines.base import FLASH_ATTN_AUTO, FLASH_ATTN_ON, HOST_DEVICE

LOG_DEBUG, LOG_ERROR, LOG_CONT = 1, 4, 5  # GGML_LOG_LEVEL_*
LINES: collections.deque[tuple[int, str]] = collections.deque(maxlen=400)
#: Layer index -> device, from load_tensors' debug lines (src/llama-model.cpp: "layer %3d assigned to device %s,
#: is_swa = %d"; index n_layer is the output layer). Kept apart: debug lines are otherwise dropped.
LAYER_DEVICES: dict[int, str] = {}
_LAYER_RE = re.compile(r"layer\s+(\d+) assigned to device ([^,\s]+)")


def keep_line(level: int, msg: str) -> bool:
    """Keep one message; False for per-tensor graph chatter at context creation (not kept, never in the timed path)."""
    if level == LOG_DEBUG or (level == LOG_CONT and LINES and LINES[-1][0] == LOG_DEBUG):
        if "assigned to device" in msg and (m := _LAYER_RE.search(msg)):
            LAYER_DEVICES[int(m.group(1))] = m.group(2)
        return False
    LINES.append((level, msg))
    return True


def clear_lines() -> None:
    """Forget what was logged: call before the llama.cpp call whose log is read next."""
    LINES.clear()
    LAYER_DEVICES.clear()


def _strip_prefix(text: str) -> str:
    while re.match(r"^[a-z_0-9:]+: ", text):
        text = text.split(": ", 1)[1]
    return text


def last_error(default: str) -> str:
    """The cause llama.cpp logged: its final error line, with the first (root) one added when they differ."""
    errors = [_strip_prefix(m.strip()) for level, m in LINES if level == LOG_ERROR and m.strip()]
    if not errors:
        return default
    first, last = errors[0], errors[-1]
    return last if first == last else f"{first}; {last}"


#: What llama_init_from_model logs when it refuses a combination of settings (src/llama-context.cpp, around
#: the checks on quantized V, K/V block sizes, MLA K/V types and tensor split), as opposed to running out of memory.
_SETTINGS_REFUSALS = ("requires flash_attn", "does not divide", "does not support different", "not compatible",
                      "cannot both be zero")


def settings_refused() -> bool:
    """Whether the errors logged since the last clear say llama.cpp refused the settings (not out of memory)."""
    return any(level == LOG_ERROR and any(s in m for s in _SETTINGS_REFUSALS) for level, m in LINES)


_BUFFER_RE = re.compile(r"(\S+) (model|KV|compute) buffer size =\s*([0-9.]+) MiB")


_BUFFER_KINDS = {"model": "weights", "KV": "kv", "compute": "compute"}


def reported_buffers() -> dict[str, float]:
    """Buffer sizes llama.cpp logged since the last clear (bytes): weights, KV cache, compute; all devices."""
    out = {"weights": 0.0, "kv": 0.0, "compute": 0.0}
    for per_kind in device_buffers().values():
        for kind, n in per_kind.items():
            out[kind] += n
    return out


def buffer_device(buffer_name: str) -> str:
    """The device a llama.cpp buffer (type) name lives on: "CPU" for host memory, else the device's own name.

    Host: "CPU", "CPU_Mapped" (mmapped weights), "CPU_REPACK", and a GPU backend's pinned host buffers
    ("Vulkan_Host", "CUDA_Host"); a device: "Vulkan0", "CUDA1", and its variants ("CUDA0_Split" -> "CUDA0").
    """
    if buffer_name.startswith("CPU") or "_Host" in buffer_name or buffer_name in _HOST_EXTRA_BUFFERS:
        return HOST_DEVICE
    return buffer_name.split("_", 1)[0]


#: Extra buffer types of ggml's CPU backend whose names do not start with "CPU" (ggml-cpu/amx/amx.cpp: "AMX").
_HOST_EXTRA_BUFFERS = ("AMX",)
#: Host buffers that hold weights as they are in the file (plain or mmapped), not repacked for a kernel.
_PLAIN_HOST_BUFFERS = ("CPU", "CPU_Mapped")


def is_extra_buffer(buffer_name: str) -> bool:
    """Whether a buffer (type) name is one of the CPU backend's extra buffer types, which repack weights for their
    own kernels: AMX, CPU_REPACK, CPU_KLEIDIAI, CPU_RISCV64_SPACEMIT (llama.cpp's ``use_extra_bufts``)."""
    return (buffer_name in _HOST_EXTRA_BUFFERS
            or (buffer_name.startswith("CPU_") and buffer_name not in _PLAIN_HOST_BUFFERS))


def weight_extra_buffers() -> list[str]:
    """The extra buffer types llama.cpp put weights in at the last load ("model buffer size" lines), in log order."""
    out: list[str] = []
    for _, msg in LINES:
        for m in _BUFFER_RE.finditer(msg):
            if m.group(2) == "model" and is_extra_buffer(m.group(1)) and m.group(1) not in out:
                out.append(m.group(1))
    return out


def named_buffers() -> dict[str, dict[str, float]]:
    """Per buffer (type) name as llama.cpp logs it ("CPU_Mapped", "CPU_REPACK", "AMX", "Vulkan0"...), the weights,
    KV cache and compute bytes logged since the clear."""
    out: dict[str, dict[str, float]] = {}
    for _, msg in LINES:
        for m in _BUFFER_RE.finditer(msg):
            per_kind = out.setdefault(m.group(1), {"weights": 0.0, "kv": 0.0, "compute": 0.0})
            per_kind[_BUFFER_KINDS[m.group(2)]] += float(m.group(3)) * 2**20
    return out


def device_buffers() -> dict[str, dict[str, float]]:
    """Per device (see ``buffer_device``), the weights, KV cache and compute bytes llama.cpp logged since the clear."""
    out: dict[str, dict[str, float]] = {}
    for name, kinds in named_buffers().items():
        per_kind = out.setdefault(buffer_device(name), {"weights": 0.0, "kv": 0.0, "compute": 0.0})
        for kind, n in kinds.items():
            per_kind[kind] += n
    return out


_OFFLOADED_RE = re.compile(r"offloaded (\d+)/(\d+) layers to GPU")


def offloaded_layers() -> int | None:
    """The layers llama.cpp said it offloaded ("offloaded N/M layers to GPU"); None when it said nothing (CPU build)."""
    for _, msg in LINES:
        if m := _OFFLOADED_RE.search(msg):
            return int(m.group(1))
    return None


def layers_per_device() -> dict[str, int]:
    """How many layers (repeating and output) llama.cpp assigned to each device at the last load; {} if not logged."""
    out: dict[str, int] = {}
    for device in LAYER_DEVICES.values():
        out[device] = out.get(device, 0) + 1
    return out


#: What llama.cpp logs when it decides flash attention itself (src/llama-context.cpp, the vendored 0.3.36 source):
#: llama_init_from_model turns it on under auto for a quantized V cache (or tensor split mode) and off for Grok;
#: under auto, llama_context::resolve_fused_ops probes the backend at context creation and logs
#: "Flash Attention enabled" or "Flash Attention not supported, set to disabled".
_FLASH_ATTN_LOG: tuple[tuple[str, bool], ...] = (
    ("flash_attn is not compatible", False),
    ("enabling flash_attn since it is required", True),
    ("Flash Attention enabled", True),
    ("Flash Attention not supported", False),
)


def flash_attn_used(requested: int) -> bool | None:
    """Whether the context just built runs flash attention: llama.cpp's logged decision, else the request.

    ``requested`` is -1 (auto), 0 or 1; None when it was auto and llama.cpp logged no decision.
    """
    for _, msg in LINES:
        for needle, used in _FLASH_ATTN_LOG:
            if needle in msg:
                return used
    return None if requested == FLASH_ATTN_AUTO else requested == FLASH_ATTN_ON


#: A line of a worker's log (llama.cpp's log and the process's stderr) that says why it crashed: ggml's assertion
#: and abort messages (ggml/src/ggml.c ggml_abort: "FILE:LINE: GGML_ASSERT(...) failed"), C++ exceptions
#: ("terminate called ...", "what(): ..."), C assertions, and llama.cpp's own error lines.
_CRASH_RE = re.compile(r"GGML_ASSERT|GGML_ABORT|terminate called|what\(\):|Assertion .* failed|\berror\b|\bfailed\b",
                       re.IGNORECASE)
#: Lines of the backtrace ggml prints after an abort (gdb's frames and source lines), never the cause.
_BACKTRACE_RE = re.compile(r"^(#\d+\s|\d+\s|\[Inferior |\S+: No such file or directory|ptrace: )")


def crash_cause(log_text: str, max_chars: int = 300) -> str | None:
    """The last line of a crashed worker's log that names the cause, shortened (source paths to file names)."""
    cause = None
    for raw in log_text.splitlines():
        line = raw.strip()
        if line and not _BACKTRACE_RE.match(line) and _CRASH_RE.search(line):
            cause = line
    if cause is None:
        return None
    head, sep, rest = cause.partition(": ")
    if sep and "/" in head and " " not in head:  # "/long/build/path/llama-model.cpp:1328: GGML_ASSERT(...) failed"
        cause = head.rsplit("/", 1)[1] + sep + rest
    return cause if len(cause) <= max_chars else cause[: max_chars - 1] + "…"


# --- a context's memory as llama.cpp sizes it (what its dry run, ``no_alloc``, still logs) --------------------------
#: src/llama-kv-cache.cpp, one line per KV cache (an iSWA model has two, a hybrid's attention part one):
#: "llama_kv_cache: size = X MiB (N cells, L layers, s/S seqs), K (f16): a MiB, V (f16): b MiB"
_KV_SIZE_RE = re.compile(r"llama_kv_cache: size =\s*([0-9.]+) MiB \(\s*(\d+) cells,\s*(\d+) layers,[^)]*\), "
                         r"K \((\w+)\):\s*([0-9.]+) MiB, V \((\w+)\):\s*([0-9.]+) MiB")
#: src/llama-memory-recurrent.cpp: "llama_memory_recurrent: size = X MiB (N cells, L layers, ...), R (f32): a MiB,
#: S (f32): b MiB[, P (f32): c MiB]"
_RS_SIZE_RE = re.compile(r"llama_memory_recurrent: size =\s*([0-9.]+) MiB \(\s*(\d+) cells,\s*(\d+) layers,[^)]*\), "
                         r"R \((\w+)\):\s*([0-9.]+) MiB, S \((\w+)\):\s*([0-9.]+) MiB")
_COMPUTE_RE = re.compile(r"(\S+) compute buffer size =\s*([0-9.]+) MiB")
_OUTPUT_RE = re.compile(r"(\S+)\s+output buffer size =\s*([0-9.]+) MiB")
_MIB = 2**20


def context_memory() -> dict[str, object]:
    """What the context built since the last clear holds, as llama.cpp logged it (bytes; the MiB it prints to two
    decimals): ``kv_bytes`` (every KV cache: K ``kv_k_bytes``, V ``kv_v_bytes``; ``kv_caches`` each one's cells,
    layers and bytes), ``state_bytes`` (the recurrent state: R ``state_r_bytes``, S ``state_s_bytes``), per device the
    ``compute`` buffers (the last size logged for each) and the ``output`` buffer. llama.cpp logs these sizes with
    ``no_alloc`` too, where nothing is allocated: its dry run."""
    kv = {"kv_bytes": 0.0, "kv_k_bytes": 0.0, "kv_v_bytes": 0.0}
    caches: list[dict[str, float]] = []
    state = {"state_bytes": 0.0, "state_r_bytes": 0.0, "state_s_bytes": 0.0}
    compute_named: dict[str, float] = {}
    output: dict[str, float] = {}
    for _, msg in LINES:
        if m := _KV_SIZE_RE.search(msg):
            kv["kv_bytes"] += float(m.group(1)) * _MIB
            kv["kv_k_bytes"] += float(m.group(5)) * _MIB
            kv["kv_v_bytes"] += float(m.group(7)) * _MIB
            caches.append({"cells": int(m.group(2)), "layers": int(m.group(3)), "bytes": float(m.group(1)) * _MIB})
        elif m := _RS_SIZE_RE.search(msg):
            state["state_bytes"] += float(m.group(1)) * _MIB
            state["state_r_bytes"] += float(m.group(5)) * _MIB
            state["state_s_bytes"] += float(m.group(7)) * _MIB
        for m in _COMPUTE_RE.finditer(msg):  # a later reservation's size replaces an earlier one's
            compute_named[m.group(1)] = float(m.group(2)) * _MIB
        for m in _OUTPUT_RE.finditer(msg):
            output[buffer_device(m.group(1))] = output.get(buffer_device(m.group(1)), 0.0) + float(m.group(2)) * _MIB
    compute: dict[str, float] = {}
    for name, n in compute_named.items():
        compute[buffer_device(name)] = compute.get(buffer_device(name), 0.0) + n
    return {**kv, "kv_caches": caches, **state, "compute": compute, "output": output}
