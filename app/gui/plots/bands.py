"""Shaded x spans across a view's whole height (the telemetry plot's prefill and decode phases) in one item.

A ``pg.LinearRegionItem`` per phase cost 1-1.5 ms to build (two interactive lines each) and one more item to paint:
a sweep of a few tests made dozens, several in one redraw. Here every span is one rectangle in a single item.
"""

from __future__ import annotations

from typing import Any

import pyqtgraph as pg
from PySide6.QtCore import QRectF


class SpanBands(pg.GraphicsObject):
    """Filled vertical bands ``[x0, x1]`` over the view's whole y range, each with one of the ``brushes``."""

    def __init__(self, brushes: dict[str, tuple[int, int, int, int]]) -> None:
        super().__init__()
        self.brushes = {kind: pg.mkBrush(*rgba) for kind, rgba in brushes.items()}
        self.spans: list[tuple[float, float, str]] = []
        self.setZValue(-10)  # under the data, over the grid

    def add(self, x0_s: float, x1_s: float, kind: str) -> None:
        """One more band (``kind``: a key of the brushes)."""
        self.prepareGeometryChange()
        self.spans.append((x0_s, x1_s, kind))
        self.update()

    def clear(self) -> None:
        self.prepareGeometryChange()
        self.spans.clear()
        self.update()

    def viewRangeChanged(self) -> None:  # noqa: N802 - pyqtgraph's hook: the bands span the view's new height
        self.prepareGeometryChange()
        self.update()

    def boundingRect(self) -> QRectF:  # noqa: N802 - Qt's name
        view = self.viewRect()
        if view is None or not self.spans:
            return QRectF()
        x0 = min(s[0] for s in self.spans)
        x1 = max(s[1] for s in self.spans)
        return QRectF(x0, view.top(), x1 - x0, view.height())

    def paint(self, p: Any, *args: Any) -> None:
        view = self.viewRect()
        if view is None:
            return
        p.setPen(pg.mkPen(None))
        for x0, x1, kind in self.spans:
            p.fillRect(QRectF(x0, view.top(), x1 - x0, view.height()), self.brushes[kind])
