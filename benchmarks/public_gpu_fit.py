"""Public GPU fit: how well published llama-bench results predict a GPU the fit never saw.

For each GPU architecture in profiles/reference/llama_bench_public.toml with at least two GPUs, every GPU in turn
is left out, the architecture is fitted on the others (app/predict/public_fit.py) and the left-out GPU's decode
(tg) and prefill (pp) figures are predicted. Prints the fitted parameters, every held-out prediction, and the
median and worst absolute error per architecture and overall. Targets: median ≤ 10 %, worst ≤ 25 %.
Rows the table marks as excluded are predicted too, shown apart and not counted. Pure arithmetic: seconds to run.

    python benchmarks/public_gpu_fit.py [--table FILE]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.paths import HARDWARE_PROFILES_DIR  # noqa: E402
from app.predict.profiles import load_profiles  # noqa: E402
from app.predict.public_arch_fit import (  # noqa: E402
    HeldOut,
    PublicFitError,
    fit_phase_rows,
    measured_tps,
    reference_demand,
    summarize,
    used,
)
from app.predict.public_data import PUBLIC_TABLE_PATH, ReferenceResult, load_reference  # noqa: E402
from app.predict.public_fit import PublicGpuModel  # noqa: E402
from app.predict.workload import PHASES  # noqa: E402

TARGET_MEDIAN, TARGET_WORST = 0.10, 0.25


def parameter_lines(model: PublicGpuModel) -> list[str]:
    lines = ["| architecture | phase | GPUs | rows | η per kernel class | t_layer µs | t_fixed µs | κ TFLOPS/W "
             "| ALU ops per quantized weight |", "|---|---|---:|---:|---|---:|---:|---:|---:|"]
    for (arch, phase), fit in sorted(model.fits.items()):
        c = fit.coefficients
        eta = ", ".join(f"{k.removeprefix('class:')} {1 / v:.2f}" for k, v in c.items() if k.startswith("class:"))
        kappa = f"{fit.tflops_per_w:.2f}" if fit.tflops_per_w else "-"
        lines.append(f"| {arch} | {phase} | {len(fit.gpus)} | {len(fit.rows)} | {eta} | "
                     f"{c.get('layer', 0.0) * 1e6:.1f} | {c.get('fixed', 0.0) * 1e6:.0f} | {kappa} | "
                     f"{f'{fit.alu_ops:.0f}' if fit.alu_ops else '-'} |")
    return lines


def excluded_held_out(model: PublicGpuModel) -> list[HeldOut]:
    """Rows the table excludes, predicted by their architecture's fit without their GPU (shown, not counted)."""
    out = []
    arch_of = {name: p.architecture or "unknown" for name, p in model.profiles.items()}
    for phase in PHASES:
        for r in (r for r in model.rows if not used(r, phase)):
            arch = arch_of[r.gpu]
            train = [t for t in model.rows if t.gpu != r.gpu and arch_of[t.gpu] == arch]
            try:
                fit = fit_phase_rows(phase, train, model.profiles, arch)
                tps = fit.tps(reference_demand(r, model.profiles[r.gpu], phase, fit.tflops_per_w))
            except PublicFitError:
                tps = None
            out.append(HeldOut(arch, phase, r, tps))
    return out


def row_line(h: HeldOut) -> str:
    r: ReferenceResult = h.row
    pred = f"{h.predicted_tps:.1f}" if h.predicted_tps else "-"
    err = f"{h.rel_error * 100:+.1f}%" if h.predicted_tps else "no fit"
    test = f"tg{r.n_gen}" if h.phase == "decode" else f"pp{r.n_prompt}"
    return (f"| {h.architecture} | {r.gpu} | {r.model.name} {r.weight_type} | {test} | "
            f"{measured_tps(r, h.phase):.1f} | {pred} | {err} |")  # type: ignore[arg-type]


def summary_lines(held: list[HeldOut]) -> list[str]:
    lines = ["| architecture | phase | rows | median error | worst error |", "|---|---|---:|---:|---:|"]
    for arch in [*sorted({h.architecture for h in held}), "all"]:
        for phase in PHASES:
            s = summarize(h for h in held if h.phase == phase and arch in ("all", h.architecture))
            if s.n:
                lines.append(f"| {arch} | {phase} | {s.n} | {s.median * 100:.1f}% | {s.worst * 100:.1f}% |")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--table", type=Path, default=PUBLIC_TABLE_PATH, help="reference table (TOML)")
    args = ap.parse_args(argv)
    model = PublicGpuModel(load_reference(args.table), load_profiles([HARDWARE_PROFILES_DIR]))
    header = ["| architecture | GPU left out | model | test | measured t/s | predicted t/s | error |",
              "|---|---|---|---|---:|---:|---:|"]
    print("## Fitted parameters (all GPUs of each architecture)\n", *parameter_lines(model), sep="\n")
    print("\n## Leave-one-GPU-out predictions\n", *header, *map(row_line, model.held_out), sep="\n")
    excluded = excluded_held_out(model)
    if excluded:
        print("\n## Rows the table excludes (not counted)\n", *header, *map(row_line, excluded), sep="\n")
    print("\n## Held-out error\n", *summary_lines(model.held_out), sep="\n")
    ok = True
    for phase in PHASES:
        s = summarize(h for h in model.held_out if h.phase == phase)
        hit = s.median <= TARGET_MEDIAN and s.worst <= TARGET_WORST
        ok &= hit
        print(f"\n{phase}: median {s.median:.1%} (target ≤ {TARGET_MEDIAN:.0%}), worst {s.worst:.1%} "
              f"(target ≤ {TARGET_WORST:.0%}){'' if hit else '  — target missed'}")
        if s.worst > TARGET_WORST:
            over = [h for h in model.held_out if h.phase == phase and abs(h.rel_error) > TARGET_WORST]
            print(f"  over {TARGET_WORST:.0%}: " + ", ".join(f"{h.row.label} {h.rel_error:+.0%}" for h in over)
                  + " (the forms tried for them: benchmarks/public_gpu_variants.py)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
