"""The summary of a ``benchmarks/gpu_check.sh`` folder: steps, doctor, -ngl and context sweeps, fidelity.

    python benchmarks/gpu_check_report.py OUT_DIR      # writes OUT_DIR/summary.md and prints it

Reads what the steps left (``status.tsv``, ``results/doctor.json``, ``results/ngl_sweep.json``,
``results/ctx_sweep.json``, ``logs/fidelity.log``); a step that failed or never ran shows as such, never as a
crash. Per row: the offload llama.cpp really did, the rates, the VRAM the test took (NVML delta) beside the
predicted weights + KV + compute, the GPU's mean decode power and the decode energy per generated token.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

MIB = 2**20
SWEEP_COLUMNS = (  # (header, row key or function)
    ("ngl", "n_gpu_layers"), ("ngl used", "n_gpu_layers_effective"), ("backends", "backends"),
    ("depth", "n_depth"), ("n_ctx", "n_ctx"), ("limit MiB", "device_mem_limit_mib"), ("status", "status"),
    ("pp tok/s", "prefill_tps"), ("tg tok/s", "decode_tps"),
)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _fmt(value: Any, fmt: str = "{:.1f}") -> str:
    if value is None or value == "":
        return "n/a"
    return fmt.format(value) if isinstance(value, float) else str(value)


def vram_columns(row: dict[str, Any]) -> list[str]:
    """VRAM delta and predicted memory in MiB, their ratio, decode power (W) and energy per token (J)."""
    vram, pred = row.get("vram_delta_bytes"), row.get("pred_mem_bytes")
    ratio = f"{vram / pred:.2f}" if vram and pred else "n/a"
    return [_fmt(vram / MIB if vram is not None else None), _fmt(pred / MIB if pred else None), ratio,
            _fmt(row.get("power_avg_w_decode")), _fmt(row.get("energy_j_per_token"), "{:.4f}")]


def sweep_table(rows: list[dict[str, Any]] | None) -> list[str]:
    """A markdown table of one sweep's rows, or why there is none."""
    if not rows:
        return ["(no rows: see the step's log)"]
    heads = [h for h, _ in SWEEP_COLUMNS] + ["VRAM Δ MiB", "pred MiB", "Δ/pred", "W decode", "J/token", "error"]
    out = ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    for r in rows:
        cells = [_fmt(r.get(k)) for _, k in SWEEP_COLUMNS] + vram_columns(r) + [str(r.get("error") or "")[:80]]
        out.append("| " + " | ".join(cells) + " |")
    return out


def doctor_lines(doctor: dict[str, Any] | None) -> list[str]:
    if not doctor:
        return ["(no doctor report)"]
    llama = doctor.get("llama_cpp", {})
    lines = [f"- llama.cpp backends: {', '.join(llama.get('backends', [])) or 'none'}"]
    lines += [f"- device {d['name']} [{d['backend']}, {d['type']}] {d['description']}, "
              f"{d['memory_total_bytes'] / 2**30:.1f} GiB" for d in llama.get("devices", [])]
    lines += [f"- NVML: {g.get('name')} ({(g.get('vram_total_bytes') or 0) / 2**30:.0f} GiB, driver "
              f"{g.get('driver_version')})" for g in doctor.get("machine_gpus", {}).get("nvidia", [])]
    lines += [f"- [{a['level']}] {a['text']}" for a in doctor.get("advice", [])]
    return lines


def steps_lines(status: Path) -> list[str]:
    try:
        rows = [ln.split("\t") for ln in status.read_text().splitlines() if ln.strip()]
    except OSError:
        return ["(no status.tsv)"]
    return ["| step | result | seconds | note |", "|---|---|---|---|"] + [
        "| " + " | ".join((r + ["", "", "", ""])[:4]) + " |" for r in rows]


def fidelity_lines(log: Path) -> list[str]:
    try:
        text = log.read_text()
    except OSError:
        return ["(not run)"]
    lines = [ln.strip() for ln in text.splitlines() if ln.startswith(("  decode", "  prefill", "llama-bench"))]
    return [f"- {ln}" for ln in lines] or ["(no ratios: see logs/fidelity.log)"]


def gpu_lines(res: Path, logs: Path) -> list[str]:
    """nvidia-smi's line for the GPU, and the gpu-marked tests' pytest summary."""
    try:
        lines = [f"- nvidia-smi: {ln}" for ln in (res / "nvidia-smi.csv").read_text().splitlines() if ln.strip()]
    except OSError:
        lines = []
    lines = lines or ["- nvidia-smi: no output"]
    try:
        tail = [ln for ln in (logs / "gpu-tests.log").read_text().splitlines() if ln.strip()][-1:]
    except OSError:
        tail = []
    lines.append(f"- gpu-marked tests: {tail[0] if tail else 'not run'}")
    return lines


def summary(out_dir: Path) -> str:
    res = out_dir / "results"
    parts = ["# GPU check", "", "## Steps", *steps_lines(out_dir / "status.tsv"),
             "", "## GPU", *gpu_lines(res, out_dir / "logs"),
             "", "## Doctor", *doctor_lines(_read_json(res / "doctor.json")),
             "", "## -ngl sweep", *sweep_table(_read_json(res / "ngl_sweep.json")),
             "", "## Context sweep", *sweep_table(_read_json(res / "ctx_sweep.json")),
             "", "## Fidelity against llama-bench (same -ngl)", *fidelity_lines(out_dir / "logs" / "fidelity.log")]
    return "\n".join(parts) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or not Path(args[0]).is_dir():
        print("usage: python benchmarks/gpu_check_report.py OUT_DIR", file=sys.stderr)
        return 2
    text = summary(Path(args[0]))
    (Path(args[0]) / "summary.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
