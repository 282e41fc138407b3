"""Runs that are not running: past runs from the results store (with their kept event logs), recorded event
streams replayed, and the compare view of runs and model files.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QFileDialog, QWidget

from app.gui.bridge import read_event_stream
from app.gui.predictions import PredictionService
from app.gui.sweep_controller import SweepController
from app.results.store import ResultStore, StoreError
from app.run.events import Event
from app.run.live import LiveRun

#: Why a recording cannot be read: missing or unreadable file, bad gzip, a line that is not an event.
READ_ERRORS = (OSError, EOFError, ValueError, TypeError)


def read_event_log(path: Path) -> list[Event]:
    """A run's kept event stream; empty when it was not kept or was cut short by a crash (the rows still show)."""
    if not path.exists():
        return []
    try:
        return read_event_stream(path)
    except READ_ERRORS:
        return []


class RunBrowser(QObject):
    """Shows past runs and recordings through the SweepController; opens the compare view."""

    message = Signal(str, str)  # (text, level)

    def __init__(self, view: QWidget, sweeps: SweepController, predictor: PredictionService,
                 request_facts: Callable[[str], None], selected_models: Callable[[], list[str]],
                 store_path: str | Path | None = None, asked_ctx: Callable[[], int] = lambda: 0) -> None:
        super().__init__(view)
        self.asked_ctx = asked_ctx  # the inspector's context (tokens): compare's memory plot reaches it
        self.view = view
        self.sweeps = sweeps
        self.predictor = predictor
        self.request_facts = request_facts
        self.selected_models = selected_models
        self.store_path = store_path
        self.compare_window: Any = None

    def show_session(self, session: LiveRun, title: str) -> None:
        """Replace what the window shows, reading the facts of the session's models for their predictions."""
        for m in session.models():
            self.request_facts(m)
        self.sweeps.show_session(session, title)

    # --- past runs --------------------------------------------------------------------------------
    def show_history(self) -> None:
        from app.gui.history import HistoryDialog

        dlg = HistoryDialog(self.view, self.store_path)
        if dlg.exec() and dlg.chosen:
            if dlg.action == "compare":
                self.show_compare(runs=dlg.chosen)
            else:
                self.open_run(dlg.chosen[0])

    def open_run(self, run_id: str) -> bool:
        """Show a stored run in the table and plots, with its per-token data when its event log was kept."""
        if self.sweeps.busy:
            self.message.emit("Wait for the running sweep to finish (or cancel it) first.", "warning")
            return False
        try:
            with ResultStore.open_read_only(self.store_path) as store:
                rows = store.rows(run_id)
                info = store.run_info(run_id)
                log = store.event_log_path(run_id)
        except StoreError as e:
            self.message.emit(str(e), "error")
            return False
        title = str(info.get("sweep_name") or run_id)
        events = read_event_log(log)
        if events:  # the whole stream was kept: per-token rates, latencies and telemetry come back too
            session = LiveRun(title)
            session.extend(events)
            session.mark_finished(cancelled=session.cancelled)
            # the stored rows are the complete ones (a crashed run's last rows may postdate its log)
            for row in rows:
                session.add_row(row)
        else:
            session = LiveRun.from_rows(rows, title)
        self.show_session(session, f"past run {run_id} ({info.get('status')})")
        return True

    # --- recordings -------------------------------------------------------------------------------
    def replay(self, events: list[Event], title: str = "replay") -> None:
        """Show a recorded event stream as if it had just run (no model, no worker)."""
        session = LiveRun(title)
        session.extend(events)
        session.mark_finished(cancelled=session.cancelled)
        self.show_session(session, title)
        self.sweeps.announce(events)  # after: showing another run takes the last run's messages away

    def ask_replay(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self.view, "Replay an event recording", str(Path.home()),
                                              "Event streams (*.jsonl);;All files (*)")
        if path:
            try:
                self.replay(read_event_stream(path), os.path.basename(path))
            except READ_ERRORS as e:
                self.message.emit(f"Cannot replay {path}: {e}", "error")

    # --- compare ----------------------------------------------------------------------------------
    def show_compare(self, runs: list[str] | None = None, models: list[str] | None = None) -> Any:
        """The compare view with these runs and model files; without any, the selected models and this run."""
        from app.gui.compare import CompareWindow

        if self.compare_window is None:
            self.compare_window = CompareWindow(self.predictor, self.request_facts, self.store_path)
        w = self.compare_window
        w.asked_ctx = self.asked_ctx()
        for rid in runs or []:
            w.add_run(rid)
        for m in models or []:
            w.add_model(m)
        if not w.items:
            for m in self.selected_models()[:2]:
                w.add_model(m)
            if self.sweeps.session.run_id:
                w.add_run(self.sweeps.session.run_id)
        w.refresh()
        w.show()
        w.raise_()
        return w

    def refresh_compare(self) -> None:
        if self.compare_window is not None:
            self.compare_window.refresh()

    def close(self) -> None:
        if self.compare_window is not None:
            self.compare_window.close()
