"""The telemetry timeline: worker memory on the left axis, CPU/GPU use and power on the right, phases shaded."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt

from app.gui.plots.bands import SpanBands
from app.gui.plots.interaction import PickSeries, number
from app.gui.plots.items import line
from app.gui.plots.panel import PlotPanel, PlotView
from app.gui.plots.style import DECODE_BRUSH, MIB, PREFILL_BRUSH, finite_max, nice_ceil
from app.gui.predictions import n_ctx_for
from app.gui.theme import series_colour as sc


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
        self._n_phases = 0
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
            self.legend.addItem(dummy, name)
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
        self.phases.clear()
        self._n_phases = 0
        if self._mem_pred is not None:
            self.plot.removeItem(self._mem_pred)
            self._mem_pred = None
        self.vb2.enableAutoRange()

    def key(self, view: PlotView) -> tuple[Any, ...]:
        s = view.session
        return (*view.base_key, len(s.tel_t_ns), len(s.phases), len(s.tests))

    @property
    def n_phase_regions(self) -> int:
        return len(self.phases.spans)

    def draw(self, view: PlotView) -> None:
        s = view.session
        t = np.asarray(s.t_s(s.tel_t_ns.view()))
        tel = {k: series.view() for k, series in s.tel.items()}
        for key, name, column, colour in (("rss", "worker memory, RSS", "rss_bytes", "#1f77b4"),
                                          ("vram", "GPU memory used", "vram_used_bytes", "#9467bd")):
            mib = tel[column] / MIB
            if key == "vram" and not np.isfinite(mib).any():
                continue
            item = self.item((key,), lambda n=name, c=colour: line(f"{n} (MiB)", sc(c), 1.8, long=True))
            item.setData(t, mib)
            self.pickable((key,), PickSeries(t, mib, np.full(t.size, -1), lambda i, n=name, mib=mib, t=t: (
                f"{n}\n{t[i]:.1f} s since start · {number(float(mib[i]))} MiB"), item, sorted_x=True))
        self._right("cpu", "worker CPU (%)", sc("#2ca02c")).setData(t, tel["cpu_pct"])
        if np.isfinite(tel["gpu_util_pct"]).any():
            self._right("gpu", "GPU utilisation (%)", sc("#ff7f0e")).setData(t, tel["gpu_util_pct"])
        if np.isfinite(tel["power_w"]).any():
            self._right("pw", "GPU power (W)", sc("#d62728"), dashed=True).setData(t, tel["power_w"])
        self._draw_phases(view)
        self._draw_mem_pred(view)
        t_hi = finite_max(t, [float(s.t_s(sp.end_ns)) for sp in s.phases[-1:]])
        x = (0.0, nice_ceil(t_hi)) if np.isfinite(t_hi) else None
        mem_hi = finite_max(tel["rss_bytes"] / MIB, tel["vram_used_bytes"] / MIB,
                            [self._mem_pred.value()] if self._mem_shown else [])
        self.set_range(self.plot.getViewBox(), x, mem_hi if np.isfinite(mem_hi) else None)
        pct_hi = finite_max([100.0], tel["cpu_pct"], tel["gpu_util_pct"], tel["power_w"])
        self.set_range(self.vb2, None, pct_hi, which="right")

    def _draw_phases(self, view: PlotView) -> None:
        """Shade the prefill and decode spans that finished since the last draw."""
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
        biggest = max((t for t in tests.values() if t.get("model_path") == models[0]), key=n_ctx_for, default=None)
        needed = view.predictor.mem_bytes(biggest) if biggest else None
        if not needed:
            return
        if self._mem_pred is None:
            self._mem_pred = pg.InfiniteLine(angle=0, movable=False, pen=pg.mkPen(
                sc("#1f77b4"), width=1.2, style=Qt.PenStyle.DashLine), label="predicted weights+KV+compute",
                labelOpts={"position": 0.12, "color": sc("#1f77b4"), "anchors": [(0, 1), (0, 1)]})
            self.plot.addItem(self._mem_pred)
        self._mem_pred.setPos(needed / MIB)
        self._mem_pred.show()

    @property
    def _mem_shown(self) -> bool:
        return self._mem_pred is not None and self._mem_pred.isVisible()


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
