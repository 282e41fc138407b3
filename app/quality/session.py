"""Run a quality plan in the worker: rows per file as they finish, each stored at once; cancel keeps them.

The worker gets the text as a file and a temporary folder for the reference's log-probabilities; both are
removed here when the run ends, however it ends (the worker may have been killed).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from app.paths import remove_leftovers
from app.quality.plan import QualityPlan
from app.results.fields import RowStatus
from app.results.quality_store import save_quality_rows
from app.results.row_types import QualityRow
from app.results.store import ResultStore, now_iso
from app.run.events import Event, JobProgress, TestFailed, TestFinished, WorkerError
from app.run.job_client import JobClient
from app.telemetry import repack_guard

OnEvent = Callable[[Event], None]
#: The temporary folder of a run: ``gguf-quality-<pid>-<random>`` in the temporary dir (tens of MB of the reference's
#: log-probabilities); one whose process is gone (killed) is removed by the next run. Older runs named it without
#: the pid: removed once a day old.
TMP_PREFIX = "gguf-quality-"
TMP_NAME = re.compile(rf"^{TMP_PREFIX}(\d+)-")
OLD_TMP_NAME = re.compile(rf"^{TMP_PREFIX}(?!\d+-)")


class QualitySession:
    """One ``quality`` command: the worker's rows, completed with the files' columns and stored as they arrive."""

    def __init__(self, plan: QualityPlan, run_id: str, *, store: ResultStore | None = None,
                 log_path: str | Path | None = None) -> None:
        self.plan = plan
        self.run_id = run_id
        self.store = store
        self.log_path = log_path
        self.rows: dict[int, QualityRow] = {}
        self.cancelled = False
        self.worker_error = ""
        self.client: JobClient | None = None
        self.removed: list[Path] = []  # leftovers of killed runs removed before this one started

    def cancel(self) -> None:
        self.cancelled = True
        if self.client is not None:
            self.client.cancel(grace_s=0)

    def run(self, on_event: OnEvent | None = None) -> list[QualityRow]:
        """Every file's row in the order given (those not reached say cancelled, or why the worker stopped)."""
        self.removed = remove_leftovers(Path(tempfile.gettempdir()), TMP_NAME, unowned=OLD_TMP_NAME)
        tmp = Path(tempfile.mkdtemp(prefix=f"{TMP_PREFIX}{os.getpid()}-"))  # whose it is: see remove_leftovers
        try:
            text_path = tmp / "text.txt"
            text_path.write_text(self.plan.text(), encoding="utf-8")
            self.client = JobClient({
                "kind": "quality", "run_id": self.run_id, "models": list(self.plan.models),
                "reference_index": self.plan.reference_index, "text_path": str(text_path),
                "n_tokens": self.plan.n_tokens, "n_ctx": self.plan.n_ctx, "n_threads": self.plan.n_threads,
                # the repack crash guard's default: scoring runs the same matmuls a sweep does
                "repack": repack_guard.ensure_verdict()[0].default_repack,
                "tmp_dir": str(tmp)}, log_path=self.log_path)
            if self.cancelled:  # cancelled while the text was being written
                return [self._missing_row(i) for i in range(len(self.plan.models))]
            if not self.client.pump(self._handle, on_event):
                self.cancelled = True
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return [self.rows.get(i) or self._missing_row(i) for i in range(len(self.plan.models))]

    def _handle(self, event: Event) -> None:
        if isinstance(event, (TestFinished, TestFailed)) and isinstance(event.row, QualityRow):
            index = event.row.model_index if event.row.model_index is not None else event.test_index
            row = QualityRow(run_id=self.run_id, model_index=index, **self.plan.file_columns(index))
            row = row.merged(event.row).replace(created_at=now_iso())
            self.rows[index] = row
            if self.store is not None:
                save_quality_rows(self.store, [row])
        elif isinstance(event, WorkerError):
            self.worker_error = event.message

    def _changed_file(self) -> str:
        """One line naming a file of the plan that changed size or vanished since it was read (a reference truncated
        mid-run kills the worker reading it with SIGBUS), or ""."""
        for path, facts in zip(self.plan.models, self.plan.facts, strict=True):
            try:
                size = os.stat(path).st_size
            except OSError:
                return f"{Path(path).name} vanished during the run"
            if size != facts.file_bytes:
                return f"{Path(path).name} changed during the run ({facts.file_bytes:,} bytes, now {size:,})"
        return ""

    def _missing_row(self, index: int) -> QualityRow:
        if self.cancelled:
            status, error = RowStatus.CANCELLED, "cancelled"
        else:
            changed = self._changed_file()
            error = self.worker_error or "worker stopped"
            status, error = RowStatus.FAILED, f"{changed}: {error}" if changed else error
        return QualityRow(run_id=self.run_id, model_index=index, **self.plan.file_columns(index), status=status,
                          error=error, created_at=now_iso())


def progress_text(event: JobProgress, plan: QualityPlan, n_done: int) -> str:
    """``[2/7] SmolLM2.Q6_K.gguf  chunk 3/4``."""
    name = Path(plan.models[event.item_index]).name
    return f"[{n_done + 1}/{len(plan.models)}] {name}  chunk {event.done}/{event.total}"
