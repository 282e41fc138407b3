"""The CPU probe and compute lines of ``gguf-bench hw``: each figure with what it is and where it came from."""

from __future__ import annotations

from typing import Any


def _passes(src: dict[str, Any] | None) -> str:
    """``best of 3 passes, spread 4%, quiet`` for a figure's source; ``no load check`` for an old record."""
    if not src:
        return "no load check"
    parts = [f"best of {src['passes']} passes" if src.get("passes") else "passes unknown"]
    if src.get("spread_frac") is not None:
        parts.append(f"spread {src['spread_frac'] * 100:.0f}%")
    if src.get("busy") is None:
        parts.append("no load check")
    elif src["busy"]:
        others = src.get("others_cpus")
        parts.append("BUSY" + (f": others used {others:.1f} CPUs" if others is not None else ""))
    else:
        parts.append("quiet")
    return ", ".join(parts)


def probe_lines(probe: dict[str, Any]) -> list[str]:
    """Bandwidth, matmul rate and the probe's state."""
    origin = "cached" if probe.get("cached") else "measured"
    state = {None: "; recorded without a load check: measured again at the next run",
             True: "; taken while the machine was busy: measured again at the next run"}.get(probe.get("busy"), "")
    return [
        f"  Bandwidth:  {probe['bandwidth_gbps']:.1f} GB/s (probed copy, {probe['n_threads']} threads; "
        f"{_passes(probe.get('bandwidth_source'))})",
        f"  Compute:    {probe['gflops_f32']:.0f} GFLOPS float32 (matmul; {_passes(probe.get('gflops_source'))})",
        f"  Probe:      {origin} {probe.get('measured_at', '')}{state}",
    ]


def _rate(tflops: float) -> str:
    return f"{tflops * 1e3:.0f} G" if tflops < 10 else f"{tflops:.1f} T"


def compute_lines(compute: dict[str, Any] | None) -> list[str]:
    """The prefill compute figures by weight type: int8 dot peak / FMA peak / measured roofline, with sources."""
    if not compute:
        return []
    int8, fma = compute["int8"], compute["fma"]
    lines = ["  Prefill compute (what a prefill ceiling divides by):",
             f"    quantized weights: {_rate(int8['tflops'])}OPS {int8['kind']} ({int8['source']})",
             f"    F16/BF16/F32:      {_rate(fma['tflops'])}FLOPS {fma['kind']} ({fma['source']})"]
    if compute.get("clock_ghz"):
        lines.append(f"    clock:             {compute['clock_source']}")
    if "roofline" in int8["kind"]:
        lines.append("    (a measured roofline is not a ceiling: measurements may exceed it)")
    return lines
