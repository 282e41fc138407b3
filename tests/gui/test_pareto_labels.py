"""The chooser's quality plot: a file's name stands beside its point, clear of the circle (a large file's circle
hid the start of its own label, 'Q8_0' over its red ring, at 1366×768), and the left axis' title fits."""

from __future__ import annotations

import math

import pyqtgraph as pg
import pytest
from PySide6.QtWidgets import QApplication

from app.gui.plots.pareto import ParetoPlot, clear_of_point


@pytest.mark.parametrize(("point_px", "below"), [(10, False), (36, False), (48, True), (36, True)])
def test_a_label_stands_clear_of_its_points_circle(qtbot, point_px: float, below: bool) -> None:  # noqa: ANN001
    plot = ParetoPlot()
    qtbot.addWidget(plot)
    plot.resize(600, 260)
    plot.show()
    qtbot.waitExposed(plot)
    plot.setXRange(0, 100, padding=0)
    plot.setYRange(0, 1, padding=0)
    label = pg.TextItem("Q8_0")  # a short name: an anchor's fraction of its width is a few pixels
    plot.addItem(label)
    label.setAnchor(clear_of_point(label, point_px, below=below))
    label.setPos(50, 0.5)
    QApplication.processEvents()
    centre = plot.getViewBox().mapViewToScene(pg.Point(50, 0.5))
    rect = label.textItem.sceneBoundingRect()
    nearest_x = min(max(centre.x(), rect.left()), rect.right())
    nearest_y = min(max(centre.y(), rect.top()), rect.bottom())
    assert math.hypot(nearest_x - centre.x(), nearest_y - centre.y()) >= point_px / 2, (rect, centre)
    assert (rect.top() >= centre.y()) if below else (rect.bottom() <= centre.y())  # below or above the point


def test_the_quality_axis_title_fits_a_laptops_plot(qtbot) -> None:  # noqa: ANN001
    plot = ParetoPlot()
    qtbot.addWidget(plot)
    plot.resize(620, 205)  # the chooser's plot at 1366×768
    plot.show()
    qtbot.waitExposed(plot)
    QApplication.processEvents()
    axis = plot.getAxis("left")
    title = axis.label.mapRectToScene(axis.label.boundingRect())  # the title runs along the axis
    assert title.top() >= 0 and title.bottom() <= plot.viewport().height(), (axis.labelText, title)
