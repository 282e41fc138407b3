"""Grid lines drawn inside the view at the axes' tick values (instead of by the axes themselves).

pyqtgraph's axis grid (``showGrid``) makes each axis item span the whole plot: with the axes' pixmap cache (which
keeps repaints cheap while only the data change) every range change re-rendered two plot-sized pixmaps, 5.8 ms
per axis against 1.8 ms without the grid on this machine, and a live plot's range changes while points arrive.
Here the lines are a few cosmetic strokes in the view, recomputed only when the view's range changes.
"""

from __future__ import annotations

from typing import Any

import pyqtgraph as pg
from PySide6.QtCore import QLineF, QRectF

#: Each tick level's line opacity, 0-255, finest last (pyqtgraph's own grid halves it per level too).
LEVEL_ALPHA = (46, 23)


class TickGrid(pg.GraphicsObject):
    """Lines at the bottom and left axes' major and minor ticks, across the view (log axes included: the axes
    give their ticks in view coordinates)."""

    def __init__(self, plot: pg.PlotItem, color: str = "#222222") -> None:
        super().__init__()
        self.plot = plot
        self.pens: list[Any] = []
        self.set_colour(color)
        self._lines: list[list[QLineF]] | None = None
        self.setZValue(-100)  # under every data item

    def set_colour(self, color: str) -> None:
        """The grid's lines in ``color`` (the plot's foreground: dark on a light page, light on a dark one)."""
        self.pens = []
        for alpha in LEVEL_ALPHA:
            c = pg.mkColor(color)
            c.setAlpha(alpha)
            self.pens.append(pg.mkPen(c, width=0))  # cosmetic: one pixel whatever the view's scale
        self.update()

    def viewRangeChanged(self) -> None:  # noqa: N802 - pyqtgraph's hook, called when the view's range changes
        self.prepareGeometryChange()
        self._lines = None
        self.update()

    def boundingRect(self) -> QRectF:  # noqa: N802 - Qt's name
        rect = self.viewRect()
        return QRectF() if rect is None else rect

    def _ticks(self, axis_name: str, lo: float, hi: float, size_px: float) -> list[list[float]]:
        axis = self.plot.getAxis(axis_name)
        if size_px <= 0 or not hi > lo:
            return []
        levels = axis.tickValues(lo, hi, size_px)
        return [[v for v in values if lo <= v <= hi] for _spacing, values in levels[: len(LEVEL_ALPHA)]]

    def lines(self) -> list[list[QLineF]]:
        """Per tick level, the grid's lines in view coordinates (computed once per view range)."""
        if self._lines is not None:
            return self._lines
        vb = self.plot.getViewBox()
        (x0, x1), (y0, y1) = vb.viewRange()
        out: list[list[QLineF]] = [[] for _ in LEVEL_ALPHA]
        for level, xs in enumerate(self._ticks("bottom", x0, x1, vb.width())):
            out[level].extend(QLineF(x, y0, x, y1) for x in xs)
        for level, ys in enumerate(self._ticks("left", y0, y1, vb.height())):
            out[level].extend(QLineF(x0, y, x1, y) for y in ys)
        self._lines = out
        return out

    def paint(self, p: Any, *args: Any) -> None:
        for pen, level in zip(self.pens, self.lines(), strict=True):
            if level:
                p.setPen(pen)
                p.drawLines(level)


def add_tick_grid(plot: pg.PlotItem) -> TickGrid:
    """Put a :class:`TickGrid` in ``plot``'s view (it never counts in the autorange)."""
    grid = TickGrid(plot)
    plot.addItem(grid, ignoreBounds=True)
    return grid
