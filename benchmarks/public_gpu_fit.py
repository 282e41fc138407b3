"""Public GPU fit: how well published llama-bench results predict a GPU the fit never saw.

For each GPU architecture of the training tables (profiles/reference/llama_bench_public.toml, May 2024 builds, and
llama_bench_public_2025.toml, later builds) with at least two GPUs, every GPU in turn
is left out, the architecture is fitted on the others (app/predict/public/fit.py) and the left-out GPU's decode
(tg) and prefill (pp) figures are predicted. Prints the fitted parameters, every held-out prediction, and the
median and worst absolute error per architecture and overall. Targets: median ≤ 10 %, worst ≤ 25 %.
Rows the table marks as excluded are predicted too, shown apart and not counted. Then the leave-one-architecture-out
and leave-one-build-era-out errors, and the build-era evidence.

Then the BANDS by situation (app/predict/public/bands.py, issue #41 item 6): the cross-validated errors each
situation's band is made of (training rows only: each publication left out, with its GPU or architecture in turn),
the band and its width (high ÷ low), and the band rule's own check within the training rows (each publication's
errors against the band made without them); and how many publications each GPU has, which is why a band is made
per situation and not per GPU.

Then the HELD-OUT check: the fit of the training tables only predicts every row of
profiles/reference/llama_bench_public_more.toml (rows no fit has seen) at its own settings, backend and build;
median |error| and the share inside the band, overall, by backend, weight type, build era and GPU kind (issue #26
targets: decode ≤ 10 %, prefill ≤ 15 %, ≥ 80 % inside). Rows whose GPU has no hardware profile are listed as
skipped. Last, the floor: each held-out figure whose question (GPU, backend, model, type, test, era or exact build)
was published more than once, predicted by the median of the others; a target under that spread cannot be met
with those inputs; and the bands by situation on the held-out rows: figures, share inside the band, median width,
against the acceptance (issue #41 item 6: inside ≥ 80 %; where the GPU's architecture has training rows, a median
band ≤ 1.6x for decode and ≤ 2.0x for prefill), beside the width of the oracle's own 80 % band. Pure arithmetic:
seconds to run.

    python benchmarks/public_gpu_fit.py [--table FILE ...] [--held-out FILE]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.paths import HARDWARE_PROFILES_DIR  # noqa: E402
from app.predict.machine_fit.workload import PHASES  # noqa: E402
from app.predict.profiles import HardwareProfile, load_profiles  # noqa: E402
from app.predict.public.arch_fit import (  # noqa: E402
    ERAS,
    HeldOut,
    PublicFitError,
    canonical_backend,
    fit_phase_rows,
    leave_one_architecture_out,
    leave_one_era_out,
    measured_tps,
    published,
    reference_demand,
    row_era,
    summarize,
    used,
)
from app.predict.public.bands import COVERAGE, Basis, Residual, Situation, band_for, min_residuals  # noqa: E402
from app.predict.public.data import (  # noqa: E402
    TRAINING_TABLE_PATHS,
    ReferenceResult,
    load_machine_spread,  # noqa: E402
    load_training,
)
from app.predict.public.fit import PublicGpuModel, inside_ceiling  # noqa: E402
from app.predict.public.held_out import (  # noqa: E402
    GROUPINGS,
    HELD_OUT_TABLE_PATHS,
    HeldOutCheck,
    check_held_out,
    load_held_out,
    on_a_laptop,
    repeat_spread,
    summarize_checks,
)

TARGET_MEDIAN, TARGET_WORST = 0.10, 0.25
HELD_OUT_TARGETS = {"decode": 0.10, "prefill": 0.15}
HELD_OUT_TARGET_INSIDE = 0.80
#: Issue #41 item 6: where the GPU's architecture has training rows, the median band (high ÷ low) at most this.
BAND_WIDTH_TARGETS = {"decode": 1.6, "prefill": 2.0}
#: The bases whose architecture has training rows (the band-width target's figures).
OWN_ARCHITECTURE = (Basis.GPU, Basis.ARCHITECTURE)


def training_lines(model: PublicGpuModel, tables: list[Path]) -> list[str]:
    """Rows per table, backend and build era, and the rows left out for want of a hardware profile."""
    lines = [f"Tables: {', '.join(t.name for t in tables)}; {len(model.rows)} rows fitted, "
             f"{len({r.gpu for r in model.rows})} GPUs.", "", "| backend | build era | rows | GPUs |",
             "|---|---|---:|---:|"]
    cells: dict[tuple[str, str], list[ReferenceResult]] = {}
    for r in model.rows:
        cells.setdefault((r.backend, row_era(r) or "unknown"), []).append(r)
    for (backend, era), rows in sorted(cells.items()):
        lines.append(f"| {backend} | {era} | {len(rows)} | {len({r.gpu for r in rows})} |")
    if model.unprofiled:
        gpus = sorted({r.gpu for r in model.unprofiled})
        lines += ["", f"Not fitted, no hardware profile yet: {len(model.unprofiled)} rows of {', '.join(gpus)}."]
    return lines


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
        for r in (r for r in model.rows if published(r, phase) and not used(r, phase)):
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


def situations(found: Sequence[Situation]) -> list[Situation]:
    """Every exact situation among ``found``, each followed by its basis (any substitution), then any situation."""
    out: list[Situation] = []
    for basis in Basis:
        exact = sorted({s for s in found if s.basis == basis}, key=lambda s: bool(s.substituted))
        out += [*exact, Situation(basis, None)] if exact else []
    return [*out, Situation(None, None)]


def self_check(residuals: Sequence[Residual]) -> dict[tuple[str, Situation], tuple[int, int]]:
    """The band rule checked within the training rows: each publication's errors against the band of their
    situation made from the OTHER publications' errors. (phase, situation) -> (inside, errors), for every exact
    situation and each coarser one."""
    out: dict[tuple[str, Situation], tuple[int, int]] = {}
    for source in sorted({r.source for r in residuals}):
        others = [r for r in residuals if r.source != source]
        for r in (r for r in residuals if r.source == source):
            band = band_for(others, r.situation, r.phase)
            inside = band.low_error <= math.expm1(r.log_error) <= band.high_error
            for key in (s for s in situations([r.situation]) if s.holds(r.situation)):
                hit, n = out.get((r.phase, key), (0, 0))
                out[(r.phase, key)] = (hit + inside, n + 1)
    return out


def band_lines(model: PublicGpuModel) -> list[str]:
    """Per phase and situation: the cross-validated errors a band is made of, the band and its width, and the
    share of each publication's errors inside the band made without them."""
    lines = ["| phase | situation | errors | publications | band: measured ÷ figure | width (high ÷ low) | each "
             "publication inside the others' band |", "|---|---|---:|---:|---:|---:|---:|"]
    checked = self_check(model.residuals)
    for phase in PHASES:
        own = [r for r in model.residuals if r.phase == phase]
        for sit in situations([r.situation for r in own]):
            pool = [r for r in own if sit.holds(r.situation)]
            band = band_for(own, sit, phase)
            made = "" if band.used == sit else f" (pooled: {band.used.text()})"
            hit, n = checked.get((phase, sit), (0, 0))
            lines.append(f"| {phase} | {sit.text()} | {len(pool)} | {len({r.source for r in pool})} | "
                         f"{1 / (1 + band.high_error):.2f}–{1 / (1 + band.low_error):.2f}{made} | {band.width:.2f} | "
                         f"{f'{hit}/{n} ({hit / n:.0%})' if n else '-'} |")
    return lines


#: Issue #53's targets on each publication left out in turn: median |error|, share inside the band, median width.
LOPO_TARGETS = {"decode": (0.10, 0.80, 1.6), "prefill": (0.25, 0.80, 2.5)}


@dataclass(frozen=True)
class LeftOut:
    """One figure of a publication left out in turn: what the fit without it says, inside the ceiling, and its band
    made of the other publications' errors (before and after the clip at the ceiling)."""

    residual: Residual
    measured: float
    value: float
    low: float
    high: float
    raw_high: float  # the band's top before the ceiling clipped it

    @property
    def abs_error(self) -> float:
        return abs(self.value / self.measured - 1.0)

    @property
    def inside(self) -> bool:
        return self.low <= self.measured <= self.high


def left_out(model: PublicGpuModel) -> list[LeftOut]:
    """Each training figure as a user of its publication would get it: the fit without that publication, the band of
    its situation from the other publications' errors (at least the spread between machines), kept inside the row's
    spec-sheet ceiling as ``expected`` keeps it."""
    out = []
    by_source: dict[str, list[Residual]] = {}
    for r in model.residuals:
        by_source.setdefault(r.source, []).append(r)
    for source, own in sorted(by_source.items()):
        others = [r for r in model.residuals if r.source != source]
        for r in (r for r in own if r.fold == "publication"):
            band = band_for(others, r.situation, r.phase, unit=model.cv_unit, floor=model.spread.get(r.phase))
            low, high = band.edges(r.predicted_tps)
            value, clipped_low, clipped_high = inside_ceiling(r.predicted_tps, low, high, r.ceiling_tps)
            out.append(LeftOut(r, r.predicted_tps / math.exp(r.log_error), value, clipped_low, clipped_high, high))
    return out


def left_out_lines(model: PublicGpuModel) -> list[str]:
    """Per phase and situation (each exact situation, then coarser ones): figures, median |error|, share inside the
    band, median width, and band tops above the ceiling before the clip and as shown."""
    got = left_out(model)
    lines = ["| phase | situation | figures | publications | median \\|error\\| | inside the band | median width "
             "(high ÷ low) | band tops above the ceiling: before the clip | as shown |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for phase in PHASES:
        own = [g for g in got if g.residual.phase == phase]
        for sit in situations([g.residual.situation for g in own]):
            part = [g for g in own if sit.holds(g.residual.situation)]
            if not part:
                continue
            inside = sum(g.inside for g in part)
            lines.append(f"| {phase} | {sit.text()} | {len(part)} | {len({g.residual.source for g in part})} | "
                         f"{statistics.median(g.abs_error for g in part):.1%} | {inside}/{len(part)} "
                         f"({inside / len(part):.0%}) | {statistics.median(g.high / g.low for g in part):.2f} | "
                         f"{sum(g.raw_high > g.residual.ceiling_tps * (1 + 1e-9) for g in part)} | "
                         f"{sum(g.high > g.residual.ceiling_tps * (1 + 1e-9) for g in part)} |")
    lines += ["", "| phase | test | figures | median \\|error\\| | inside the band | median width |",
              "|---|---|---:|---:|---:|---:|"]
    kinds: list[tuple[str, Callable[[ReferenceResult], bool]]] = [
        ("dense model, from an empty cache", lambda r: not r.model.n_expert and not r.n_depth),
        ("mixture of experts, from an empty cache", lambda r: bool(r.model.n_expert) and not r.n_depth),
        ("at a depth (-d 2048 to 32768)", lambda r: r.n_depth > 0)]
    for phase in PHASES:
        for name, kind in kinds:
            part = [g for g in got if g.residual.phase == phase and kind(model.rows[g.residual.row])]
            if part:
                inside = sum(g.inside for g in part)
                lines.append(f"| {phase} | {name} | {len(part)} | {statistics.median(g.abs_error for g in part):.1%} | "
                             f"{inside}/{len(part)} | {statistics.median(g.high / g.low for g in part):.2f} |")
    lines.append("")
    for phase in PHASES:
        part = [g for g in got if g.residual.phase == phase]
        if not part:
            continue
        target_err, target_in, target_width = LOPO_TARGETS[phase]
        err = statistics.median(g.abs_error for g in part)
        inside = sum(g.inside for g in part) / len(part)
        width = statistics.median(g.high / g.low for g in part)
        above = sum(g.high > g.residual.ceiling_tps * (1 + 1e-9) for g in part)
        missed = [what for what, ok in (("median error", err <= target_err), ("coverage", inside >= target_in),
                                        ("width", width <= target_width), ("ceiling", not above)) if not ok]
        spread = model.spread.get(phase)
        lines.append(f"{phase}, each of {len({g.residual.source for g in part})} publications left out in turn "
                     f"({len(part)} figures): median |error| {err:.2%} (target ≤ {target_err:.0%}), inside the band "
                     f"{inside:.1%} (target ≥ {target_in:.0%}), median band {width:.2f}x (target ≤ {target_width}x), "
                     f"band tops above a spec-sheet ceiling {above} (target 0); floor: "
                     f"{spread.text() if spread else 'none'}"
                     f"{'  — target missed: ' + ', '.join(missed) if missed else '  — met'}")
    return lines


def granularity_lines(model: PublicGpuModel) -> list[str]:
    """How many publications each GPU, and each GPU on one backend, has in the training rows: a band made of one
    GPU's own errors (narrower than its situation's) needs as many publications as a conformal band needs errors,
    since a publication's figures share its machine, driver and build and move together."""
    by_gpu: dict[str, set[str]] = {}
    by_cell: dict[tuple[str, str], set[str]] = {}
    for r in model.rows:
        by_gpu.setdefault(r.gpu, set()).add(r.publication_key)
        by_cell.setdefault((r.gpu, canonical_backend(r.backend)), set()).add(r.publication_key)
    lines = ["| unit | count | with 1 publication | 2 | 3 | 4 or more | most publications |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for unit, groups in (("GPU", by_gpu), ("GPU on one backend", by_cell)):
        n = [len(v) for v in groups.values()]
        lines.append(f"| {unit} | {len(n)} | {n.count(1)} | {n.count(2)} | {n.count(3)} | "
                     f"{sum(k >= 4 for k in n)} | {max(n)} |")
    return [*lines, "", f"A conformal band at {COVERAGE:.0%} needs at least {min_residuals()} exchangeable errors; the "
            "unit that is exchangeable with a user's run is a publication (another machine, driver and build), so "
            "no GPU has enough of its own for a band of its own: bands are made per situation, pooled over GPUs."]


def era_evidence(train: list[ReferenceResult], held: list[ReferenceResult]) -> list[str]:
    """Build numbers and dates per era in both tables: where the era boundaries sit in the data."""
    lines = ["| era | table | rows | builds | dates |", "|---|---|---:|---|---|"]
    for name, _, _ in ERAS:
        for label, rows in (("training", train), ("held-out", held)):
            inside = [r for r in rows if row_era(r) == name]
            if not inside:
                lines.append(f"| {name} | {label} | 0 | - | - |")
                continue
            builds = sorted({r.build_number for r in inside if r.build_number is not None})
            dates = sorted({r.date for r in inside if r.date})
            b = f"b{builds[0]}–b{builds[-1]} ({len(builds)} builds)" if builds else "none given"
            d = f"{dates[0]} – {dates[-1]}" if dates else "none given"
            lines.append(f"| {name} | {label} | {len(inside)} | {b} | {d} |")
    unknown = [r for r in held if not row_era(r)]
    if unknown:
        lines.append(f"| unknown | held-out | {len(unknown)} | no build, no date | - |")
    return lines


def check_line(c: HeldOutCheck) -> str:
    r, e = c.row, c.expected
    test = f"tg{r.n_gen}" if c.phase == "decode" else f"pp{r.n_prompt}"
    test += f" @ d{r.n_depth}" if r.n_depth else ""
    if e is None:
        return (f"| {r.gpu} | {r.backend} | {r.build or r.date} | {r.model.name} {r.weight_type} | {test} | "
                f"{c.measured_tps:.1f} | - | {c.why_none} | - |")
    return (f"| {r.gpu} | {r.backend} | {r.build or r.date} | {r.model.name} {r.weight_type} | {test} | "
            f"{c.measured_tps:.1f} | {e.value:.1f} ({e.low:.1f}–{e.high:.1f}) | {c.rel_error:+.1%} | "
            f"{'yes' if c.inside_band else 'no'} |")


def held_out_summary_lines(checks: list[HeldOutCheck]) -> list[str]:
    lines = ["| grouping | group | phase | figures | median \\|error\\| | inside the band | no figure |",
             "|---|---|---|---:|---:|---:|---:|"]
    for grouping, key in GROUPINGS.items():
        for group in sorted({key(c) for c in checks}):
            for phase in PHASES:
                s = summarize_checks(c for c in checks if c.phase == phase and key(c) == group)
                if s.n or s.unpredicted:
                    med = f"{s.median_abs_error:.1%}" if s.n else "-"
                    inside = f"{s.inside_band}/{s.n} ({s.inside_band / s.n:.0%})" if s.n else "-"
                    lines.append(f"| {grouping} | {group} | {phase} | {s.n} | {med} | {inside} | {s.unpredicted} |")
    return lines


def floor_lines(rows: list[ReferenceResult], checks: list[HeldOutCheck]) -> list[str]:
    """The repeat spread of the held-out rows beside the fit's error: a target below the spread cannot be met
    with the inputs a prediction has (GPU, backend, model, weight type, test, build era)."""
    lines = ["| phase | same question = | figures asked twice or more | of them by two publications or more | "
             "questions asked once | oracle median "
             "\\|error\\| | oracle within 15 % | figures the fit predicts: oracle's median \\|error\\| | the fit's | "
             "fit ÷ oracle |", "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for phase in PHASES:
        predicted = {id(c.row): abs(c.rel_error) for c in checks if c.phase == phase and c.expected is not None}
        for exact in (False, True):
            f = repeat_spread(rows, phase, exact_build=exact)
            if not f.repeated:
                continue
            both = [(o, predicted[id(r)]) for r, o in zip(f.rows, f.errors, strict=True) if id(r) in predicted]
            judged = "- | - | - |"
            if both:
                oracle, fit = (statistics.median(x) for x in zip(*both, strict=True))
                judged = f"{oracle:.1%} | {fit:.1%} ({len(both)}) | {f'{fit / oracle:.1f}x' if oracle else '-'} |"
            lines.append(f"| {phase} | {'the exact build' if exact else 'the build era'} | {f.repeated} | "
                         f"{f.across_publications} | {f.single} | {f.median_abs_error:.1%} | {f.within:.0%} | {judged}")
    lines.append("\nThe oracle predicts each repeated figure by the median of the other figures of its question, "
                 "learned from the held-out rows themselves; no fit with these inputs does better. Where its median "
                 "is above a target, the spread comes from what no row records (driver, ROCm and hipBLASLt "
                 "versions, build flags, power settings). Where few repeats come from two publications, the "
                 "oracle is one machine's spread over builds and runs, not how far two machines of one GPU name "
                 "disagree: a user's run is another machine, and the rows do not say that floor.")
    return lines


def held_out_band_lines(checks: list[HeldOutCheck]) -> list[str]:
    """Per phase and situation the figure was made in: held-out figures, the share inside their band, and the
    median width (high ÷ low) of their bands."""
    lines = ["| phase | situation | figures | inside the band | median width (high ÷ low) | bands pooled from a "
             "coarser situation |", "|---|---|---:|---:|---:|---:|"]
    for phase in PHASES:
        banded = [c for c in checks if c.phase == phase and c.band is not None]
        groups: list[tuple[str, Callable[[HeldOutCheck], bool]]] = [
            (sit.text(), lambda c, sit=sit: sit.holds(c.band.asked))  # type: ignore[union-attr]
            for sit in situations([c.band.asked for c in banded])]  # type: ignore[union-attr]
        groups.insert(-1, ("architecture has training rows (GPU or architecture basis)",
                           lambda c: c.band.asked.basis in OWN_ARCHITECTURE))  # type: ignore[union-attr]
        for name, holds in groups:
            got = [c for c in banded if holds(c)]
            if got:
                inside = sum(c.inside_band for c in got)
                pooled = sum(c.band.used != c.band.asked for c in got)  # type: ignore[union-attr]
                width = statistics.median(c.expected.high / c.expected.low for c in got)  # type: ignore[union-attr]
                lines.append(f"| {phase} | {name} | {len(got)} | {inside}/{len(got)} ({inside / len(got):.0%}) | "
                             f"{width:.2f} | {pooled} |")
    return lines


def acceptance_lines(checks: list[HeldOutCheck], train: list[ReferenceResult],
                     held: list[ReferenceResult]) -> list[str]:
    """Issue #41 item 6 per phase: held-out figures inside their band (≥ 80 %) and, where the GPU's architecture has
    training rows, the median band's width (≤ BAND_WIDTH_TARGETS); beside it, the width of the oracle's own 80 %
    band (the median of the other figures of the same question): a band this honest cannot be much narrower."""
    lines = []
    for phase in PHASES:
        banded = [c for c in checks if c.phase == phase and c.band is not None]
        own = [c for c in banded if c.band.asked.basis in OWN_ARCHITECTURE]  # type: ignore[union-attr]
        if not banded or not own:
            lines.append(f"{phase}: no held-out figure with a band")
            continue
        inside = sum(c.inside_band for c in banded) / len(banded)
        width = statistics.median(c.expected.high / c.expected.low for c in own)  # type: ignore[union-attr]
        target = BAND_WIDTH_TARGETS[phase]
        oracle = ", ".join(f"{name} {repeat_spread(rows, phase).band_width(COVERAGE):.2f}x"
                           for name, rows in (("training rows", train), ("held-out rows", held)))
        missed = [what for what, ok in (("coverage", inside >= HELD_OUT_TARGET_INSIDE), ("width", width <= target))
                  if not ok]
        lines.append(f"{phase}: {inside:.0%} of {len(banded)} held-out figures inside their band (target ≥ "
                     f"{HELD_OUT_TARGET_INSIDE:.0%}); median band {width:.2f}x over the {len(own)} whose architecture "
                     f"has training rows (target ≤ {target:.1f}x); the oracle's own {COVERAGE:.0%} band (by build "
                     f"era): {oracle}{'  — target missed: ' + ' and '.join(missed) if missed else '  — met'}")
    return lines


def held_out_report(model: PublicGpuModel, paths: list[Path]) -> None:
    rows = load_held_out(paths)
    checks, skipped = check_held_out(model, rows, list(model.profiles.values()))
    print(f"\n## HELD-OUT check: {', '.join(p.name for p in paths)} ({len(rows)} rows; fit on the training tables "
          "only)\n")
    print(f"Skipped {len(skipped)} of {len(rows)} rows (their GPU has no hardware profile; by GPU):")
    by_gpu: dict[str, list[str]] = {}
    for s in skipped:
        by_gpu.setdefault(s.row.gpu, []).append(s.reason)
    for gpu, reasons in sorted(by_gpu.items(), key=lambda kv: -len(kv[1])):
        print(f"- {gpu}: {len(reasons)} rows — {reasons[0]}")
    header = ["| GPU | backend | build | model | test | published t/s | expected t/s (band) | error | inside |",
              "|---|---|---|---|---|---:|---:|---:|---|"]
    print("\n", *header, *map(check_line, checks), sep="\n")
    print("\n### Held-out error and band coverage\n", *held_out_summary_lines(checks), sep="\n")
    print("\n### The floor: how far published figures of the same question disagree\n",
          *floor_lines(rows, checks), sep="\n")
    print("\n### Bands by situation (issue #41 item 6)\n", *held_out_band_lines(checks), "",
          *acceptance_lines(checks, list(model.rows), rows), sep="\n")
    if not any(on_a_laptop(c.profile) for c in checks):
        print("\nLaptop GPUs: no held-out row is on a laptop GPU or iGPU with a profile yet.")
    for phase in PHASES:
        s = summarize_checks(c for c in checks if c.phase == phase)
        if not s.n:
            print(f"\n{phase}: no held-out figure could be predicted")
            continue
        share = s.inside_band / s.n
        share_all = s.inside_band / (s.n + s.unpredicted)
        hit = s.median_abs_error <= HELD_OUT_TARGETS[phase] and share_all >= HELD_OUT_TARGET_INSIDE
        refused = (f"; {s.unpredicted} published figures got no expected figure (counted as outside the band: "
                   f"{share_all:.0%} of all {s.n + s.unpredicted})" if s.unpredicted else "")
        print(f"\n{phase} (held-out, {s.n} figures predicted): median |error| {s.median_abs_error:.1%} (target ≤ "
              f"{HELD_OUT_TARGETS[phase]:.0%}), inside the band {share:.0%} (target ≥ {HELD_OUT_TARGET_INSIDE:.0%})"
              f"{refused}{'' if hit else '  — target missed'}")
        per_gpu = [summarize_checks(c for c in checks if c.phase == phase and c.profile.name == g)
                   for g in sorted({c.profile.name for c in checks})]
        medians = [g.median_abs_error for g in per_gpu if g.n]
        inside = [g.inside_band / g.n for g in per_gpu if g.n]
        if medians:  # each GPU counted once: one GPU with many rows (the 8060S) does not decide the figure
            print(f"  each GPU weighed once ({len(medians)} GPUs): median of the GPUs' median |error| "
                  f"{statistics.median(medians):.1%}, mean share inside the band {statistics.mean(inside):.0%}")


def census_lines(train: list[ReferenceResult], held: list[ReferenceResult],
                 profiles: dict[str, HardwareProfile]) -> list[str]:
    """What the public tables hold, counted as llama-bench prints it: one row per test (a pp and a tg row per
    result where both were run), by table kind; GPUs (those on a laptop: a laptop GPU or a laptop processor's
    iGPU), weight types, backends, builds and dates."""
    lines = ["| tables | llama-bench rows (pp + tg) | results | GPUs | on a laptop | weight types | backends | builds "
             "| dates |", "|---|---:|---:|---:|---|---|---|---|---|"]
    for name, rows in (("training", train), ("held-out", held), ("all", [*train, *held])):
        n_tests = sum(published(r, phase) for r in rows for phase in PHASES)
        builds = sorted(r.build_number for r in rows if r.build_number is not None)
        dates = sorted(r.date for r in rows if r.date)
        types = sorted({r.weight_type for r in rows})
        laptop = sorted({r.gpu for r in rows if r.gpu in profiles and on_a_laptop(profiles[r.gpu])})
        lines.append(f"| {name} | {n_tests} | {len(rows)} | {len({r.gpu for r in rows})} | {len(laptop)}: "
                     f"{', '.join(laptop)} | {len(types)}: "
                     f"{', '.join(types)} | {', '.join(sorted({r.backend for r in rows}))} | "
                     f"b{builds[0]}–b{builds[-1]} ({len(set(builds))} builds) | {dates[0]} – {dates[-1]} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--table", type=Path, action="append",
                    help="a training table (TOML); repeat for several (default: the shipped training tables)")
    ap.add_argument("--held-out", type=Path, action="append",
                    help="a held-out table (TOML), never fitted; repeat for several (default: the shipped ones)")
    args = ap.parse_args(argv)
    tables = args.table or list(TRAINING_TABLE_PATHS)
    model = PublicGpuModel(load_training(tables), load_profiles([HARDWARE_PROFILES_DIR]), skip_unprofiled=True,
                           spread=load_machine_spread())
    print("## Training tables\n", *training_lines(model, tables), sep="\n")
    header = ["| architecture | GPU left out | model | test | measured t/s | predicted t/s | error |",
              "|---|---|---|---|---:|---:|---:|"]
    print("## Fitted parameters (all GPUs of each architecture)\n", *parameter_lines(model), sep="\n")
    if model.cells:
        print("\nFiner cells (backend, era) fitted on their own: " + ", ".join(
            f"{a} {b} {e or 'all eras'} {ph}" for a, b, e, ph in sorted(model.cells)))
    else:
        print("\nNo (architecture, backend[, era]) cell differs from its architecture's rows: every architecture's "
              "rows are one backend and one build era, so the per-architecture fit is the only one.")
    print("\n## Leave-one-GPU-out predictions\n", *header, *map(row_line, model.held_out), sep="\n")
    excluded = excluded_held_out(model)
    if excluded:
        print("\n## Rows the table excludes (not counted)\n", *header, *map(row_line, excluded), sep="\n")
    print("\n## Held-out error\n", *summary_lines(model.held_out), sep="\n")
    print("\n## Leave-one-architecture-out (each predicted by its nearest other architecture: a borrowed fit)\n",
          *summary_lines(leave_one_architecture_out(model.rows, model.profiles, model.fits)), sep="\n")
    era_out = leave_one_era_out(model.rows, model.profiles)
    if era_out:
        print("\n## Leave-one-build-era-out\n", *summary_lines(era_out), sep="\n")
    else:
        print("\nLeave-one-build-era-out: none — no architecture of the training table has rows of two build eras "
              "(a prediction for another era takes the leave-one-architecture-out errors for its band).")
    print(f"\n## Bands by situation: the cross-validated errors they are made of ({COVERAGE:.0%}, conformal)\n",
          *band_lines(model), sep="\n")
    print("\nEach training figure is predicted as `expected` predicts it, by the fit of the rows left when its "
          "publication is taken out (then its GPU too, then its whole architecture), and its error is filed under "
          "the situation that fold made it in. A band is the conformal interval of its situation's errors; under "
          "the minimum the rule pools the coarser situation. The last column checks the rule within the training "
          "rows: each publication against the band made without it.")
    print("\n## Each publication left out in turn (issue #53 acceptance)\n", *left_out_lines(model), sep="\n")
    print("\nEvery training figure predicted by the fit without its publication, as `expected` predicts it for a user "
          "of that machine, its band made of the other publications' errors of its situation, widened to the spread "
          "between machines and kept inside the row's spec-sheet ceiling.")
    print("\n## How finely a band can be made: publications per GPU\n", *granularity_lines(model), sep="\n")
    held_tables = args.held_out or list(HELD_OUT_TABLE_PATHS)
    held = load_held_out(held_tables)
    print("\n## Build eras: evidence\n", *era_evidence(list(model.rows), held), sep="\n")
    print("\n## The public tables: what they hold\n",
          *census_lines([*model.rows, *model.unprofiled], held, model.profiles), sep="\n")
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
    held_out_report(model, held_tables)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
