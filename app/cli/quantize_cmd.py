"""``gguf-bench quantize``: write quantized variants of a GGUF file with llama.cpp's quantizer, in the worker.

Progress (per tensor) on stderr; a table of the outputs on stdout or ``--out``. Ctrl+C stops: the outputs already
written stay, the one under way is removed. Exit 0 all written, 1 some failed, 2 a user error, 130 cancelled.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from typing import Any

from app.cli.arg_types import check_threads
from app.cli.errors import EXIT_CANCELLED, EXIT_OK, EXIT_TESTS_FAILED, UserError
from app.cli.output import check_output_path, write_results
from app.cli.progress import write_progress
from app.cli.run_cmd import _stop_on_signals
from app.quantize.plan import DEFAULT_TYPES, QUANT_TYPE_NAMES, QuantizeSetupError, parse_types, plan_quantize
from app.quantize.session import QUANTIZE_COLUMNS, QuantizeSession, progress_line
from app.results import export
from app.results.fields import RowStatus
from app.results.row_types import Row
from app.run.events import Event, JobProgress, TestFailed, TestFinished
from app.run.job_client import new_job_log

OUTPUT_FORMATS = ("md", "csv", "json", "jsonl")


def add_quantize_parser(sub: Any) -> None:
    """Register ``gguf-bench quantize`` on the subcommand parsers ``sub``."""
    p = sub.add_parser("quantize", help="write quantized variants of a GGUF file (llama.cpp's quantizer)")
    p.add_argument("-m", "--model", required=True, help="source GGUF file (F16/BF16/F32; a quantized one needs "
                                                        "--allow-requantize)")
    p.add_argument("--types", default=",".join(DEFAULT_TYPES),
                   help=f"comma-separated target types (default {','.join(DEFAULT_TYPES)}; valid: "
                        f"{', '.join(QUANT_TYPE_NAMES)})")
    p.add_argument("--out", dest="out_dir", required=True, help="folder for the outputs (created if missing)")
    p.add_argument("--allow-requantize", action="store_true",
                   help="quantize an already quantized source (quality loss on top of its own; the outputs record "
                        "requantized_from)")
    p.add_argument("--force", action="store_true", help="overwrite outputs that already exist")
    p.add_argument("-t", "--threads", type=int, default=0, help="quantizing threads (default: all)")
    p.add_argument("-o", "--output", choices=OUTPUT_FORMATS, default="md", help="the outputs table's format")
    p.add_argument("--table-out", help="write the outputs table to this file instead of stdout")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=cmd_quantize)


def render_rows(typed: Sequence[Row], fmt: str, columns: tuple[str, ...]) -> str:
    """Rows of a non-sweep command in ``fmt``, ``columns`` first (the speed rows' cell rules)."""
    rows = [r.to_mapping() for r in typed]  # where rows leave as text
    if fmt == "csv":
        return export.to_csv(rows, list(columns) + sorted({k for r in rows for k in r} - set(columns)))
    if fmt == "md":
        return export.to_markdown(rows, columns[:11])
    ordered = [{k: r[k] for k in (*columns, *sorted(set(r) - set(columns))) if k in r} for r in rows]
    return export.to_json(ordered) if fmt == "json" else export.to_jsonl(ordered)


class FileProgress:
    """Per-tensor progress on one stderr line (a line per finished output when stderr is not a terminal)."""

    def __init__(self, session: QuantizeSession, enabled: bool) -> None:
        self.session = session
        self.enabled = enabled
        self.tty = sys.stderr.isatty()
        self.t0 = time.monotonic()

    def __call__(self, ev: Event) -> None:
        if not self.enabled and not isinstance(ev, TestFailed):
            return
        n = len(self.session.items)
        if isinstance(ev, JobProgress) and self.tty:
            write_progress(progress_line(ev, self.session.items, time.monotonic() - self.t0), final=False, tty=True)
        elif isinstance(ev, TestFinished):
            r = self.session.rows[-1]  # the event's row with the output's header facts added
            self._final(f"[{ev.test_index + 1}/{n}] wrote {r.model_filename} ({r.file_type or '?'}, "
                        f"{r.bits_per_weight or 0:.2f} bits/weight) in {r.elapsed_s or 0:.1f} s")
        elif isinstance(ev, TestFailed):
            self._final(f"[{ev.test_index + 1}/{n}] FAILED: {ev.reason}")
        if not isinstance(ev, JobProgress):
            self.t0 = time.monotonic()

    def _final(self, text: str) -> None:
        write_progress(text, final=True, tty=self.tty)


def cmd_quantize(args: argparse.Namespace) -> int:
    check_threads(args.threads)
    sources = [args.model] if isinstance(args.model, str) else list(args.model or [])
    if args.table_out:  # before the plan creates the --out folder: a refused command leaves nothing behind
        check_output_path(args.table_out, "--table-out", None, sources)
    try:
        items = plan_quantize(args.model, parse_types(args.types), args.out_dir,
                              allow_requantize=args.allow_requantize, force=args.force)
    except QuantizeSetupError as e:
        raise UserError(str(e)) from None
    if args.table_out:
        check_output_path(args.table_out, "--table-out", None, [*sources, *(item.dst for item in items)])
    run_id, log_path = new_job_log()
    session = QuantizeSession(items, run_id, n_threads=args.threads, log_path=log_path)
    _stop_on_signals(session.cancel)  # Ctrl+C: the worker is killed, what it finished is kept
    rows = session.run(FileProgress(session, not args.quiet))
    if session.removed and not args.quiet:
        print(f"gguf-bench: removed {len(session.removed)} .part file(s) a killed quantize left behind",
              file=sys.stderr)
    write_results(render_rows(rows, args.output, QUANTIZE_COLUMNS), args.table_out, "--table-out")
    if session.cancelled:
        print(f"gguf-bench: cancelled; {sum(r.status == RowStatus.OK for r in rows)} outputs kept", file=sys.stderr)
        return EXIT_CANCELLED
    return EXIT_OK if all(r.status == RowStatus.OK for r in rows) else EXIT_TESTS_FAILED
