"""Latency against concurrency for a remote server sweep: TTFT and TPOT, p50 (solid) and p99 (dashed)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import pyqtgraph as pg
from PySide6.QtCore import Qt

from app.gui.plots.items import style_plot
from app.results.fields import RowStatus

#: (row column, legend label, colour, dashed)
SERIES: tuple[tuple[str, str, str, bool], ...] = (
    ("ttft_p50_ms", "TTFT p50", "#1f77b4", False),
    ("ttft_p99_ms", "TTFT p99", "#1f77b4", True),
    ("tpot_p50_ms", "TPOT p50", "#d62728", False),
    ("tpot_p99_ms", "TPOT p99", "#d62728", True),
)


def latency_curves(rows: Iterable[dict[str, Any]]) -> dict[str, tuple[list[float], list[float]]]:
    """Per legend label: (concurrency, ms) sorted by concurrency, from the ok remote rows.

    Tests of several prompt/output lengths or depths get one curve each, labelled ``TTFT p50 (p128 n64)``,
    ``(p128 n64 d4096)``, ``(… d4096 cached)`` for a prefix-cache test.
    """
    ok = [r for r in rows if r.get("status") == RowStatus.OK and r.get("backends") == "remote"]

    def shape(r: dict[str, Any]) -> tuple[Any, ...]:
        return r.get("n_prompt"), r.get("n_gen"), r.get("n_depth") or 0, bool(r.get("prefix_cache"))

    shapes = sorted({shape(r) for r in ok}, key=str)
    curves: dict[str, tuple[list[float], list[float]]] = {}
    for p, n, d, cached in shapes:
        same = sorted((r for r in ok if shape(r) == (p, n, d, cached)), key=lambda r: r.get("n_parallel") or 0)
        depth = f" d{d}" + (" cached" if cached else "") if d else ""
        suffix = f" (p{p} n{n}{depth})" if len(shapes) > 1 else ""
        for column, label, _, _ in SERIES:
            pts = [(float(r["n_parallel"]), float(r[column])) for r in same
                   if isinstance(r.get(column), (int, float)) and math.isfinite(r[column]) and r[column] > 0]
            if pts:
                curves[label + suffix] = ([x for x, _ in pts], [y for _, y in pts])
    return curves


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

    def show_rows(self, rows: Iterable[dict[str, Any]]) -> None:
        self.clear()
        self.curves = latency_curves(rows)
        style = {label: (colour, dashed) for _, label, colour, dashed in SERIES}
        for label, (xs, ys) in self.curves.items():
            colour, dashed = style[label.split(" (")[0]]
            pen = pg.mkPen(colour, width=2, style=Qt.PenStyle.DashLine if dashed else Qt.PenStyle.SolidLine)
            self.plot(xs, ys, pen=pen, symbol="o", symbolSize=6, symbolBrush=colour, name=label)
