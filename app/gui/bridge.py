"""The bridge: runs a SweepSession on a background thread and hands its events to the GUI thread.

The sweep thread only appends events to a deque (thread-safe, no Qt call per event); the window's 10 Hz
timer takes them with :meth:`SweepBridge.drain`. One Qt signal, ``finished``, is emitted once per sweep.
Telemetry: a TelemetrySampler watches each worker process (its pid is known at the worker's SweepStarted)
and its readings enter the same queue as ``TelemetrySample`` events, on the same clock as the worker's events.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Signal

from app.core import events as ev
from app.core.plan import TestSpec
from app.core.session import SweepOutcome, SweepSession
from app.core.store import ResultStore

TELEMETRY_INTERVAL_S = 0.2


def worker_pid(session: SweepSession) -> int | None:
    """The running worker's pid (SweepSession exposes no public accessor yet)."""
    pid = getattr(session, "worker_pid", None)
    if isinstance(pid, int):
        return pid
    client = getattr(session, "_client", None)
    return getattr(client, "pid", None)


class SweepBridge(QObject):
    """One sweep at a time: :meth:`start`, :meth:`drain` from a timer, :meth:`cancel` any time."""

    #: SweepOutcome when the sweep ended (finished, cancelled or crashed), or a str when it could not run.
    finished = Signal(object)

    def __init__(self, parent: QObject | None = None, *, store_path: str | Path | None = None,
                 telemetry: bool = True, telemetry_interval_s: float = TELEMETRY_INTERVAL_S) -> None:
        super().__init__(parent)
        self.store_path = store_path
        self.telemetry = telemetry
        self.telemetry_interval_s = telemetry_interval_s
        self._queue: deque[ev.Event] = deque()
        self._thread: threading.Thread | None = None
        self._session: SweepSession | None = None
        self._lock = threading.Lock()
        self._cancel = threading.Event()
        self._sampler: Any = None
        self.before_run: Callable[[], None] | None = None  # e.g. wait for the CPU probe to finish
        self.run_id = ""

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def current_worker_pid(self) -> int | None:
        with self._lock:
            return worker_pid(self._session) if self._session is not None else None

    def start(self, tests: list[TestSpec], *, sweep_name: str = "", command: str = "gguf-workbench") -> None:
        if self.running:
            raise RuntimeError("a sweep is already running")
        self._queue.clear()
        self._cancel.clear()
        self.run_id = ""
        self._thread = threading.Thread(target=self._run, args=(list(tests), sweep_name, command),
                                        name="sweep", daemon=True)
        self._thread.start()

    def cancel(self) -> None:
        """Kill the worker (from the GUI thread; returns at once). Finished rows are kept in the store."""
        self._cancel.set()
        with self._lock:
            if self._session is not None:
                self._session.cancel()

    def drain(self) -> list[ev.Event]:
        """Every event queued since the last call, oldest first."""
        out: list[ev.Event] = []
        q = self._queue
        while q:
            out.append(q.popleft())
        return out

    def wait(self, timeout_s: float | None = None) -> bool:
        """Join the sweep thread (tests, shutdown); True when it has ended."""
        t = self._thread
        if t is not None:
            t.join(timeout_s)
        return not self.running

    # --- sweep thread ---------------------------------------------------------------------------
    def _run(self, tests: list[TestSpec], sweep_name: str, command: str) -> None:
        result: SweepOutcome | str
        store: ResultStore | None = None
        try:
            if self.before_run is not None:
                self.before_run()
            store = ResultStore(self.store_path)  # sqlite connections belong to the thread that opens them
            session = SweepSession(tests, store=store, sweep_name=sweep_name, command=command)
            self.run_id = session.run_id
            with self._lock:
                self._session = session
            if self._cancel.is_set():
                session.cancel()
            result = session.run(self._on_event)
        except Exception as e:  # noqa: BLE001 - shown in the window, never raised into Qt
            result = f"the sweep could not run: {type(e).__name__}: {e}"
        finally:
            self._stop_sampler()
            with self._lock:
                self._session = None
            if store is not None:
                store.close()
        self.finished.emit(result)

    def _on_event(self, event: ev.Event) -> None:
        if isinstance(event, ev.SweepStarted) and self.telemetry:
            self._start_sampler()
        self._queue.append(event)

    def _start_sampler(self) -> None:
        self._stop_sampler()
        with self._lock:
            pid = worker_pid(self._session) if self._session is not None else None
        if pid is None:
            return
        try:
            from app.telemetry.sampler import TelemetrySampler

            sampler = TelemetrySampler(pid, interval_s=self.telemetry_interval_s, on_sample=self._on_sample)
            sampler.start()
            self._sampler = sampler
        except Exception:  # noqa: BLE001 - telemetry never stops a run
            self._sampler = None

    def _on_sample(self, sample: Any) -> None:
        values = {k: v for k, v in sample.as_dict().items() if k != "t_ns"}
        self._queue.append(ev.TelemetrySample(t_ns=sample.t_ns, values=values))

    def _stop_sampler(self) -> None:
        sampler, self._sampler = self._sampler, None
        if sampler is not None:
            try:
                sampler.stop(timeout_s=1.0)
            except Exception:  # noqa: BLE001
                pass


def read_event_stream(path: str | Path) -> list[ev.Event]:
    """Events from a JSONL recording (one event per line; blank lines and ``#`` comments skipped)."""
    out: list[ev.Event] = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            out.append(ev.event_from_json(line))
    return out


def now_ns() -> int:
    return time.perf_counter_ns()
