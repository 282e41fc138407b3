"""A worker process running one job that is not a sweep of timed tests (quantize, quality)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.paths import check_writable_data_dir
from app.results.store import new_run_id
from app.run.client import WorkerClient
from app.run.events import Event


class JobClient(WorkerClient):
    """A worker running one non-sweep job (``kind`` with its own fields) instead of a list of tests."""

    def __init__(self, job: dict[str, Any], *, log_path: str | Path | None = None) -> None:
        super().__init__([], run_id=str(job.get("run_id", "")), log_path=log_path)
        self.job = job

    def job_document(self) -> dict[str, object]:
        return {**self.job, "log_path": str(self.log_path) if self.log_path else None}

    def pump(self, handle: Callable[[Event], None], on_event: Callable[[Event], None] | None = None) -> bool:
        """Each event to ``handle``, then ``on_event``, until the worker ends; False when interrupted (the worker is
        then killed). The worker is always reaped."""
        try:
            for event in self.events():
                handle(event)
                if on_event is not None:
                    on_event(event)
        except KeyboardInterrupt:
            self.cancel(grace_s=0)
            return False
        finally:
            self.close()
        return True


def new_job_log() -> tuple[str, Path]:
    """A new run id and the path of its worker's log, after checking the data dir can take it (DataDirError, one
    line, if not): what the CLI and the window's quantize and quality jobs start a worker with."""
    run_id = new_run_id()
    log_path = check_writable_data_dir() / "logs" / f"worker-{run_id}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    return run_id, log_path
