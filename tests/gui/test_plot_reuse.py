"""What keeps the GUI thread's work in short pieces during a sweep: plot items kept across sweeps (hidden, with their
legend entries, then shown again by key), the grid drawn in the view at the axes' ticks, and a plot's repaint
coming a turn of the event loop after its redraw."""

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


def test_a_retired_item_comes_back_by_key_with_its_legend_entry_and_the_name_asked_for(qtbot) -> None:  # noqa: ANN001
    panel = _Panel()
    qtbot.addWidget(panel.widget)
    a = panel.item(("a",), lambda: line("measured — model A", "#1f77b4"), "measured — model A")
    b = panel.item(("b",), lambda: line("predicted", "#d62728"))
    a.setData([0, 1], [1, 2])
    assert _labels(panel) == ["measured — model A", "predicted"]

    panel.retire()  # a new sweep: hidden; the legend entries wait for the next draw's settle
    assert not a.isVisible() and not b.isVisible() and _labels(panel) == ["measured — model A", "predicted"]
    assert panel.data_of("t", "a")[0].size == 0  # a retired item is not drawn data
    entry = panel.legend.items[0]
    assert panel.item(("a",), lambda: line("x", "#000")) is a and a.isVisible()  # asked for again: its entry
    panel.settle()  # never left the legend; the one not asked for (b) leaves it now
    assert panel.legend.items == [entry] and not b.isVisible()
    panel.retire()
    panel.settle()
    assert _labels(panel) == []

    made: list[str] = []
    again = panel.item(("a",), lambda: made.append("a") or line("x", "#000"), "measured — model B")
    assert again is a and not made and a.isVisible()
    assert _labels(panel) == ["measured — model B"]  # renamed; b stays hidden, out of the legend
    assert not b.isVisible()
    c = panel.item(("c",), lambda: line("new", "#2ca02c"))
    assert _labels(panel) == ["measured — model B", "new"] and c.isVisible()
    panel.drop(("c",))  # an item that comes and goes within a sweep: hidden and out of the legend, kept
    assert not c.isVisible() and _labels(panel) == ["measured — model B"]
    assert panel.item(("c",), lambda: made.append("c") or line("x", "#000"), "new") is c and not made
    assert c.isVisible() and _labels(panel) == ["measured — model B", "new"]

    stashed_label = panel.legend._stashed[id(b)][1]
    panel.reset()  # destructive: nothing kept; kept items and their kept legend labels leave the scene
    assert _labels(panel) == [] and not panel.pool.items and not panel.pool.spare
    assert b.scene() is None and stashed_label.scene() is None and not panel.legend._stashed
    assert panel.item(("a",), lambda: line("fresh", "#000")) is not a


def test_entries_coming_back_in_another_order_never_share_a_legend_cell(qtbot, qtlog) -> None:  # noqa: ANN001
    panel = _Panel()
    qtbot.addWidget(panel.widget)
    for k in "abcd":
        panel.item((k,), lambda k=k: line(f"entry {k}", "#333"))
    panel.drop(("b",))
    panel.retire()
    for k in "dxa":
        panel.item((k,), lambda k=k: line(f"entry {k}", "#333"))
    panel.settle()
    assert _labels(panel) == ["entry a", "entry d", "entry x"]  # kept entries keep their order, new ones last
    lay = panel.legend.layout
    laid_out = {id(lay.itemAt(r, c)) for r in range(lay.rowCount()) for c in range(lay.columnCount())
                if lay.itemAt(r, c) is not None}
    assert all(id(sample) in laid_out and id(label) in laid_out for sample, label in panel.legend.items)
    assert not [m for m in qtlog.records if "already taken" in m.message]


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



def test_a_spare_built_ahead_is_hidden_out_of_the_legend_and_shown_by_its_first_use(qtbot) -> None:  # noqa: ANN001
    panel = _Panel()
    qtbot.addWidget(panel.widget)
    panel.item(("pred",), lambda: line("predicted", "#d62728"))
    made: list[str] = []
    assert panel.make_spare(("rep",), lambda: made.append("rep") or line("repetition", "#1f77b4"))
    assert not panel.make_spare(("rep",), lambda: line("again", "#000"))  # one per key
    rep = panel.pool.spare[("t", "rep")][1]
    assert made == ["rep"] and not rep.isVisible() and _labels(panel) == ["predicted"]
    assert rep.scene() is panel.plot.scene()  # in the plot already: the first use only shows it
    again = panel.item(("rep",), lambda: made.append("twice") or line("x", "#000"), "repetition — model B")
    assert again is rep and made == ["rep"] and rep.isVisible()
    assert _labels(panel) == ["predicted", "repetition — model B"]
    panel.drop(("rep",))
    assert _labels(panel) == ["predicted"] and not rep.isVisible()


def test_a_spare_s_legend_entry_can_come_in_a_later_piece(qtbot) -> None:  # noqa: ANN001
    panel = _Panel()
    qtbot.addWidget(panel.widget)
    queued: list = []
    assert panel.make_spare(("rep",), lambda: line("repetition", "#1f77b4"), queued.append)
    assert panel.make_spare(("ring",), lambda: line("unstable", "#ff9900"), queued.append)
    assert len(queued) == 2 and _labels(panel) == []  # the items are in the plot; their entries are queued
    queued[0]()  # the repetitions' entry is built, kept out of the legend
    rep = panel.item(("rep",), lambda: line("x", "#000"), "repetition")
    assert rep.isVisible() and _labels(panel) == ["repetition"]
    ring = panel.item(("ring",), lambda: line("x", "#000"), "unstable")  # asked for before its entry was built
    assert ring.isVisible() and _labels(panel) == ["repetition", "unstable"]
    queued[1]()  # too late: it adds nothing
    assert _labels(panel) == ["repetition", "unstable"]
    panel.drop(("ring",))
    assert _labels(panel) == ["repetition"]


def test_the_pacer_runs_one_piece_per_turn_in_order_and_a_keyed_piece_once(qtbot) -> None:  # noqa: ANN001
    from app.gui.pacer import Pacer

    pacer = Pacer(gap_ms=5)
    ran: list[str] = []
    assert pacer.post(lambda: ran.append("a"), key="a")
    assert not pacer.post(lambda: ran.append("a2"), key="a")  # still waiting: not queued twice
    pacer.post(lambda: (ran.append("b"), pacer.post(lambda: ran.append("d"))))  # posted while running: after c
    pacer.post(lambda: ran.append("c"))
    assert ran == [] and len(pacer) == 3  # nothing runs inside post
    qtbot.waitUntil(lambda: ran == ["a", "b", "c", "d"], timeout=2000)
    from PySide6.QtCore import QTimer

    ran.clear()  # pieces run in turns of their own: a zero-delay timer set by one runs before the next piece
    pacer.post(lambda: QTimer.singleShot(0, lambda: ran.append("turn")))
    pacer.post(lambda: ran.append("next"))
    qtbot.waitUntil(lambda: "next" in ran, timeout=2000)
    assert ran == ["turn", "next"]
    pacer.post(lambda: ran.append("e"))
    pacer.clear()
    qtbot.wait(30)
    assert ran == ["turn", "next"] and len(pacer) == 0


def test_settle_heap_leaves_the_live_objects_out_of_later_full_collections() -> None:
    import gc

    from app.gui.qt_compat import settle_heap

    class Cycle:
        def __init__(self) -> None:
            self.me = self

    Cycle()  # garbage in a cycle: only a collection frees it
    settle_heap()
    try:
        assert gc.get_freeze_count() > 1000  # the modules, Qt and pyqtgraph objects: frozen
        assert not [o for o in gc.get_objects() if isinstance(o, Cycle)]  # collected before the freeze
        assert len(gc.get_objects()) < gc.get_freeze_count()  # a full pass now looks at the few objects made since
    finally:
        gc.unfreeze()
