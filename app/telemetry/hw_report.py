"""The text of ``gguf-bench hw``, from :meth:`app.telemetry.machine.MachineScan.report`."""

from __future__ import annotations

from typing import Any

from app.telemetry.cpu_report import compute_lines, probe_lines


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
        lines += probe_lines(probe) + compute_lines(report.get("cpu_compute"))
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
