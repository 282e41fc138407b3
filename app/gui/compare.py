"""The Compare view: model files (predicted) and past runs (measured) overlaid, one colour each, and the ratio table.

What is compared, the figures and the table are :mod:`app.compare`'s (``gguf-bench compare`` prints the same table);
this view draws them, beside the predictions the window's PredictionService gives for each entry's hardware.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QIcon, QPixmap
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.compare.entries import CompareItem, colour_slots, legend_names, load_run, model_item, model_part, shared_prefix
from app.compare.figures import FIGURES, CompareTable, compare_table, means_by_x, run_settings
from app.gui import theme
from app.gui.plots.decode import DecodePlot, mean_pos
from app.gui.plots.kv import KvPlot, ctx_of
from app.gui.plots.panel import Curve
from app.gui.plots.style import MIB, color
from app.gui.plots.ttft import TtftPlot
from app.gui.predictions import PredictionService
from app.gui.top_level import add_close_keys, fit_to_screen
from app.predict.questions import DEFAULT_N_CTX, Question
from app.results.store import ResultStore, StoreError


def predicted_figures(predictor: PredictionService, path: str, prompt: int) -> tuple[float | None, float | None]:
    """A model file's (decode tok/s from an empty cache, TTFT ms at ``prompt``) on the chosen profile, as the answer
    gives them everywhere else: expected where a source gives one, else the ceiling."""
    got = predictor.predict_settings(path, Question(n_ctx=prompt + 256).short_prompt(prompt))
    if got is None:
        return None, None
    return got.decode_empty.value, got.ttft_ms.value if got.ttft_ms is not None else None


class CompareWindow(QWidget):
    """Pick two or more model files or past runs; TTFT and decode curves overlaid; ratios against the first."""

    def __init__(self, predictor: PredictionService, request_facts: Callable[[str], None] | None = None,
                 store_path: str | Path | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent, Qt.WindowType.Window)
        self.setWindowTitle("GGUF Workbench — compare")
        fit_to_screen(self, 1280, 820)
        add_close_keys(self)
        self.predictor = predictor
        self.request_facts = request_facts or (lambda _p: None)
        self.store_path = store_path
        self.asked_ctx = 0  # the context the main window's inspector asks (tokens; 0: none): the KV plot reaches it
        self.items: list[CompareItem] = []
        self.list = QListWidget(self)
        self.list.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.list.setWordWrap(True)
        add_model = QPushButton("Add model file…", self)
        add_model.clicked.connect(self._ask_model)
        add_run = QPushButton("Add past run…", self)
        add_run.clicked.connect(self._ask_run)
        remove = QPushButton("Remove", self)
        remove.clicked.connect(self._remove_selected)
        left = QWidget(self)
        ll = QVBoxLayout(left)
        ll.setContentsMargins(0, 0, 0, 0)
        ll.addWidget(QLabel("<b>Compared</b> (the first is the baseline)", left))
        ll.addWidget(self.list, 1)
        row = QHBoxLayout()
        for b in (add_model, add_run, remove):
            row.addWidget(b)
        ll.addLayout(row)
        self.note = QLabel(left)
        self.note.setWordWrap(True)
        theme.set_role(self.note, "muted")
        ll.addWidget(self.note)

        self.ttft = TtftPlot("Time to first token", columns=1)
        self.decode = DecodePlot("Decode speed", columns=1)
        self.kv = KvPlot("KV-cache memory vs context", columns=1)
        self.table = QTableWidget(self)
        self.table.setTextElideMode(Qt.TextElideMode.ElideMiddle)  # two files differ at their ends: keep them
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        plots = QWidget(self)
        pl = QHBoxLayout(plots)
        pl.setContentsMargins(0, 0, 0, 0)
        pl.addWidget(self.ttft.widget)
        pl.addWidget(self.decode.widget)
        pl.addWidget(self.kv.widget)
        right = QSplitter(Qt.Orientation.Vertical, self)
        right.addWidget(plots)
        right.addWidget(self.table)
        right.setStretchFactor(0, 3)
        right.setStretchFactor(1, 1)
        right.setSizes([560, 190])
        split = QSplitter(Qt.Orientation.Horizontal, self)
        split.addWidget(left)
        split.addWidget(right)
        split.setStretchFactor(0, 1)
        split.setStretchFactor(1, 4)
        split.setSizes([300, 980])
        lay = QVBoxLayout(self)
        lay.addWidget(split)

    # --- items ----------------------------------------------------------------------------------
    def add_model(self, path: str) -> None:
        self._add(model_item(path))

    def add_run(self, run_id: str) -> bool:
        try:
            with ResultStore.open_read_only(self.store_path) as store:
                items = load_run(store, run_id)
        except StoreError as e:
            self.note.setText(str(e))
            return False
        if not items:
            self.note.setText(f"run {run_id} has no results")
            return False
        for item in items:
            self._add(item, refresh=False)
        self.refresh()
        return True

    def _add(self, item: CompareItem, refresh: bool = True) -> None:
        self.items.append(item)
        if item.path:
            self.request_facts(item.path)
        if refresh:
            self.refresh()

    def _remove_selected(self) -> None:
        rows = sorted({self.list.row(i) for i in self.list.selectedItems()}, reverse=True)
        for r in rows:
            del self.items[r]
        self.refresh()

    def _ask_model(self) -> None:
        files, _ = QFileDialog.getOpenFileNames(self, "Compare model files", str(Path.home()), "GGUF (*.gguf)")
        for f in files:
            self.add_model(f)

    def _ask_run(self) -> None:
        from app.gui.history import HistoryDialog

        dlg = HistoryDialog(self, self.store_path)
        if dlg.exec() and dlg.chosen:
            for rid in dlg.chosen:
                self.add_run(rid)

    # --- drawing --------------------------------------------------------------------------------
    def refresh(self) -> None:
        self.list.clear()
        for it, c in zip(self.items, self.colours(), strict=True):
            pix = QPixmap(14, 14)
            pix.fill(QColor(c))
            QListWidgetItem(QIcon(pix), it.label, self.list)
        table = self.table_figures()
        prompt = table.prompt
        ttft, decode, kv = self._curves(prompt)
        off = self.ttft.draw_curves(ttft) + self.decode.draw_curves(decode)
        self.kv.draw_curves(kv)
        few = self._fill_table(table)
        models = [model_part(it) for it in self.items]
        prefix = shared_prefix(models)
        hardware = sorted({hw.name for it in self.items if it.kind == "run"
                           if (hw := self.predictor.hardware_of(it.ok_rows())) is not None})
        named = (f"Models: {prefix.rstrip('.-_ ')} (legends name the rest of each file name). " if prefix else "") + (
            f"Measured on {hardware[0]}. " if len(hardware) == 1 else "")
        note = (named + "Points: measured (one entry per model per run); a line in the same colour: its prediction "
                "for the hardware it ran on. Dashed: a model file's what-if. Ratios compare like with like (measured "
                "with the first measured entry, predicted with the first predicted one); TTFT at "
                f"{prompt} prompt tokens, ± the ratio's noise from the repetitions.")
        if few:
            note += f" ⚠ {few} entr{'y has' if few == 1 else 'ies have'} fewer than 3 repetitions: within noise."
        if off:
            note += " Off the scale (above the measurements): " + "; ".join(dict.fromkeys(off)) + "."
        self.note.setText(note)

    def colours(self) -> list[str]:
        """Each entry's colour (:func:`app.compare.entries.colour_slots`)."""
        return [color(k) for k in colour_slots(self.items)]

    def table_figures(self) -> CompareTable:
        """The ratio table's figures (``gguf-bench compare`` prints the same for the same runs), and each model
        file's fit verdict at the asked context (the inspector's question)."""
        return compare_table(self.items, self.predictor.facts.get,
                             lambda path, prompt: predicted_figures(self.predictor, path, prompt),
                             self.verdict_words if any(it.kind != "run" for it in self.items) else None)

    def verdict_words(self, path: str) -> str:
        """A model file's verdict in a cell: its words and placement (the whole reason is the inspector's)."""
        got = self.predictor.verdict(path, Question(n_ctx=int(self.asked_ctx) or DEFAULT_N_CTX))
        if got is None or isinstance(got, str):
            return got or ""
        placed = got.asked if got.user_placed else got.best
        return got.word + (f" ({placed.flags(got.kv_cache)})" if placed is not None else "")

    def _curves(self, prompt: int) -> tuple[list[Curve], list[Curve], list[Curve]]:
        """TTFT, decode and KV-memory curves. A run: its measured means (points) and, in the same colour, the
        prediction for the hardware it ran on (a line: this machine's expected figure where a fit gives one,
        else the ceiling). A model file: its what-if on the chosen profile (dashed), off the y scale when there
        are measurements to read."""
        xmax_p = max([float(r.n_prompt or 0) for it in self.items for r in it.rows] + [prompt]) * 1.1
        xmax_d = max([float((r.n_depth or 0) + (r.n_prompt or 0) + (r.n_gen or 0))
                      for it in self.items for r in it.rows] + [prompt + 128]) * 1.05
        xmax_kv = max([float(ctx_of(r)) for it in self.items for r in it.rows] + [4096.0, float(self.asked_ctx)])
        xs, xd = np.linspace(1, xmax_p, 40), np.linspace(0, xmax_d, 40)
        xk = np.linspace(256, xmax_kv, 24)
        measured_any = any(it.kind == "run" and it.ok_rows() for it in self.items)
        ttft: list[Curve] = []
        decode: list[Curve] = []
        kv: list[Curve] = []
        kv_drawn: set[str] = set()
        runs = {it.run_id for it in self.items if it.kind == "run"}
        names = legend_names(self.items, with_run=len(runs) > 1)
        ran_on = {it.path: self.predictor.hardware_of(it.ok_rows()) for it in self.items if it.kind == "run"}
        one_hardware = len({hw.name for hw in ran_on.values() if hw is not None}) <= 1
        for it, c, name in zip(self.items, self.colours(), names, strict=True):
            if it.kind == "run":
                rows = it.ok_rows()
                ttft.append(Curve(f"{name} (measured)", *_arrays(means_by_x(
                    (float(r.n_prompt or 0), r.ttft_ms) for r in rows if r.ttft_ms is not None and not r.n_depth)),
                    c))
                decode.append(Curve(f"{name} (measured)", *_arrays(means_by_x(
                    (mean_pos(r), r.decode_tps) for r in rows if r.decode_tps is not None)), c))
                kv_points = [(ctx_of(r), r.llama_kv_bytes / MIB) for r in rows if r.llama_kv_bytes]
                if kv_points:
                    kv.append(Curve(f"{name} (llama.cpp's KV)", *_arrays(means_by_x(kv_points)), c))
                hw = self.predictor.hardware_of(rows)
                if hw is not None and it.path:
                    settings = run_settings(rows)
                    where = "" if one_hardware else f" ({hw.name})"  # one hardware: the note names it once
                    t_pred, d_pred = self._predicted_on(it.path, hw, xs, xd, settings)
                    if t_pred is not None:
                        ttft.append(Curve(f"{name} predicted{where}", xs, t_pred, c, measured=False))
                    if d_pred is not None:
                        decode.append(Curve(f"{name} predicted{where}", xd, d_pred, c, measured=False))
                    if it.path not in kv_drawn:
                        kv_drawn.add(it.path)
                        self._kv_curve(kv, it.path, xk, name, c, settings)
                continue
            settings = {"type_k": "f16", "n_gpu_layers": 999}
            where = self.predictor.profile.name if self.predictor.profile else "no profile"
            ys = self.predictor.ttft_curve(it.path, xs, 0, **settings)
            yd = self.predictor.decode_curve(it.path, xd, **settings)
            if ys is not None:
                ttft.append(Curve(f"{name} what-if ({where})", xs, ys, c, measured=False, scale=not measured_any))
            if yd is not None:
                decode.append(Curve(f"{name} what-if ceiling ({where})", xd, yd, c, measured=False,
                                    scale=not measured_any))
            if it.path not in kv_drawn:
                kv_drawn.add(it.path)
                self._kv_curve(kv, it.path, xk, name, c, settings)
        return ttft, decode, kv

    def _predicted_on(self, path: str, hw: Any, xs: np.ndarray, xd: np.ndarray,
                      settings: dict[str, Any]) -> tuple[np.ndarray | None, np.ndarray | None]:
        """TTFT (ms) against prompt length and decode (tok/s) against position on ``hw``: the expected figures
        where a fit gives them, else the ceilings."""
        t = self.predictor.expected_curve(path, xs, "prefill", 0, hw, **settings)
        d = self.predictor.expected_curve(path, xd, "decode", 0, hw, **settings)
        t_line = t[0] if t is not None else self.predictor.ttft_curve(path, xs, 0, hw, **settings)
        d_line = d[0] if d is not None else self.predictor.decode_curve(path, xd, hw, **settings)
        return t_line, d_line

    def _kv_curve(self, out: list[Curve], path: str, xk: np.ndarray, name: str, c: str,
                  settings: dict[str, Any]) -> None:
        curve = self.predictor.kv_curve(path, xk, **settings)
        if curve is not None:
            out.append(Curve(f"{name} KV predicted", xk, curve[0] / MIB, c, measured=False))

    def _fill_table(self, table: CompareTable) -> int:
        """The ratio table; returns how many measured entries have fewer than 3 repetitions (marked ⚠)."""
        headers = table.headers
        self.table.clear()
        self.table.setColumnCount(len(headers))
        self.table.setHorizontalHeaderLabels(list(headers))
        self.table.setRowCount(len(table.rows))
        for k, (*_names, tip) in enumerate(FIGURES):
            self.table.horizontalHeaderItem(3 + 2 * k).setToolTip(tip)
        for r, (row, colour) in enumerate(zip(table.rows, self.colours(), strict=True)):
            pix = QPixmap(12, 12)
            pix.fill(QColor(colour))
            first = QTableWidgetItem(QIcon(pix), row.name)
            first.setToolTip(row.item.label)
            cells = [first, QTableWidgetItem(row.kind)]
            if row.thin:
                cells[1].setToolTip("fewer than 3 repetitions: its ratios are within the run-to-run noise")
            cells += [QTableWidgetItem(text) for text in row.cells]
            for c, cell in enumerate(cells):
                if c >= 2:
                    cell.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                self.table.setItem(r, c, cell)
        self.table.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        for c in range(1, len(headers)):
            self.table.horizontalHeader().setSectionResizeMode(c, QHeaderView.ResizeMode.ResizeToContents)
        return table.n_thin


def _arrays(xy: tuple[list[float], list[float]]) -> tuple[np.ndarray, np.ndarray]:
    return np.asarray(xy[0], dtype=float), np.asarray(xy[1], dtype=float)
