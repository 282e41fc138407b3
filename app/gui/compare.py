"""Compare view: model files (predicted) and past runs (measured) overlaid, one colour each, plus a ratio table."""

from __future__ import annotations

import os
import statistics
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
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

from app.gui import theme
from app.gui.panels.library import human_bytes
from app.gui.plots.decode import DecodePlot, mean_pos
from app.gui.plots.panel import Curve
from app.gui.plots.style import color, short_model
from app.gui.plots.ttft import TtftPlot
from app.gui.predictions import PredictionService
from app.gui.top_level import add_close_keys, fit_to_screen
from app.results.fields import RowStatus
from app.results.store import ResultStore, StoreError


@dataclass
class CompareItem:
    kind: str  # "model" (predicted) | "run" (measured)
    label: str
    path: str = ""
    run_id: str = ""
    rows: list[dict[str, Any]] = field(default_factory=list)
    sweep_name: str = ""

    def ok_rows(self) -> list[dict[str, Any]]:
        return [r for r in self.rows if r.get("status") == RowStatus.OK]


def run_item(run_id: str, rows: list[dict[str, Any]], sweep_name: str = "") -> CompareItem:
    """One model's rows of a run as a compare entry (label: the run, the model and its fixed settings)."""
    models = sorted({str(r.get("model_filename", "")) for r in rows})
    settings = _distinct_settings(rows)
    label = f"run {run_id[:15]}" + (f" {sweep_name}" if sweep_name else "") + f": {', '.join(models)}" + \
        (f" ({settings})" if settings else "")
    path = next((str(r.get("model_path")) for r in rows if r.get("model_path")), "")
    return CompareItem("run", label, path=path, run_id=run_id, rows=rows, sweep_name=sweep_name)


def run_items(run_id: str, rows: list[dict[str, Any]], sweep_name: str = "") -> list[CompareItem]:
    """A run as compare entries: one per model, never one average over several models."""
    by_model: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_model.setdefault(str(r.get("model_path") or r.get("model_filename") or ""), []).append(r)
    return [run_item(run_id, mine, sweep_name) for mine in by_model.values()]


def _distinct_settings(rows: list[dict[str, Any]]) -> str:
    parts = []
    for key, short in (("n_threads", "t"), ("type_k", "kv "), ("n_gpu_layers", "ngl"), ("flash_attn", "fa")):
        vals = sorted({str(r.get(key)) for r in rows if r.get(key) is not None})
        if len(vals) == 1:
            parts.append(f"{short}{vals[0]}")
    return " ".join(parts)


def _mean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x is not None]
    return statistics.fmean(xs) if xs else None


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
        self.table = QTableWidget(self)
        self.table.setTextElideMode(Qt.TextElideMode.ElideMiddle)  # two files differ at their ends: keep them
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        plots = QWidget(self)
        pl = QHBoxLayout(plots)
        pl.setContentsMargins(0, 0, 0, 0)
        pl.addWidget(self.ttft.widget)
        pl.addWidget(self.decode.widget)
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
        self._add(CompareItem("model", f"model {os.path.basename(path)} (predicted)", path=path))

    def add_run(self, run_id: str) -> bool:
        try:
            with ResultStore(self.store_path) as store:
                rows = store.rows(run_id)
                info = store.run_info(run_id)
        except StoreError as e:
            self.note.setText(str(e))
            return False
        if not rows:
            self.note.setText(f"run {run_id} has no results")
            return False
        for item in run_items(run_id, rows, str(info.get("sweep_name") or "")):
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
        for k, it in enumerate(self.items):
            pix = QPixmap(14, 14)
            pix.fill(QColor(color(k)))
            QListWidgetItem(QIcon(pix), it.label, self.list)
        prompt = self.reference_prompt()
        ttft, decode = self._curves(prompt)
        self.ttft.draw_curves(ttft)
        self.decode.draw_curves(decode)
        self._fill_table(prompt)
        prof = self.predictor.profile.name if self.predictor.profile else "no profile"
        self.note.setText(f"Solid: measured (one entry per model per run). Dashed: predicted ceilings for {prof} "
                          f"(model files: a what-if). Ratios compare like with like: measured against the first "
                          f"measured entry, predicted against the first predicted one; TTFT at {prompt} prompt "
                          f"tokens.")

    def _curves(self, prompt: int) -> tuple[list[Curve], list[Curve]]:
        """TTFT and decode curves, one colour per entry: a run's measured means, a model file's predictions."""
        xmax_p = max([float(r.get("n_prompt") or 0) for it in self.items for r in it.rows] + [prompt]) * 1.1
        xmax_d = max([float((r.get("n_depth") or 0) + (r.get("n_prompt") or 0) + (r.get("n_gen") or 0))
                      for it in self.items for r in it.rows] + [prompt + 128]) * 1.05
        ttft: list[Curve] = []
        decode: list[Curve] = []
        for k, it in enumerate(self.items):
            c, name = color(k), _short_label(it)
            if it.kind == "run":
                rows = it.ok_rows()
                ttft.append(Curve(f"{name} (measured)", *_means_by_x(
                    (float(r["n_prompt"]), float(r["ttft_ms"])) for r in rows
                    if r.get("ttft_ms") is not None and not r.get("n_depth")), c))
                decode.append(Curve(f"{name} (measured)", *_means_by_x(
                    (mean_pos(r), float(r["decode_tps"])) for r in rows if r.get("decode_tps") is not None), c))
                continue
            settings = {"type_k": "f16", "n_gpu_layers": 999}
            xs, xd = np.linspace(1, xmax_p, 40), np.linspace(0, xmax_d, 40)
            ys = self.predictor.ttft_curve(it.path, xs, 0, **settings)
            yd = self.predictor.decode_curve(it.path, xd, **settings)
            if ys is not None:
                ttft.append(Curve(f"{name} (predicted)", xs, ys, c, measured=False))
            if yd is not None:
                decode.append(Curve(f"{name} (ceiling)", xd, yd, c, measured=False))
        return ttft, decode

    def reference_prompt(self) -> int:
        counts = Counter(int(r.get("n_prompt") or 0) for it in self.items if it.kind == "run"
                         for r in it.ok_rows() if r.get("ttft_ms") is not None)
        counts.pop(0, None)
        if not counts:
            return 512
        top = max(counts.values())
        return max(p for p, n in counts.items() if n == top)

    def figures(self, it: CompareItem, prompt: int) -> dict[str, float | None]:
        """Decode tok/s (empty context), TTFT ms at ``prompt``, file size, KV bytes per token."""
        facts = self.predictor.facts.get(it.path)
        if it.kind == "run":
            rows = it.ok_rows()
            d0 = [r for r in rows if not r.get("n_depth")] or rows
            decode = _mean([r.get("decode_tps") for r in d0])
            pts = sorted((int(r["n_prompt"]), float(r["ttft_ms"])) for r in d0 if r.get("ttft_ms") is not None)
            same = [t for p, t in pts if p == prompt]
            ttft = _mean(same) if same else (float(np.interp(prompt, [p for p, _ in pts], [t for _, t in pts]))
                                             if pts else None)
            size = next((float(r["model_size"]) for r in rows if r.get("model_size")), None)
            type_k = next((str(r.get("type_k")) for r in rows if r.get("type_k")), "f16")
        else:
            p = self.predictor.predict(it.path, n_ctx=prompt + 256, n_prompt=prompt, n_gen=0)
            decode = p.decode_ceiling_empty_tps if p else None
            ttft = p.ttft_ms if p else None
            size, type_k = None, "f16"
        if facts is not None:  # one definition of size for runs and files alike: the file on disk
            size = float(facts.file_bytes)
        kv = facts.kv_bytes_per_token(type_k) if facts is not None else None
        return {"decode": decode, "ttft": ttft, "size": size, "kv": kv}

    def _fill_table(self, prompt: int) -> None:
        headers = ["", "kind", "decode tok/s", "× decode", f"TTFT ms @{prompt}", "× TTFT", "size", "× size",
                   "KV / token", "× KV"]
        self.table.clear()
        self.table.setColumnCount(len(headers))
        self.table.setHorizontalHeaderLabels(headers)
        self.table.setRowCount(len(self.items))
        for c, tip in ((3, "decode ÷ the first entry of the same kind (measured or predicted)"),
                       (5, "TTFT ÷ the first entry of the same kind"), (7, "file size ÷ the first of the same kind"),
                       (9, "KV per token ÷ the first of the same kind")):
            self.table.horizontalHeaderItem(c).setToolTip(tip)
        figs = [self.figures(it, prompt) for it in self.items]
        bases = {kind: next(f for it, f in zip(self.items, figs, strict=True) if it.kind == kind)
                 for kind in {it.kind for it in self.items}}
        for r, (it, f) in enumerate(zip(self.items, figs, strict=True)):
            base = bases[it.kind]
            pix = QPixmap(12, 12)
            pix.fill(QColor(color(r)))
            first = QTableWidgetItem(QIcon(pix), _short_label(it))
            first.setToolTip(it.label)
            cells = [first, QTableWidgetItem("measured" if it.kind == "run" else "predicted")]
            for key, fmt in (("decode", "{:,.1f}"), ("ttft", "{:,.1f}"), ("size", None), ("kv", None)):
                v = f.get(key)
                text = "—" if v is None else (human_bytes(v) if fmt is None else fmt.format(v))
                if key == "kv" and v is not None and v < 1024:
                    text = f"{v:.0f} B"
                cells.append(QTableWidgetItem(text))
                b = base.get(key)
                cells.append(QTableWidgetItem("—" if v is None or not b else f"{v / b:.2f}×"))
            for c, cell in enumerate(cells):
                if c >= 2:
                    cell.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                self.table.setItem(r, c, cell)
        self.table.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        for c in range(1, len(headers)):
            self.table.horizontalHeader().setSectionResizeMode(c, QHeaderView.ResizeMode.ResizeToContents)


def _short_label(it: CompareItem) -> str:
    if it.kind == "model":
        return short_model(it.path)
    settings = _distinct_settings(it.rows)
    model = short_model(it.path) if it.path else ", ".join(sorted({str(r.get("model_filename")) for r in it.rows}))
    return (it.sweep_name or it.run_id[:15]) + f" · {model}" + (f" ({settings})" if settings else "")


def _means_by_x(points: Iterable[tuple[float, float]]) -> tuple[np.ndarray, np.ndarray]:
    """The mean y at each distinct x, sorted by x."""
    by_x: dict[float, list[float]] = {}
    for x, y in points:
        by_x.setdefault(x, []).append(y)
    xs = sorted(by_x)
    return np.array(xs, dtype=float), np.array([statistics.fmean(by_x[x]) for x in xs], dtype=float)
