"""Plot items drawn the plain way: one item per series by key with one legend entry, removed when dropped or on a
new sweep; long series thinned by pyqtgraph itself; the grid drawn in the view at the axes' ticks."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QCoreApplication

from app.gui.plots.grid import TickGrid
from app.gui.plots.items import line, make_plot
from app.gui.plots.panel import PlotPanel, PlotView


class _Panel(PlotPanel):
    name, title, x_label, y_label = "t", "test", "x", "y"

    def key(self, view: PlotView) -> tuple[object, ...]:
        return ()

    def draw(self, view: PlotView) -> None:
        pass


def _labels(panel: PlotPanel) -> list[str]:
    return [label.text for _s, label in panel.legend.items]


def test_one_item_per_series_by_key_with_one_legend_entry_named_as_asked(qtbot) -> None:  # noqa: ANN001
    panel = _Panel()
    qtbot.addWidget(panel.widget)
    made: list[str] = []
    a = panel.item(("a",), lambda: made.append("a") or line("measured — model A", "#1f77b4"))
    b = panel.item(("b",), lambda: line("predicted", "#d62728"))
    a.setData([0, 1], [1, 2])
    assert _labels(panel) == ["measured — model A", "predicted"]
    again = panel.item(("a",), lambda: made.append("again") or line("x", "#000"), "measured — model B")
    assert again is a and made == ["a"]  # asked for again by key: the same item, renamed
    assert _labels(panel) == ["measured — model B", "predicted"]
    assert panel.data_of("t", "a")[1].tolist() == [1, 2]

    panel.drop(("a",))  # off the plot and out of the legend
    assert a.scene() is None and _labels(panel) == ["predicted"] and panel.data_of("t", "a")[0].size == 0
    c = panel.item(("a",), lambda: line("measured again", "#1f77b4"))
    assert c is not a and _labels(panel) == ["predicted", "measured again"]

    panel.reset()  # a new sweep: nothing drawn is kept
    assert _labels(panel) == [] and not panel.items and b.scene() is None and c.scene() is None


def test_entries_that_come_and_go_never_share_a_legend_cell(qtbot, qtlog) -> None:  # noqa: ANN001
    panel = _Panel()
    qtbot.addWidget(panel.widget)
    for k in "abcd":
        panel.item((k,), lambda k=k: line(f"entry {k}", "#333"))
    panel.drop(("b",))
    for k in "xy":
        panel.item((k,), lambda k=k: line(f"entry {k}", "#333"))
    panel.drop(("a",))
    assert _labels(panel) == ["entry c", "entry d", "entry x", "entry y"]
    lay = panel.legend.layout
    laid_out = {id(lay.itemAt(r, c)) for r in range(lay.rowCount()) for c in range(lay.columnCount())
                if lay.itemAt(r, c) is not None}
    assert all(id(sample) in laid_out and id(label) in laid_out for sample, label in panel.legend.items)
    assert not [m for m in qtlog.records if "already taken" in m.message]


def test_long_series_are_drawn_thinned_and_kept_whole(qtbot) -> None:  # noqa: ANN001
    """pyqtgraph's own downsampling and clipping to the view (no drawing machinery of ours): a 200,000-point
    per-token line is drawn with far fewer points, while its data stays whole for export and tests."""
    panel = _Panel()
    qtbot.addWidget(panel.widget)
    panel.widget.resize(500, 300)
    panel.widget.show()
    xs = np.arange(200_000, dtype=float)
    item = panel.item(("tok",), lambda: line("per token", "#333"))
    item.setData(xs, np.sin(xs / 500))
    panel.plot.getViewBox().setRange(xRange=(0, 50_000), padding=0)
    QCoreApplication.processEvents()
    shown_x, _ = item.getData()
    assert shown_x is not None and len(shown_x) < 20_000
    assert panel.data_of("t", "tok")[0].size == 200_000


def test_the_grid_follows_the_axes_ticks_and_not_the_data(qtbot) -> None:  # noqa: ANN001
    w = make_plot("t", "x", "y")
    qtbot.addWidget(w)
    w.resize(500, 400)
    w.show()
    plot = w.getPlotItem()
    grid = next(i for i in plot.items if isinstance(i, TickGrid))
    assert plot.getAxis("left").grid is False and plot.getAxis("bottom").grid is False  # not drawn by the axes
    plot.getViewBox().setRange(xRange=(0, 1000), yRange=(0, 50), padding=0)
    QCoreApplication.processEvents()
    grid.viewRangeChanged()
    major = grid.lines()[0]
    xs = sorted({ln.x1() for ln in major if ln.x1() == ln.x2()})
    ys = sorted({ln.y1() for ln in major if ln.y1() == ln.y2()})
    assert xs == [float(v) for v in plot.getAxis("bottom").tickValues(0, 1000, plot.getViewBox().width())[0][1]]
    assert ys and all(0 <= y <= 50 for y in ys)
    plot.plot(np.arange(10), np.arange(10))  # data inside the grid's view (0-1000): the grid never widens the range
    plot.enableAutoRange()
    QCoreApplication.processEvents()
    assert plot.getViewBox().childrenBounds()[0][1] < 10
