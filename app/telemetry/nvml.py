"""NVIDIA GPU readings through NVML (the only module that imports ``pynvml``).

NVML is initialised lazily, once, on the first call that needs it. If the library or the driver is missing,
:func:`nvml_available` is False and :func:`nvml_unavailable_reason` says why; every other function then returns
empty lists or "not available" (``None``) readings. After start-up nothing here raises: each NVML call goes through
:func:`_query`, which turns any failure (``NVMLError_NotSupported``, ``NoPermission``, a lost GPU...) into ``None``.
The idea follows nvitop's ``libnvml.nvmlQuery`` (lazy init behind one query function, a failed reading becomes N/A).

NVML units, converted here: power ``mW`` -> ``power_w``; energy counter ``mJ`` (kept as ``energy_mj``, total since
the driver was loaded); memory in bytes; clocks in MHz; PCIe throughput in KB/s (kilobytes per second, NVML's unit,
kept as ``pcie_rx_kbps``/``pcie_tx_kbps``; NVML samples it over ~20 ms).

Tests replace the ``pynvml`` module with a recorded-readings double through :func:`set_nvml_module`.

NVML is never shut down explicitly: a sampler thread may still be inside an NVML call at interpreter exit
(nvitop guards against exactly that use-after-free), and the OS reclaims NVML's resources when the process ends.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

# NVML (and nvidia-smi, "Clocks / Max Clocks: Memory") reports the memory clock at half the per-pin data rate, for
# every memory type NVIDIA ships. Published nvidia-smi figures against the vendors' spec sheets (not measured here):
#   GDDR6  RTX 4060 Laptop:  8001 MHz -> 16 Gbps/pin x  128-bit =  256 GB/s
#   GDDR6X RTX 4090:        10501 MHz -> 21 Gbps/pin x  384-bit = 1008 GB/s
#   GDDR7  RTX 5090:        14001 MHz -> 28 Gbps/pin x  512-bit = 1792 GB/s
#   HBM2e  A100 40GB:        1215 MHz -> 2.43 Gbps/pin x 5120-bit = 1555 GB/s
#   HBM3   H100 SXM:         2619 MHz -> 5.24 Gbps/pin x 5120-bit = 3352 GB/s
# Whatever the signalling underneath (GDDR6 double rate on WCK, GDDR6X PAM4, GDDR7 PAM3, HBM DDR), the reported clock
# is scaled so that data rate = 2 x clock. So one multiplier serves them all:
#   bandwidth_GB/s = bus_bits / 8 * mem_clock_MHz * 2 / 1000
NVML_MEM_CLOCK_DATA_RATE_MULTIPLIER = 2

GPU_SAMPLE_KEYS: tuple[str, ...] = (
    "vram_used_bytes",
    "vram_total_bytes",
    "process_vram_bytes",
    "gpu_util_pct",
    "mem_util_pct",
    "sm_clock_mhz",
    "mem_clock_mhz",
    "power_w",
    "energy_mj",
    "temperature_c",
    "throttle_reasons",
    "pcie_rx_kbps",
    "pcie_tx_kbps",
)

# NVML_VALUE_NOT_AVAILABLE for unsigned long long fields (per-process memory under WDDM).
_ULL_NOT_AVAILABLE = 2**64 - 1

_lock = threading.RLock()
_module_override: ModuleType | None = None
_lib: ModuleType | None = None
_init_done = False
_reason: str | None = None
_handles: dict[int, Any] = {}


@dataclass(frozen=True, slots=True)
class GpuInfo:
    """Static facts about one NVIDIA GPU; a field NVML cannot give is None."""

    index: int
    name: str | None
    uuid: str | None
    vram_total_bytes: int | None
    driver_version: str | None
    memory_bus_bits: int | None
    max_memory_clock_mhz: int | None
    theoretical_bandwidth_gbps: float | None  # bus_bits / 8 * max_mem_clock * 2 (see module notes), in GB/s
    #: what a GPU no profile names is predicted from (app.predict.detected_gpu): the highest SM clock, the CUDA
    #: cores and the CUDA compute capability (major, minor)
    max_sm_clock_mhz: int | None = None
    cuda_cores: int | None = None
    compute_capability: tuple[int, int] | None = None


def set_nvml_module(module: ModuleType | None) -> None:
    """Use ``module`` in place of ``pynvml`` (tests replay recorded readings); None restores the real one.

    Resets the lazy initialisation so the next call initialises the new module.
    """
    global _module_override, _lib, _init_done, _reason
    with _lock:
        _module_override = module
        _lib = None
        _init_done = False
        _reason = None
        _handles.clear()


def theoretical_bandwidth_gbps(memory_bus_bits: int | None, memory_clock_mhz: float | None) -> float | None:
    """Peak DRAM bandwidth in GB/s (10^9 B/s) from the bus width and the memory clock as NVML reports it."""
    if not memory_bus_bits or not memory_clock_mhz:
        return None
    return memory_bus_bits / 8 * memory_clock_mhz * 1e6 * NVML_MEM_CLOCK_DATA_RATE_MULTIPLIER / 1e9


def _load() -> ModuleType | None:
    """Import and initialise NVML once; return the module, or None with ``_reason`` set."""
    global _lib, _init_done, _reason
    if _init_done:
        return _lib
    with _lock:
        if _init_done:
            return _lib
        lib: ModuleType | None = _module_override
        try:
            if lib is None:
                import pynvml  # lazy: imported only when first needed

                lib = pynvml
            lib.nvmlInit()
            count = int(lib.nvmlDeviceGetCount())
        except ImportError as exc:
            _reason = f"pynvml not installed ({exc})"
            lib = None
        except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, LibRmVersionMismatch...
            _reason = nvml_error_words(exc)
            lib = None
        else:
            if count < 1:
                _reason = "NVML found no GPUs"
                lib = None
        _lib = lib
        _init_done = True
        return _lib


#: NVML's failures at start-up, in the words a user acts on (pynvml names its errors NVMLError_<Name>)
_NVML_ERROR_WORDS = {
    "LibraryNotFound": "no NVIDIA driver installed (its NVML library was not found)",
    "DriverNotLoaded": "the NVIDIA driver is installed but not loaded",
    "LibRmVersionMismatch": "the NVIDIA driver and its NVML library differ in version (reboot after a driver update)",
    "NoPermission": "no permission to query the NVIDIA driver",
}


def nvml_error_words(exc: BaseException) -> str:
    """One plain line for an NVML start-up error: known ones in words, others as the error's own text."""
    name = type(exc).__name__.removeprefix("NVMLError_")
    return _NVML_ERROR_WORDS.get(name) or str(exc) or name


def nvml_available() -> bool:
    """True when NVML initialises and sees at least one GPU."""
    return _load() is not None


def nvml_unavailable_reason() -> str | None:
    """Why NVML is not available (library/driver missing, no GPU), or None when it is."""
    _load()
    return _reason


def _query(fn: Callable[..., Any] | str, *args: Any) -> Any:
    """Call one NVML function; any failure (not supported, no permission, GPU lost...) gives None."""
    lib = _load()
    if lib is None:
        return None
    try:
        func = getattr(lib, fn) if isinstance(fn, str) else fn
        value = func(*args)
    except Exception:
        return None
    if isinstance(value, bytes):
        value = value.decode("utf-8", errors="replace")
    return value


def _handle(index: int) -> Any:
    """Device handle for ``index`` (cached), or None."""
    handle = _handles.get(index)
    if handle is None:
        handle = _query("nvmlDeviceGetHandleByIndex", index)
        if handle is not None:
            _handles[index] = handle
    return handle


def _const(name: str, default: int) -> int:
    lib = _lib
    value = getattr(lib, name, default) if lib is not None else default
    return int(value)


def _num(value: Any, scale: float = 1.0) -> float | None:
    """A numeric NVML value times ``scale`` as float, or None."""
    if value is None or isinstance(value, bool):
        return None
    try:
        return float(value) * scale
    except (TypeError, ValueError):
        return None


def _attr(obj: Any, name: str) -> Any:
    return getattr(obj, name, None) if obj is not None else None


def list_gpus() -> list[GpuInfo]:
    """Facts about every GPU NVML sees; empty when NVML is not available."""
    lib = _load()
    if lib is None:
        return []
    count = _query("nvmlDeviceGetCount") or 0
    driver = _query("nvmlSystemGetDriverVersion")
    gpus = []
    for index in range(int(count)):
        handle = _handle(index)
        if handle is None:
            gpus.append(GpuInfo(index, None, None, None, driver, None, None, None))
            continue
        mem = _query("nvmlDeviceGetMemoryInfo", handle)
        total = _attr(mem, "total")
        bus_bits = _query("nvmlDeviceGetMemoryBusWidth", handle)
        max_mem_mhz = _query("nvmlDeviceGetMaxClockInfo", handle, _const("NVML_CLOCK_MEM", 2))
        max_sm_mhz = _query("nvmlDeviceGetMaxClockInfo", handle, _const("NVML_CLOCK_SM", 1))
        cores = _query("nvmlDeviceGetNumGpuCores", handle)  # NVML 11.8 and later; None before
        gpus.append(
            GpuInfo(
                index=index,
                name=_query("nvmlDeviceGetName", handle),
                uuid=_query("nvmlDeviceGetUUID", handle),
                vram_total_bytes=int(total) if total is not None else None,
                driver_version=driver,
                memory_bus_bits=int(bus_bits) if bus_bits else None,
                max_memory_clock_mhz=int(max_mem_mhz) if max_mem_mhz else None,
                theoretical_bandwidth_gbps=theoretical_bandwidth_gbps(bus_bits, max_mem_mhz),
                max_sm_clock_mhz=_positive_int(max_sm_mhz),
                cuda_cores=_positive_int(cores),
                compute_capability=_capability(_query("nvmlDeviceGetCudaComputeCapability", handle)),
            )
        )
    return gpus


def _positive_int(value: Any) -> int | None:
    """A count or clock NVML gave, as a positive int; None for a missing or malformed one."""
    return int(value) if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _capability(value: Any) -> tuple[int, int] | None:
    """NVML's (major, minor) CUDA compute capability; None for a missing or malformed one."""
    if isinstance(value, (tuple, list)) and len(value) == 2 and all(
            isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 100 for v in value):
        return int(value[0]), int(value[1])
    return None


def _process_vram_bytes(handle: Any, pid: int) -> float | None:
    """GPU memory used by ``pid`` (compute contexts first, then graphics), or None.

    None also when the pid is not listed: either it has no CUDA context yet or NVML sees another PID namespace
    (containers), and the two cannot be told apart. Under Windows WDDM the driver never gives the figure.
    """
    for fn in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
        procs = _query(fn, handle)
        for proc in procs or ():
            if _attr(proc, "pid") == pid:
                used = _attr(proc, "usedGpuMemory")
                if used is None or used >= _ULL_NOT_AVAILABLE:
                    return None
                return float(used)
    return None


def _throttle_reasons(handle: Any) -> int | None:
    """Clock event (throttle) reasons bitmask; the newer NVML name first."""
    for fn in ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"):
        value = _query(fn, handle)
        if value is not None:
            return int(value)
    return None


#: NVML's clock-event (throttle) reason bits (nvml.h ``nvmlClocksEventReason*``), in words.
CLOCK_EVENT_REASONS: dict[int, str] = {
    0x1: "idle", 0x2: "application clocks setting", 0x4: "software power cap", 0x8: "hardware slowdown",
    0x10: "sync boost", 0x20: "software thermal slowdown", 0x40: "hardware thermal slowdown",
    0x80: "hardware power brake", 0x100: "display clock setting",
}
#: The reasons that mean the clocks were held back by power or temperature (not idle, not a setting).
HELD_BACK_REASONS = 0x4 | 0x8 | 0x20 | 0x40 | 0x80


def clock_event_words(mask: int | None) -> str:
    """A clock-event bitmask in words ("software power cap, hardware thermal slowdown"); "" for none."""
    if not mask:
        return ""
    return ", ".join(word for bit, word in CLOCK_EVENT_REASONS.items() if mask & bit)


def power_limits_w(index: int = 0) -> tuple[float | None, float | None, float | None]:
    """(the power limit the driver enforces now, the lowest and the highest it can be set to), in watts; each None
    where NVML cannot say. A laptop GPU's name covers parts from 35 to 115 W: this says which one ran."""
    try:
        handle = _handle(index) if _load() is not None else None
        if handle is None:
            return None, None, None
        enforced = _num(_query("nvmlDeviceGetEnforcedPowerLimit", handle), 1e-3)
        bounds = _query("nvmlDeviceGetPowerManagementLimitConstraints", handle)
        low, high = (_num(bounds[0], 1e-3), _num(bounds[1], 1e-3)) if isinstance(bounds, (tuple, list)) \
            and len(bounds) == 2 else (None, None)
        return enforced, low, high
    except Exception:  # a malformed value from the driver: not available
        return None, None, None


def empty_gpu_sample() -> dict[str, float | int | None]:
    """A GPU sample with every reading "not available"."""
    return dict.fromkeys(GPU_SAMPLE_KEYS)


def read_gpu_sample(index: int = 0, pid: int | None = None) -> dict[str, float | int | None]:
    """One set of readings from GPU ``index``; keys are :data:`GPU_SAMPLE_KEYS`, a failed reading is None.

    ``process_vram_bytes`` is the memory of ``pid`` where the driver reports it. ``throttle_reasons`` is NVML's
    clock-event bitmask (int). Never raises.
    """
    sample = empty_gpu_sample()
    try:
        handle = _handle(index) if _load() is not None else None
        if handle is None:
            return sample
        mem = _query("nvmlDeviceGetMemoryInfo", handle)
        util = _query("nvmlDeviceGetUtilizationRates", handle)
        sample["vram_used_bytes"] = _num(_attr(mem, "used"))
        sample["vram_total_bytes"] = _num(_attr(mem, "total"))
        sample["process_vram_bytes"] = _process_vram_bytes(handle, pid) if pid is not None else None
        sample["gpu_util_pct"] = _num(_attr(util, "gpu"))
        sample["mem_util_pct"] = _num(_attr(util, "memory"))
        sample["sm_clock_mhz"] = _num(_query("nvmlDeviceGetClockInfo", handle, _const("NVML_CLOCK_SM", 1)))
        sample["mem_clock_mhz"] = _num(_query("nvmlDeviceGetClockInfo", handle, _const("NVML_CLOCK_MEM", 2)))
        sample["power_w"] = _num(_query("nvmlDeviceGetPowerUsage", handle), 1e-3)
        sample["energy_mj"] = _num(_query("nvmlDeviceGetTotalEnergyConsumption", handle))
        sample["temperature_c"] = _num(_query("nvmlDeviceGetTemperature", handle, _const("NVML_TEMPERATURE_GPU", 0)))
        sample["throttle_reasons"] = _throttle_reasons(handle)
        sample["pcie_rx_kbps"] = _num(
            _query("nvmlDeviceGetPcieThroughput", handle, _const("NVML_PCIE_UTIL_RX_BYTES", 1))
        )
        sample["pcie_tx_kbps"] = _num(
            _query("nvmlDeviceGetPcieThroughput", handle, _const("NVML_PCIE_UTIL_TX_BYTES", 0))
        )
    except Exception:  # a malformed value from the driver must not stop the sampler
        pass
    return sample
