"""KV-cache memory against context size: predicted KV and totals, llama.cpp's reported KV, measured growth."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt

from app.gui.plots.interaction import number, row_series
from app.gui.plots.items import line, ring, scatter
from app.gui.plots.panel import PlotPanel, PlotView
from app.gui.plots.style import CURVE_POINTS, MIB, color
from app.gui.predictions import n_ctx_for
from app.gui.theme import plot_foreground
from app.results.row_types import ResultRow


def ctx_of(row: ResultRow) -> float:
    """The context size a test ran with."""
    return float(row.n_ctx or n_ctx_for(row))


def _llama_kv_bytes(row: ResultRow) -> float:
    """llama.cpp's KV cache as its log gave it (0: not given)."""
    return float(row.llama_kv_bytes or 0)


def _mem_measured_bytes(row: ResultRow) -> float:
    """The measured memory growth (0: not measured)."""
    return float(row.mem_measured_bytes or 0)


def _in_mib(curve: tuple[np.ndarray, np.ndarray] | None) -> tuple[np.ndarray, np.ndarray] | None:
    """(KV, total) byte curves in MiB, cached as such: the same arrays from one redraw to the next."""
    return None if curve is None else (curve[0] / MIB, curve[1] / MIB)


class KvPlot(PlotPanel):
    """Memory (MiB, log scale) vs context size (tokens), with the hardware profile's memory as a dotted line."""

    name = "kv"
    title = "KV-cache memory vs context"
    x_label = "context size (tokens)"
    y_label = "memory (MiB)"
    log_axes = ("y",)  # the KV cache beside weights and the device's memory: decades apart
    log_default = True

    def __init__(self, title: str | None = None, columns: int | None = None) -> None:
        self._limit: pg.InfiniteLine | None = None
        super().__init__(title, columns)

    def reset(self) -> None:
        super().reset()
        if self._limit is not None:
            self.plot.removeItem(self._limit)
            self._limit = None

    def prediction_key(self, view: PlotView) -> tuple[Any, ...]:
        """The curves run to the inspector's context size too; the memory line is placed in view units."""
        return (*view.prediction_key, view.kv_ctx_max, self.log_scale)

    def predict(self, view: PlotView) -> None:
        """Each model's predicted KV cache and total memory along the context, and the profile's memory line."""
        cmax = max([t.n_ctx for t in view.tests] + [view.kv_ctx_max, 512])
        xs = np.linspace(256, cmax, CURVE_POINTS)
        for m, path in enumerate(view.models):
            self._draw_predicted(view, m, path, xs)
        self._draw_limit(view)

    def take_rows(self, view: PlotView) -> None:
        """llama.cpp's reported KV and the measured memory growth per test, the selected tests ringed."""
        rows = view.session.ok_rows()
        source = next((r.mem_source for r in rows if r.mem_source), "rss_delta")
        taken = "VRAM growth" if source.startswith("vram") else "RSS growth"
        for m, path in enumerate(view.models):
            c = color(m)
            self._predicted_items(view, m, path)  # first in the legend, before the measurements
            mine = [r for r in rows if r.model_path == path]
            kv_name, mem_name = view.label("KV in llama.cpp's log", path), view.label(f"measured ({taken})", path)
            for key, name, column, what, make in (
                    (("meas", m), kv_name, _llama_kv_bytes, "KV cache",
                     lambda c=c, n=kv_name: scatter(n, c, "d", 11)),
                    (("mem", m), mem_name, _mem_measured_bytes, taken,
                     lambda c=c, n=mem_name: scatter(n, c, "t", 11))):
                shown = [r for r in mine if column(r)]
                x, y = [ctx_of(r) for r in shown], [column(r) / MIB for r in shown]
                item = self.stage(key, make, x, y, name=name)
                self.pickable(key, row_series(name, x, y, shown, lambda v: f"context {v:.0f} tok",
                                              lambda r, c=column, w=what: f"{w} {number(c(r) / MIB)} MiB",
                                              item))
        hi = [r for r in rows if r.test_index in view.selected and r.mem_measured_bytes]
        self.stage(("hl",), lambda: ring(None), [ctx_of(r) for r in hi], [_mem_measured_bytes(r) / MIB for r in hi])

    def _draw_predicted(self, view: PlotView, m: int, path: str, xs: np.ndarray) -> None:
        """Model ``m``'s predicted KV cache alone (solid) and with weights and compute buffers (dashed)."""
        settings = view.settings(path)
        res = view.curve(("kv-mib", path, float(xs[-1]), tuple(sorted(settings.items()))),
                         lambda: _in_mib(view.predictor.kv_curve(path, xs, **settings)))
        kv_item, tot_item = self._predicted_items(view, m, path)
        self.show_predicted(("kv", m), kv_item, xs, res, 0)
        self.show_predicted(("tot", m), tot_item, xs, res, 1)

    def _predicted_items(self, view: PlotView, m: int, path: str) -> tuple[pg.PlotDataItem, pg.PlotDataItem]:
        """Model ``m``'s predicted KV (solid) and total memory (dashed) lines, named for its KV type."""
        c = color(m)
        kv_name = view.label(f"KV cache, pred. ({view.settings(path).get('type_k') or 'f16'})", path)
        tot_name = view.label("weights+KV+compute, pred.", path)
        return (self.item(("kv", m), lambda: line(kv_name, c, 2.0), kv_name),
                self.item(("tot", m), lambda: line(tot_name, c, 1.6, dashed=True), tot_name))

    def _draw_limit(self, view: PlotView) -> None:
        """The profile's VRAM (or RAM, for a CPU profile) as a labelled dotted line."""
        profile = view.predictor.profile
        if profile is None:
            if self._limit is not None:
                self._limit.hide()
            return
        label = f"{'RAM' if profile.kind == 'cpu' else 'VRAM'} {profile.vram_gib:.0f} GiB ({profile.name})"
        if self._limit is None:
            self._limit = pg.InfiniteLine(angle=0, movable=False,
                                          pen=pg.mkPen(plot_foreground(), width=1.5, style=Qt.PenStyle.DotLine),
                                          label=label, labelOpts={"position": 0.3, "color": plot_foreground(),
                                                                  "anchors": [(0.5, 0), (0.5, 0)]})
            self.plot.addItem(self._limit, ignoreBounds=False)
        mib = profile.vram_gib * 1024.0
        self._limit.setPos(np.log10(mib) if self.log_scale else mib)  # an InfiniteLine is placed in view units
        self._limit.label.setFormat(label)
        self._limit.show()
