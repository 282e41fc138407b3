"""The live plots: every measurement beside its prediction, kept up to date from a LiveRun by the window's timer.

Drawn the plain way (PyMeasure's): one item per series; at each of the timer's ticks every plot appends the run's
new points to its series' buffers and calls ``setData`` for the series that grew, where the plot is shown;
predicted curves are asked for only when their inputs change; pyqtgraph's own downsampling and clipping to the view
thin the long per-token and telemetry series. Nothing is scheduled or held back here: what came in is drawn at the
next tick.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QTimer, Signal
from PySide6.QtGui import QColor, QImage, QPainter
from PySide6.QtWidgets import QGridLayout, QHBoxLayout, QStackedLayout, QTabWidget, QWidget

from app.gui.plots.decode import DecodePlot
from app.gui.plots.itl import ItlPlot
from app.gui.plots.kv import KvPlot
from app.gui.plots.panel import PlotPanel, PlotView
from app.gui.plots.telemetry import TelemetryPlot
from app.gui.plots.ttft import TtftPlot
from app.gui.predictions import PredictionService
from app.gui.saved_files import save_png
from app.run.live import LiveRun

#: Below this height two rows of plots, each with a legend above its data, leave too little of each to read: the
#: plots go into two tabs. A 1920×1080 screen gives the plots about 560 px: two rows of 280 px, each keeping
#: :data:`~app.gui.plots.panel.MIN_DATA_HEIGHT_PX` of data under a legend that folds beyond two rows.
GRID_MIN_HEIGHT_PX = 540
#: where each plot's log-scale choice is remembered (``Settings``), by plot name
LOG_SCALE_KEY = "plots/log_scale/{}"


class LivePlots(QWidget):
    """TTFT vs prompt, decode vs position, KV memory vs context, telemetry timeline and inter-token latency.

    A click on a measured point emits ``pointClicked(test index, add)`` (``add``: Ctrl held); the window selects that
    test's row, which highlights it in every plot.
    """

    pointClicked = Signal(int, bool)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ttft = TtftPlot()
        self.decode = DecodePlot()
        self.kv = KvPlot()
        self.tel = TelemetryPlot()
        self.itl = ItlPlot(self.decode)
        # the order they are kept up to date in: the inter-token plot reads the ceilings the decode plot drew
        self.panels: list[PlotPanel] = [self.ttft, self.decode, self.kv, self.tel, self.itl]
        self._build_pages()
        self.kv_ctx_max = 4096
        self.redraws = 0  # plots given new data, all refreshes together
        self._legend_entries: dict[str, int] = {}
        self.last_drawn: tuple[str, ...] = ()  # the plots the last refresh gave new data (benchmarks/gui_stall.py)
        self._view: PlotView | None = None  # what the plots show now: a plot whose log scale is switched redraws it
        self._view_key: tuple[Any, ...] | None = None
        self._settings: Any = None
        for p in self.panels:
            p.pointer.testClicked.connect(self.pointClicked)
            if p.log_toggle is not None:
                p.log_toggle.changed.connect(self._log_changed)

    def keep_log_scales(self, settings: Any, restore: bool = True) -> None:
        """Remember each plot's log-scale choice in ``settings`` (a :class:`~app.gui.settings.Settings`) from now
        on, and with ``restore`` put back the ones saved before."""
        if restore:
            for p in self.panels:
                saved = settings.value(LOG_SCALE_KEY.format(p.name)) if p.log_toggle is not None else None
                if saved is not None:
                    p.set_log_scale(str(saved).lower() in ("true", "1"))
        self._settings = settings

    def _log_changed(self, name: str) -> None:
        """A plot's log scale was switched: remember it, and redraw that plot now (its error bars and the lines
        placed by value are in view units)."""
        panel = next(p for p in self.panels if p.name == name)
        if self._settings is not None:
            self._settings.set_value(LOG_SCALE_KEY.format(panel.name), panel.log_scale)
        panel.restage()
        if self._view is not None:
            panel.draw(self._view)

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
        """Forget everything drawn (a new sweep, another past run)."""
        for p in self.panels:
            p.reset()
        self._view = None
        self._view_key = None

    def reset_ranges(self) -> None:
        """Forget the axis ranges (another profile or new predictions): the next redraw fits the new curves."""
        for p in self.panels:
            p.reset_ranges()

    def refresh(self, session: LiveRun, predictor: PredictionService, selected: Iterable[int] = (),
                force: bool = False) -> bool:
        """Bring every plot up to date with ``session``: each takes the run's new points into its series' buffers
        and asks for predicted curves whose inputs changed, then the shown plots (all of them with ``force``) call
        ``setData`` for the series that changed; a hidden plot (the other tab) catches up when it shows. True when
        any plot was given new data (:attr:`last_drawn` names them)."""
        view = self._view_for(session, predictor, frozenset(selected))
        drawn = []
        for p in self.panels:
            p.take(view)
            p.update_predictions(view)
            if (force or p.widget.isVisible()) and p.flush():
                drawn.append(p.name)
            n = len(p.legend.items)
            if self._legend_entries.get(p.name) != n:  # entries came or went: the legend's columns fit again
                self._legend_entries[p.name] = n
                p.fit_legend()
        self.last_drawn = tuple(drawn)
        self.redraws += len(drawn)
        return bool(drawn)

    def _view_for(self, session: LiveRun, predictor: PredictionService, selected: frozenset[int]) -> PlotView:
        """What the plots read; the same one while the run's tests, rows and loads, the predictor's answers and
        the selection stay as they were (it keeps what it worked out from them: models, hardware)."""
        key = (id(session), id(predictor), predictor.version, selected, self.kv_ctx_max, session.rows_version,
               session.tests_version, len(session.loads))
        if self._view is None or key != self._view_key or self._view.session is not session:
            self._view = PlotView(session, predictor, selected, self.kv_ctx_max)
            self._view_key = key
        return self._view

    @property
    def behind(self) -> bool:
        """Some plot has data it has not drawn yet (it is hidden: the other tab)."""
        return any(p.dirty for p in self.panels)

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
        name = "tel" if key[:1] == ("tel2",) else (key[0] if key else None)  # tel2: telemetry's right axis
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
        try:
            save_png(img, path)
        except OSError:
            return False
        return True

