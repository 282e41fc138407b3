"""A plot's costly paint work done ahead of its paint, in turns of the event loop of their own.

After a range change pyqtgraph rebuilds each axis' tick picture inside the next paint: ~1.7 ms per axis to place
and measure the tick strings, ~0.5 ms to record and play them. With the grid's lines and the view's items, one
plot's whole repaint took 8-14 ms as one stretch. Building the pictures first, a step each, splits that
into short pieces.
"""

from __future__ import annotations

from collections.abc import Callable

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


def prepare_steps(plot: pg.PlotItem) -> list[Callable[[], object]]:
    """What the next paint of ``plot`` would build, as steps the window's pacer runs in turns of their own: settle
    the views' ranges and transforms (what pyqtgraph does at the start of a paint), build each visible axis' tick
    picture, then the grid's lines. As one piece that took 8-9 ms (each axis ~2.5 ms, the ranges ~3 ms), and
    2-5 times as long with another process on the cores."""
    steps: list[Callable[[], object]] = [lambda: _settle_ranges(plot)]
    steps += [lambda axis=e["item"]: prepare_axis(axis) for e in plot.axes.values() if e["item"].isVisible()]
    steps.append(lambda: _prepare_grids(plot))
    return steps


def _settle_ranges(plot: pg.PlotItem) -> None:
    scene = plot.scene()
    if scene is not None:
        scene.prepareForPaint()  # an auto-ranging or resized view takes its range now, not inside the paint


def _prepare_grids(plot: pg.PlotItem) -> None:
    for item in plot.getViewBox().addedItems:
        if isinstance(item, TickGrid):
            item.lines()
