"""``gguf-bench quality``: perplexity, KL divergence and same-top-token rate of GGUF files against a reference.

Progress (per chunk) on stderr; the table on stdout or ``--out``; every file's row is stored as it finishes, so
Ctrl+C keeps the files already scored. Exit 0 all scored, 1 some failed, 2 a user error, 130 cancelled.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from app.cli.arg_types import check_threads
from app.cli.errors import EXIT_CANCELLED, EXIT_OK, EXIT_TESTS_FAILED, UserError, print_line
from app.cli.output import check_output_path, write_results
from app.cli.progress import write_progress
from app.cli.run_cmd import _stop_on_signals
from app.quality.plan import DEFAULT_N_CTX, DEFAULT_N_TOKENS, QualityPlan, QualitySetupError, plan_quality
from app.quality.session import QualitySession, progress_text
from app.results.fields import RowStatus
from app.results.quality_store import QUALITY_FORMATS, render_quality
from app.results.row_types import QualityRow
from app.results.store import ResultStore
from app.run.events import Event, JobProgress, TestFailed, TestFinished
from app.run.job_client import new_job_log


def add_quality_parser(sub: Any) -> None:
    """Register ``gguf-bench quality`` on the subcommand parsers ``sub``."""
    p = sub.add_parser("quality", help="perplexity and KL divergence of GGUF files against a reference")
    p.add_argument("-m", "--model", action="append", required=True,
                   help="GGUF file (repeat: the reference and the files to compare)")
    p.add_argument("--ref", help="the reference file (default: the file with the most bits per weight)")
    p.add_argument("--text", help="UTF-8 text file to score (default: the Python documentation shipped with Python)")
    p.add_argument("--tokens", type=int, default=DEFAULT_N_TOKENS,
                   help=f"token budget per file: whole chunks of --ctx tokens (default {DEFAULT_N_TOKENS})")
    p.add_argument("--ctx", type=int, default=DEFAULT_N_CTX,
                   help=f"chunk length in tokens; the second half of each is scored (default {DEFAULT_N_CTX})")
    p.add_argument("-t", "--threads", type=int, default=0, help="threads (default: all)")
    p.add_argument("-o", "--output", choices=QUALITY_FORMATS, default="md")
    p.add_argument("--out", help="write the table to this file instead of stdout")
    p.add_argument("--no-store", action="store_true", help="do not save to the results store")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=cmd_quality)


class ChunkProgress:
    """Per-chunk progress on one stderr line; a line per finished file."""

    def __init__(self, plan: QualityPlan, session: QualitySession, enabled: bool) -> None:
        self.plan, self.session, self.enabled = plan, session, enabled
        self.tty = sys.stderr.isatty()
        self.n_done = 0

    def __call__(self, ev: Event) -> None:
        if isinstance(ev, JobProgress):
            if self.enabled and self.tty:
                write_progress(progress_text(ev, self.plan, self.n_done), final=False, tty=True)
            return
        if not isinstance(ev, (TestFinished, TestFailed)):
            return
        self.n_done += 1
        if not isinstance(ev.row, QualityRow) or ev.row.model_index is None:
            raise ValueError(f"a quality job's {ev.type} event carries a {ev.row.KIND} row without a model index")
        r = self.session.rows[ev.row.model_index]
        if isinstance(ev, TestFailed):
            text = f"FAILED: {ev.reason}"
        else:
            text = (f"ppl {r.ppl:.3f} ± {r.ppl_err:.3f}, mean KLD {r.mean_kld:.5f}, "
                    f"same top {100 * (r.same_top_rate or 0.0):.1f}%, {r.tokens_per_s} tok/s")
        if self.enabled or isinstance(ev, TestFailed):
            write_progress(f"[{self.n_done}/{len(self.plan.models)}] {r.model_filename}: {text}", final=True,
                           tty=self.tty)


def cmd_quality(args: argparse.Namespace) -> int:
    check_threads(args.threads)
    try:
        plan = plan_quality(args.model, ref=args.ref, text=args.text, n_tokens=args.tokens, n_ctx=args.ctx,
                            n_threads=args.threads)
    except QualitySetupError as e:
        raise UserError(str(e)) from None
    if args.out:
        check_output_path(args.out, "--out", None, [*plan.models, plan.text_source])
    run_id, log_path = new_job_log()
    store = None if args.no_store else ResultStore.recover(getattr(args, "store", None))
    print_line(f"reference: {plan.reference} ({plan.facts[plan.reference_index].file_type}); "
               f"text: {plan.text_source}; {plan.n_tokens // plan.n_ctx} chunks of {plan.n_ctx} tokens")
    session = QualitySession(plan, run_id, store=store, log_path=log_path)
    _stop_on_signals(session.cancel)  # Ctrl+C: the worker is killed, the files already scored are kept
    try:
        rows = session.run(ChunkProgress(plan, session, not args.quiet))
        if session.removed and not args.quiet:
            print(f"gguf-bench: removed {len(session.removed)} temporary folder(s) a killed quality run left behind",
                  file=sys.stderr)
    finally:
        if store is not None:
            store.close()
    write_results(render_quality(rows, args.output), args.out)
    for i, r in enumerate(rows):  # files no event reported on (the worker died first): why, as for the others
        if i not in session.rows and r.status == RowStatus.FAILED:
            print(f"gguf-bench: {r.model_filename}: FAILED: {r.error}", file=sys.stderr)
    if session.cancelled:
        print(f"gguf-bench: cancelled; {sum(r.status == RowStatus.OK for r in rows)} files scored and kept",
              file=sys.stderr)
        return EXIT_CANCELLED
    return EXIT_OK if all(r.status == RowStatus.OK for r in rows) else EXIT_TESTS_FAILED
