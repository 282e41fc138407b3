"""TEST DOUBLE: replays recorded readings because this machine has no NVIDIA GPU.

A fake ``pynvml``-shaped module. It offers the NVML functions ``app.telemetry.nvml`` calls, with the same names,
arguments, units (mW, mJ, KB/s, MHz, bytes) and error classes, and answers them from a recording in
``tests/telemetry/recorded/*.json``. The n-th call of a reading function on a device returns frame n (the last frame
repeats), so the k-th ``read_gpu_sample`` sees frame k; ``list_gpus`` reads memory info too, so call ``rewind()``
after it. A reading recorded as ``"NOT_SUPPORTED"`` (or missing) raises :class:`NVMLError_NotSupported`, as pynvml
does. ``init_error`` makes ``nvmlInit`` fail like a machine without the library or driver. Nothing here talks to a
GPU.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

RECORDED_DIR = Path(__file__).parent / "recorded"
NOT_SUPPORTED = "NOT_SUPPORTED"

# pynvml's error codes
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_GPU_IS_LOST = 15


class NVMLError(Exception):
    """Base error, shaped like ``pynvml.NVMLError`` (carries ``value``, the NVML return code)."""

    _strings = {
        NVML_ERROR_INVALID_ARGUMENT: "Invalid Argument",
        NVML_ERROR_NOT_SUPPORTED: "Not Supported",
        NVML_ERROR_NOT_FOUND: "Not Found",
        NVML_ERROR_DRIVER_NOT_LOADED: "Driver Not Loaded",
        NVML_ERROR_LIBRARY_NOT_FOUND: "NVML Shared Library Not Found",
        NVML_ERROR_GPU_IS_LOST: "GPU is lost",
    }
    code = 999

    def __init__(self, value: int | None = None) -> None:
        self.value = self.code if value is None else value
        super().__init__(self.value)

    def __str__(self) -> str:
        return self._strings.get(self.value, f"NVML Error with code {self.value}")


# pynvml's class names
class NVMLError_InvalidArgument(NVMLError):
    code = NVML_ERROR_INVALID_ARGUMENT


class NVMLError_NotSupported(NVMLError):
    code = NVML_ERROR_NOT_SUPPORTED


class NVMLError_NotFound(NVMLError):
    code = NVML_ERROR_NOT_FOUND


class NVMLError_DriverNotLoaded(NVMLError):
    code = NVML_ERROR_DRIVER_NOT_LOADED


class NVMLError_LibraryNotFound(NVMLError):
    code = NVML_ERROR_LIBRARY_NOT_FOUND


class NVMLError_GpuIsLost(NVMLError):
    code = NVML_ERROR_GPU_IS_LOST


_INIT_ERRORS: dict[str, type[NVMLError]] = {
    "LibraryNotFound": NVMLError_LibraryNotFound,
    "DriverNotLoaded": NVMLError_DriverNotLoaded,
}


def load_recording(name: str) -> dict[str, Any]:
    """A recording from ``tests/telemetry/recorded/<name>.json``."""
    return json.loads((RECORDED_DIR / f"{name}.json").read_text(encoding="utf-8"))


class _Handle:
    def __init__(self, index: int) -> None:
        self.index = index


class ReplayNvml(ModuleType):
    """TEST DOUBLE for ``pynvml``: replays ``recording``; ``init_error`` ("LibraryNotFound", ...) fails init."""

    NVMLError = NVMLError
    NVMLError_NotSupported = NVMLError_NotSupported
    NVMLError_LibraryNotFound = NVMLError_LibraryNotFound
    NVMLError_DriverNotLoaded = NVMLError_DriverNotLoaded
    NVMLError_InvalidArgument = NVMLError_InvalidArgument
    NVMLError_NotFound = NVMLError_NotFound
    NVMLError_GpuIsLost = NVMLError_GpuIsLost

    # the constants pynvml defines
    NVML_TEMPERATURE_GPU = 0
    NVML_CLOCK_GRAPHICS = 0
    NVML_CLOCK_SM = 1
    NVML_CLOCK_MEM = 2
    NVML_PCIE_UTIL_TX_BYTES = 0
    NVML_PCIE_UTIL_RX_BYTES = 1

    def __init__(self, recording: dict[str, Any] | None = None, init_error: str | None = None) -> None:
        super().__init__("pynvml_replay", __doc__)
        self.recording = recording or {"driver_version": None, "devices": []}
        self.init_error = init_error
        self.initialized = False
        self.calls: Counter[tuple[Any, ...]] = Counter()

    # -- helpers --
    def _device(self, handle: _Handle) -> dict[str, Any]:
        if not self.initialized:
            raise NVMLError(1)  # Uninitialized
        if not isinstance(handle, _Handle):
            raise NVMLError_InvalidArgument()
        return self.recording["devices"][handle.index]

    @staticmethod
    def _value(value: Any) -> Any:
        if value is None or value == NOT_SUPPORTED:
            raise NVMLError_NotSupported()
        return value

    def _static(self, handle: _Handle, key: str) -> Any:
        return self._value(self._device(handle).get(key))

    def rewind(self) -> None:
        """Start every reading again from the first frame."""
        self.calls.clear()

    def _frame(self, handle: _Handle, reading: str, *args: Any) -> dict[str, Any]:
        frames = self._device(handle)["frames"]
        key = (reading, handle.index, *args)
        n = self.calls[key]
        self.calls[key] += 1
        return frames[min(n, len(frames) - 1)]

    def _reading(self, handle: _Handle, key: str, *args: Any) -> Any:
        return self._value(self._frame(handle, key, *args).get(key))

    # -- init / system --
    def nvmlInit(self) -> None:
        if self.init_error is not None:
            raise _INIT_ERRORS.get(self.init_error, NVMLError)()
        self.initialized = True

    def nvmlShutdown(self) -> None:
        self.initialized = False

    def nvmlSystemGetDriverVersion(self) -> str:
        return self._value(self.recording.get("driver_version"))

    def nvmlDeviceGetCount(self) -> int:
        if not self.initialized:
            raise NVMLError(1)
        return len(self.recording["devices"])

    def nvmlDeviceGetHandleByIndex(self, index: int) -> _Handle:
        if not self.initialized:
            raise NVMLError(1)
        if not 0 <= index < len(self.recording["devices"]):
            raise NVMLError_InvalidArgument()
        return _Handle(index)

    # -- static device facts --
    def nvmlDeviceGetName(self, handle: _Handle) -> str:
        return self._static(handle, "name")

    def nvmlDeviceGetUUID(self, handle: _Handle) -> str:
        return self._static(handle, "uuid")

    def nvmlDeviceGetMemoryBusWidth(self, handle: _Handle) -> int:
        return self._static(handle, "memory_bus_width_bits")

    def nvmlDeviceGetMaxClockInfo(self, handle: _Handle, clock_type: int) -> int:
        clocks = self._static(handle, "max_clock_mhz")
        return self._value(clocks.get({self.NVML_CLOCK_SM: "sm", self.NVML_CLOCK_MEM: "mem"}.get(clock_type, "")))

    def nvmlDeviceGetNumGpuCores(self, handle: _Handle) -> int:
        return self._static(handle, "cuda_cores")

    def nvmlDeviceGetCudaComputeCapability(self, handle: _Handle) -> tuple[int, int]:
        major, minor = self._static(handle, "compute_capability")
        return major, minor

    # -- readings (one frame per call) --
    def nvmlDeviceGetMemoryInfo(self, handle: _Handle) -> SimpleNamespace:
        total = self._static(handle, "memory_total_bytes")
        used = self._reading(handle, "memory_used_bytes")
        return SimpleNamespace(total=total, used=used, free=total - used)

    def nvmlDeviceGetUtilizationRates(self, handle: _Handle) -> SimpleNamespace:
        frame = self._frame(handle, "utilization")
        return SimpleNamespace(
            gpu=self._value(frame.get("util_gpu_pct")), memory=self._value(frame.get("util_memory_pct"))
        )

    def nvmlDeviceGetClockInfo(self, handle: _Handle, clock_type: int) -> int:
        key = {self.NVML_CLOCK_SM: "clock_sm_mhz", self.NVML_CLOCK_MEM: "clock_mem_mhz"}.get(clock_type, "")
        return self._reading(handle, key, clock_type)

    def nvmlDeviceGetPowerUsage(self, handle: _Handle) -> int:
        return self._reading(handle, "power_mw")

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: _Handle) -> int:
        return self._reading(handle, "energy_mj")

    def nvmlDeviceGetTemperature(self, handle: _Handle, sensor: int) -> int:
        if sensor != self.NVML_TEMPERATURE_GPU:
            raise NVMLError_InvalidArgument()
        return self._reading(handle, "temperature_c")

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: _Handle) -> int:
        return self._static(handle, "enforced_power_limit_mw")

    def nvmlDeviceGetPowerManagementLimitConstraints(self, handle: _Handle) -> list[int]:
        return list(self._static(handle, "power_limit_constraints_mw"))

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: _Handle) -> int:
        return self._reading(handle, "clocks_event_reasons")

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle: _Handle) -> int:
        return self._reading(handle, "clocks_event_reasons", "legacy")

    def nvmlDeviceGetPcieThroughput(self, handle: _Handle, counter: int) -> int:
        key = "pcie_rx_kbytes_per_s" if counter == self.NVML_PCIE_UTIL_RX_BYTES else "pcie_tx_kbytes_per_s"
        return self._reading(handle, key, counter)

    def nvmlDeviceGetComputeRunningProcesses(self, handle: _Handle) -> list[SimpleNamespace]:
        procs = self._value(self._frame(handle, "processes").get("processes"))
        # pynvml turns NVML_VALUE_NOT_AVAILABLE (WDDM) into None
        return [SimpleNamespace(pid=p["pid"], usedGpuMemory=p.get("used_memory_bytes")) for p in procs]

    def nvmlDeviceGetGraphicsRunningProcesses(self, handle: _Handle) -> list[SimpleNamespace]:
        self._device(handle)
        return []


def replay(name: str, **kwargs: Any) -> ReplayNvml:
    """TEST DOUBLE replaying ``recorded/<name>.json``."""
    return ReplayNvml(load_recording(name), **kwargs)
