"""``gguf-bench calibrate``: fit this machine's decode and prefill model, for expected figures of any model.

Writes a ladder of small synthetic models (several widths, depths and weight types), measures them through the
worker, adds this machine's stored runs, fits, saves the fit (per machine and llama.cpp build, the previous one kept
as .prev) and prints how well it fits. Progress on stderr. Exit 0 saved, 1 the fit failed, 130 cancelled.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import Any

from app.calibrate import FitError
from app.calibrate.ladder import CalibrateOptions, Calibration, CalibrationCancelled, residual_table
from app.calibrate.synth_models import WRITABLE_TYPES
from app.cli.arg_types import check_threads
from app.cli.errors import EXIT_CANCELLED, EXIT_OK, EXIT_TESTS_FAILED, UserError, print_line
from app.cli.json_docs import SCHEMA_VERSIONS, json_text
from app.results.store import ResultStore

#: The most repetitions per test and passes over the ladder a calibration takes (each is minutes of work already).
MAX_REPETITIONS, MAX_PASSES = 100, 20
HELP = "fit this machine's decode/prefill model from a ladder of synthetic models (about three minutes on 2 cores)"


def options_from_args(args: argparse.Namespace) -> CalibrateOptions:
    """The ladder asked for: --quick or the full one, narrowed by --types, with -t, -r, --passes and
    --no-store-runs (-t other than the default leaves the stored runs out)."""
    o = CalibrateOptions.quick() if args.quick else CalibrateOptions()
    if args.types:
        types = tuple(t.strip().upper() for t in args.types.split(",") if t.strip())
        unknown = [t for t in types if t not in WRITABLE_TYPES]
        if unknown or not types:
            raise UserError(f"--types: unknown weight type {', '.join(unknown) or '(none)'} "
                            f"(valid: {', '.join(WRITABLE_TYPES)})")
        o = dataclasses.replace(o, types=types)
    check_threads(args.threads or 0)
    if args.repetitions is not None:
        if not 1 <= args.repetitions <= MAX_REPETITIONS:
            raise UserError(f"-r must be between 1 and {MAX_REPETITIONS}")
        o = dataclasses.replace(o, repetitions=args.repetitions)
    if args.passes is not None:
        if not 1 <= args.passes <= MAX_PASSES:
            raise UserError(f"--passes must be between 1 and {MAX_PASSES}")
        o = dataclasses.replace(o, passes=args.passes)
    threads = max(args.threads or 0, 0)  # stored runs are of the default thread count: not mixed with another
    return dataclasses.replace(o, n_threads=threads, use_store=not args.no_store_runs and not threads)


def cmd_calibrate(args: argparse.Namespace) -> int:
    options = options_from_args(args)

    def progress(msg: str) -> None:
        if not args.quiet:
            print_line(f"calibrate: {msg}")

    with ResultStore.recover(args.store) as store:
        calibration = Calibration(options, store=store, progress=progress)
        try:
            result = calibration.run()
        except (CalibrationCancelled, KeyboardInterrupt):
            calibration.cancel()
            print("gguf-bench: calibration cancelled; the previous fit is unchanged", file=sys.stderr)
            return EXIT_CANCELLED
        except FitError as e:
            print_line(f"gguf-bench: calibration could not fit: {e}")
            return EXIT_TESTS_FAILED
        except OSError as e:  # a full disk or a read-only data dir: writing a ladder model or saving the fit
            where = f"{e.filename}: {e.strerror}" if e.filename and e.strerror else str(e)
            print_line(f"gguf-bench: calibration stopped: {where}; the previous fit is unchanged")
            return EXIT_TESTS_FAILED
    if args.json:
        doc = {"path": str(result.path), **result.fit.to_json_dict()}
        print(json_text(doc, SCHEMA_VERSIONS["calibrate"], indent=1))
        return EXIT_OK
    print(residual_table(result.fit))
    print(f"fit of {result.fit.cpu_info} with {result.fit.build}: {result.n_ladder_points} ladder points and "
          f"{result.n_store_points} stored runs, saved to {result.path}")
    return EXIT_OK


def add_calibrate_parser(sub: Any) -> None:
    """Register ``calibrate`` on the subcommand parsers of ``gguf-bench``."""
    p = sub.add_parser("calibrate", help=HELP, description=__doc__)
    p.add_argument("--quick", action="store_true", help="a tiny ladder (seconds; a rough fit, for tests)")
    p.add_argument("--types", help="weight types of the ladder, comma-separated (default "
                   "Q4_0,Q4_1,Q5_0,Q4_K,Q5_K,Q6_K,Q8_0,F16; Q8_0, else the first, runs every shape and depth)")
    p.add_argument("-t", "--threads", type=int, default=0, help="CPU threads (0: all, as run's default; "
                   "another count fits the ladder only)")
    p.add_argument("-r", "--repetitions", type=int, default=None, help="repetitions per test (default 3)")
    p.add_argument("--passes", type=int, default=None, help="passes over the whole ladder, each test's "
                   "repetitions pooled into one median (default 2; --quick 1)")
    p.add_argument("--no-store-runs", action="store_true", help="fit the ladder only, not the stored runs")
    p.add_argument("--json", action="store_true", help="print the saved fit as JSON")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=cmd_calibrate)
