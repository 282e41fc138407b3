"""Hardware report for ``gguf-bench hw``: machine facts, NVIDIA GPUs (NVML) and the CPU probe."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from app.telemetry import nvml
from app.telemetry.cpu_probe import probe_cpu
from app.telemetry.host import machine_facts


def hardware_report(run_probe: bool = True, *, cache: bool = True, refresh: bool = False) -> dict[str, Any]:
    """Machine facts, the GPU list (or an empty list and ``gpu_note`` saying why) and, if asked, the CPU probe.

    Plain JSON-ready types. Never raises: a failed probe leaves ``cpu_probe`` None and says why in
    ``cpu_probe_error``.
    """
    report: dict[str, Any] = {"machine": machine_facts(), "gpus": [], "gpu_note": None}
    if nvml.nvml_available():
        report["gpus"] = [asdict(g) for g in nvml.list_gpus()]
        if not report["gpus"]:
            report["gpu_note"] = "NVML is available but listed no GPUs"
    else:
        report["gpu_note"] = f"no NVIDIA GPU/driver found (NVML: {nvml.nvml_unavailable_reason()})"
    report["cpu_probe"] = None
    report["cpu_probe_error"] = None
    if run_probe:
        try:
            report["cpu_probe"] = asdict(probe_cpu(cache=cache, refresh=refresh))
        except Exception as exc:  # e.g. not enough memory for the probe buffers
            report["cpu_probe_error"] = f"{type(exc).__name__}: {exc}"
    return report


def _gib(n_bytes: float | None) -> str:
    return "n/a" if n_bytes is None else f"{n_bytes / 2**30:.1f} GiB"


def _or_na(value: Any, fmt: str = "{}") -> str:
    return "n/a" if value is None else fmt.format(value)


def format_hw_report(report: dict[str, Any]) -> str:
    """Plain-text report: the CPU side always, each GPU, or a plain line when there is no NVIDIA GPU."""
    m = report.get("machine") or {}
    lines = [
        "Machine",
        f"  OS:         {_or_na(m.get('os'))}",
        f"  Python:     {_or_na(m.get('python'))}",
        "CPU",
        f"  Model:      {_or_na(m.get('cpu_model'))}",
        f"  Cores:      {_or_na(m.get('cpu_cores_physical'))} physical, {_or_na(m.get('cpu_threads'))} threads"
        + (
            f" ({m['cpu_threads_usable']} usable)"
            if m.get("cpu_threads_usable") not in (None, m.get("cpu_threads"))
            else ""
        ),
        f"  RAM:        {_gib(m.get('ram_total_bytes'))}",
    ]
    probe = report.get("cpu_probe")
    if probe:
        origin = "cached" if probe.get("cached") else "measured"
        lines += [
            f"  Bandwidth:  {probe['bandwidth_gbps']:.1f} GB/s (probed copy, {probe['n_threads']} threads)",
            f"  Compute:    {probe['gflops_f32']:.0f} GFLOPS float32 (matmul)",
            f"  Probe:      {origin} {probe.get('measured_at', '')}",
        ]
    elif report.get("cpu_probe_error"):
        lines.append(f"  Probe:      failed ({report['cpu_probe_error']})")
    else:
        lines.append("  Probe:      not run")
    gpus = report.get("gpus") or []
    lines.append("GPU")
    if not gpus:
        lines.append(f"  None: {report.get('gpu_note') or 'no NVIDIA GPU found'}.")
        lines.append("  GPU readings (VRAM, power, clocks) will be n/a; the CPU figures above apply.")
    for g in gpus:
        lines += [
            f"  [{g.get('index')}] {_or_na(g.get('name'))}",
            f"      VRAM:       {_gib(g.get('vram_total_bytes'))}",
            f"      Memory bus: {_or_na(g.get('memory_bus_bits'), '{} bit')}, max memory clock "
            f"{_or_na(g.get('max_memory_clock_mhz'), '{} MHz')}",
            f"      Bandwidth:  {_or_na(g.get('theoretical_bandwidth_gbps'), '{:.0f} GB/s')} (theoretical)",
            f"      Driver:     {_or_na(g.get('driver_version'))}",
            f"      UUID:       {_or_na(g.get('uuid'))}",
        ]
    return "\n".join(lines)
