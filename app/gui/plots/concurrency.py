"""Latency against concurrency for a remote server sweep: TTFT and TPOT, p50 (solid) and p99 (dashed)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import pyqtgraph as pg
from PySide6.QtCore import Qt

from app.gui import theme
from app.gui.plots.items import style_plot
from app.results.fields import RowStatus
from app.results.row_types import ResultRow

#: (a row's latency in ms, legend label, colour, dashed)
SERIES: tuple[tuple[Callable[[ResultRow], float | None], str, str, bool], ...] = (
    (lambda r: r.ttft_p50_ms, "TTFT p50", "#1f77b4", False),
    (lambda r: r.ttft_p99_ms, "TTFT p99", "#1f77b4", True),
    (lambda r: r.tpot_p50_ms, "TPOT p50", "#d62728", False),
    (lambda r: r.tpot_p99_ms, "TPOT p99", "#d62728", True),
)


def latency_curves(rows: Iterable[ResultRow]) -> dict[str, tuple[list[float], list[float]]]:
    """Per legend label: (concurrency, ms) sorted by concurrency, from the ok remote rows.

    Tests of several prompt/output lengths or depths get one curve each, labelled ``TTFT p50 (p128 n64)``,
    ``(p128 n64 d4096)``, ``(… d4096 cached)`` for a prefix-cache test.
    """
    ok = [r for r in rows if r.status == RowStatus.OK and r.backends == "remote"]

    def shape(r: ResultRow) -> tuple[Any, ...]:
        return r.n_prompt, r.n_gen, r.n_depth or 0, bool(r.prefix_cache)

    shapes = sorted({shape(r) for r in ok}, key=str)
    curves: dict[str, tuple[list[float], list[float]]] = {}
    for p, n, d, cached in shapes:
        same = sorted((r for r in ok if shape(r) == (p, n, d, cached)), key=lambda r: r.n_parallel or 0)
        depth = f" d{d}" + (" cached" if cached else "") if d else ""
        suffix = f" (p{p} n{n}{depth})" if len(shapes) > 1 else ""
        for latency_ms, label, _, _ in SERIES:
            pts = [(float(r.n_parallel or 0), ms) for r in same
                   if (ms := latency_ms(r)) is not None and math.isfinite(ms) and ms > 0]
            if pts:
                curves[label + suffix] = ([x for x, _ in pts], [y for _, y in pts])
    return curves


MAX_X_TICKS = 8  # concurrency labels on the x axis; more are thinned to every other one


def concurrency_ticks(levels: Iterable[float]) -> list[tuple[float, str]]:
    """x ticks for a log axis: the concurrency levels measured (log10 positions, integer labels), thinned to at most
    MAX_X_TICKS so they never crowd (pyqtgraph's own log ticks label every 2…9 of each decade)."""
    values = sorted({v for v in levels if v > 0})
    step = 1
    while len(values[::step]) > MAX_X_TICKS:
        step *= 2
    return [(math.log10(v), f"{v:g}") for v in values[::step]]


def latency_ticks(lo_ms: float, hi_ms: float) -> list[tuple[float, str]]:
    """y ticks for a log latency axis: each decade (1 ms, 10 ms, …, 1 s), and 2 and 5 between them when the data
    span two decades or less; labels in ms below a second, in s from it."""
    if not (lo_ms > 0 and hi_ms >= lo_ms):
        return []
    first, last = math.floor(math.log10(lo_ms)), math.ceil(math.log10(hi_ms))
    steps = (1, 2, 5) if last - first <= 2 else (1,)
    ticks = []
    for decade in range(first, last + 1):
        for m in steps:
            v = m * 10.0**decade
            if lo_ms / 1.5 <= v <= hi_ms * 1.5:
                ticks.append((math.log10(v), f"{v / 1000:g} s" if v >= 1000 else f"{v:g} ms"))
    return ticks


class ConcurrencyPlot(pg.PlotWidget):
    """TTFT/TPOT p50 and p99 (ms, log scale) vs requests in flight (log2 scale)."""

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self.setTitle("Latency vs concurrency")
        self.setLabel("bottom", "requests in flight (concurrency)")
        self.setLabel("left", "latency (ms)")
        self.setLogMode(x=True, y=True)
        self.showGrid(x=True, y=True, alpha=0.2)
        self.legend = self.addLegend(offset=(10, 10))
        style_plot(self)
        self.curves: dict[str, tuple[list[float], list[float]]] = {}

    def show_rows(self, rows: Iterable[ResultRow]) -> None:
        self.clear()
        self.curves = latency_curves(rows)
        style = {label: (colour, dashed) for _, label, colour, dashed in SERIES}
        for label, (xs, ys) in self.curves.items():
            colour, dashed = style[label.split(" (")[0]]
            colour = theme.series_colour(colour)
            pen = pg.mkPen(colour, width=2, style=Qt.PenStyle.DashLine if dashed else Qt.PenStyle.SolidLine)
            self.plot(xs, ys, pen=pen, symbol="o", symbolSize=6, symbolBrush=colour, name=label)
        xs_all = [x for xs, _ in self.curves.values() for x in xs]
        ys_all = [y for _, ys in self.curves.values() for y in ys]
        self.getAxis("bottom").setTicks([concurrency_ticks(xs_all)] if xs_all else None)
        self.getAxis("left").setTicks([latency_ticks(min(ys_all), max(ys_all))] if ys_all else None)
