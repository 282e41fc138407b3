"""Shaded x spans across a view's whole height (the telemetry plot's prefill and decode phases) in one item.

A ``pg.LinearRegionItem`` per phase cost 1-1.5 ms to build (two interactive lines each) and one more item to paint:
a sweep of a few tests made dozens, several in one redraw. Here every span is one rectangle in a single item, filled
opaque in its colour as laid over the plot's background, under the grid: a translucent fill cost ~30 µs a span
whatever its width (one blend per scan line) against ~2 µs opaque, and a plot whose lines grow is repainted whole
at each refresh (80 spans: 9.4 ms a repaint drawn translucent and antialiased).
"""

from __future__ import annotations

from typing import Any

import pyqtgraph as pg
from PySide6.QtCore import QRect, QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QPainter

from app.gui.theme import plot_background


def laid_over(rgba: tuple[int, int, int, int], background: QColor) -> QColor:
    """The opaque colour a translucent ``rgba`` shows as over ``background``."""
    a = rgba[3] / 255.0
    return QColor(*(round(c * a + b * (1.0 - a)) for c, b in zip(rgba[:3], background.getRgb()[:3], strict=True)))


class SpanBands(pg.GraphicsObject):
    """Filled vertical bands ``[x0, x1]`` over the view's whole y range, each in its kind's colour; its owner puts it
    under the grid (opaque, it would hide the grid lines)."""

    def __init__(self, brushes: dict[str, tuple[int, int, int, int]]) -> None:
        super().__init__()
        self.colours = dict(brushes)  # kind -> RGBA, as the legend shows it
        self._opaque: tuple[str, dict[str, QBrush]] = ("", {})  # (background, kind -> opaque brush)
        self.spans: list[tuple[float, float, str]] = []

    def brushes(self) -> dict[str, QBrush]:
        """Each kind's opaque brush over the page's plot background (made again after a theme switch)."""
        bg = plot_background()
        if self._opaque[0] != bg:
            self._opaque = (bg, {k: QBrush(laid_over(rgba, QColor(bg))) for k, rgba in self.colours.items()})
        return self._opaque[1]

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
        """The spans of each kind in one call: opaque rectangles of whole device pixels, not antialiased."""
        view = self.viewRect()
        if view is None or not self.spans:
            return
        to_device = p.transform()
        by_kind: dict[str, list[QRect]] = {}
        for x0, x1, kind in self.spans:
            box = to_device.mapRect(QRectF(x0, view.top(), x1 - x0, view.height())).toAlignedRect()
            by_kind.setdefault(kind, []).append(box)
        brushes = self.brushes()
        p.save()
        p.resetTransform()
        p.setRenderHint(QPainter.RenderHint.Antialiasing, False)
        p.setPen(Qt.PenStyle.NoPen)
        for kind, boxes in by_kind.items():
            p.setBrush(brushes[kind])
            p.drawRects(boxes)
        p.restore()
