"""Worker jobs other than a sweep of timed tests: ``quantize`` and ``quality``, chosen by the job's ``kind``."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from app.run.events import Event, FailureKind, WorkerError

Emit = Callable[[Event], None]


def _make_job(job: dict[str, Any], emit: Emit) -> Any:
    kind = job.get("kind")
    if kind == "quantize":
        from app.worker.quantize_job import QuantizeJob

        return QuantizeJob(job, emit)
    if kind == "quality":
        from app.worker.quality_job import QualityJob

        return QualityJob(job, emit)
    raise ValueError(f"unknown job kind {kind!r}")


def run_other_job(job: dict[str, Any], emit: Emit, cancel: Any = None) -> int:
    """Run one job; a job that cannot start (llama.cpp missing, a bad document) is a WorkerError event."""
    try:
        runner = _make_job(job, emit)
    except Exception as e:  # noqa: BLE001 - reported as an event, the worker cannot go on
        emit(WorkerError(t_ns=time.perf_counter_ns(), message=f"worker cannot start: {e}",
                         kind=FailureKind.WORKER_START))
        return 2
    if cancel is not None:
        cancel.attach(runner)
    return int(runner.run())
