"""The bridge: runs a SweepSession on a background thread and hands its events to the GUI thread.

The sweep thread only appends events to a deque (thread-safe, no Qt call per event); the window's 10 Hz
timer takes them with :meth:`SweepBridge.drain`. One Qt signal, ``finished``, is emitted once per sweep.
The sweep is set up exactly as ``gguf-bench run`` sets it up (:func:`app.run.sweep_setup.prepare_sweep`: same
machine facts, same predicted columns, tests of unreadable models as failed rows, same store), so a sweep
gives the same rows from the window as from the CLI.
Telemetry comes from the worker itself, as TelemetrySample events in the same stream.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Signal

from app.results.store import ResultStore
from app.run import events as ev
from app.run.plan import TestSpec
from app.run.replay import MAX_RECORDING_BYTES as MAX_RECORDING_BYTES  # the replay reader: app.run.replay
from app.run.replay import read_event_stream as read_event_stream
from app.run.session import SweepOutcome, SweepSession
from app.run.sweep_setup import prepare_sweep


class SweepBridge(QObject):
    """One sweep at a time: :meth:`start`, :meth:`drain` from a timer, :meth:`cancel` any time."""

    #: SweepOutcome when the sweep ended (finished, cancelled or crashed), or a str when it could not run.
    finished = Signal(object)

    def __init__(self, parent: QObject | None = None, *, store_path: str | Path | None = None,
                 predict_rows: bool = True) -> None:
        super().__init__(parent)
        self.store_path = store_path
        self.predict_rows = predict_rows
        self._queue: deque[ev.Event] = deque()
        self._thread: threading.Thread | None = None
        self._session: SweepSession | None = None
        self._lock = threading.Lock()
        self._cancel = threading.Event()
        self.before_run: Callable[[], None] | None = None  # e.g. wait for the CPU probe to finish
        self.run_id = ""

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def worker_pid(self) -> int | None:
        """The running worker process's pid, when there is one."""
        with self._lock:
            return self._session.worker_pid if self._session is not None else None

    def start(self, tests: list[TestSpec], *, sweep_name: str = "", command: str = "gguf-workbench",
              facts: dict[str, Any] | None = None) -> None:
        """Run ``tests`` on the sweep thread; ``facts`` are GGUF facts already read, by model path."""
        tests, facts = list(tests), dict(facts or {})

        def make(store: ResultStore) -> SweepSession:
            setup = prepare_sweep(tests, store, predict=self.predict_rows, known_facts=facts)
            self._queue.extend(ev.Notice(t_ns=0, message=w) for w in setup.warnings)  # past a trained context
            return setup.session(store, sweep_name=sweep_name, command=command)

        self.start_session(make)

    def start_session(self, make: Callable[[ResultStore], SweepSession]) -> None:
        """Run the session ``make(store)`` builds on the sweep thread (a remote sweep's RemoteSession, say)."""
        if self.running:
            raise RuntimeError("a sweep is already running")
        self._queue.clear()
        self._cancel.clear()
        self.run_id = ""
        self._thread = threading.Thread(target=self._run, args=(make,), name="sweep", daemon=True)
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
    def _run(self, make: Callable[[ResultStore], SweepSession]) -> None:
        result: SweepOutcome | str
        store: ResultStore | None = None
        try:
            if self.before_run is not None:
                self.before_run()
            store = ResultStore.recover(self.store_path)  # sqlite connections belong to the thread that opens them
            session = make(store)
            self.run_id = session.run_id
            with self._lock:
                self._session = session
            if self._cancel.is_set():
                session.cancel()
            result = session.run(self._on_event)
        except Exception as e:  # noqa: BLE001 - shown in the window, never raised into Qt
            result = f"the sweep could not run: {type(e).__name__}: {e}"
        finally:
            with self._lock:
                self._session = None
            if store is not None:
                store.close()
        self.finished.emit(result)

    def _on_event(self, event: ev.Event) -> None:
        if isinstance(event, (ev.TestFinished, ev.TestFailed)):
            # the session has just recorded the row with run id, machine and predicted columns: show that one
            session = self._session
            recorded = session.rows.get(event.test_index) if session is not None else None
            if recorded is not None:
                event = dataclasses.replace(event, row=recorded)
        self._queue.append(event)
