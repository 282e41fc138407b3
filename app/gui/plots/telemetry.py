"""The telemetry timeline: worker memory on the left axis, CPU/GPU use and power on the right, phases shaded."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QColor

from app.gui import theme
from app.gui.plots.bands import SpanBands, laid_over
from app.gui.plots.interaction import PickSeries, number
from app.gui.plots.items import ShapeSample, line
from app.gui.plots.panel import PlotPanel, PlotView
from app.gui.plots.streams import Stream
from app.gui.plots.style import DECODE_BRUSH, MIB, PREFILL_BRUSH, finite_max, nice_ceil
from app.gui.theme import series_colour as sc

#: the lines by key (``data_of(*key)``; "tel2": the right axis): (the sampler's reading, legend name, colour,
#: dashed); memory in MiB on the left, use (%) and power (W) on the right
LINES: dict[tuple[str, ...], tuple[str, str, str, bool]] = {
    ("rss",): ("rss_bytes", "worker memory, RSS (MiB)", "#1f77b4", False),
    ("vram",): ("vram_used_bytes", "GPU memory used (MiB)", "#9467bd", False),
    ("tel2", "cpu"): ("cpu_pct", "worker CPU (%)", "#2ca02c", False),
    ("tel2", "gpu"): ("gpu_util_pct", "GPU utilisation (%)", "#ff7f0e", False),
    ("tel2", "pw"): ("power_w", "GPU power (W)", "#d62728", True),
}
#: the legend's name of the predicted memory line (the first model's largest test: weights, KV cache and compute)
MEM_PRED_NAME = "predicted weights+KV+compute (MiB)"
#: lines shown from the start; the others (a GPU's) once they have a reading
ALWAYS = (("rss",), ("tel2", "cpu"))


class TelemetryPlot(PlotPanel):
    """Memory (MiB) and use (%, W) vs time since sweep start (s), prefill and decode spans shaded."""

    name = "tel"
    title = "Telemetry: worker process (shaded: prefill / decode)"
    x_label = "time since sweep start (s)"
    y_label = "memory (MiB)"
    columns = 4

    def __init__(self, title: str | None = None, columns: int | None = None) -> None:
        super().__init__(title, columns)
        self.phases = SpanBands({"prefill": PREFILL_BRUSH, "decode": DECODE_BRUSH})
        self.plot.addItem(self.phases, ignoreBounds=True)
        self.phases.setZValue(self.plot.tick_grid.zValue() - 1)  # under the grid (its z is the view's once added)
        self._n_phases = 0
        self._n_tel = 0
        self._mem_pred: pg.InfiniteLine | None = None
        self.vb2 = self._setup_right_axis()
        self._right_axis = _RightAxis(self.vb2, self.legend)

    def _setup_right_axis(self) -> pg.ViewBox:
        """A second view box for percentages and watts, sharing the time axis; shaded phases in the legend."""
        p = self.plot
        vb2 = pg.ViewBox()
        p.showAxis("right")
        p.scene().addItem(vb2)
        axis = p.getAxis("right")
        axis.linkToView(vb2)
        axis.setLabel("CPU / GPU use (%), power (W)")
        axis.enableAutoSIPrefix(False)
        vb2.setXLink(p)

        def sync() -> None:
            vb2.setGeometry(p.vb.sceneBoundingRect())
            vb2.linkedViewChanged(p.vb, vb2.XAxis)

        p.vb.sigResized.connect(sync)
        sync()
        for name, brush in (("prefill", PREFILL_BRUSH), ("decode", DECODE_BRUSH)):
            dummy = pg.PlotDataItem([np.nan], [np.nan], pen=None, fillLevel=0, fillBrush=pg.mkBrush(*brush))
            self.legend.addItem(PhaseSample(dummy, brush), name)
        return vb2

    def _right(self, key: str, name: str, c: str, dashed: bool = False) -> pg.PlotDataItem:
        """A line on the right axis (``data_of("tel2", key)``)."""
        def make() -> pg.PlotDataItem:
            item = line(name, c, 1.5, dashed, long=True)
            item.setDownsampling(auto=True, method="peak")  # as the plot's own lines (make_plot)
            item.setClipToView(True)
            return item

        return self.item(("tel2", key), make, owner=self._right_axis)

    def reset(self) -> None:
        super().reset()
        if self._mem_pred is not None:
            self.plot.removeItem(self._mem_pred)
            self.legend.removeItem(MEM_PRED_NAME)
            self._mem_pred = None
        self.vb2.enableAutoRange()

    @property
    def n_phase_regions(self) -> int:
        return len(self.phases.spans)

    def forget_taken(self) -> None:
        self._n_tel = 0
        self._n_phases = 0
        self.phases.clear()

    def predict(self, view: PlotView) -> None:
        self._draw_mem_pred(view)

    def take_new(self, view: PlotView) -> None:
        """The telemetry samples and the phases that came since."""
        s = view.session
        n0, n = self._n_tel, len(s.tel_t_ns)
        if n != n0:
            self._n_tel = n
            t = np.asarray(s.t_s(s.tel_t_ns.view()[n0:n]))
            for key, (column, _name, _colour, _dashed) in LINES.items():
                values = s.tel[column].view()[n0:n]
                self.stream(key).extend(t, values / MIB if column.endswith("_bytes") else values)
                if np.isfinite(values).any():
                    self._line(key)
        self._draw_phases(view)

    def take_rows(self, view: PlotView) -> None:
        for key in ALWAYS:
            self._line(key)

    def _line(self, key: tuple[str, ...]) -> pg.PlotDataItem:
        """The item of the line ``key`` (:data:`LINES`), made on first use."""
        _column, name, colour, dashed = LINES[key]
        if key[0] == "tel2":
            return self._right(key[1], name, sc(colour), dashed)
        return self.item(key, lambda: line(name, sc(colour), 1.8, dashed, long=True))

    def show_stream(self, key: tuple[Any, ...], stream: Stream, item: Any) -> None:
        """A line as sampled (pyqtgraph thins it to the pixels); memory lines read out under the mouse."""
        t, y = stream.x.view(), stream.y.view()
        item.setData(t, y)
        if key[0] != "tel2":
            name = LINES[key][1].removesuffix(" (MiB)")
            self.pickable(key, PickSeries(t, y, np.full(t.size, -1), lambda i, n=name, mib=y, t=t: (
                f"{n}\n{t[i]:.1f} s since start · {number(float(mib[i]))} MiB"), item, sorted_x=True))

    def fit_ranges(self) -> None:
        """Time from zero to the last sample or phase; memory to the highest sample or the predicted line; use from
        zero to 100 % (or the highest reading)."""
        s = self._session
        t = self.stream(("rss",)).x.view()
        last = [float(s.t_s(sp.end_ns)) for sp in s.phases[-1:]] if s is not None else []
        t_hi = finite_max(t, last)
        x = (0.0, nice_ceil(t_hi)) if np.isfinite(t_hi) else None
        mem_hi = finite_max(self.stream(("rss",)).y.view(), self.stream(("vram",)).y.view(),
                            [self._mem_pred.value()] if self._mem_shown else [])
        self.set_range(self.plot.getViewBox(), x, mem_hi if np.isfinite(mem_hi) else None)
        pct_hi = finite_max([100.0], *(self.stream(("tel2", k)).y.view() for k in ("cpu", "gpu", "pw")))
        self.set_range(self.vb2, None, pct_hi, which="right")

    def _draw_phases(self, view: PlotView) -> None:
        """Shade the prefill and decode spans that finished since they were last taken."""
        s = view.session
        for span in s.phases[self._n_phases:]:
            self.phases.add(float(s.t_s(span.start_ns)), float(s.t_s(span.end_ns)),
                            "prefill" if span.phase == "prefill" else "decode")
        self._n_phases = len(s.phases)

    def _draw_mem_pred(self, view: PlotView) -> None:
        """The predicted memory of the first model's largest test, for scale."""
        tests, models = view.session.tests, view.models
        if not models or not view.predictor.ready:
            return
        biggest = max((t for t in tests.values() if t.model_path == models[0]), key=lambda t: t.n_ctx, default=None)
        needed = view.predictor.mem_bytes(biggest) if biggest else None
        if not needed:
            return
        if self._mem_pred is None:
            # named in the legend, not by a label on the line: the worker's memory runs just above or on the
            # predicted figure, and a label there covered the measured line (issue #44, 1920×1080)
            pen = pg.mkPen(sc("#1f77b4"), width=1.2, style=Qt.PenStyle.DashLine)
            self._mem_pred = pg.InfiniteLine(angle=0, movable=False, pen=pen)
            self.plot.addItem(self._mem_pred)
            self.legend.addItem(pg.PlotDataItem([np.nan], [np.nan], pen=pen), MEM_PRED_NAME)
        self._mem_pred.setPos(needed / MIB)
        self._mem_pred.show()

    @property
    def _mem_shown(self) -> bool:
        return self._mem_pred is not None and self._mem_pred.isVisible()


class PhaseSample(ShapeSample):
    """A phase's legend sample: a swatch of the shade as it shows over the plot (opaque), outlined in the page's
    text colour, so it reads on a light and on a dark page (a translucent fill's own sample all but vanished on a
    dark one)."""

    def __init__(self, item: Any, rgba: tuple[int, int, int, int]) -> None:
        super().__init__(item)
        self.rgba = rgba

    def swatch(self) -> QColor:
        return laid_over(self.rgba, QColor(theme.plot_background()))

    def paint(self, p: Any, *args: Any) -> None:
        p.setRenderHint(p.RenderHint.Antialiasing, False)
        p.setBrush(pg.mkBrush(self.swatch()))
        p.setPen(pg.mkPen(theme.plot_foreground(), width=1))
        p.drawRect(QRectF(2, 4, 16, 12))


class _RightAxis:
    """The right axis' view box as an owner of pooled items: a line added there gets its entry in the plot's legend,
    as ``PlotItem.addItem`` gives one to the left axis' lines."""

    def __init__(self, vb: pg.ViewBox, legend: Any) -> None:
        self.vb = vb
        self.legend = legend

    def addItem(self, item: Any) -> None:  # noqa: N802 - what PlotPanel.item calls on an owner (pyqtgraph's names)
        self.vb.addItem(item)
        if item.name():
            self.legend.addItem(item, item.name())

    def removeItem(self, item: Any) -> None:  # noqa: N802
        self.vb.removeItem(item)
        self.legend.removeItem(item)
