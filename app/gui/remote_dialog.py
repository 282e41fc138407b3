"""Sweep → Remote server…: benchmark an OpenAI-compatible server at several concurrencies, latency plotted live.

The sweep runs on the bridge's thread as a RemoteSession (no worker process: no model loads here), into the same
results store, so the run shows among past runs with the CLI's columns. The API key comes from the environment.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.gui.bridge import SweepBridge
from app.gui.plots.concurrency import ConcurrencyPlot
from app.gui.top_level import fit_to_screen
from app.remote.session import RemoteSession, RemoteSpec, build_remote_spec
from app.results.store import ResultStore
from app.run.events import TestFailed, TestFinished
from app.run.params import PlanError
from app.run.session import SweepOutcome
from engines.openai_http import API_KEY_ENVS

REDRAW_MS = 200


class RemoteDialog(QDialog):
    """URL, served model, lengths and concurrencies; Run, Cancel; a TTFT/TPOT vs concurrency plot."""

    def __init__(self, parent: QWidget | None = None, store_path: str | Path | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Remote server")
        self.bridge = SweepBridge(self, store_path=store_path, predict_rows=False)
        self.bridge.finished.connect(self._finished)
        self.rows: dict[int, dict[str, Any]] = {}
        self.fields = {name: QLineEdit(text, self) for name, text in (
            ("url", "http://127.0.0.1:8080/v1"), ("model", ""), ("n_prompt", "128"), ("n_gen", "64"),
            ("concurrency", "1,2,4,8"), ("n_depth", "0"))}
        self.requests = QSpinBox(self)
        self.requests.setRange(0, 10_000)
        self.requests.setSpecialValueText("auto (4 × concurrency, at least 8)")
        form = QFormLayout()
        for label, name in (("URL (API root)", "url"), ("Served model", "model"), ("Prompt lengths", "n_prompt"),
                            ("Output lengths", "n_gen"), ("Concurrency", "concurrency"),
                            ("Context depths", "n_depth")):
            form.addRow(label, self.fields[name])
        form.addRow("Requests per test", self.requests)
        self.prefix_cache = QCheckBox("Load each context first, then time the prompt over the cached context", self)
        self.prefix_cache.setToolTip("llama-benchy's prefix-cache test: needs a depth above 0")
        form.addRow("Prefix cache", self.prefix_cache)
        self.plot = ConcurrencyPlot(self)
        self.status = QLabel(f"API key, if the server needs one: {' or '.join(API_KEY_ENVS)} in the environment.", self)
        self.status.setWordWrap(True)
        self.buttons = QDialogButtonBox(self)
        self.run_button = self.buttons.addButton("Run", QDialogButtonBox.ButtonRole.AcceptRole)
        self.cancel_button = self.buttons.addButton("Cancel run", QDialogButtonBox.ButtonRole.RejectRole)
        self.run_button.clicked.connect(self.run)
        self.cancel_button.clicked.connect(self.bridge.cancel)
        self.cancel_button.setEnabled(False)
        lay = QVBoxLayout(self)
        lay.addLayout(form)
        lay.addWidget(self.plot, 1)
        lay.addWidget(self.status)
        lay.addWidget(self.buttons)
        self.timer = QTimer(self)
        self.timer.setInterval(REDRAW_MS)
        self.timer.timeout.connect(self.tick)
        fit_to_screen(self, 720, 640)

    def spec(self) -> RemoteSpec:
        """The sweep the fields describe; PlanError (one line) when they do not fit."""
        f = {name: edit.text() for name, edit in self.fields.items()}
        return build_remote_spec(f["url"], f["model"], n_prompt=f["n_prompt"], n_gen=f["n_gen"],
                                 concurrency=f["concurrency"], n_requests=self.requests.value() or None,
                                 n_depth=f["n_depth"], prefix_cache=self.prefix_cache.isChecked(),
                                 ask_server=False)  # the window's thread never waits on a server

    def run(self) -> str | None:
        """Start the sweep; returns why nothing started, or None."""
        if self.bridge.running:
            return "a sweep is already running"
        try:
            spec = self.spec()
        except PlanError as e:
            self.status.setText(str(e))
            return str(e)
        self.rows.clear()
        self.plot.show_rows([])

        def make(store: ResultStore) -> RemoteSession:
            return RemoteSession(spec, store=store, command="gguf-workbench (remote)")

        self.bridge.start_session(make)
        self.run_button.setEnabled(False)
        self.cancel_button.setEnabled(True)
        self.status.setText(f"Running {len(spec.tests())} tests against {spec.endpoint.display}…")
        self.timer.start()
        return None

    def tick(self) -> None:
        """Take the sweep's events (GUI thread) and redraw when a test ended."""
        changed = False
        for ev in self.bridge.drain():
            if isinstance(ev, (TestFinished, TestFailed)):
                self.rows[ev.test_index] = ev.row
                changed = True
                if isinstance(ev, TestFailed):
                    self.status.setText(f"test {ev.test_index + 1} failed: {ev.reason}")
        if changed:
            self.plot.show_rows(self.rows[i] for i in sorted(self.rows))

    def _finished(self, outcome: SweepOutcome | str) -> None:
        self.tick()
        self.timer.stop()
        self.run_button.setEnabled(True)
        self.cancel_button.setEnabled(False)
        if isinstance(outcome, str):
            self.status.setText(outcome)
        else:
            self.status.setText(f"Remote sweep {outcome.status}: {len(outcome.rows) - outcome.n_failed} ok, "
                                f"{outcome.n_failed} failed — run {outcome.run_id} saved (File → Past runs).")

    def done(self, result: int) -> None:  # closing the dialog cancels its sweep
        if self.bridge.running:
            self.bridge.cancel()
            self.bridge.wait(3.0)
        self.timer.stop()
        super().done(result)
