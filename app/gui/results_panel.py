"""The results table under the plots: the session's rows (sortable), selection → highlighted points, CSV and PNG
export. It follows the SweepController: new rows, a new session, the run's title.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from app.gui.plots.style import short_model
from app.gui.predictions import PredictionService
from app.gui.results_model import TEST_INDEX_ROLE, ResultsModel, ResultsProxy
from app.gui.saved_files import save_text
from app.gui.sweep_controller import SweepController
from app.results import export
from app.results.row_types import ResultRow

#: (text, tooltip, slot) of a button on the panel's bar
Button = tuple[str, str, Callable[[], Any]]
MODEL_COLUMN_MAX_PX = 240  # a whole file name ("SmolLM2-135M-Instruct.Q8_0.gguf") at the default font


class ResultsPanel(QWidget):
    """Title, buttons and the table of the controller's session."""

    message = Signal(str, str)  # (text, level)
    status = Signal(str)

    def __init__(self, sweeps: SweepController, predictor: PredictionService, buttons: list[Button],
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.sweeps = sweeps
        self.model = ResultsModel(predictor, self)
        self.proxy = ResultsProxy(self)
        self.proxy.setSourceModel(self.model)
        self.table = self._make_table()
        self.title = QLabel("<b>Results</b>", self)
        bar = QHBoxLayout()
        bar.addWidget(self.title)
        bar.addStretch(1)
        for text, tip, slot in [("Export CSV…", "Every column, as gguf-bench's CSV (llama-bench compatible; Ctrl+E)",
                                 self.export_csv),
                                ("Export summary…", "A short CSV for spreadsheets: key columns first, sizes in MiB, "
                                 "no per-repetition samples (gguf-bench -o summary)", self.export_summary),
                                ("Save plots PNG…", "The five plots as one picture", self.save_plots_png), *buttons]:
            b = QPushButton(text, self)
            b.setToolTip(tip)
            b.clicked.connect(lambda _c=False, s=slot: s())
            bar.addWidget(b)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(2)
        lay.addLayout(bar)
        lay.addWidget(self.table)
        sweeps.rowsChanged.connect(self.show_rows)
        sweeps.cleared.connect(self.model.clear)
        sweeps.titleChanged.connect(self.set_title)

    def _make_table(self) -> QTableView:
        table = QTableView(self)
        table.setTextElideMode(Qt.TextElideMode.ElideMiddle)  # two files differ at their ends: keep them
        table.setWordWrap(False)  # a wrapped name is cut after its first line, whatever the elide mode
        table.setModel(self.proxy)
        table.setSortingEnabled(True)
        table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        table.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        table.setAlternatingRowColors(True)
        table.verticalHeader().setVisible(False)
        table.verticalHeader().setDefaultSectionSize(20)
        table.horizontalHeader().setStretchLastSection(True)
        table.selectionModel().selectionChanged.connect(self._selection_changed)
        return table

    def set_title(self, what: str) -> None:
        """``Results — what``; empty: just ``Results``."""
        self.title.setText(f"<b>Results</b> — {what}" if what else "<b>Results</b>")

    def show_rows(self, rows: list[ResultRow]) -> None:
        """The rows now, the columns as wide as their contents."""
        self.model.update_rows(rows)
        self.fit_columns()

    def fit_columns(self, columns: Iterable[int] | None = None) -> None:
        """``columns`` (default: all) as wide as their contents, the model column at most ``MODEL_COLUMN_MAX_PX``."""
        if columns is None:
            self.table.resizeColumnsToContents()
        else:
            for c in columns:
                self.table.resizeColumnToContents(c)
        if self.table.columnWidth(1) > MODEL_COLUMN_MAX_PX:
            self.table.setColumnWidth(1, MODEL_COLUMN_MAX_PX)

    # --- selection --------------------------------------------------------------------------------
    def _selection_changed(self, *_a: Any) -> None:
        rows = {self.proxy.mapToSource(i).row() for i in self.table.selectionModel().selectedRows()}
        self.sweeps.highlight({int(self.model.index(r, 0).data(TEST_INDEX_ROLE)) for r in rows})

    def select_tests(self, test_indices: set[int]) -> None:
        """Select table rows by test index (tests, scripting)."""
        sm = self.table.selectionModel()
        sm.clearSelection()
        for r in range(self.proxy.rowCount()):
            idx = self.proxy.index(r, 0)
            if idx.data(TEST_INDEX_ROLE) in test_indices:
                sm.select(idx, sm.SelectionFlag.Select | sm.SelectionFlag.Rows)

    def select_test(self, test_index: int, add: bool = False) -> None:
        """Select one test's row and show it (a click on its point in a plot); ``add`` (Ctrl-click) adds it to the
        selection, or takes it out where it was in."""
        sm = self.table.selectionModel()
        for r in range(self.proxy.rowCount()):
            idx = self.proxy.index(r, 0)
            if idx.data(TEST_INDEX_ROLE) == test_index:
                how = sm.SelectionFlag.Toggle if add else sm.SelectionFlag.ClearAndSelect
                sm.select(idx, how | sm.SelectionFlag.Rows)
                sm.setCurrentIndex(idx, sm.SelectionFlag.NoUpdate)
                self.table.scrollTo(idx)
                return

    # --- files ------------------------------------------------------------------------------------
    def _ask_path(self, title: str, name: str, filter_: str) -> str | None:
        path, _ = QFileDialog.getSaveFileName(self, title, str(Path.home() / name), filter_)
        return path or None

    def default_name(self, kind: str, ext: str) -> str:
        """``gguf-bench_<run id>_<model>[_and-N-more]_<kind>.<ext>``: the run and the model, never "results.csv"."""
        session = self.sweeps.session
        models = session.models()
        model = short_model(models[0]) if models else "model"
        more = f"_and-{len(models) - 1}-more" if len(models) > 1 else ""
        run = session.run_id or "unsaved"
        name = f"gguf-bench_{run}_{model}{more}_{kind}.{ext}"
        return re.sub(r"[^\w.+-]+", "-", name)

    def export_csv(self, path: str | None = None) -> str | None:
        """The session's rows as gguf-bench's full CSV; asks for a file when ``path`` is None. The path, or None."""
        return self._export(path, "results", export.to_csv)

    def export_summary(self, path: str | None = None) -> str | None:
        """The session's rows as the short summary CSV (``gguf-bench -o summary``). The path, or None."""
        return self._export(path, "summary", export.to_summary_csv)

    def _export(self, path: str | None, kind: str, render: Callable[[list[dict[str, Any]]], str]) -> str | None:
        rows = self.sweeps.session.ordered_rows()
        if not rows:
            self.message.emit("No results to export yet.", "warning")
            return None
        path = path or self._ask_path(f"Export {kind} as CSV", self.default_name(kind, "csv"), "CSV (*.csv)")
        if not path:
            return None
        try:
            save_text(render([r.to_mapping() for r in rows]), path)  # never over a model, a FIFO or a device
        except OSError as e:
            self.message.emit(f"Could not write {path}: {e.strerror or e}", "error")
            return None
        self.status.emit(f"Exported {len(rows)} row(s) to {path}")
        return path

    def save_plots_png(self, path: str | None = None) -> str | None:
        """The five plots as one PNG; asks for a file when ``path`` is None. The path, or None."""
        path = path or self._ask_path("Save plots as PNG", self.default_name("plots", "png"), "PNG (*.png)")
        if not path:
            return None
        self.sweeps.tick(force=True)
        if not self.sweeps.plots.save_png(path):
            self.message.emit(f"Could not write {path}", "error")
            return None
        self.status.emit(f"Saved the plots to {path}")
        return path
