"""A worker process running one job that is not a sweep of timed tests (quantize, quality)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from app.run.client import WorkerClient


class JobClient(WorkerClient):
    """A worker running one non-sweep job (``kind`` with its own fields) instead of a list of tests."""

    def __init__(self, job: dict[str, Any], *, log_path: str | Path | None = None) -> None:
        super().__init__([], run_id=str(job.get("run_id", "")), log_path=log_path)
        self.job = job

    def job_document(self) -> dict[str, object]:
        return {**self.job, "log_path": str(self.log_path) if self.log_path else None}
