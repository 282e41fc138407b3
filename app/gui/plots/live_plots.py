"""The live plots: every measurement beside its prediction, redrawn from a LiveRun by a timer (setData only)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QTimer
from PySide6.QtGui import QColor, QImage, QPainter
from PySide6.QtWidgets import QGridLayout, QHBoxLayout, QStackedLayout, QTabWidget, QWidget

from app.gui.live import LiveRun
from app.gui.pacer import Pacer
from app.gui.plots.decode import DecodePlot
from app.gui.plots.itl import ItlPlot
from app.gui.plots.kv import KvPlot
from app.gui.plots.panel import PlotPanel, PlotView
from app.gui.plots.prepaint import prepare_steps
from app.gui.plots.telemetry import TelemetryPlot
from app.gui.plots.ttft import TtftPlot
from app.gui.predictions import PredictionService

#: Below this height two rows of plots, each with a legend above its data, leave too little of each to read
#: (at 1600×1000 a 289 px plot kept 135 px of data under a four-entry legend): the plots go into two tabs.
GRID_MIN_HEIGHT_PX = 700


class LivePlots(QWidget):
    """TTFT vs prompt, decode vs position, KV memory vs context, telemetry timeline and inter-token latency."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ttft = TtftPlot()
        self.decode = DecodePlot()
        self.kv = KvPlot()
        self.tel = TelemetryPlot()
        self.itl = ItlPlot(self.decode)
        # drawing order when all are due: the inter-token plot reads the ceilings the decode plot drew
        self.panels: list[PlotPanel] = [self.ttft, self.decode, self.kv, self.tel, self.itl]
        self._build_pages()
        self._last_key: tuple[Any, ...] | None = None
        self.kv_ctx_max = 4096
        self.redraws = 0
        self._plot_keys: dict[str, tuple[Any, ...]] = {}
        self._drawn_at: dict[str, int] = {}
        self._behind = False
        self._legend_entries: dict[str, int] = {}
        self.max_per_refresh = 1
        self.last_drawn: tuple[str, ...] = ()  # the plots the last refresh drew (benchmarks/gui_stall.py)
        self.pacer = Pacer(self)  # deferred pieces of the window's drawing, one per turn of the event loop
        for w in self.plots():
            for name in ("left", "bottom", "right"):
                w.getPlotItem().getAxis(name).setCacheMode(pg.QtWidgets.QGraphicsItem.CacheMode.DeviceCoordinateCache)

    def _build_pages(self) -> None:
        """Two arrangements of the same five plots: one grid (two rows) where the area is tall enough, else two
        tabs of one row each ("Speed" and "Memory and machine"), so every plot keeps a readable height."""
        self.grid_page = QWidget(self)
        self.grid = QGridLayout(self.grid_page)
        self.grid.setContentsMargins(0, 0, 0, 0)
        self.grid.setSpacing(4)
        self.tabs = QTabWidget(self)
        self.tabs.setDocumentMode(True)
        self.tab_rows: list[QHBoxLayout] = []
        for title in ("Speed: TTFT, decode, inter-token latency", "Memory and machine: KV cache, telemetry"):
            page = QWidget(self.tabs)
            row = QHBoxLayout(page)
            row.setContentsMargins(0, 2, 0, 0)
            row.setSpacing(4)
            self.tab_rows.append(row)
            self.tabs.addTab(page, title)
        self.stack = QStackedLayout(self)
        self.stack.addWidget(self.grid_page)
        self.stack.addWidget(self.tabs)
        self.mode = ""
        self._wanted_mode: str | None = None
        self.arrange("grid")

    def arrange(self, mode: str) -> None:
        """Put the plots in the grid (``"grid"``) or in the tabs (``"tabs"``)."""
        if mode == self.mode:
            return
        self.mode = mode
        if mode == "grid":
            for w, (r, c, rs, cs) in ((self.ttft.widget, (0, 0, 1, 1)), (self.decode.widget, (0, 1, 1, 1)),
                                      (self.kv.widget, (0, 2, 1, 1)), (self.tel.widget, (1, 0, 1, 2)),
                                      (self.itl.widget, (1, 2, 1, 1))):
                self.grid.addWidget(w, r, c, rs, cs)
            self.stack.setCurrentWidget(self.grid_page)
        else:
            for row, widgets in zip(self.tab_rows, ((self.ttft, self.decode, self.itl), (self.kv, self.tel)),
                                    strict=True):
                for p in widgets:
                    row.addWidget(p.widget, 2 if p is self.tel else 1)
            self.stack.setCurrentWidget(self.tabs)
        for p in self.panels:
            p.widget.show()

    def plots(self) -> list[pg.PlotWidget]:
        return [p.widget for p in self.panels]

    def reset(self) -> None:
        """Forget everything drawn (a new sweep, another past run).

        A shown plot keeps its last picture until its next draw: its items go now, its repaint comes with that
        draw (every plot is due after a reset), so the five plots are not all repainted in one go.
        """
        for p in self.panels:
            if p.widget.isVisible():
                p.widget.setUpdatesEnabled(False)
            p.retire()
        self._last_key = None
        self._plot_keys.clear()
        self._drawn_at.clear()
        self._behind = False

    def prewarm(self, session: LiveRun, predictor: PredictionService) -> None:
        """Build (hidden) the items a sweep's first measurements would, one per piece of the pacer, and their legend
        entries in pieces of their own: an item and its entry took 2-11 ms, and the first repetition's redraw built
        them beside everything else."""
        view = PlotView(session, predictor, frozenset(), self.kv_ctx_max)
        for panel in self.panels:
            for key, make in panel.spares(view):
                self.pacer.post(lambda panel=panel, key=key, make=make: panel.make_spare(key, make, self.pacer.post),
                                key=("spare", panel.name, key))

    def reset_ranges(self) -> None:
        """Forget the axis ranges (another profile or new predictions): the next redraw fits the new curves."""
        for p in self.panels:
            p.reset_ranges()

    @property
    def behind(self) -> bool:
        """Whether some plot still waits for its redraw (refresh draws at most a few per call)."""
        return self._behind

    def refresh(self, session: LiveRun, predictor: PredictionService, selected: Iterable[int] = (),
                force: bool = False) -> bool:
        """Redraw plots whose inputs changed; False when none had.

        Without ``force`` at most ``max_per_refresh`` plots are redrawn per call, the longest-waiting first:
        each redraw queues a repaint of its scene, and two repaints in one tick held the GUI thread 43.7 ms on a
        busy 2-core machine (one per tick: at most 15.6 ms). The rest follow on the next timer tick.
        """
        view = PlotView(session, predictor, frozenset(selected), self.kv_ctx_max)
        key = (id(session), session.version, predictor.version, predictor.curves_version, view.selected,
               self.kv_ctx_max)
        if key == self._last_key and not force and not self._behind:
            return False
        self._last_key = key
        keys = {p.name: p.key(view) for p in self.panels}
        changed = [p for p in self.panels if force or self._plot_keys.get(p.name) != keys[p.name]]
        if not force:
            changed.sort(key=lambda p: self._drawn_at.get(p.name, -1))
            changed = changed[: self.max_per_refresh]
        self.last_drawn = tuple(p.name for p in changed)
        for p in changed:
            self._draw_then_paint(p, view, defer=not force)
            self._plot_keys[p.name] = keys[p.name]
            self.redraws += 1
            self._drawn_at[p.name] = self.redraws
        self._behind = any(self._plot_keys.get(k) != v for k, v in keys.items())
        return bool(changed)

    def _draw_then_paint(self, panel: PlotPanel, view: PlotView, defer: bool) -> None:
        """Update ``panel``'s items; with ``defer``, a repaint of the whole plot waits for a later turn of the event
        loop.

        Qt repaints a scene from events it posts while the items change, and it handles posted events before it
        looks at timers again. A redraw that moves an axis range or changes the legend repaints the whole plot
        (8-14 ms, the axes re-rendering their ticks), and with the redraw itself (3-9 ms) that ran as one unbroken
        stretch of the GUI thread. The repaint is now a later piece of the :attr:`pacer`; where the redraw moved a
        range or changed the legend (and for a plot's first draw after a reset) pieces before it build the axes'
        tick pictures and the grid (:func:`prepare_steps`), so the repaint only plays them. A redraw that only
        moved data repaints later too: Qt's partial repaint at once (2-5 ms) ran in the redraw's stretch.
        """
        w = panel.widget
        if not defer or not w.isVisible():
            try:
                self._draw_and_fit(panel, view)
            finally:
                w.setUpdatesEnabled(True)  # after a reset
            return
        first = not w.updatesEnabled()  # hidden since a reset: its whole picture changes
        before = None if first else _layout_state(panel)
        try:
            self._draw_and_fit(panel, view)
        finally:
            w.setUpdatesEnabled(False)  # the scene's queued repaint of this draw is dropped; one later, whole
            # the layout settles in a piece of its own (auto-range and legend layout: up to 5 ms of a 10 ms redraw)
            self.pacer.post(lambda: self._settle_then_paint(panel, first, before), key=("settle", panel.name))

    def _settle_then_paint(self, panel: PlotPanel, first: bool, before: tuple[Any, ...] | None) -> None:
        """After a deferred redraw: settle the plot's layout; where it changed (or on a first draw) queue the tick
        pictures' piece, then the repaint's."""
        w = panel.widget
        if first or _layout_state(panel) != before:
            for i, step in enumerate(prepare_steps(panel.plot)):
                self.pacer.post(step, key=("prepare", panel.name, i))
        self.pacer.post(lambda: w.setUpdatesEnabled(True), key=("repaint", panel.name))

    def _draw_and_fit(self, panel: PlotPanel, view: PlotView) -> None:
        """Draw ``panel``; where its legend gained or lost entries, fit its columns now (in the same piece, so a
        legend that changes rows is seen as a layout change and its repaint deferred with the rest)."""
        panel.draw(view)
        panel.settle()
        n = len(panel.legend.items)
        if self._legend_entries.get(panel.name) != n:
            self._legend_entries[panel.name] = n
            panel.fit_legend()

    def fit_legends(self) -> None:
        """Fewer legend columns where a plot is too narrow for them (after resizes and new entries)."""
        for p in self.panels:
            p.fit_legend()

    def resizeEvent(self, event: Any) -> None:  # noqa: N802
        super().resizeEvent(event)
        h = event.size().height()
        # hysteresis: no flipping back and forth while a splitter is dragged across the threshold
        if self.mode == "grid" and h < GRID_MIN_HEIGHT_PX:
            self._arrange_later("tabs")
        elif self.mode == "tabs" and h >= GRID_MIN_HEIGHT_PX + 40:
            self._arrange_later("grid")
        self.fit_legends()

    def _arrange_later(self, mode: str) -> None:
        """Re-arrange after the resize, from the event loop: moving plot widgets between layouts inside a resize
        (while Qt lays out and paints them) is how a GraphicsView gets painted half-moved."""
        if self._wanted_mode is None:
            QTimer.singleShot(0, self._arrange_wanted)
        self._wanted_mode = mode

    def _arrange_wanted(self) -> None:
        mode, self._wanted_mode = self._wanted_mode, None
        if mode is not None:
            self.arrange(mode)

    def data_of(self, *key: Any) -> tuple[np.ndarray, np.ndarray]:
        """(x, y) drawn by one item, e.g. ``data_of("ttft", "meas", 0)`` (tests, scripting); empty if none."""
        name = "tel" if key[:1] == ("tel2",) else (key[0] if key else None)
        panel = next((p for p in self.panels if p.name == name), None)
        return panel.data_of(*key) if panel is not None else (np.zeros(0), np.zeros(0))

    def n_phase_regions(self) -> int:
        return self.tel.n_phase_regions

    def save_png(self, path: str) -> bool:
        """All five plots in one picture, in the grid's arrangement, whichever tab is showing."""
        w = max(p.widget.width() for p in self.panels)
        h = max(p.widget.height() for p in self.panels)
        img = QImage(3 * w, 2 * h, QImage.Format.Format_RGB32)
        img.fill(QColor("white"))
        painter = QPainter(img)
        for p, (x, y, span) in zip(self.panels, ((0, 0, 1), (1, 0, 1), (2, 0, 1), (0, 1, 2), (2, 1, 1)),
                                   strict=True):
            painter.drawPixmap(x * w, y * h, p.widget.grab().scaled(w * span, h))
        painter.end()
        return img.save(path, "PNG", 0)


def _layout_state(panel: PlotPanel) -> tuple[Any, ...]:
    """What, when a redraw changes it, makes the whole plot repaint: its views' ranges and sizes, and its legend.

    The plot's layout is settled first (Qt would do it from a posted event, after this check: a legend that gained a
    row shrinks the view), then the views take their ranges (an auto-ranging view would inside the paint).
    """
    panel.legend.layout.activate()
    panel.plot.layout.activate()
    scene = panel.plot.scene()
    if scene is not None:
        scene.prepareForPaint()
    views = [v for v in (panel.plot.getViewBox(), getattr(panel, "vb2", None)) if v is not None]
    legend = panel.legend
    return (*(tuple(map(tuple, v.viewRange())) for v in views), tuple(panel.plot.getViewBox().size().toTuple()),
            len(legend.items), legend.collapsed, legend.columnCount)
