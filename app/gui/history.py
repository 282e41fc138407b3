"""Past runs from the results store: re-open one in the window, or pick several to compare."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QDialogButtonBox,
    QHeaderView,
    QLabel,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.gui.top_level import fit_to_screen
from app.results.store import ResultStore, RunSummary, StoreError


def load_runs(store_path: str | Path | None = None, limit: int = 200) -> tuple[list[RunSummary], Path]:
    """Stored runs, newest first, and the store's path."""
    with ResultStore.open_read_only(store_path) as store:
        return store.runs(limit=limit), store.path


class HistoryDialog(QDialog):
    """A table of stored runs; ``chosen`` holds the run ids after Open or Compare."""

    def __init__(self, parent: QWidget | None = None, store_path: str | Path | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Past runs")
        fit_to_screen(self, 860, 420)
        self.chosen: list[str] = []
        self.action = ""
        self.table = QTableWidget(self)
        self.table.setTextElideMode(Qt.TextElideMode.ElideMiddle)  # two files differ at their ends: keep them
        headers = ["Run", "Started", "Status", "OK", "Failed", "Sweep", "Models"]
        self.table.setColumnCount(len(headers))
        self.table.setHorizontalHeaderLabels(headers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        self.table.horizontalHeader().setSectionResizeMode(6, QHeaderView.ResizeMode.Stretch)
        self.table.doubleClicked.connect(lambda _i: self._choose("open"))
        info = QLabel(self)
        try:
            runs, path = load_runs(store_path)
            info.setText(f"{len(runs)} run(s) in {path}" if runs else "No runs stored yet: run a sweep first.")
        except StoreError as e:
            runs = []
            info.setText(str(e))
        self.table.setRowCount(len(runs))
        for r, run in enumerate(runs):
            cells = [run.run_id, run.created_at.replace("T", " ").rstrip("Z"), run.status, str(run.n_ok),
                     str(run.n_failed), run.sweep_name or "", run.models]
            for c, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if c == 0:
                    item.setData(Qt.ItemDataRole.UserRole, run.run_id)
                self.table.setItem(r, c, item)
        self.table.resizeColumnsToContents()
        buttons = QDialogButtonBox(self)
        open_b = QPushButton("Open in the window", self)
        open_b.clicked.connect(lambda: self._choose("open"))
        cmp_b = QPushButton("Compare selected…", self)
        cmp_b.setToolTip("Select two or more runs")
        cmp_b.clicked.connect(lambda: self._choose("compare"))
        buttons.addButton(open_b, QDialogButtonBox.ButtonRole.AcceptRole)
        buttons.addButton(cmp_b, QDialogButtonBox.ButtonRole.ActionRole)
        buttons.addButton(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        lay = QVBoxLayout(self)
        lay.addWidget(info)
        lay.addWidget(self.table)
        lay.addWidget(buttons)
        if runs:
            self.table.selectRow(0)

    def selected_run_ids(self) -> list[str]:
        rows = sorted({i.row() for i in self.table.selectedIndexes()})
        return [str(self.table.item(r, 0).data(Qt.ItemDataRole.UserRole)) for r in rows]

    def _choose(self, action: str) -> None:
        ids = self.selected_run_ids()
        if not ids:
            return
        self.chosen, self.action = ids, action
        self.accept()
