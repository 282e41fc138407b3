"""Sweep → Remote server…: benchmark an OpenAI-compatible server at several concurrencies, latency plotted live.

The sweep runs on the bridge's thread as a RemoteSession (no worker process: no model loads here), into the same
results store, so the run shows among past runs with the CLI's columns. The API key comes from the environment.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.gui.bridge import SweepBridge
from app.gui.plots.concurrency import ConcurrencyPlot
from app.gui.top_level import fit_to_screen
from app.remote.session import RemoteSession, RemoteSpec, build_remote_spec
from app.results.row_types import ResultRow
from app.results.store import ResultStore
from app.run.events import TestFailed, TestFinished, TestStarted
from app.run.params import PlanError
from app.run.plan import RemoteTest
from app.run.session import SweepOutcome
from engines.openai_http import API_KEY_ENVS, Endpoint, EndpointError, served_models

REDRAW_MS = 200
#: the per-test table: (header, row key, format)
TABLE_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("concurrency", "n_parallel", "{}"), ("prompt", "n_prompt", "{}"), ("gen", "n_gen", "{}"),
    ("depth", "n_depth", "{}"), ("status", "status", "{}"), ("TTFT p50 ms", "ttft_p50_ms", "{:,.1f}"),
    ("TPOT p50 ms", "tpot_p50_ms", "{:,.1f}"), ("output tok/s", "decode_tps", "{:,.1f}"),
    ("req/s", "req_per_s", "{:.2f}"), ("goodput req/s", "goodput_req_per_s", "{:.2f}"),
    ("errors", "n_errors", "{}"), ("why", "error", "{}"),
)


def one_line_reason(text: str, limit: int = 240) -> str:
    """A server's error as one readable line: HTML tags out, whitespace folded, cut at ``limit`` characters."""
    plain = " ".join(re.sub(r"<[^>]{0,200}>", " ", text).split())
    return plain if len(plain) <= limit else plain[: limit - 1] + "…"


class RemoteDialog(QDialog):
    """URL, served model (the server's own list a click away), lengths and concurrencies; Run, Cancel; a TTFT/TPOT
    vs concurrency plot and a table per test (throughput, requests/s, goodput, why a test failed)."""

    modelsListed = Signal(object)  # list[str] | str (why the server could not say): from the asking thread

    def __init__(self, parent: QWidget | None = None, store_path: str | Path | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Remote server")
        self.bridge = SweepBridge(self, store_path=store_path, predict_rows=False)
        self.bridge.finished.connect(self._finished)
        self.rows: dict[int, ResultRow] = {}
        self.fields = {name: QLineEdit(text, self) for name, text in (
            ("url", "http://127.0.0.1:8080/v1"), ("n_prompt", "128"), ("n_gen", "64"),
            ("concurrency", "1,2,4,8"), ("n_depth", "0"))}
        self.model_combo = QComboBox(self)
        self.model_combo.setEditable(True)
        self.model_combo.lineEdit().setPlaceholderText("empty: the one the server lists")
        self.fields["model"] = self.model_combo.lineEdit()
        self.list_button = QPushButton("List the server's models", self)
        self.list_button.clicked.connect(self.list_models)
        self.modelsListed.connect(self._models_listed)
        self._start_after_listing = False
        model_row = QHBoxLayout()
        model_row.addWidget(self.model_combo, 1)
        model_row.addWidget(self.list_button)
        self.requests = QSpinBox(self)
        self.requests.setRange(0, 10_000)
        self.requests.setSpecialValueText("auto (4 × concurrency, at least 8)")
        form = QFormLayout()
        form.addRow("URL (API root)", self.fields["url"])
        form.addRow("Served model", model_row)
        for label, name in (("Prompt lengths", "n_prompt"), ("Output lengths", "n_gen"),
                            ("Concurrency", "concurrency"), ("Context depths", "n_depth")):
            form.addRow(label, self.fields[name])
        form.addRow("Requests per test", self.requests)
        self.prefix_cache = QCheckBox("Load each context first, then time the prompt over the cached context", self)
        self.prefix_cache.setToolTip("llama-benchy's prefix-cache test: needs a depth above 0")
        form.addRow("Prefix cache", self.prefix_cache)
        self.plot = ConcurrencyPlot(self)
        self.table = QTableWidget(0, len(TABLE_COLUMNS), self)
        self.table.setHorizontalHeaderLabels([h for h, _k, _f in TABLE_COLUMNS])
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.horizontalHeader().setSectionResizeMode(len(TABLE_COLUMNS) - 1, QHeaderView.ResizeMode.Stretch)
        results = QSplitter(Qt.Orientation.Vertical, self)
        results.addWidget(self.plot)
        results.addWidget(self.table)
        self._n_tests = 0
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
        lay.addWidget(results, 1)
        lay.addWidget(self.status)
        lay.addWidget(self.buttons)
        self.timer = QTimer(self)
        self.timer.setInterval(REDRAW_MS)
        self.timer.timeout.connect(self.tick)
        fit_to_screen(self, 900, 760)

    # --- the server's models -------------------------------------------------------------------
    def list_models(self) -> None:
        """Ask the server which models it serves (GET /models) off the GUI thread; the list fills the field."""
        url = self.fields["url"].text().strip()
        try:
            endpoint = Endpoint(url, "", timeout_s=10.0)
        except EndpointError as e:
            self.status.setText(str(e))
            return
        self.list_button.setEnabled(False)
        self.status.setText(f"Asking {endpoint.display} which models it serves…")

        def ask() -> None:
            listed = served_models(endpoint)
            self.modelsListed.emit(listed if listed is not None else
                                   f"{endpoint.display} did not list its models (GET /models): type the name")

        threading.Thread(target=ask, name="served-models", daemon=True).start()

    def _models_listed(self, listed: list[str] | str) -> None:
        self.list_button.setEnabled(True)
        start, self._start_after_listing = self._start_after_listing, False
        if isinstance(listed, str) or not listed:
            self.status.setText(listed if isinstance(listed, str) else "The server lists no models.")
            return
        typed = self.fields["model"].text()
        self.model_combo.clear()
        self.model_combo.addItems(listed)
        self.fields["model"].setText(typed if typed in listed else listed[0])
        if len(listed) > 1 and typed not in listed:
            self.status.setText(f"The server serves {len(listed)} models: choose one, then Run.")
            return
        self.status.setText(f"The server serves {', '.join(listed[:5])}" + ("…" if len(listed) > 5 else "") + ".")
        if start:
            self.run()

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
        if not self.fields["model"].text().strip():  # ask the server first, then run with the one it serves
            self._start_after_listing = True
            self.list_models()
            return "asking the server for its model"
        try:
            spec = self.spec()
        except PlanError as e:
            self.status.setText(str(e))
            return str(e)
        self.rows.clear()
        self.plot.show_rows([])
        self.table.setRowCount(0)
        self._n_tests = len(spec.tests())

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
            if isinstance(ev, TestStarted) and isinstance(ev.test, RemoteTest):
                t = ev.test
                self.status.setText(f"Test {ev.test_index + 1} of {self._n_tests or '?'}: concurrency "
                                    f"{t.concurrency}, prompt {t.n_prompt}, {len(self.rows)} done…")
            if isinstance(ev, (TestFinished, TestFailed)) and isinstance(ev.row, ResultRow):
                self.rows[ev.test_index] = ev.row
                changed = True
                if isinstance(ev, TestFailed):
                    self.status.setText(f"Test {ev.test_index + 1} failed: {one_line_reason(str(ev.reason))}")
        if changed:
            rows = [self.rows[i] for i in sorted(self.rows)]
            self.plot.show_rows(rows)
            self._fill_table(rows)

    def _fill_table(self, rows: list[ResultRow]) -> None:
        self.table.setRowCount(len(rows))
        for r, row in enumerate(rows):
            for c, (_h, key, fmt) in enumerate(TABLE_COLUMNS):
                v = getattr(row, key)  # a field of the table (tests hold TABLE_COLUMNS to it)
                text = "" if v is None or v == "" else (one_line_reason(str(v)) if key == "error" else
                                                        fmt.format(v) if isinstance(v, int | float) else str(v))
                item = QTableWidgetItem(text)
                if key == "error" and v:
                    item.setToolTip(str(v)[:2000])
                self.table.setItem(r, c, item)
        self.table.resizeColumnsToContents()

    def _finished(self, outcome: SweepOutcome | str) -> None:
        self.tick()
        self.timer.stop()
        self.run_button.setEnabled(True)
        self.cancel_button.setEnabled(False)
        if isinstance(outcome, str):
            self.status.setText(outcome)
        else:
            why = next((one_line_reason(r.error) for r in outcome.rows if r.error), "")
            self.status.setText(f"Remote sweep {outcome.status}: {len(outcome.rows) - outcome.n_failed} ok, "
                                f"{outcome.n_failed} failed" + (f" (the first: {why})" if why else "")
                                + f" — run {outcome.run_id} saved (File → Past runs).")

    def done(self, result: int) -> None:  # closing the dialog cancels its sweep
        if self.bridge.running:
            self.bridge.cancel()
            self.bridge.wait(3.0)
        self.timer.stop()
        super().done(result)
