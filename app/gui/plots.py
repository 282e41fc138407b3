"""The live plots: every measurement beside its prediction, redrawn from a LiveRun by a timer (setData only)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QGridLayout, QWidget

from app.gui.live import LiveRun
from app.gui.predictions import PredictionService, n_ctx_for

pg.setConfigOptions(antialias=True, background="w", foreground="#222")

COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f")
HILITE = "#ff8c00"
PREFILL_BRUSH = (255, 190, 60, 55)
DECODE_BRUSH = (70, 150, 255, 40)
MIB = 1024.0**2
CURVE_POINTS = 20


def nice_ceil(v: float) -> float:
    """A round number a little above ``v`` (steps of half a decade: 150 → 200, 0.73 → 0.8)."""
    if not np.isfinite(v) or v <= 0:
        return 1.0
    half = 10 ** np.floor(np.log10(v)) / 2
    return float(np.ceil(v * 1.04 / half) * half)


def _finite_max(*arrays: Any) -> float:
    vals = [float(np.nanmax(a)) for a in arrays if np.size(a) and np.isfinite(a).any()]
    return max(vals) if vals else float("nan")


def color(i: int) -> str:
    return COLORS[i % len(COLORS)]


def short_model(path: str) -> str:
    name = os.path.basename(path)
    return name[:-5] if name.lower().endswith(".gguf") else name


class TopLegend(pg.LegendItem):
    """A legend laid out above the plot area (in the PlotItem's grid), so it never hides data."""

    def updateSize(self) -> None:  # noqa: N802 - pyqtgraph's name
        height = width = 0.0
        for row in range(self.layout.rowCount()):
            row_height = col_width = 0.0
            for col in range(self.layout.columnCount()):
                item = self.layout.itemAt(row, col)
                if item:
                    col_width += item.width() + 3
                    row_height = max(row_height, item.height())
            width = max(width, col_width)
            height += row_height
        self.setMinimumHeight(height)
        self.setMaximumHeight(height)
        self.setMinimumWidth(min(width, 200))
        self.updateGeometry()

    def paint(self, p: Any, *args: Any) -> None:
        return  # no frame: it sits outside the data

    def fit(self, width: float) -> None:
        """Use as many columns (up to ``max_columns``) as fit in ``width`` pixels."""
        cols = max(getattr(self, "max_columns", self.columnCount), 1)
        while cols > 1:
            widths = [0.0] * cols
            for i, (_sample, label) in enumerate(self.items):
                text_w = label.item.boundingRect().width() if hasattr(label, "item") else label.width()
                widths[i % cols] = max(widths[i % cols], 20 + text_w + 12)
            if sum(widths) <= width:
                break
            cols -= 1
        if cols != self.columnCount:
            self.setColumnCount(cols)


def make_plot(title: str, x_label: str, y_label: str, columns: int = 2) -> pg.PlotWidget:
    """A white plot with a bold title, axis labels carrying their units, a grid and a legend above the data."""
    w = pg.PlotWidget()
    w.setMinimumSize(240, 170)
    p = w.getPlotItem()
    p.setTitle(f"<b>{title}</b>", size="10pt")
    p.setLabel("bottom", x_label)
    p.setLabel("left", y_label)
    for ax in ("left", "bottom"):
        p.getAxis(ax).enableAutoSIPrefix(False)
    p.showGrid(x=True, y=True, alpha=0.18)
    legend = TopLegend(labelTextSize="8pt", colCount=columns, verSpacing=-8, horSpacing=4)
    legend.max_columns = columns
    p.layout.removeItem(p.getAxis("top"))  # its cell (above the data) holds the legend; the axis stays hidden
    p.layout.addItem(legend, 1, 1)
    p.legend = legend
    return w


def scatter(name: str | None, c: str, symbol: str = "o", size: float = 8) -> pg.PlotDataItem:
    return pg.PlotDataItem([], [], pen=None, symbol=symbol, symbolSize=size, symbolBrush=pg.mkBrush(c),
                           symbolPen=pg.mkPen("w", width=0.8), name=name)


def ring(name: str | None) -> pg.PlotDataItem:
    return pg.PlotDataItem([], [], pen=None, symbol="o", symbolSize=17, symbolBrush=None,
                           symbolPen=pg.mkPen(HILITE, width=2.6), name=name)


def line(name: str | None, c: str, width: float = 1.8, dashed: bool = False, alpha: int = 255) -> pg.PlotDataItem:
    qc = pg.mkColor(c)
    qc.setAlpha(alpha)
    pen = pg.mkPen(qc, width=width, style=Qt.PenStyle.DashLine if dashed else Qt.PenStyle.SolidLine)
    return pg.PlotDataItem([], [], pen=pen, name=name)


def rename(plot: pg.PlotItem, item: Any, name: str) -> None:
    """Change an item's legend label (names that carry the profile change when the profile does)."""
    legend = plot.legend
    if legend is None or item.name() == name:
        return
    item.opts["name"] = name
    for sample, label in legend.items:
        if sample.item is item:
            label.setText(name)
            legend.updateSize()
            return


def _connect(starts: np.ndarray) -> np.ndarray:
    """pyqtgraph connect array: point i joins i+1 unless i+1 begins a new repetition."""
    if starts.size == 0:
        return np.zeros(0, dtype=bool)
    return np.append(starts[1:] < 0.5, False)


class _Pool:
    """Plot items created on first use, reused by key; ``clear`` removes them all."""

    def __init__(self) -> None:
        self.items: dict[tuple[Any, ...], tuple[Any, Any]] = {}

    def get(self, owner: Any, key: tuple[Any, ...], make: Callable[[], Any]) -> Any:
        hit = self.items.get(key)
        if hit is None:
            item = make()
            owner.addItem(item)
            self.items[key] = (owner, item)
            return item
        return hit[1]

    def clear(self) -> None:
        for owner, item in self.items.values():
            owner.removeItem(item)
        self.items.clear()


class LivePlots(QWidget):
    """TTFT vs prompt, decode vs position, KV memory vs context, telemetry timeline and inter-token latency."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ttft = make_plot("Time to first token (prefill)", "prompt length (tokens)", "TTFT (ms)", 1)
        self.decode = make_plot("Decode speed vs position in context", "position in context (tokens)",
                                "decode speed (tok/s)", 2)
        self.kv = make_plot("KV-cache memory vs context", "context size (tokens)", "memory (MiB, log scale)", 2)
        self.kv.getPlotItem().setLogMode(x=False, y=True)
        self.tel = make_plot("Telemetry: worker process (shaded: prefill / decode)", "time since sweep start (s)",
                             "memory (MiB)", 4)
        self.itl = make_plot("Inter-token latency over the run", "time since sweep start (s)",
                             "inter-token latency (ms)", 1)
        self._setup_right_axis()
        grid = QGridLayout(self)
        grid.setContentsMargins(0, 0, 0, 0)
        grid.setSpacing(4)
        grid.addWidget(self.ttft, 0, 0)
        grid.addWidget(self.decode, 0, 1)
        grid.addWidget(self.kv, 0, 2)
        grid.addWidget(self.tel, 1, 0, 1, 2)
        grid.addWidget(self.itl, 1, 2)
        self._pool = _Pool()
        self._regions: list[pg.LinearRegionItem] = []
        self._n_phases = 0
        self._last_key: tuple[Any, ...] | None = None
        self._limit: pg.InfiniteLine | None = None
        self._mem_pred: pg.InfiniteLine | None = None
        self.kv_ctx_max = 4096
        self.redraws = 0
        self._plot_keys: dict[str, tuple[Any, ...]] = {}
        self._ranges: dict[str, tuple[Any, Any]] = {}
        self._dec_curves: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._drawn_at: dict[str, int] = {}
        self._behind = False
        self._legend_entries = 0
        self.max_per_refresh = 1
        for w in self.plots():
            for name in ("left", "bottom", "right"):
                w.getPlotItem().getAxis(name).setCacheMode(pg.QtWidgets.QGraphicsItem.CacheMode.DeviceCoordinateCache)

    def plots(self) -> list[pg.PlotWidget]:
        return [self.ttft, self.decode, self.kv, self.tel, self.itl]

    def _setup_right_axis(self) -> None:
        p = self.tel.getPlotItem()
        self.tel_vb2 = pg.ViewBox()
        p.showAxis("right")
        p.scene().addItem(self.tel_vb2)
        axis = p.getAxis("right")
        axis.linkToView(self.tel_vb2)
        axis.setLabel("CPU / GPU use (%), power (W)")
        axis.enableAutoSIPrefix(False)
        self.tel_vb2.setXLink(p)

        def sync() -> None:
            self.tel_vb2.setGeometry(p.vb.sceneBoundingRect())
            self.tel_vb2.linkedViewChanged(p.vb, self.tel_vb2.XAxis)

        p.vb.sigResized.connect(sync)
        sync()
        legend = p.legend
        for name, brush in (("prefill", PREFILL_BRUSH), ("decode", DECODE_BRUSH)):
            dummy = pg.PlotDataItem([np.nan], [np.nan], pen=None, fillLevel=0, fillBrush=pg.mkBrush(*brush))
            legend.addItem(dummy, name)
        self._right_items: dict[str, pg.PlotDataItem] = {}

    def _right(self, key: str, name: str, c: str, dashed: bool = False) -> pg.PlotDataItem:
        item = self._right_items.get(key)
        if item is None:
            item = line(None, c, 1.5, dashed)
            self.tel_vb2.addItem(item)
            self.tel.getPlotItem().legend.addItem(item, name)
            self._right_items[key] = item
        return item

    # --- public ---------------------------------------------------------------------------------
    def reset(self) -> None:
        """Forget everything drawn (a new sweep, another past run)."""
        self._pool.clear()
        for r in self._regions:
            self.tel.getPlotItem().removeItem(r)
        self._regions.clear()
        self._n_phases = 0
        legend = self.tel.getPlotItem().legend
        for item in self._right_items.values():
            self.tel_vb2.removeItem(item)
            legend.removeItem(item)
        self._right_items.clear()
        for attr in ("_limit", "_mem_pred"):
            line_item = getattr(self, attr)
            if line_item is not None:
                self.kv.getPlotItem().removeItem(line_item) if attr == "_limit" else \
                    self.tel.getPlotItem().removeItem(line_item)
                setattr(self, attr, None)
        self._last_key = None
        self._plot_keys.clear()
        self._drawn_at.clear()
        self._behind = False
        self._ranges.clear()
        self._dec_curves = {}
        for w in (self.decode, self.tel, self.itl):
            w.getPlotItem().enableAutoRange()
        self.tel_vb2.enableAutoRange()

    @property
    def behind(self) -> bool:
        """Whether some plot still waits for its redraw (refresh draws at most a few per call)."""
        return self._behind

    def refresh(self, session: LiveRun, predictor: PredictionService, selected: Iterable[int] = (),
                force: bool = False) -> bool:
        """Redraw plots whose inputs changed; False when none had.

        Without ``force`` at most ``max_per_refresh`` plots are redrawn per call, the longest-waiting first:
        each redraw queues a repaint of its scene, and five back-to-back repaints would hold the GUI thread for
        tens of milliseconds. The rest follow on the next timer tick.
        """
        sel = frozenset(selected)
        key = (id(session), session.version, predictor.version, predictor.curves_version, sel, self.kv_ctx_max)
        if key == self._last_key and not force and not self._behind:
            return False
        self._last_key = key
        models = session.models()
        multi = len(models) > 1
        n_tok, n_tel = len(session.tok_t_ns), len(session.tel_t_ns)
        base = (id(session), predictor.version, predictor.curves_version)
        keys = {
            "ttft": (*base, session.rows_version, len(session.tests), sel),
            "dec": (*base, session.rows_version, len(session.tests), sel, n_tok),
            "kv": (*base, session.rows_version, len(session.tests), sel, self.kv_ctx_max),
            "tel": (*base, n_tel, len(session.phases), len(session.tests)),
            "itl": (*base, n_tok, sel, session.rows_version),
        }
        changed = [k for k, v in keys.items() if force or self._plot_keys.get(k) != v]
        if not force:
            changed.sort(key=lambda k: self._drawn_at.get(k, -1))
            changed = changed[: self.max_per_refresh]
        self._behind = False
        for name in changed:
            if name == "ttft":
                self._draw_ttft(session, predictor, models, multi, sel)
            elif name == "dec":
                self._dec_curves = self._draw_decode(session, predictor, models, multi, sel)
            elif name == "kv":
                self._draw_kv(session, predictor, models, multi, sel)
            elif name == "tel":
                self._draw_telemetry(session, predictor, models)
            else:
                self._draw_itl(session, models, self._dec_curves, sel)
            self._plot_keys[name] = keys[name]
            self.redraws += 1
            self._drawn_at[name] = self.redraws
        self._behind = any(self._plot_keys.get(k) != v for k, v in keys.items())
        n_entries = sum(len(w.getPlotItem().legend.items) for w in self.plots())
        if n_entries != self._legend_entries:
            self._legend_entries = n_entries
            self.fit_legends()
        return bool(changed)

    def _set_range(self, name: str, vb: pg.ViewBox, x: tuple[float, float] | None,
                   y_hi: float | None, y_lo: float = 0.0) -> None:
        """Fix a view's range to 'nice' bounds that only grow within a session: axes are redrawn (costly text)
        only when the data outgrows them, not on every appended point."""
        prev_x, prev_y = self._ranges.get(name, (None, None))
        if x is not None and prev_x is not None:
            x = (min(x[0], prev_x[0]), max(x[1], prev_x[1]))
        y = None
        if y_hi is not None:
            hi = nice_ceil(y_hi)
            y = (y_lo, max(hi, prev_y[1]) if prev_y is not None else hi)
        if (x, y) == (prev_x, prev_y) or (x is None and y is None):
            return
        self._ranges[name] = (x if x is not None else prev_x, y if y is not None else prev_y)
        vb.disableAutoRange()
        vb.setRange(xRange=x, yRange=y, padding=0.0)

    def fit_legends(self) -> None:
        """Fewer legend columns where a plot is too narrow for them (after resizes and new entries)."""
        for w in self.plots():
            legend = w.getPlotItem().legend
            if isinstance(legend, TopLegend):
                legend.fit(w.getPlotItem().getViewBox().width() or w.width() - 60)

    def resizeEvent(self, event: Any) -> None:  # noqa: N802
        super().resizeEvent(event)
        self.fit_legends()

    def data_of(self, *key: Any) -> tuple[np.ndarray, np.ndarray]:
        """(x, y) drawn by one item, e.g. ``data_of("ttft", "meas", 0)`` (tests, scripting); empty if none."""
        hit = self._pool.items.get(tuple(key))
        item = hit[1] if hit is not None else self._right_items.get(str(key[-1])) if key[:1] == ("tel2",) else None
        if item is None:
            return np.zeros(0), np.zeros(0)
        x, y = item.getData()
        return (np.zeros(0) if x is None else np.asarray(x)), (np.zeros(0) if y is None else np.asarray(y))

    def n_phase_regions(self) -> int:
        return len(self._regions)

    def save_png(self, path: str) -> bool:
        return self.grab().save(path, "PNG", 0)

    # --- helpers --------------------------------------------------------------------------------
    def _settings(self, session: LiveRun, path: str) -> dict[str, Any]:
        for i in sorted(session.tests):
            t = session.tests[i]
            if t.get("model_path") == path:
                return {k: t.get(k) for k in ("n_gpu_layers", "type_k", "type_v", "flash_attn", "n_ubatch")}
        return {}

    def _curve(self, predictor: PredictionService, key: tuple[Any, ...], compute: Callable[[], Any]) -> Any:
        """A predicted curve from the predictor's cache; None while it is being computed in the background."""
        return predictor.cached_curve((*key, predictor.version), compute)

    def _label(self, what: str, path: str, multi: bool) -> str:
        return f"{what} — {short_model(path)}" if multi else what

    @staticmethod
    def _profile_name(predictor: PredictionService) -> str:
        return predictor.profile.name if predictor.profile else "no profile"

    # --- TTFT -----------------------------------------------------------------------------------
    def _draw_ttft(self, session: LiveRun, predictor: PredictionService, models: Sequence[str], multi: bool,
                   sel: frozenset[int]) -> None:
        plot = self.ttft.getPlotItem()
        rows = [r for r in session.ok_rows() if r.get("ttft_ms") is not None]
        tests = [session.tests[i] for i in sorted(session.tests)]
        xmax = max([int(t.get("n_prompt") or 0) for t in tests] + [64]) * 1.15
        xs = np.linspace(1, xmax, CURVE_POINTS)
        for m, path in enumerate(models):
            c = color(m)
            mine = [r for r in rows if r.get("model_path") == path]
            x = np.array([float(r["n_prompt"]) for r in mine])
            y = np.array([float(r["ttft_ms"]) for r in mine])
            e = np.array([float(r.get("ttft_ms_stddev") or 0.0) for r in mine])
            err = self._pool.get(plot, ("ttft", "err", m), lambda c=c: pg.ErrorBarItem(
                x=np.zeros(0), y=np.zeros(0), top=np.zeros(0), bottom=np.zeros(0), beam=6, pen=pg.mkPen(c, width=1.2)))
            err.setData(x=x, y=y, top=e, bottom=e)
            pts = self._pool.get(plot, ("ttft", "meas", m),
                                 lambda m=m, c=c, path=path: scatter(self._label("measured (±1 sd)", path, multi), c))
            pts.setData(x, y)
            depths = sorted({int(t.get("n_depth") or 0) for t in tests if t.get("model_path") == path})[:3] or [0]
            settings = self._settings(session, path)
            for j, d in enumerate(depths):
                ys = self._curve(predictor, ("ttft", path, d, xmax, tuple(sorted(settings.items()))),
                                 lambda d=d, path=path, settings=settings: predictor.ttft_curve(path, xs, d,
                                                                                                 **settings))
                name = f"predicted ({self._profile_name(predictor)})" + (f", depth {d}" if len(depths) > 1 else "")
                item = self._pool.get(plot, ("ttft", "pred", m, j),
                                      lambda name=name, c=c, j=j, path=path: line(
                                          self._label(name, path, multi), c, 1.8, dashed=True, alpha=255 - 60 * j))
                rename(plot, item, self._label(name, path, multi))
                if ys is None:
                    item.setData([], [])
                else:
                    item.setData(xs, ys)
        hx = [float(r["n_prompt"]) for r in rows if r.get("test_index") in sel]
        hy = [float(r["ttft_ms"]) for r in rows if r.get("test_index") in sel]
        self._pool.get(plot, ("ttft", "hl"), lambda: ring(None)).setData(hx, hy)

    # --- decode ---------------------------------------------------------------------------------
    def _model_of_tokens(self, session: LiveRun, models: Sequence[str]) -> np.ndarray:
        tt = session.tok_test.view().astype(int)
        if tt.size == 0:
            return tt
        lut = np.full(max(int(tt.max()), max(session.tests, default=0)) + 1, -1, dtype=int)
        index = {p: i for i, p in enumerate(models)}
        for i, t in session.tests.items():
            if 0 <= i < lut.size:
                lut[i] = index.get(str(t.get("model_path", "")), -1)
        return lut[tt]

    def _draw_decode(self, session: LiveRun, predictor: PredictionService, models: Sequence[str], multi: bool,
                     sel: frozenset[int]) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        plot = self.decode.getPlotItem()
        tests = [session.tests[i] for i in sorted(session.tests)]
        xmax = max([int(t.get("n_depth") or 0) + int(t.get("n_prompt") or 0) + int(t.get("n_gen") or 0)
                    for t in tests] + [64]) * 1.05
        xs = np.linspace(0, xmax, CURVE_POINTS)
        tok_m = self._model_of_tokens(session, models)
        pos, rate, starts = session.tok_pos.view(), session.tok_rate.view(), session.tok_rep_start.view()
        tok_t = session.tok_test.view()
        rows = [r for r in session.ok_rows() if r.get("decode_tps") is not None]
        curves: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        for m, path in enumerate(models):
            c = color(m)
            mask = tok_m == m
            tokens = self._pool.get(plot, ("dec", "tok", m), lambda c=c, path=path: line(
                self._label("per token (measured)", path, multi), c, 1.0, alpha=110))
            tokens.setData(pos[mask], rate[mask], connect=_connect(starts[mask]))
            mine = [r for r in rows if r.get("model_path") == path]
            x = np.array([_mean_pos(r) for r in mine])
            y = np.array([float(r["decode_tps"]) for r in mine])
            e = np.array([float(r.get("decode_tps_stddev") or 0.0) for r in mine])
            err = self._pool.get(plot, ("dec", "err", m), lambda c=c: pg.ErrorBarItem(
                x=np.zeros(0), y=np.zeros(0), top=np.zeros(0), bottom=np.zeros(0), beam=6, pen=pg.mkPen(c, width=1.2)))
            err.setData(x=x, y=y, top=e, bottom=e)
            means = self._pool.get(plot, ("dec", "mean", m), lambda c=c, path=path: scatter(
                self._label("test mean (±1 sd)", path, multi), c, "s", 10))
            means.setData(x, y)
            settings = self._settings(session, path)
            ys = self._curve(predictor, ("dec", path, xmax, tuple(sorted(settings.items()))),
                             lambda path=path, settings=settings: predictor.decode_curve(path, xs, **settings))
            name = self._label(f"ceiling ({self._profile_name(predictor)})", path, multi)
            item = self._pool.get(plot, ("dec", "pred", m), lambda c=c, name=name: line(name, c, 2.0, dashed=True))
            rename(plot, item, name)
            if ys is None:
                item.setData([], [])
            else:
                item.setData(xs, ys)
                curves[m] = (xs, ys)
        in_sel = np.isin(tok_t, list(sel)) if sel else np.zeros(tok_t.size, dtype=bool)
        hl = self._pool.get(plot, ("dec", "hltok"), lambda: line(None, HILITE, 1.6))
        hl.setData(pos[in_sel], rate[in_sel], connect=_connect(starts[in_sel]))
        hx = [_mean_pos(r) for r in rows if r.get("test_index") in sel]
        hy = [float(r["decode_tps"]) for r in rows if r.get("test_index") in sel]
        self._pool.get(plot, ("dec", "hl"), lambda: ring(None)).setData(hx, hy)
        tok_hi = float(np.percentile(rate, 99)) if rate.size else float("nan")
        mean_hi = max((float(r["decode_tps"]) + float(r.get("decode_tps_stddev") or 0) for r in rows), default=np.nan)
        y_hi = _finite_max(tok_hi, mean_hi, *[ys for _xs, ys in curves.values()])
        self._set_range("dec", plot.getViewBox(), (0.0, float(xmax)), y_hi if np.isfinite(y_hi) else None)
        return curves

    # --- KV memory ------------------------------------------------------------------------------
    def _draw_kv(self, session: LiveRun, predictor: PredictionService, models: Sequence[str], multi: bool,
                 sel: frozenset[int]) -> None:
        plot = self.kv.getPlotItem()
        tests = [session.tests[i] for i in sorted(session.tests)]
        cmax = max([n_ctx_for(t) for t in tests] + [self.kv_ctx_max, 512])
        xs = np.linspace(256, cmax, CURVE_POINTS)
        rows = session.ok_rows()
        source = next((str(r.get("mem_source")) for r in rows if r.get("mem_source")), "rss_delta")
        taken = "VRAM growth" if source.startswith("vram") else "RSS growth"
        for m, path in enumerate(models):
            c = color(m)
            settings = self._settings(session, path)
            res = self._curve(predictor, ("kv", path, cmax, tuple(sorted(settings.items()))),
                              lambda path=path, settings=settings: predictor.kv_curve(path, xs, **settings))
            kv_item = self._pool.get(plot, ("kv", "kv", m), lambda c=c, path=path, settings=settings: line(
                self._label(f"KV cache, pred. ({settings.get('type_k') or 'f16'})", path, multi), c, 2.0))
            tot_item = self._pool.get(plot, ("kv", "tot", m), lambda c=c, path=path: line(
                self._label("weights+KV+compute, pred.", path, multi), c, 1.6, dashed=True))
            if res is None:
                kv_item.setData([], [])
                tot_item.setData([], [])
            else:
                kv_item.setData(xs, res[0] / MIB)
                tot_item.setData(xs, res[1] / MIB)
            mine = [r for r in rows if r.get("model_path") == path]
            kv_rows = [r for r in mine if r.get("llama_kv_bytes")]
            self._pool.get(plot, ("kv", "meas", m), lambda c=c, path=path: scatter(
                self._label("KV in llama.cpp's log", path, multi), c, "d", 11)).setData(
                [_ctx(r) for r in kv_rows], [float(r["llama_kv_bytes"]) / MIB for r in kv_rows])
            mem_rows = [r for r in mine if r.get("mem_measured_bytes")]
            self._pool.get(plot, ("kv", "mem", m), lambda c=c, path=path, taken=taken: scatter(
                self._label(f"measured ({taken})", path, multi), c, "t", 11)).setData(
                [_ctx(r) for r in mem_rows], [float(r["mem_measured_bytes"]) / MIB for r in mem_rows])
        hi = [r for r in rows if r.get("test_index") in sel and r.get("mem_measured_bytes")]
        self._pool.get(plot, ("kv", "hl"), lambda: ring(None)).setData(
            [_ctx(r) for r in hi], [float(r["mem_measured_bytes"]) / MIB for r in hi])
        profile = predictor.profile
        if profile is not None:
            limit_mib = profile.vram_gib * 1024.0
            label = f"{'RAM' if profile.kind == 'cpu' else 'VRAM'} {profile.vram_gib:.0f} GiB ({profile.name})"
            if self._limit is None:
                self._limit = pg.InfiniteLine(angle=0, movable=False, pen=pg.mkPen("#444", width=1.5,
                                                                                 style=Qt.PenStyle.DotLine),
                                              label=label, labelOpts={"position": 0.3, "color": "#333",
                                                                      "anchors": [(0.5, 0), (0.5, 0)]})
                plot.addItem(self._limit, ignoreBounds=False)
            self._limit.setPos(np.log10(limit_mib))
            self._limit.label.setFormat(label)

    # --- telemetry ------------------------------------------------------------------------------
    def _draw_telemetry(self, session: LiveRun, predictor: PredictionService, models: Sequence[str]) -> None:
        plot = self.tel.getPlotItem()
        t = np.asarray(session.t_s(session.tel_t_ns.view()))
        tel = {k: s.view() for k, s in session.tel.items()}
        rss = self._pool.get(plot, ("tel", "rss"), lambda: line("worker memory, RSS (MiB)", "#1f77b4", 1.8))
        rss.setData(t, tel["rss_bytes"] / MIB)
        if np.isfinite(tel["vram_used_bytes"]).any():
            vram = self._pool.get(plot, ("tel", "vram"), lambda: line("GPU memory used (MiB)", "#9467bd", 1.8))
            vram.setData(t, tel["vram_used_bytes"] / MIB)
        self._right("cpu", "worker CPU (%)", "#2ca02c").setData(t, tel["cpu_pct"])
        if np.isfinite(tel["gpu_util_pct"]).any():
            self._right("gpu", "GPU utilisation (%)", "#ff7f0e").setData(t, tel["gpu_util_pct"])
        if np.isfinite(tel["power_w"]).any():
            self._right("pw", "GPU power (W)", "#d62728", dashed=True).setData(t, tel["power_w"])
        for span in session.phases[self._n_phases:]:
            brush = PREFILL_BRUSH if span.phase == "prefill" else DECODE_BRUSH
            region = pg.LinearRegionItem(values=(float(session.t_s(span.start_ns)), float(session.t_s(span.end_ns))),
                                         movable=False, brush=pg.mkBrush(*brush), pen=pg.mkPen(None))
            region.setZValue(-10)
            plot.addItem(region, ignoreBounds=True)
            self._regions.append(region)
        self._n_phases = len(session.phases)
        # predicted memory of the largest test of the first model, for scale
        if models and predictor.ready:
            biggest = max((session.tests[i] for i in session.tests if session.tests[i].get("model_path") == models[0]),
                          key=n_ctx_for, default=None)
            needed = predictor.mem_bytes(biggest) if biggest else None
            if needed:
                if self._mem_pred is None:
                    self._mem_pred = pg.InfiniteLine(angle=0, movable=False, pen=pg.mkPen(
                        "#1f77b4", width=1.2, style=Qt.PenStyle.DashLine), label="predicted weights+KV+compute",
                        labelOpts={"position": 0.12, "color": "#1f77b4", "anchors": [(0, 1), (0, 1)]})
                    plot.addItem(self._mem_pred)
                self._mem_pred.setPos(needed / MIB)
        t_hi = _finite_max(t, [float(session.t_s(sp.end_ns)) for sp in session.phases[-1:]])
        x = (0.0, nice_ceil(t_hi)) if np.isfinite(t_hi) else None
        mem_hi = _finite_max(tel["rss_bytes"] / MIB, tel["vram_used_bytes"] / MIB,
                             [self._mem_pred.value()] if self._mem_pred is not None else [])
        self._set_range("tel", plot.getViewBox(), x, mem_hi if np.isfinite(mem_hi) else None)
        pct_hi = _finite_max([100.0], tel["cpu_pct"], tel["gpu_util_pct"], tel["power_w"])
        self._set_range("tel2", self.tel_vb2, None, pct_hi)

    # --- inter-token latency --------------------------------------------------------------------
    def _draw_itl(self, session: LiveRun, models: Sequence[str],
                  curves: dict[int, tuple[np.ndarray, np.ndarray]], sel: frozenset[int]) -> None:
        plot = self.itl.getPlotItem()
        t = np.asarray(session.t_s(session.tok_t_ns.view()))
        itl, starts = session.tok_itl_ms.view(), session.tok_rep_start.view()
        conn = _connect(starts)
        self._pool.get(plot, ("itl", "meas"), lambda: line("measured, per token", "#1f77b4", 1.0)).setData(
            t, itl, connect=conn)
        floor = np.full(itl.size, np.nan)
        if curves and itl.size:
            tok_m = self._model_of_tokens(session, models)
            pos = session.tok_pos.view()
            for m, (xs, ys) in curves.items():
                mask = tok_m == m
                floor[mask] = 1000.0 / np.interp(pos[mask], xs, ys)
        self._pool.get(plot, ("itl", "pred"), lambda: line("predicted floor (1000 / ceiling)", "#d62728", 1.6,
                                                           dashed=True)).setData(t, floor, connect=conn)
        tok_t = session.tok_test.view()
        in_sel = np.isin(tok_t, list(sel)) if sel else np.zeros(tok_t.size, dtype=bool)
        self._pool.get(plot, ("itl", "hl"), lambda: line(None, HILITE, 1.6)).setData(
            t[in_sel], itl[in_sel], connect=_connect(starts[in_sel]))
        plot.setClipToView(True)
        plot.setDownsampling(auto=True, mode="peak")
        if itl.size:
            y_hi = min(float(np.nanmax(itl)), 4 * float(np.percentile(itl, 95)))
            self._set_range("itl", plot.getViewBox(), (0.0, nice_ceil(float(t[-1]))), _finite_max([y_hi], floor))


def _ctx(row: dict[str, Any]) -> float:
    """The context size a test ran with."""
    return float(row.get("n_ctx") or n_ctx_for(row))


def _mean_pos(row: dict[str, Any]) -> float:
    """Average context position of a test's decode steps: depth + prompt + half the generated tokens."""
    return float(int(row.get("n_depth") or 0) + int(row.get("n_prompt") or 0) + int(row.get("n_gen") or 0) / 2)
