"""One entry point that looks at this machine: host facts, NVIDIA GPUs (NVML) and the CPU probe.

Everything that needs to know the hardware asks here (``gguf-bench hw``, a run's machine record, the
hardware a run is predicted against, the window's hardware list), so all of them see the same answer.
Nothing here raises for a reading it cannot take: it is None, with the reason beside it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

from app.telemetry import nvml
from app.telemetry.cpu_features import CpuFeatures, read_cpu_features
from app.telemetry.cpu_peaks import CpuPeaks, derive_peaks
from app.telemetry.cpu_probe import CpuProbe, load_cached_probe, probe_cpu
from app.telemetry.host import machine_facts, power_source
from app.telemetry.repack_guard import RepackVerdict, ensure_verdict, remembered

GIB = 2**30


class ProbeMode(StrEnum):
    """How much CPU probing a scan may do: it takes seconds of full load, so callers choose."""

    NONE = "none"  # no probe figures at all
    CACHED = "cached"  # the cached figures for this machine, if any; never measure
    RUN = "run"  # the cached figures, else measure now (and cache)
    REFRESH = "refresh"  # measure again; the cache keeps the better figures


@dataclass(frozen=True)
class MachineScan:
    """What one look at the machine found; ``facts`` are :func:`app.telemetry.host.machine_facts`."""

    facts: dict[str, Any]
    gpus: tuple[nvml.GpuInfo, ...] = ()
    gpu_note: str | None = None  # why there is no GPU in ``gpus``, when there is none
    nvml_available: bool = False
    nvml_reason: str | None = None  # why NVML cannot be used, when it cannot
    probe: CpuProbe | None = None
    probe_error: str | None = None
    cpu_features: CpuFeatures | None = None
    #: the repack crash guard's verdict for this CPU and llama.cpp build (whether repacked weights run here, and
    #: the CPU backend's extra buffer types); None when never checked
    repack: RepackVerdict | None = None
    #: the power limit NVML enforces on the first GPU now (W), and what powers the machine ("ac", "battery"); None
    #: where they cannot be read (no NVIDIA GPU, no battery)
    gpu_power_limit_w: float | None = None
    power_source: str | None = None

    def cpu_peaks(self) -> CpuPeaks | None:
        """This CPU's int8 and FMA peaks (or measured rooflines), from its features and the probe; None unprobed."""
        if self.probe is None or self.cpu_features is None:
            return None
        return derive_peaks(self.cpu_features, self.probe.gflops_f32)

    @property
    def cpu_model(self) -> str:
        return str(self.facts.get("cpu_model") or "CPU")

    @property
    def ram_total_bytes(self) -> int | None:
        ram = self.facts.get("ram_total_bytes")
        return int(ram) if ram else None

    def gpu_info(self) -> str:
        """``name (N GiB)`` per GPU, comma-separated; empty without an NVIDIA GPU (the ``gpu_info`` column)."""
        return ", ".join(f"{g.name} ({(g.vram_total_bytes or 0) / GIB:.0f} GiB)" for g in self.gpus)

    def run_facts(self) -> dict[str, Any]:
        """The machine record stored with a run: host facts, GPUs where NVML answers, and ``gpu_info``."""
        facts = dict(self.facts)
        if self.nvml_available:
            facts["gpus"] = [asdict(g) for g in self.gpus]
        facts["gpu_info"] = self.gpu_info()
        return facts

    def report(self) -> dict[str, Any]:
        """Plain JSON-ready types for ``gguf-bench hw``."""
        return {
            "machine": dict(self.facts),
            "gpus": [asdict(g) for g in self.gpus],
            "gpu_note": self.gpu_note,
            "cpu_probe": asdict(self.probe) if self.probe is not None else None,
            "cpu_probe_error": self.probe_error,
            "cpu_compute": peaks.to_json_dict() if (peaks := self.cpu_peaks()) is not None else None,
        }


def _gpus() -> dict[str, Any]:
    try:
        if not nvml.nvml_available():
            reason = nvml.nvml_unavailable_reason()
            return {"gpu_note": f"no NVIDIA GPU/driver found (NVML: {reason})", "nvml_reason": reason}
        gpus = tuple(nvml.list_gpus())
    except Exception as e:  # noqa: BLE001 - no GPU is a normal answer, whatever NVML says
        return {"gpu_note": f"GPU detection failed: {e}", "nvml_reason": str(e)}
    return {"gpus": gpus, "gpu_note": None if gpus else "NVML is available but listed no GPUs", "nvml_available": True}


def _probe(mode: ProbeMode) -> tuple[CpuProbe | None, str | None]:
    try:
        if mode == ProbeMode.CACHED:
            return load_cached_probe(include_stale=True), None
        if mode in (ProbeMode.RUN, ProbeMode.REFRESH):
            return probe_cpu(cache=True, refresh=mode == ProbeMode.REFRESH), None
    except Exception as e:  # noqa: BLE001 - e.g. not enough memory for the probe buffers
        return None, f"{type(e).__name__}: {e}"
    return None, None


def _repack_verdict(mode: ProbeMode) -> RepackVerdict | None:
    """The repack guard's verdict: remembered, or (where the scan may measure) checked now, once per CPU and build."""
    try:
        return ensure_verdict()[0] if mode in (ProbeMode.RUN, ProbeMode.REFRESH) else remembered()
    except Exception:  # noqa: BLE001 - no verdict is an answer: repacking as llama.cpp defaults, nothing counted
        return None


def scan_machine(probe: ProbeMode | str = ProbeMode.NONE) -> MachineScan:
    """Look at this machine: host facts, NVIDIA GPUs and, as ``probe`` allows, the CPU probe and the repack
    guard's check (each once per machine, then remembered). Never raises."""
    mode = ProbeMode(probe)
    cpu_probe, error = _probe(mode)
    try:
        features: CpuFeatures | None = read_cpu_features()
    except Exception:  # noqa: BLE001 - without features the probe's figure stands as a measured roofline
        features = None
    gpus = _gpus()
    limit = nvml.power_limits_w(0)[0] if gpus.get("gpus") else None
    return MachineScan(facts=machine_facts(), probe=cpu_probe, probe_error=error, cpu_features=features,
                       repack=_repack_verdict(mode), gpu_power_limit_w=limit, power_source=power_source(), **gpus)
