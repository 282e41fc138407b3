"""A sweep session: runs tests through worker processes, keeps the rows, commits each to the store at once.

The CLI and the GUI both drive sweeps through this class and read the same events. If the worker dies
mid-test (a native crash, the OOM killer), that test becomes a failed row and a fresh worker goes on
with the rest; on cancel the worker is killed and what finished is kept.
"""

from __future__ import annotations

import dataclasses
import gzip
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from app.paths import data_dir
from app.results.store import ResultStore, new_run_id
from app.run.client import WorkerClient
from app.run.events import (
    Event,
    FailureKind,
    Notice,
    SweepStarted,
    TestFailed,
    TestFinished,
    TestStarted,
    WorkerError,
)
from app.run.plan import TestSpec
from app.run.rows import base_row
from app.telemetry.machine import scan_machine

EventHandler = Callable[[Event], None]


@dataclass(frozen=True)
class UpfrontFailure:
    """A test that fails before any worker starts (its model file cannot be read): recorded as a failed row."""

    test: TestSpec
    reason: str
    kind: FailureKind


@dataclass
class SweepOutcome:
    run_id: str
    status: str  # finished | cancelled | crashed
    rows: list[dict[str, Any]] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def n_failed(self) -> int:
        return sum(1 for r in self.rows if r.get("status") != "ok")


class SweepSession:
    """Run ``tests`` in order; ``on_event`` sees every event (from the calling thread)."""

    def __init__(self, tests: list[TestSpec], *, store: ResultStore | None = None, sweep_name: str = "",
                 command: str = "", machine: dict[str, Any] | None = None, token_ticks: bool = True,
                 extra_row: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
                 failed_upfront: list[UpfrontFailure] | None = None) -> None:
        self.tests = tests
        self.failed_upfront = list(failed_upfront or [])
        self.store = store
        self.run_id = new_run_id()
        self.sweep_name = sweep_name
        self.command = command
        self.machine = machine if machine is not None else scan_machine().run_facts()
        self.token_ticks = token_ticks
        self.extra_row = extra_row
        self.rows: dict[int, dict[str, Any]] = {}
        self._client: WorkerClient | None = None
        self._cancel = threading.Event()
        self.log_path = data_dir() / "logs" / f"worker-{self.run_id}.log"

    @property
    def worker_pid(self) -> int | None:
        """The running worker's process id (None between workers)."""
        client = self._client
        return client.pid if client is not None else None

    def cancel(self) -> None:
        """Safe from any thread: kill the worker; finished rows stay."""
        self._cancel.set()
        if self._client is not None:
            self._client.cancel()

    def _record(self, row: dict[str, Any]) -> dict[str, Any]:
        """Complete a row (run id, machine, predictions), keep it and commit it; return the recorded row."""
        row = dict(row)
        row["run_id"] = self.run_id
        row.setdefault("cpu_info", self.machine.get("cpu_model", ""))
        row.setdefault("gpu_info", self.machine.get("gpu_info", ""))
        if self.extra_row is not None:
            row.update(self.extra_row(row))
        self.rows[int(row["test_index"])] = row
        if self.store is not None:
            self.store.add_result(self.run_id, row)
        return row

    def run(self, on_event: EventHandler | None = None) -> SweepOutcome:
        outcome = SweepOutcome(run_id=self.run_id, status="finished")
        if self.store is not None:
            all_tests = self.tests + [f.test for f in self.failed_upfront]
            self.store.begin_run(self.run_id, sweep_name=self.sweep_name, command=self.command,
                                 tests=[t.to_dict() for t in all_tests], machine=self.machine)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        recorder = self._open_event_log()

        def record_and_forward(ev: Event) -> None:
            if recorder is not None:
                recorder.write(ev.to_json() + "\n")
                if isinstance(ev, (TestFinished, TestFailed)):
                    recorder.flush()
            if on_event is not None:
                on_event(ev)

        try:
            self._run_workers(outcome, record_and_forward)
        except KeyboardInterrupt:
            self.cancel()
        finally:
            self._record_upfront_failures(record_and_forward)
            if recorder is not None:
                recorder.close()
        if self._cancel.is_set():
            outcome.status = "cancelled"
        outcome.rows = [self.rows[i] for i in sorted(self.rows)]
        if self.store is not None:
            self.store.finish_run(self.run_id, outcome.status)
        return outcome

    def _record_upfront_failures(self, on_event: EventHandler) -> None:
        """Tests of unreadable models: failed rows numbered after the measured tests (as the CLI always did)."""
        for i, failure in enumerate(self.failed_upfront, start=len(self.tests)):
            row = base_row(failure.test, i, self.run_id)
            row.update(status="failed", error=failure.reason, error_kind=failure.kind)
            row = self._record(row)
            on_event(TestFailed(t_ns=0, test_index=i, reason=failure.reason, row=row, kind=failure.kind))

    def _open_event_log(self) -> gzip.GzipFile | None:
        """The run's event stream goes beside the store, so a past run re-opens with its per-token data."""
        if self.store is None:
            return None
        path = self.store.event_log_path(self.run_id)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            return gzip.open(path, "wt", encoding="utf-8")  # type: ignore[return-value]
        except OSError:
            return None  # the rows still go to the store

    def _run_workers(self, outcome: SweepOutcome, on_event: EventHandler | None) -> None:
        next_index = 0
        while next_index < len(self.tests) and not self._cancel.is_set():
            client = WorkerClient(self.tests[next_index:], self.run_id, first_index=next_index,
                                  token_ticks=self.token_ticks, log_path=self.log_path)
            self._client = client
            if self._cancel.is_set():
                break
            current: int | None = None
            started = False
            death: WorkerError | None = None
            for ev in client.events():
                if isinstance(ev, SweepStarted):
                    started = True
                    if self.store is not None and next_index == 0:
                        self.store.update_software(self.run_id, ev.software)
                elif isinstance(ev, TestStarted):
                    current = ev.test_index
                elif isinstance(ev, (TestFinished, TestFailed)):
                    ev = dataclasses.replace(ev, row=self._record(ev.row))  # listeners see the stored row
                    current = None
                    next_index = ev.test_index + 1
                elif isinstance(ev, Notice):
                    outcome.notices.append(ev.message)
                elif isinstance(ev, WorkerError):
                    death = ev
                if on_event is not None:
                    on_event(ev)
            self._client = None
            if death is None:
                next_index = len(self.tests)
                break
            if self._cancel.is_set():
                break
            outcome.errors.append(death.message)
            if not started:  # the worker cannot even start: trying again would fail the same way
                outcome.status = "crashed"
                break
            failed_index = current if current is not None else next_index
            if failed_index < len(self.tests):
                row = base_row(self.tests[failed_index], failed_index, self.run_id)
                row.update(status="failed", error=death.message, error_kind=death.kind)
                row = self._record(row)
                if on_event is not None:
                    on_event(TestFailed(t_ns=0, test_index=failed_index, reason=death.message, row=row,
                                        kind=death.kind))
            next_index = failed_index + 1
