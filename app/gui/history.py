"""Past runs from the results store: sweeps (re-open one in the window, or pick several to compare) and quality runs
(``gguf-bench quality``, the chooser's "Measure quality…": open one to read its scores and export them)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QHeaderView,
    QLabel,
    QMessageBox,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.atomic import write_text_atomic
from app.gui.top_level import add_close_keys, fit_to_screen
from app.results.quality_store import QUALITY_MD_COLUMNS, quality_rows, quality_runs, render_quality
from app.results.row_types import QualityRow
from app.results.store import ResultStore, RunSummary, StoreError

SWEEP, QUALITY = "sweep", "quality"
KIND_ROLE = Qt.ItemDataRole.UserRole + 1
HEADERS = ("Run", "Started", "Kind", "Status", "OK", "Failed", "Sweep", "Models")


@dataclass(frozen=True)
class PastRun:
    """One row of the Past runs table: a sweep or a quality run."""

    run_id: str
    created_at: str
    kind: str  # SWEEP | QUALITY
    status: str
    n_ok: int
    n_failed: int
    name: str
    models: str


def _sweep(run: RunSummary) -> PastRun:
    return PastRun(run.run_id, run.created_at, SWEEP, str(run.status), run.n_ok, run.n_failed, run.sweep_name or "",
                   run.models)


def load_runs(store_path: str | Path | None = None, limit: int = 200) -> tuple[list[RunSummary], Path]:
    """Stored sweeps, newest first, and the store's path."""
    with ResultStore.open_read_only(store_path) as store:
        return store.runs(limit=limit), store.path


def load_past_runs(store_path: str | Path | None = None, limit: int = 200) -> tuple[list[PastRun], Path]:
    """Stored sweeps and quality runs together, newest first, and the store's path."""
    with ResultStore.open_read_only(store_path) as store:
        runs = [_sweep(r) for r in store.runs(limit=limit)]
        for run_id, created, n_files, n_ok, models in quality_runs(store, limit=limit):
            runs.append(PastRun(run_id, created, QUALITY, "finished" if n_ok == n_files else "partial", n_ok,
                                n_files - n_ok, "quality", models.replace(",", ", ")))
        return sorted(runs, key=lambda r: r.created_at, reverse=True)[:limit], store.path


class HistoryDialog(QDialog):
    """A table of stored runs; ``chosen`` holds the sweeps' run ids after Open or Compare (a quality run opens in a
    table of its own, :class:`QualityRunDialog`)."""

    def __init__(self, parent: QWidget | None = None, store_path: str | Path | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Past runs")
        fit_to_screen(self, 960, 460)
        self.store_path = store_path
        self.chosen: list[str] = []
        self.action = ""
        self.quality_view: QualityRunDialog | None = None
        self.table = QTableWidget(self)
        self.table.setTextElideMode(Qt.TextElideMode.ElideMiddle)  # two files differ at their ends: keep them
        self.table.setColumnCount(len(HEADERS))
        self.table.setHorizontalHeaderLabels(list(HEADERS))
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        self.table.horizontalHeader().setSectionResizeMode(HEADERS.index("Models"), QHeaderView.ResizeMode.Stretch)
        self.table.doubleClicked.connect(lambda _i: self._choose("open"))
        self.info = QLabel(self)
        try:
            runs, path = load_past_runs(store_path)
            n_quality = sum(1 for r in runs if r.kind == QUALITY)
            self.info.setText(f"{len(runs) - n_quality} sweep(s) and {n_quality} quality run(s) in {path}" if runs
                              else "No runs stored yet: run a sweep (or measure quality in the chooser) first.")
        except StoreError as e:
            runs = []
            self.info.setText(str(e))
        self.runs = runs
        self.table.setRowCount(len(runs))
        for r, run in enumerate(runs):
            cells = [run.run_id, run.created_at.replace("T", " ").rstrip("Z"), run.kind, run.status, str(run.n_ok),
                     str(run.n_failed), run.name, run.models]
            for c, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if c == 0:
                    item.setData(Qt.ItemDataRole.UserRole, run.run_id)
                    item.setData(KIND_ROLE, run.kind)
                if run.kind == QUALITY:
                    item.setToolTip("A quality run (KL divergence and perplexity against a reference): Open shows "
                                    "its scores")
                self.table.setItem(r, c, item)
        self.table.resizeColumnsToContents()
        buttons = QDialogButtonBox(self)
        open_b = QPushButton("Open", self)
        open_b.setToolTip("A sweep: in the window (table and plots); a quality run: its scores")
        open_b.clicked.connect(lambda: self._choose("open"))
        cmp_b = QPushButton("Compare selected…", self)
        cmp_b.setToolTip("Select two or more sweeps")
        cmp_b.clicked.connect(lambda: self._choose("compare"))
        buttons.addButton(open_b, QDialogButtonBox.ButtonRole.AcceptRole)
        buttons.addButton(cmp_b, QDialogButtonBox.ButtonRole.ActionRole)
        buttons.addButton(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        lay = QVBoxLayout(self)
        lay.addWidget(self.info)
        lay.addWidget(self.table)
        lay.addWidget(buttons)
        if runs:
            self.table.selectRow(0)

    def _selected(self) -> list[tuple[str, str]]:
        rows = sorted({i.row() for i in self.table.selectedIndexes()})
        return [(str(self.table.item(r, 0).data(Qt.ItemDataRole.UserRole)), str(self.table.item(r, 0).data(KIND_ROLE)))
                for r in rows]

    def selected_run_ids(self) -> list[str]:
        """The selected sweeps' run ids (quality runs are opened, not compared)."""
        return [rid for rid, kind in self._selected() if kind == SWEEP]

    def _choose(self, action: str) -> None:
        picked = self._selected()
        if action == "open" and picked and picked[0][1] == QUALITY:
            self.open_quality(picked[0][0])
            return
        ids = self.selected_run_ids()
        if not ids:
            return
        self.chosen, self.action = ids, action
        self.accept()

    def open_quality(self, run_id: str) -> QualityRunDialog | None:
        """A quality run's scores in a table of their own (this dialog stays open)."""
        try:
            with ResultStore.open_read_only(self.store_path) as store:
                rows = quality_rows(store, run_id)
        except StoreError as e:
            self.info.setText(str(e))
            return None
        self.quality_view = QualityRunDialog(run_id, rows, self)
        self.quality_view.show()
        return self.quality_view


class QualityRunDialog(QDialog):
    """One quality run: a row per file (type, bits per weight, perplexity, KLD, same top token…), CSV export."""

    def __init__(self, run_id: str, rows: list[QualityRow], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(f"Quality run {run_id}")
        self.run_id = run_id
        self.rows = rows
        reference = next((r.reference_filename for r in rows if r.reference_filename), "")
        head = QLabel(f"{len(rows)} file(s) scored" + (f" against {reference}" if reference else "")
                      + ". Lower KLD is closer to the reference.", self)
        head.setWordWrap(True)
        self.table = QTableWidget(len(rows), len(QUALITY_MD_COLUMNS), self)
        self.table.setHorizontalHeaderLabels(list(QUALITY_MD_COLUMNS))
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        for r, row in enumerate(rows):
            for c, key in enumerate(QUALITY_MD_COLUMNS):
                v = row.value(key)  # a column of the quality table, by name
                text = "" if v is None else f"{v:.4g}" if isinstance(v, float) else str(v)
                item = QTableWidgetItem(text)
                if isinstance(v, (int, float)):
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                if row.error:
                    item.setToolTip(str(row.error))
                self.table.setItem(r, c, item)
        self.table.resizeColumnsToContents()
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        export = QPushButton("Export CSV…", self)
        export.clicked.connect(self.ask_export)
        buttons.addButton(export, QDialogButtonBox.ButtonRole.ActionRole)
        buttons.rejected.connect(self.close)
        lay = QVBoxLayout(self)
        lay.addWidget(head)
        lay.addWidget(self.table, 1)
        lay.addWidget(buttons)
        fit_to_screen(self, 1000, 420)
        add_close_keys(self)

    def export_csv(self, path: str | Path) -> Path:
        """The run's rows, every column, as ``gguf-bench export RUN -o csv`` writes them."""
        return write_text_atomic(path, render_quality(self.rows, "csv"))

    def ask_export(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Export the quality run", str(Path.home() / f"{self.run_id}.csv"),
                                              "CSV (*.csv)")
        if path:
            try:
                self.export_csv(path)
            except OSError as e:  # a model, a FIFO, a full disk: said, not raised out of the slot
                QMessageBox.warning(self, "Export the quality run", f"Could not save {path}: {e.strerror or e}")
