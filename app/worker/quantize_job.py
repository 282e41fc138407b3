"""The worker's quantize job: each output written as ``.part`` by llama.cpp, renamed when complete.

Events: TestStarted per output, JobProgress per tensor (llama.cpp's own per-tensor log line), then TestFinished
(the output's row) or TestFailed, and SweepFinished. A cancel (SIGUSR1) stops before the next output; the parent
kills the worker shortly after and removes the ``.part`` file of the output under way, so no half-written file
ever has the final name.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from app.model.lineage import KEY_QUANTIZED_FROM, KEY_REQUANTIZED_FROM
from app.results.fields import RowStatus
from app.results.row_types import QuantizeRow
from app.run.events import (
    Event,
    FailureKind,
    JobItem,
    JobProgress,
    SweepFinished,
    TestFailed,
    TestFinished,
    TestStarted,
)

Emit = Callable[[Event], None]
#: At most one progress event per this many seconds (and always the last tensor).
PROGRESS_EVERY_S = 0.1


def _now() -> int:
    return time.perf_counter_ns()


class QuantizeJob:
    """Writes the job's outputs one after another; ``request_cancel`` (from the signal handler) stops between them."""

    def __init__(self, job: dict[str, Any], emit: Emit) -> None:
        from engines.llama_cpp_quantize import QuantizeError, quantize_file  # the worker owns the native library

        self._quantize = quantize_file
        self._error = QuantizeError
        self.items: list[dict[str, Any]] = list(job["items"])
        self.run_id = str(job.get("run_id", ""))
        self.n_threads = int(job.get("n_threads", 0))
        self.emit = emit
        self.cancel_requested = False

    def request_cancel(self) -> None:
        self.cancel_requested = True

    def run(self) -> int:
        n_ok = n_failed = 0
        for index, item in enumerate(self.items):
            if self.cancel_requested:
                break
            if self.one(index, item):
                n_ok += 1
            else:
                n_failed += 1
        self.emit(SweepFinished(t_ns=_now(), n_ok=n_ok, n_failed=n_failed, cancelled=self.cancel_requested))
        return 0 if n_failed == 0 else 1

    def one(self, index: int, item: dict[str, Any]) -> bool:
        self.emit(TestStarted(t_ns=_now(), test_index=index, test=JobItem(item)))
        row = QuantizeRow(run_id=self.run_id, output_index=index, model_path=item["dst"],
                          model_filename=os.path.basename(item["dst"]), type=item["type"], source_path=item["src"],
                          **_lineage_columns(item.get("metadata", {})))
        last = [0.0]

        def on_tensor(done: int, total: int, name: str) -> None:
            now = time.monotonic()
            if now - last[0] >= PROGRESS_EVERY_S or done == total:
                last[0] = now
                self.emit(JobProgress(t_ns=_now(), item_index=index, done=done, total=total, label=name))

        t0 = time.perf_counter()
        try:
            self._quantize(item["src"], item["part"], item["type"], allow_requantize=bool(item["allow_requantize"]),
                           n_threads=self.n_threads, metadata=item.get("metadata") or {}, on_tensor=on_tensor)
            os.replace(item["part"], item["dst"])
        except (self._error, OSError, ValueError) as e:
            _remove(item["part"])
            row = row.replace(status=RowStatus.FAILED, error=str(e), elapsed_s=round(time.perf_counter() - t0, 3))
            self.emit(TestFailed(t_ns=_now(), test_index=index, reason=str(e), row=row, kind=FailureKind.ENGINE_ERROR))
            return False
        row = row.replace(status=RowStatus.OK, error="", elapsed_s=round(time.perf_counter() - t0, 3))
        self.emit(TestFinished(t_ns=_now(), test_index=index, row=row))
        return True


def _lineage_columns(metadata: dict[str, str]) -> dict[str, str]:
    return {"source_file_type": metadata.get(KEY_QUANTIZED_FROM, ""),
            "requantized_from": metadata.get(KEY_REQUANTIZED_FROM, "")}


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
