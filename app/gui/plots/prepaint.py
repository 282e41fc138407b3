"""A plot's costly paint work done ahead of its paint, in a turn of the event loop of its own.

After a range change pyqtgraph rebuilds each axis' tick picture inside the next paint: ~1.7 ms per axis to place
and measure the tick strings, ~0.5 ms to record and play them. With the grid's lines and the view's items, one
plot's whole repaint took 8-14 ms as one stretch. Building the pictures first splits that into two shorter pieces.
"""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtGui import QPainter, QPicture

from app.gui.plots.grid import TickGrid


def prepare_axis(axis: pg.AxisItem) -> bool:
    """Build ``axis``' tick picture now if its next paint would; True when it did.

    The axis' own ``paint`` builds and keeps the picture (then plays it, here into a throwaway recording), so the
    picture is exactly the one the paint would have made.
    """
    if getattr(axis, "picture", True) is not None or not axis.isVisible() or axis.linkedView() is None:
        return False
    sink = QPicture()
    painter = QPainter(sink)
    try:
        axis.paint(painter, None, None)
    finally:
        painter.end()
    return True


def prepare_plot(plot: pg.PlotItem) -> int:
    """Settle the views' ranges and transforms (what pyqtgraph does at the start of a paint), then build every
    visible axis' tick picture and the grid's lines that the next paint would; how many axes."""
    scene = plot.scene()
    if scene is not None:
        scene.prepareForPaint()  # an auto-ranging or resized view takes its range now, not inside the paint
    built = sum(prepare_axis(entry["item"]) for entry in plot.axes.values())
    for item in plot.getViewBox().addedItems:
        if isinstance(item, TickGrid):
            item.lines()
    return built
