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
from pathlib import Path
from typing import Any

from app.paths import data_dir
from app.results.fields import RowStatus
from app.results.row_types import ResultRow
from app.results.store import ResultStore, new_run_id
from app.run.client import CANCEL_GRACE_S, WorkerClient
from app.run.events import (
    Event,
    FailureKind,
    ModelLoaded,
    Notice,
    SweepStarted,
    TestFailed,
    TestFinished,
    TestStarted,
    WorkerError,
)
from app.run.params import REPACK_AUTO
from app.run.plan import TestSpec
from app.run.rows import base_row
from app.telemetry import repack_guard
from app.telemetry.machine import scan_machine
from engines.llama_log import crash_cause

#: Resolves ``--repack auto`` for a session: (this machine's default, the one line that says why, or "").
RepackDefault = Callable[[], tuple[int, str]]


def guarded_repack_default() -> tuple[int, str]:
    """The crash guard's default for ``--repack auto`` (probing this machine first if it was never checked)."""
    verdict, _probed = repack_guard.ensure_verdict()
    return verdict.default_repack, verdict.notice


def repack_crash_message(death_message: str, extra_buffers: list[str]) -> str:
    """A worker's death by a signal while the weights sat in extra buffers, said with its likely cause and the fix."""
    where = ", ".join(extra_buffers)
    return (f"{death_message} while the weights sat in llama.cpp's {where} buffer (repacked weights): a known "
            f"llama.cpp crash on some CPUs ({repack_guard.ISSUE}); run with --repack 0")

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
    rows: list[ResultRow] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def n_failed(self) -> int:
        return sum(1 for r in self.rows if r.status != RowStatus.OK)


class SweepSession:
    """Run ``tests`` in order; ``on_event`` sees every event (from the calling thread)."""

    def __init__(self, tests: list[TestSpec], *, store: ResultStore | None = None, sweep_name: str = "",
                 command: str = "", machine: dict[str, Any] | None = None, token_ticks: bool = True,
                 extra_row: Callable[[ResultRow], dict[str, Any]] | None = None,
                 failed_upfront: list[UpfrontFailure] | None = None, stall_timeout_s: float | None = None,
                 repack_default: RepackDefault | None = None) -> None:
        self.tests = tests
        self.failed_upfront = list(failed_upfront or [])
        self.store = store
        self.run_id = new_run_id()
        self.sweep_name = sweep_name
        self.command = command
        self.machine = machine if machine is not None else scan_machine().run_facts()
        self.token_ticks = token_ticks
        self.extra_row = extra_row
        self.stall_timeout_s = stall_timeout_s  # the watchdog's limit (None: app.run.client's default)
        self.repack_default = repack_default or guarded_repack_default
        self.rows: dict[int, ResultRow] = {}
        self._crashed_models: dict[tuple[Any, ...], WorkerError] = {}  # load key -> how loading it crashed
        self._client: WorkerClient | None = None
        self._cancel = threading.Event()
        self.log_path = data_dir() / "logs" / f"worker-{self.run_id}.log"

    @property
    def worker_pid(self) -> int | None:
        """The running worker's process id (None between workers)."""
        client = self._client
        return client.pid if client is not None else None

    def cancel(self, grace_s: float = CANCEL_GRACE_S) -> None:
        """Safe from any thread: stop the worker (it has ``grace_s`` to send a partial row); finished rows stay."""
        self._cancel.set()
        client = self._client
        if client is not None:
            client.cancel(grace_s)

    def _record(self, row: ResultRow) -> ResultRow:
        """Complete a row (run id, machine, predictions), keep it and commit it; return the recorded row."""
        row = row.replace(run_id=self.run_id)
        if not row.holds("cpu_info"):
            row = row.replace(cpu_info=self.machine.get("cpu_model", ""))
        if not row.holds("gpu_info"):
            row = row.replace(gpu_info=self.machine.get("gpu_info", ""))
        if self.extra_row is not None:  # predicted columns (and a prediction_error the table does not know)
            row = row.merged(ResultRow.from_mapping(self.extra_row(row)))
        self.rows[row.test_index if row.test_index is not None else -1] = row
        if self.store is not None:
            self.store.add_result(self.run_id, row)
        return row

    def _resolve_repack(self, outcome: SweepOutcome, on_event: EventHandler | None) -> None:
        """Give ``--repack auto`` tests this machine's default (the guard probes once per machine and build), so
        rows, the store and the worker see 0 or 1; one notice when that default is 0."""
        if not any(isinstance(t, TestSpec) and t.repack == REPACK_AUTO
                   for t in (*self.tests, *(f.test for f in self.failed_upfront))):
            return  # every test says 0 or 1 (or is a remote server's test)
        default, why = self.repack_default()
        self.tests = [t.with_repack_default(default) if isinstance(t, TestSpec) else t for t in self.tests]
        self.failed_upfront = [dataclasses.replace(f, test=f.test.with_repack_default(default))
                               for f in self.failed_upfront]
        if why:
            outcome.notices.append(why)
            if on_event is not None:
                on_event(Notice(t_ns=0, message=why))

    def run(self, on_event: EventHandler | None = None) -> SweepOutcome:
        outcome = SweepOutcome(run_id=self.run_id, status="finished")
        self._resolve_repack(outcome, on_event)
        if self.store is not None:
            all_tests = self.tests + [f.test for f in self.failed_upfront]
            self.store.begin_run(self.run_id, sweep_name=self.sweep_name, command=self.command,
                                 tests=[t.to_dict() for t in all_tests], machine=self.machine)
        try:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
        except OSError:
            pass  # the worker starts without its log (a full or read-only disk): said when it cannot start
        recorder = self._open_event_log()

        def record_and_forward(ev: Event) -> None:
            if recorder is not None:
                failed = recorder.write(ev, flush=isinstance(ev, (TestFinished, TestFailed)))
                if failed:  # a full disk: the log stops, once said; the sweep and its rows go on
                    outcome.notices.append(failed)
                    if on_event is not None:
                        on_event(Notice(t_ns=0, message=failed))
            if on_event is not None:
                on_event(ev)

        try:
            self._run_workers(outcome, record_and_forward)
        except KeyboardInterrupt:
            client = self._client
            self.cancel()
            if client is not None:
                client.close()  # interrupted mid-read: nobody is left to read a partial row; kill it now
        finally:
            self._record_upfront_failures(record_and_forward)
            if recorder is not None:
                recorder.close()
                if recorder.failed and recorder.failed not in outcome.notices:
                    outcome.notices.append(recorder.failed)
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
            row = self._record(row.replace(status=RowStatus.FAILED, error=failure.reason, error_kind=failure.kind))
            on_event(TestFailed(t_ns=0, test_index=i, reason=failure.reason, row=row, kind=failure.kind))

    def _open_event_log(self) -> EventLog | None:
        """The run's event stream goes beside the store, so a past run re-opens with its per-token data."""
        if self.store is None:
            return None
        return EventLog.open(self.store.event_log_path(self.run_id))

    def _run_workers(self, outcome: SweepOutcome, on_event: EventHandler | None) -> None:
        """Workers one after another: each runs the tests from the first not done up to a model that crashed one."""
        next_index = 0
        while next_index < len(self.tests) and not self._cancel.is_set():
            next_index = self._fail_crashed_models(next_index, on_event)
            end = next_index
            while end < len(self.tests) and self.tests[end].load_key() not in self._crashed_models:
                end += 1
            if end > next_index:
                next_index = self._one_worker(next_index, end, outcome, on_event)

    def _fail_crashed_models(self, index: int, on_event: EventHandler | None) -> int:
        """Tests of a model that crashed a worker while loading fail with that cause, without another crash."""
        while index < len(self.tests) and (cause := self._crashed_models.get(self.tests[index].load_key())):
            self._record_failure(index, cause, on_event)
            index += 1
        return index

    def _record_failure(self, index: int, death: WorkerError, on_event: EventHandler | None) -> None:
        row = base_row(self.tests[index], index, self.run_id)
        row = self._record(row.replace(status=RowStatus.FAILED, error=death.message, error_kind=death.kind))
        if on_event is not None:
            on_event(TestFailed(t_ns=0, test_index=index, reason=death.message, row=row, kind=death.kind))

    def _one_worker(self, first: int, end: int, outcome: SweepOutcome, on_event: EventHandler | None) -> int:
        """Run tests ``first``..``end`` in one worker; the index to go on from (``len(tests)`` to stop)."""
        client = WorkerClient(self.tests[first:end], self.run_id, first_index=first, token_ticks=self.token_ticks,
                              log_path=self.log_path, stall_timeout_s=self.stall_timeout_s)
        log_offset = _file_size(self.log_path)
        self._client = client
        if self._cancel.is_set():
            return len(self.tests)
        watch = _WorkerWatch(next_index=first)
        for ev in client.events():
            ev = self._take(ev, watch, outcome)
            if on_event is not None:
                on_event(ev)
        self._client = None
        death = watch.death
        if death is None:
            return end
        if self._cancel.is_set():
            return len(self.tests)
        death = self._with_crash_cause(death, log_offset)
        failed_index = watch.current if watch.current is not None else watch.next_index
        if (death.kind == FailureKind.WORKER_DIED and watch.extra_buffers and "killed by" in death.message
                and failed_index < end and watch.loaded_key == self.tests[failed_index].load_key()):
            death = dataclasses.replace(death, message=repack_crash_message(death.message, watch.extra_buffers))
        outcome.errors.append(death.message)
        if not watch.started:  # the worker cannot even start: trying again would fail the same way
            outcome.status = "crashed"
            return len(self.tests)
        if failed_index < end:
            key = self.tests[failed_index].load_key()
            crashed = death.kind in (FailureKind.WORKER_DIED, FailureKind.WORKER_KILLED)
            if crashed and watch.current is not None and key != watch.loaded_key:  # it died loading this model
                self._crashed_models[key] = death
            self._record_failure(failed_index, death, on_event)
        return failed_index + 1

    def _take(self, ev: Event, watch: _WorkerWatch, outcome: SweepOutcome) -> Event:
        """Follow one event of a worker (rows recorded as they come); the event as listeners should see it."""
        if isinstance(ev, SweepStarted):
            watch.started = True
            if self.store is not None and watch.next_index == 0:
                self.store.update_software(self.run_id, ev.software)
        elif isinstance(ev, TestStarted):
            watch.current = ev.test_index
        elif isinstance(ev, ModelLoaded) and watch.current is not None:
            watch.loaded_key = self.tests[watch.current].load_key()
            watch.extra_buffers = list(ev.extra_buffers)
        elif isinstance(ev, (TestFinished, TestFailed)) and isinstance(ev.row, ResultRow):
            ev = dataclasses.replace(ev, row=self._record(ev.row))  # listeners see the stored row
            watch.current = None
            watch.next_index = ev.test_index + 1
        elif isinstance(ev, Notice):
            outcome.notices.append(ev.message)
        elif isinstance(ev, WorkerError) and watch.death is None:
            watch.death = ev
        return ev

    def _with_crash_cause(self, death: WorkerError, log_offset: int) -> WorkerError:
        """A crashed worker's error with the cause llama.cpp or the C runtime wrote in its log, when there is one."""
        if death.kind not in (FailureKind.WORKER_DIED, FailureKind.WORKER_KILLED):
            return death
        try:
            with open(self.log_path, "rb") as f:
                f.seek(log_offset)
                text = f.read(4 << 20).decode("utf-8", "replace")
        except OSError:
            return death
        cause = crash_cause(text)
        return dataclasses.replace(death, message=f"{death.message}: {cause}") if cause else death


class EventLog:
    """A run's gzip JSONL event log that never stops the sweep: a write that fails (a full disk, a folder gone) ends
    the log, removes the half-written file (a cut gzip stream replays as nothing) and is said once."""

    def __init__(self, path: Path, raw: Any, gz: gzip.GzipFile) -> None:
        self.path, self._raw, self._gz = path, raw, gz
        self.failed = ""

    @classmethod
    def open(cls, path: Path) -> EventLog | None:
        """The log at ``path``, or None when it cannot even be created (the rows still go to the store)."""
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            raw = open(path, "wb")  # noqa: SIM115 - closed by close() or when a write fails
        except OSError:
            return None
        try:
            return cls(path, raw, gzip.GzipFile(fileobj=raw, mode="wb"))
        except OSError:
            raw.close()
            path.unlink(missing_ok=True)
            return None

    def write(self, ev: Event, flush: bool = False) -> str:
        """Append one event; "" while the log works, the one-line reason the first time it fails."""
        if self.failed:
            return ""
        try:
            self._gz.write((ev.to_json() + "\n").encode("utf-8"))
            if flush:
                self._gz.flush()
            return ""
        except OSError as e:
            self.failed = (f"{self.path}: the run's event log cannot be written ({e.strerror or e}); it is dropped "
                           "and the sweep goes on (its rows are kept, without per-token data)")
            self._abandon()
            return self.failed

    def _abandon(self) -> None:
        for close in (self._gz.close, self._raw.close):
            try:
                close()
            except OSError:
                pass
        try:
            self.path.unlink()
        except OSError:
            pass

    def close(self) -> None:
        if self.failed:
            return
        try:
            self._gz.close()
            self._raw.close()
        except OSError as e:
            self.failed = f"{self.path}: the run's event log cannot be written ({e.strerror or e})"
            self._abandon()


@dataclass
class _WorkerWatch:
    """What the session knows of the worker now running: where it is, and why it stopped."""

    next_index: int
    started: bool = False
    current: int | None = None
    loaded_key: tuple[Any, ...] | None = None
    extra_buffers: list[str] = field(default_factory=list)  # of the model loaded now (ModelLoaded)
    death: WorkerError | None = None


def _file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
