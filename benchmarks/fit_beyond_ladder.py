"""This machine's fit beyond its ladder: calibrate into a temporary data dir, then measure synthetic models of shapes
the ladder never holds and check each against the band ``predict`` gives it (issue #41 item 7).

The ladder's models are llama-shaped, dense, of one weight type each, with a 1,024-token vocabulary. The held-out
shapes differ from all of them in what a token reads:

- ``vocab262k-tied``: a gemma (tied embeddings) whose 262,144 × 1,024 Q6_K embedding is the output matrix every
  token reads (70 % of its bytes), the body Q4_K with attn_v and ffn_down Q6_K (a Q4_K_M mix);
- ``vocab152k-q8``: a llama with an untied 152,064-row Q8_0 output matrix;
- ``moe-32x4-q8``: a llama-family mixture of experts, 32 experts of 512 rows, 4 per token (random router: each
  token takes its own experts);
- ``moe-64x8-q4km``: the same layout, 64 experts of 256 rows, 8 per token, in the Q4_K_M mix;
- ``q4km-1536``: a dense Q4_K_M mix at width 1,536, wider than any ladder model;
- ``q3km``: Q3_K (a type the ladder never measures: its kernel class is a stand-in's) with a Q6_K output;
- ``q5_1``: Q5_1, another type the ladder never measures.

Each is measured (``-p``, ``-n``, ``-r``; not stored) and predicted by ``app.predict.answer.answer`` for the same
test, as ``gguf-bench predict`` would; the table gives shape, phase, predicted, band, measured median, error and
whether the measurement is inside the band. The load average is printed before and after. Exit 0 when every
decode (and, with ``--prefill``, every prefill) is inside its band.

    python benchmarks/fit_beyond_ladder.py [--data-dir DIR] [--no-calibrate] [--shapes a,b] [-p 64] [-n 32] [-r 3]

``--data-dir`` keeps the calibration and models (default: a temporary folder, removed afterwards);
``--no-calibrate`` reuses the fit already in ``--data-dir``. Never the user's own data dir.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.calibrate.synth_models import SynthShape, write_synth_model  # noqa: E402
from app.results.row_types import ResultRow  # noqa: E402

#: A Q4_K_M-like mix: attn_v and ffn_down (dense or experts) Q6_K over a Q4_K body (llama.cpp's preset gives them
#: more bits in some layers; all of them here).
Q4_K_M_MIX: tuple[tuple[str, str], ...] = ((r"blk\.\d+\.(attn_v|ffn_down|ffn_down_exps)\.weight", "Q6_K"),)
HELD_OUT: dict[str, SynthShape] = {
    "vocab262k-tied": SynthShape(1024, 12, "Q4_K", arch="gemma", n_vocab=262144, output_type="Q6_K",
                                 mix=Q4_K_M_MIX, file_type="Q4_K_M"),
    "vocab152k-q8": SynthShape(768, 12, "Q8_0", n_vocab=152064, gqa=3),
    "moe-32x4-q8": SynthShape(1024, 8, "Q8_0", ff_ratio=0.5, n_expert=32, n_expert_used=4, embd_type="F16"),
    "moe-64x8-q4km": SynthShape(1024, 8, "Q4_K", ff_ratio=0.25, n_expert=64, n_expert_used=8, embd_type="F16",
                                output_type="Q6_K", mix=Q4_K_M_MIX, file_type="Q4_K_M"),
    "q4km-1536": SynthShape(1536, 10, "Q4_K", gqa=6, n_vocab=32000, output_type="Q6_K", mix=Q4_K_M_MIX,
                            file_type="Q4_K_M"),
    "q3km": SynthShape(1024, 16, "Q3_K", n_vocab=32000, output_type="Q6_K", file_type="Q3_K_M"),
    "q5_1": SynthShape(1024, 12, "Q5_1", n_vocab=32000),
}


@dataclass(frozen=True)
class Row:
    shape: str
    phase: str
    predicted: float | None
    low: float | None
    high: float | None
    measured: float | None
    kind: str = ""

    @property
    def inside(self) -> bool | None:
        if self.predicted is None or self.measured is None or self.low is None or self.high is None:
            return None
        return self.low <= self.measured <= self.high


def write_models(folder: Path, names: list[str]) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for name in names:
        path = folder / f"{name}.gguf"
        if not path.exists():
            write_synth_model(path.with_suffix(".partial"), HELD_OUT[name]).rename(path)
        out[name] = path
    return out


def calibrate(quick: bool, threads: int) -> float:
    """Calibrate into the data dir (``threads``: 0, every CPU, as calibrate's default); the wall time in seconds."""
    from app.calibrate.ladder import CalibrateOptions, Calibration, residual_table

    options = replace(CalibrateOptions.quick() if quick else CalibrateOptions(), n_threads=threads, use_store=False)
    result = Calibration(options, store=None, progress=lambda m: print(f"calibrate: {m}", file=sys.stderr)).run()
    print(residual_table(result.fit))
    print(f"calibration: {result.n_ladder_points} ladder points, {result.wall_s:.0f} s wall time\n")
    return result.wall_s


def measure(paths: dict[str, Path], n_prompt: int, n_gen: int, repetitions: int, threads: int
            ) -> dict[str, dict[str, Any]]:
    from app.run.plan import TestSpec
    from app.run.session import SweepSession

    tests = [TestSpec(str(p), n_prompt=n_prompt, n_gen=n_gen, repetitions=repetitions, n_threads=threads)
             for p in paths.values()]
    rows = SweepSession(tests, store=None, token_ticks=False).run().rows
    return dict(zip(paths, rows, strict=True))


def median_of(row: ResultRow, phase: str) -> float | None:
    samples = (row.decode_samples_tps if phase == "decode" else row.prefill_samples_tps) or ()
    return statistics.median(float(x) for x in samples) if row.status == "ok" and samples else None


def predicted_rows(paths: dict[str, Path], measured: dict[str, dict[str, Any]], threads: int) -> list[Row]:
    """Each shape's expected decode and prefill from ``answer()`` (as ``gguf-bench predict``) for its row's test; at
    another thread count than a default run's (``answer()`` gives this machine's fit only there) the fit's own
    figure and band, which ``answer()`` would show."""
    from app.model.gguf_facts import read_model_facts
    from app.predict.answer import answer
    from app.predict.machine import Machine
    from app.predict.settings import PredictSettings

    machine = Machine.load(read_store=False)
    if machine.fit is None or machine.cpu is None:
        raise SystemExit(f"fit_beyond_ladder.py: no fit or CPU profile here ({'; '.join(machine.notes)})")
    out = []
    for name, path in paths.items():
        row, facts = measured[name], read_model_facts(path)
        settings = PredictSettings.from_row(row)
        if threads:
            fitted = machine.fit.expected(facts, settings)
            figures = [(p, f.value, f.low, f.high, "fit") if (f := fitted[p]) else (p, None, None, None, "")
                       for p in ("decode", "prefill")]
        else:
            got = answer(facts, machine.cpu, settings, machine, measured=False)
            figures = [(p, f.value, f.low, f.high, str(f.kind)) if f is not None and f.is_expected
                       else (p, None, None, None, "") for p, f in (("decode", got.decode), ("prefill", got.prefill))]
        out += [Row(name, p, v, lo, hi, median_of(row, p), kind) for p, v, lo, hi, kind in figures]
    return out


def print_table(rows: list[Row]) -> None:
    print(f"{'shape':<16} {'phase':<8} {'predicted':>10} {'band':>17} {'measured':>10} {'error':>8}  inside?")
    for r in rows:
        if r.predicted is None:
            print(f"{r.shape:<16} {r.phase:<8} {'none':>10} {'':>17} {r.measured or float('nan'):>10.1f}")
            continue
        err = f"{(r.predicted / r.measured - 1) * 100:+7.1f}%" if r.measured else "     n/a"
        band = f"{r.low:.1f}-{r.high:.1f}"
        print(f"{r.shape:<16} {r.phase:<8} {r.predicted:>10.1f} {band:>17} {r.measured or float('nan'):>10.1f} "
              f"{err}  {'yes' if r.inside else 'NO'}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", help="the data dir to calibrate into and keep (default: a temporary one)")
    ap.add_argument("--no-calibrate", action="store_true", help="use the fit already in --data-dir")
    ap.add_argument("--quick", action="store_true", help="the tiny ladder (proves the script works)")
    ap.add_argument("--shapes", default=",".join(HELD_OUT), help=f"of {', '.join(HELD_OUT)}")
    ap.add_argument("-p", "--n-prompt", type=int, default=64)
    ap.add_argument("-n", "--n-gen", type=int, default=32)
    ap.add_argument("-r", "--repetitions", type=int, default=3)
    ap.add_argument("-t", "--threads", type=int, default=0,
                    help="CPU threads of the ladder and the held-out tests (0: every CPU, a default run's)")
    ap.add_argument("--prefill", action="store_true", help="prefill must be inside its band too for exit 0")
    args = ap.parse_args()
    names = [s.strip() for s in args.shapes.split(",") if s.strip()]
    unknown = [n for n in names if n not in HELD_OUT]
    if unknown:
        raise SystemExit(f"unknown shapes: {', '.join(unknown)}")
    if args.no_calibrate and not args.data_dir:
        raise SystemExit("--no-calibrate needs --data-dir (the fit to reuse)")
    folder = Path(args.data_dir or tempfile.mkdtemp(prefix="fit-beyond-ladder-")).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    os.environ["GGUF_WORKBENCH_DATA_DIR"] = str(folder)  # before anything reads the data dir: never the user's
    try:
        print(f"data dir {folder}; load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        t0 = time.perf_counter()
        paths = write_models(folder / "held-out", names)
        print(f"wrote {len(paths)} held-out models in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
        if not args.no_calibrate:
            calibrate(args.quick, args.threads)
        measured = measure(paths, args.n_prompt, args.n_gen, args.repetitions, args.threads)
        rows = predicted_rows(paths, measured, args.threads)
        print_table(rows)
        phases = ("decode", "prefill") if args.prefill else ("decode",)
        judged = [r for r in rows if r.phase in phases]
        n_in = sum(bool(r.inside) for r in judged)
        print(f"\n{n_in} of {len(judged)} {'/'.join(phases)} figures inside their band; "
              f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        return 0 if n_in == len(judged) else 1
    finally:
        if not args.data_dir:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
