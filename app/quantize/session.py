"""Run a quantize plan in the worker process: progress per tensor, rows per output, cancel that leaves no half file.

The worker writes each output as ``<name>.part`` and renames it when complete. A cancel (Ctrl+C) or a worker that
dies removes the ``.part`` of the output under way; the outputs already finished stay.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.model.facts_cache import cached_facts
from app.model.gguf_facts import GGUFFileError
from app.model.lineage import UNQUANTIZED
from app.quantize.plan import QuantizeItem, remove_stale_parts
from app.results.fields import QUANTIZE_TABLE, RowStatus
from app.results.row_types import QuantizeRow
from app.run.events import Event, JobProgress, TestFailed, TestFinished, WorkerError
from app.run.job_client import JobClient

#: The quantize command's columns (CSV/markdown order): the quantize field table's.
QUANTIZE_COLUMNS: tuple[str, ...] = tuple(f.name for f in QUANTIZE_TABLE)

OnEvent = Callable[[Event], None]


def output_facts(path: str) -> dict[str, Any]:
    """The columns read back from a written output's header: file type, bits per weight, size."""
    try:
        facts = cached_facts(path)
    except GGUFFileError:
        return {}
    return {"file_type": facts.file_type, "bits_per_weight": round(facts.bits_per_weight, 4),
            "model_size": facts.file_bytes}


def _failed_row(item: QuantizeItem, index: int, run_id: str, error: str,
                status: str = RowStatus.FAILED) -> QuantizeRow:
    return QuantizeRow(run_id=run_id, output_index=index, model_path=item.dst, model_filename=Path(item.dst).name,
                       type=item.type_name, source_path=item.src, status=status, error=error)


class QuantizeSession:
    """One ``quantize`` command: iterate the worker's events into rows; ``cancel`` from another thread or Ctrl+C."""

    def __init__(self, items: list[QuantizeItem], run_id: str, *, n_threads: int = 0,
                 log_path: str | Path | None = None) -> None:
        self.items = items
        self.run_id = run_id
        self.client = JobClient({"kind": "quantize", "run_id": run_id, "n_threads": n_threads,
                                 "items": [i.to_dict() for i in items]}, log_path=log_path)
        self.rows: list[QuantizeRow] = []
        self.cancelled = False
        self.worker_error = ""
        self.removed: list[Path] = []  # leftovers of killed runs removed before this one started

    def cancel(self) -> None:
        self.cancelled = True
        self.client.cancel(grace_s=0)

    def run(self, on_event: OnEvent | None = None) -> list[QuantizeRow]:
        """The outputs' rows in order (finished, failed, and those not reached when cancelled or the worker died).
        First, the ``.part`` files a killed quantize left in the output folders are removed (:attr:`removed`)."""
        for folder in dict.fromkeys(str(Path(item.dst).parent) for item in self.items):
            self.removed += remove_stale_parts(folder)
        try:
            if not self.client.pump(self._handle, on_event):
                self.cancelled = True
        finally:
            self._cleanup()
        return self.rows

    def _handle(self, event: Event) -> None:
        if isinstance(event, TestFinished) and isinstance(event.row, QuantizeRow):
            row = event.row.replace(**output_facts(event.row.model_path or ""))
            self.rows.append(row.replace(reference_is_dequantized=bool(row.requantized_from)
                                         and row.file_type in UNQUANTIZED))
        elif isinstance(event, TestFailed) and isinstance(event.row, QuantizeRow):
            self.rows.append(event.row)
        elif isinstance(event, WorkerError):
            self.worker_error = event.message

    def _cleanup(self) -> None:
        """Remove the half-written output of a cancelled or dead worker; rows for the outputs not written."""
        done = {r.output_index for r in self.rows}
        for index, item in enumerate(self.items):
            if index in done:
                continue
            try:  # the output under way (its start may not have been read yet when the worker was stopped)
                os.unlink(item.part)
            except OSError:
                pass
            if self.cancelled:
                self.rows.append(_failed_row(item, index, self.run_id, "cancelled", status=RowStatus.CANCELLED))
            else:
                self.rows.append(_failed_row(item, index, self.run_id, self.worker_error or "worker stopped"))


def progress_line(event: JobProgress, items: list[QuantizeItem], elapsed_s: float) -> str:
    """``[2/7] q6_k  SmolLM2.Q6_K.gguf  tensor 120/272  3.1 s``."""
    item = items[event.item_index]
    return (f"[{event.item_index + 1}/{len(items)}] {item.type_name:<7} {Path(item.dst).name}  "
            f"tensor {event.done}/{event.total}  {elapsed_s:.1f} s")
