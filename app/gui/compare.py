"""Compare view: model files (predicted) and past runs (measured) overlaid, one colour each, plus a ratio table."""

from __future__ import annotations

import os
import statistics
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
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
from app.gui.plots.kv import KvPlot, ctx_of
from app.gui.plots.panel import Curve
from app.gui.plots.style import MIB, color, short_model
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
    for key, say in (("n_threads", _threads_words), ("type_k", lambda v: f"KV {v}"),
                     ("n_gpu_layers", lambda v: f"{v} GPU layers"), ("flash_attn", _flash_words)):
        vals = sorted({str(r.get(key)) for r in rows if r.get(key) is not None})
        if len(vals) == 1:
            parts.append(say(vals[0]))
    return ", ".join(parts)


def _threads_words(v: str) -> str:
    return "all threads" if v in ("0", "-1") else f"{v} thread{'s' if v != '1' else ''}"


def _flash_words(v: str) -> str:
    return {"-1": "flash attention auto", "1": "flash attention on", "0": "flash attention off"}.get(v, f"FA {v}")


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
        for it, c in zip(self.items, self.colours(), strict=True):
            pix = QPixmap(14, 14)
            pix.fill(QColor(c))
            QListWidgetItem(QIcon(pix), it.label, self.list)
        prompt = self.reference_prompt()
        ttft, decode, kv = self._curves(prompt)
        off = self.ttft.draw_curves(ttft) + self.decode.draw_curves(decode)
        self.kv.draw_curves(kv)
        few = self._fill_table(prompt)
        models = [_model_part(it) for it in self.items]
        prefix = shared_prefix(models)
        hardware = sorted({hw.name for it in self.items if it.kind == "run"
                           if (hw := self.predictor.hardware_of(it.ok_rows())) is not None})
        named = (f"Models: {prefix}… (legends name what follows). " if prefix else "") + (
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
        """Each entry's colour: one per measured entry (its prediction is drawn in it too); a model file takes the
        colour of the first measured entry of the same file, else one of its own."""
        runs = [it for it in self.items if it.kind == "run"]
        first_run_of: dict[str, int] = {}
        for n, it in enumerate(runs):
            if it.path:
                first_run_of.setdefault(it.path, n)
        n_run, n_own = 0, len(runs)  # a run's colour; the next colour for a file with no run of its own
        out: list[str] = []
        for it in self.items:
            if it.kind == "run":
                out.append(color(n_run))
                n_run += 1
            elif it.path in first_run_of:
                out.append(color(first_run_of[it.path]))
            else:
                out.append(color(n_own))
                n_own += 1
        return out

    def _curves(self, prompt: int) -> tuple[list[Curve], list[Curve], list[Curve]]:
        """TTFT, decode and KV-memory curves. A run: its measured means (points) and, in the same colour, the
        prediction for the hardware it ran on (a line: this machine's expected figure where a fit gives one,
        else the ceiling). A model file: its what-if on the chosen profile (dashed), off the y scale when there
        are measurements to read."""
        xmax_p = max([float(r.get("n_prompt") or 0) for it in self.items for r in it.rows] + [prompt]) * 1.1
        xmax_d = max([float((r.get("n_depth") or 0) + (r.get("n_prompt") or 0) + (r.get("n_gen") or 0))
                      for it in self.items for r in it.rows] + [prompt + 128]) * 1.05
        xmax_kv = max([float(ctx_of(r)) for it in self.items for r in it.rows] + [4096.0])
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
                ttft.append(Curve(f"{name} (measured)", *_means_by_x(
                    (float(r["n_prompt"]), float(r["ttft_ms"])) for r in rows
                    if r.get("ttft_ms") is not None and not r.get("n_depth")), c))
                decode.append(Curve(f"{name} (measured)", *_means_by_x(
                    (mean_pos(r), float(r["decode_tps"])) for r in rows if r.get("decode_tps") is not None), c))
                kv_points = [(ctx_of(r), float(r["llama_kv_bytes"]) / MIB) for r in rows if r.get("llama_kv_bytes")]
                if kv_points:
                    kv.append(Curve(f"{name} (llama.cpp's KV)", *_means_by_x(kv_points), c))
                hw = self.predictor.hardware_of(rows)
                if hw is not None and it.path:
                    settings = _run_settings(rows)
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
            decode_noise = _relative_noise(d0, "decode_tps")
            pts = sorted((int(r["n_prompt"]), float(r["ttft_ms"])) for r in d0 if r.get("ttft_ms") is not None)
            same = [t for p, t in pts if p == prompt]
            ttft_noise = _relative_noise([r for r in d0 if int(r.get("n_prompt") or 0) == prompt] or d0, "ttft_ms")
            reps = min((int(r.get("n_repetitions") or 1) for r in d0), default=0)
            ttft = _mean(same) if same else (float(np.interp(prompt, [p for p, _ in pts], [t for _, t in pts]))
                                             if pts else None)
            size = next((float(r["model_size"]) for r in rows if r.get("model_size")), None)
            type_k = next((str(r.get("type_k")) for r in rows if r.get("type_k")), "f16")
        else:
            p = self.predictor.predict(it.path, n_ctx=prompt + 256, n_prompt=prompt, n_gen=0)
            decode = p.decode_ceiling_empty_tps if p else None
            ttft = p.ttft_ms if p else None
            size, type_k = None, "f16"
            decode_noise = ttft_noise = 0.0  # a prediction has no repetitions
            reps = None
        if facts is not None:  # one definition of size for runs and files alike: the file on disk
            size = float(facts.file_bytes)
        kv = facts.kv_bytes_per_token(type_k) if facts is not None else None
        return {"decode": decode, "ttft": ttft, "size": size, "kv": kv, "decode_noise": decode_noise,
                "ttft_noise": ttft_noise, "reps": reps}

    def _fill_table(self, prompt: int) -> int:
        """The ratio table; returns how many measured entries have fewer than 3 repetitions (marked ⚠)."""
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
        few = 0
        for r, (it, f, colour) in enumerate(zip(self.items, figs, self.colours(), strict=True)):
            base = bases[it.kind]
            reps = f.get("reps")
            thin = reps is not None and reps < 3
            few += int(thin)
            pix = QPixmap(12, 12)
            pix.fill(QColor(colour))
            first = QTableWidgetItem(QIcon(pix), _short_label(it))
            first.setToolTip(it.label)
            kind = "predicted" if it.kind != "run" else f"measured, {reps} rep{'s' if reps != 1 else ''}" + \
                (" ⚠" if thin else "")
            cells = [first, QTableWidgetItem(kind)]
            if thin:
                cells[1].setToolTip("fewer than 3 repetitions: its ratios are within the run-to-run noise")
            for key, fmt in (("decode", "{:,.1f}"), ("ttft", "{:,.1f}"), ("size", None), ("kv", None)):
                v = f.get(key)
                text = "—" if v is None else (human_bytes(v) if fmt is None else fmt.format(v))
                if key == "kv" and v is not None and v < 1024:
                    text = f"{v:.0f} B"
                cells.append(QTableWidgetItem(text))
                b = base.get(key)
                cells.append(QTableWidgetItem(_ratio_text(v, b, f.get(f"{key}_noise"), base.get(f"{key}_noise"),
                                                          thin)))
            for c, cell in enumerate(cells):
                if c >= 2:
                    cell.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                self.table.setItem(r, c, cell)
        self.table.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        for c in range(1, len(headers)):
            self.table.horizontalHeader().setSectionResizeMode(c, QHeaderView.ResizeMode.ResizeToContents)
        return few


def _relative_noise(rows: list[dict[str, Any]], key: str) -> float | None:
    """The relative standard error of the mean of ``key`` over ``rows`` (each a mean of its repetitions, with
    its ``KEY_stddev``); None where a row has one repetition (no spread to tell)."""
    terms = []
    for r in rows:
        mean, sd, n = r.get(key), r.get(f"{key}_stddev"), int(r.get("n_repetitions") or 1)
        if not mean or sd is None or n < 2:
            return None
        terms.append((float(sd) / float(mean)) ** 2 / n)
    return (sum(terms) ** 0.5) / len(terms) if terms else None


def _ratio_text(v: float | None, base: float | None, noise: float | None, base_noise: float | None,
                thin: bool) -> str:
    """"1.23× ±4%" (the noise of both means combined), "1.23× ⚠" with too few repetitions to tell."""
    if v is None or not base:
        return "—"
    text = f"{v / base:.2f}×"
    if thin:
        return text + " ⚠"
    if noise is not None and base_noise is not None and (noise or base_noise):
        text += f" ±{100 * (noise**2 + base_noise**2) ** 0.5:.0f}%"
    return text


def _run_settings(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The settings a run's rows share that a prediction takes (KV type, layers, flash attention, batches)."""
    out: dict[str, Any] = {}
    for key in ("type_k", "type_v", "n_gpu_layers", "flash_attn", "n_batch", "n_ubatch"):
        vals = {r.get(key) for r in rows if r.get(key) is not None}
        if len(vals) == 1:
            out[key] = vals.pop()
    return out


#: a legend entry's model part at most this long (the middle elided: two files differ at their ends)
LEGEND_MODEL_CHARS = 26


def _model_part(it: CompareItem) -> str:
    return short_model(it.path) if it.path else ", ".join(sorted({str(r.get("model_filename")) for r in it.rows}))


def shared_prefix(names: Sequence[str]) -> str:
    """The start every one of ``names`` shares, cut after its last separator (``SmolLM2-135M-Instruct.`` of
    ``…Q4_1`` and ``…Q8_0``), so that what is left still names each file; "" when fewer than two distinct names."""
    distinct = sorted(set(names))
    if len(distinct) < 2:
        return ""
    prefix = os.path.commonprefix(distinct)
    cut = max(prefix.rfind(ch) for ch in ".-_ ")
    return prefix[: cut + 1] if cut > 0 else ""


def legend_names(items: Sequence[CompareItem], with_run: bool) -> list[str]:
    """Each entry's name in a legend: its model without the start all compared models share (the plot note names it
    once), the middle elided past LEGEND_MODEL_CHARS, and its run only where several runs are compared."""
    models = [_model_part(it) for it in items]
    cut = len(shared_prefix(models))
    out = []
    for it, model in zip(items, models, strict=True):
        model = model[cut:]
        if len(model) > LEGEND_MODEL_CHARS:
            half = (LEGEND_MODEL_CHARS - 1) // 2
            model = f"{model[:half]}…{model[-half:]}"
        out.append(f"{it.sweep_name or it.run_id[:15]} · {model}" if it.kind == "run" and with_run else model)
    return out


def _short_label(it: CompareItem, settings: bool = True) -> str:
    """An entry's name: the model file, or the run and its model (and, with ``settings``, what its tests shared)."""
    if it.kind == "model":
        return short_model(it.path)
    shared = _distinct_settings(it.rows) if settings else ""
    model = short_model(it.path) if it.path else ", ".join(sorted({str(r.get("model_filename")) for r in it.rows}))
    return (it.sweep_name or it.run_id[:15]) + f" · {model}" + (f" ({shared})" if shared else "")


def _means_by_x(points: Iterable[tuple[float, float]]) -> tuple[np.ndarray, np.ndarray]:
    """The mean y at each distinct x, sorted by x."""
    by_x: dict[float, list[float]] = {}
    for x, y in points:
        by_x.setdefault(x, []).append(y)
    xs = sorted(by_x)
    return np.array(xs, dtype=float), np.array([statistics.fmean(by_x[x]) for x in xs], dtype=float)
