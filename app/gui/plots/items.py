"""Plot building blocks: the plot widget with its legend above the data, and item factories."""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt, QTimer
from PySide6.QtGui import QFontMetricsF
from PySide6.QtWidgets import QGraphicsGridLayout, QGraphicsItem

from app.gui import theme
from app.gui.plots.grid import add_tick_grid
from app.gui.plots.style import HILITE

SAMPLE_PX = 34  # a legend entry's sample and the gaps beside its label
DROP_ROW_SPACING_PX = -3  # between the rows of an opened legend's entries (a label's own height has room above)

class ShapeSample(pg.ItemSample):
    """A legend sample that also draws items with one marker shape per point (pyqtgraph's own would hand the
    whole list of shapes to drawSymbol, which crashes): it shows the first shape."""

    def paint(self, p: Any, *args: Any) -> None:
        opts = self.item.opts
        shapes = opts.get("symbol")
        if isinstance(shapes, str) or shapes is None:
            super().paint(p, *args)
            return
        opts["symbol"] = shapes[0] if len(shapes) else "o"
        try:
            super().paint(p, *args)
        finally:
            opts["symbol"] = shapes


class LegendHeader(pg.LabelItem):
    """The legend's first row when it can collapse: "▸ legend: 8 entries" (click to show) or "▾ hide legend"."""

    def __init__(self, legend: TopLegend) -> None:
        super().__init__("", size="8pt", justify="left", color=theme.ink("link"))
        self.legend = legend
        self.setAcceptHoverEvents(True)

    def mouseClickEvent(self, ev: Any) -> None:  # noqa: N802 - pyqtgraph's name
        ev.accept()
        self.legend.toggle()


class LegendDrop(pg.GraphicsWidget):
    """An opened legend's entries, over the top of the data on the page's own background (a click on the header
    opens and closes it): laid out above the data, they left a short plot a strip of data area whose tick labels
    ran into each other."""

    def __init__(self, parent: pg.GraphicsWidget) -> None:
        super().__init__(parent)
        self.layout = QGraphicsGridLayout()
        self.layout.setContentsMargins(9, 2, 9, 4)
        self.setLayout(self.layout)
        self.hide()

    def paint(self, p: Any, *args: Any) -> None:
        back = pg.mkColor(theme.plot_background())
        back.setAlpha(240)
        edge = pg.mkColor(theme.plot_foreground())
        edge.setAlpha(90)
        p.setPen(pg.mkPen(edge))
        p.setBrush(pg.mkBrush(back))
        p.drawRect(self.rect().adjusted(0, 0, -1, -1))


class TopLegend(pg.GraphicsWidget):
    """A legend laid out above the plot area (in the PlotItem's grid), so it never hides data: one row of samples
    and labels per ``columnCount`` entries, made of pyqtgraph's public parts (ItemSample, LabelItem) in a Qt grid
    layout of its own.

    Where its entries would take more of the plot's height than :meth:`fit` allows (many models and depths on a
    laptop screen), it collapses to one clickable line that names how many entries it holds and lists them in its
    tooltip; a click shows them all over the top of the data (:class:`LegendDrop`: the plot keeps its height) and
    another hides them.
    A click on an entry's sample hides its item (or shows it again), as in pyqtgraph's own legend.
    """

    max_columns = 1

    def __init__(self, label_size: str = "8pt", columns: int = 1, row_spacing_px: float = -8,
                 column_spacing_px: float = 4) -> None:
        super().__init__()
        self.layout = QGraphicsGridLayout()
        # no margin above or below: :meth:`updateSize` counts the rows' heights only, and a row pushed 9 px down
        # hung over the data (a folded legend's line over the top of the telemetry's shaded phases)
        self.layout.setContentsMargins(9, 0, 9, 0)
        self.layout.setVerticalSpacing(row_spacing_px)
        self.layout.setHorizontalSpacing(column_spacing_px)
        self.setLayout(self.layout)
        self.items: list[tuple[ShapeSample, pg.LabelItem]] = []  # (sample, label) per entry, in order
        self.columnCount = max(columns, 1)
        self.label_size = label_size
        self.label_colour: Any = None
        self.collapsed = False
        self.expanded_by_user = False
        self.header: LegendHeader | None = None
        self.drop = LegendDrop(self)  # the entries of a folded legend the user opened
        # rows a little further apart than above the data (whose rows the plot's grid stretches): the unstable
        # entry's square sample ran into its neighbours' lines
        self.drop.layout.setVerticalSpacing(DROP_ROW_SPACING_PX)
        self.drop.layout.setHorizontalSpacing(column_spacing_px)
        self.setZValue(10)  # the drop over the data area below
        self._fit_args: tuple[float, float] | None = None

    @property
    def collapsible(self) -> bool:
        return self.header is not None

    def addItem(self, item: Any, name: str) -> None:  # noqa: N802 - what PlotItem.addItem calls
        """One entry more, last: ``item``'s look beside ``name``."""
        label = pg.LabelItem(name, color=self.label_colour, justify="left", size=self.label_size)
        cache_text(label)
        self.items.append((item if isinstance(item, ShapeSample) else ShapeSample(item), label))
        self.relayout()

    def removeItem(self, item: Any) -> None:  # noqa: N802 - what PlotItem.removeItem calls
        """Take out the entry of ``item`` (or the one named ``item``); the entries after it move up."""
        for entry in self.items:
            sample, label = entry
            if sample.item is item or label.text == item:
                self.items.remove(entry)
                self.relayout()
                _discard(sample, label)
                return

    def clear(self) -> None:
        entries, self.items = self.items, []
        self.relayout()
        for sample, label in entries:
            _discard(sample, label)

    def getLabel(self, item: Any) -> pg.LabelItem | None:  # noqa: N802 - pyqtgraph's name
        return next((label for sample, label in self.items if sample.item is item), None)

    def setLabelTextColor(self, *args: Any) -> None:  # noqa: N802 - pyqtgraph's name
        """Every label (and the labels of entries to come) in this colour."""
        self.label_colour = pg.mkColor(*args)
        for _sample, label in self.items:
            label.setText(label.text, color=self.label_colour)

    def setColumnCount(self, columnCount: int) -> None:  # noqa: N802, N803 - pyqtgraph's names
        if columnCount != self.columnCount:
            self.columnCount = max(columnCount, 1)
            self.relayout()

    def relayout(self) -> None:
        """Lay every entry (or only the header, when collapsed) out again: entry k at row k // columns, below the
        header if there is one."""
        lay = self.layout
        for layout in (lay, self.drop.layout):
            for i in range(layout.count() - 1, -1, -1):
                layout.removeAt(i)
        cols = max(self.columnCount, 1)
        first = 0
        if self.header is not None:
            lay.addItem(self.header, 0, 0, 1, cols * 2)
            first = 1
        opened = self.header is not None and not self.collapsed  # the entries in the drop, over the data
        into = self.drop.layout if opened else lay
        for k, (sample, label) in enumerate(self.items):
            if self.collapsed:
                sample.hide()
                label.hide()
                continue
            row, col = (0 if opened else first) + k // cols, (k % cols) * 2
            into.addItem(sample, row, col, alignment=Qt.AlignmentFlag.AlignVCenter)
            into.addItem(label, row, col + 1)
            sample.show()
            label.show()
        self._update_header()
        self.updateSize()
        self.drop.setVisible(opened and bool(self.items))
        if opened:
            self.drop.layout.activate()
            size = self.drop.layout.effectiveSizeHint(Qt.SizeHint.PreferredSize)
            self.drop.setGeometry(QRectF(0, self.header.preferredHeight(), size.width(), size.height()))

    def toggle(self) -> None:
        """Show a collapsed legend's entries, or collapse them again (the header's click)."""
        self.expanded_by_user = self.collapsed
        self.collapsed = not self.collapsed
        self.relayout()
        QTimer.singleShot(0, self, self._fit_view)  # the legend as context: no call once it is gone

    def _fit_view(self) -> None:
        """The plot back to its widget's size once the legend has its new height: a plot the opened legend made
        taller than its widget stayed that tall when it folded again (its axis title cut at the widget's foot)."""
        plot = self.parentItem()  # the PlotItem: its minimum size from the legend's new height first
        lay = getattr(plot, "layout", None)
        lay = lay() if callable(lay) else lay  # a PlotItem keeps its grid layout as an attribute
        if lay is not None:
            lay.invalidate()
            lay.activate()
        scene = self.scene()
        for view in scene.views() if scene is not None else []:
            if isinstance(view, pg.GraphicsView):  # the view's own setRange, as its resizeEvent calls it (a
                # PlotWidget's setRange is its plot's data range)
                pg.GraphicsView.setRange(view, QRectF(0, 0, view.width(), view.height()), padding=0,
                                         disableAutoPixel=False)

    def _update_header(self) -> None:
        if self.header is None:
            return
        texts = [label.text for _s, label in self.items]
        if self.collapsed:
            self.header.setText(f"▸ legend: {len(texts)} entries (click to show)")
        else:
            self.header.setText("▾ hide legend")
        self.header.setToolTip("\n".join(texts))

    def entries_height(self, columns: int) -> float:
        """Pixels the entries take in ``columns`` columns."""
        if not self.items:
            return 0.0
        row_h = max(label.preferredHeight() for _s, label in self.items)  # the row pitch, as laid out
        return math.ceil(len(self.items) / max(columns, 1)) * max(row_h, 1.0)

    def updateSize(self) -> None:  # noqa: N802 - pyqtgraph's name
        height = width = 0.0
        for row in range(self.layout.rowCount()):
            row_height = col_width = 0.0
            for col in range(self.layout.columnCount()):
                item = self.layout.itemAt(row, col)
                if item is None:
                    continue
                if item is not self.header:
                    col_width += item.width() + 3
                row_height = max(row_height, item.height())
            width = max(width, col_width)
            height += row_height
        self.setMinimumHeight(height)
        self.setMaximumHeight(height)
        self.setMinimumWidth(min(width, 200))
        self.updateGeometry()

    def fit(self, width: float, max_height: float = math.inf) -> None:
        """Use as many columns (up to ``max_columns``) as fit in ``width`` pixels; collapse to one line where the
        entries would be taller than ``max_height`` pixels (unless the user asked to see them)."""
        cols = max(self.max_columns, 1)
        while cols > 1:
            widths = [0.0] * cols
            for i, (_sample, label) in enumerate(self.items):
                text_w = QFontMetricsF(label.item.font()).horizontalAdvance(label.text)  # whole, not as cut
                widths[i % cols] = max(widths[i % cols], 20 + text_w + 12)
            if sum(widths) <= width:
                break
            cols -= 1
        too_tall = self.entries_height(cols) > max_height
        changed = cols != self.columnCount
        self.columnCount = cols
        self._fit_args = (width, max_height)
        self._elide(width / cols - SAMPLE_PX)
        if too_tall and self.header is None:
            self.header = LegendHeader(self)
            self.collapsed, changed = not self.expanded_by_user, True
        elif not too_tall and self.header is not None:
            self.layout.removeItem(self.header)
            self.header.hide()
            self.header.setParentItem(None)
            self.header, self.collapsed, self.expanded_by_user, changed = None, False, False, True
        if changed:
            self.relayout()


    def refit(self) -> None:
        """Fit again as last asked (a label was renamed: its text may need cutting again)."""
        if self._fit_args is not None:
            self.fit(*self._fit_args)

    def _elide(self, most_px: float) -> None:
        """Labels wider than ``most_px`` show their text cut at its end (what it is and its model come first; the
        depths' shapes last), whole in their tooltip and in :attr:`pyqtgraph.LabelItem.text`; the others show it
        whole."""
        for _sample, label in self.items:
            full = label.text
            shown = full
            metrics = QFontMetricsF(label.item.font())
            if most_px > 40 and metrics.horizontalAdvance(full) > most_px:
                shown = metrics.elidedText(full, Qt.TextElideMode.ElideRight, most_px)
            if shown != label.item.toPlainText():
                label.setText(shown)
                label.text = full  # what the legend says, whole; the screen shows ``shown``
            label.setToolTip(full if shown != full else "")


def _discard(*widgets: Any) -> None:
    """Take legend parts out of the scene for good (out of their layout first)."""
    for w in widgets:
        w.hide()
        w.setParentItem(None)
        if w.scene() is not None:
            w.scene().removeItem(w)


def cache_text(label: Any) -> None:
    """Keep a rich-text label as a pixmap: a plot's full repaint (after a redraw) lays its text out again
    otherwise."""
    text = getattr(label, "item", label)
    text.setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)


#: mantissas per decade a log axis may label, finest first; the finest whose ticks fit is used
LOG_MANTISSAS: tuple[tuple[int, ...], ...] = ((1, 2, 3, 4, 5, 6, 7, 8, 9), (1, 2, 5), (1, 3), (1,))
LOG_TICK_PX = 42  # the room one labelled tick takes where the labels' sizes are not known
LOG_TICK_GAP_PX = 12  # the least blank between two neighbouring tick labels (about an em): apart, not touching


def log_ticks(lo: float, hi: float, size_px: float, label_px: Callable[[str], float] | None = None) -> list[float]:
    """Tick positions (log10 units) for a log axis over [lo, hi]: 1-2-5 steps of each decade, or every decade, or
    every n-th decade, the finest whose labels fit: each label centred on its tick, LOG_TICK_GAP_PX between
    neighbours. ``label_px`` is a label's extent along the axis (its width on a horizontal axis, its height on a
    vertical one); without it each takes LOG_TICK_PX. Never fewer than two where the range holds them."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return []
    first, last = math.floor(lo), math.ceil(hi)
    choices = [[d + math.log10(m) for d in range(first, last + 1) for m in ms] for ms in LOG_MANTISSAS]
    step = 2
    while (last - first) // step >= 2:
        choices.append([float(d) for d in range(first, last + 1) if d % step == 0])
        step *= 2
    inside = [[v for v in c if lo - 1e-9 <= v <= hi + 1e-9] for c in choices]
    half = {}  # tick -> half its label's extent (px), measured once per tick
    for v in {v for c in inside for v in c}:
        half[v] = (label_px(log_tick_text(v)) if label_px else LOG_TICK_PX - LOG_TICK_GAP_PX) / 2
    px_per_unit = size_px / (hi - lo)

    def fits(c: list[float]) -> bool:
        return len(c) >= 2 and all((b - a) * px_per_unit >= half[a] + half[b] + LOG_TICK_GAP_PX
                                   for a, b in zip(c, c[1:], strict=False))

    fitting = next((c for c in inside if fits(c)), None)
    if fitting is not None:
        return fitting
    return next((c for c in reversed(inside) if c), [])


def log_tick_text(v: float) -> str:
    """A log axis label as the number itself (``20``, ``0.5``, ``1,000``), not pyqtgraph's ``2·10¹``."""
    x = 10.0**v
    if x >= 1000:
        return f"{x:,.0f}"
    return f"{float(f'{x:.3g}'):g}"


def linear_tick_text(v: float, spacing: float) -> str | None:
    """A linear axis label with thousands separators (``131,072``, ``1,000,000``) where the ticks are whole numbers
    from 10,000 up, not pyqtgraph's ``131072`` or ``1e+06``; None where pyqtgraph's own label is kept."""
    if spacing >= 1 and math.isfinite(v) and abs(v) >= 10_000:
        return f"{v:,.0f}"
    return None


class ReadableAxis(pg.AxisItem):
    """An axis whose log mode labels plain numbers at 1-2-5 steps whose labels fit side by side (pyqtgraph's own
    labels every 2…9 of a decade as ``9·10¹`` and crowds); linear mode is pyqtgraph's, large whole numbers written
    with thousands separators. Overrides the methods pyqtgraph's AxisItem documents for this."""

    def _label_extent(self) -> Callable[[str], float]:
        metrics = QFontMetricsF(self.style.get("tickFont") or self.font())
        if self.orientation in ("left", "right"):
            return lambda _text: metrics.height()
        return metrics.horizontalAdvance

    def logTickValues(self, minVal: float, maxVal: float, size: float, stdTicks: Any) -> list[Any]:  # noqa: N802, N803
        return [(None, log_ticks(minVal, maxVal, size, self._label_extent()))]

    def logTickStrings(self, values: list[float], scale: float, spacing: float) -> list[str]:  # noqa: N802
        return [log_tick_text(v) for v in values]

    def tickStrings(self, values: list[float], scale: float, spacing: float) -> list[str]:  # noqa: N802
        if self.logMode:
            return super().tickStrings(values, scale, spacing)  # pyqtgraph calls logTickStrings from here
        plain = super().tickStrings(values, scale, spacing)
        return [linear_tick_text(v * scale, spacing * scale) or text for v, text in zip(values, plain, strict=True)]


def make_plot(title: str, x_label: str, y_label: str, columns: int = 2) -> pg.PlotWidget:
    """A white plot with a bold title, axis labels carrying their units, a grid (at the ticks, drawn in the view)
    and a legend above the data."""
    w = pg.PlotWidget(axisItems={side: ReadableAxis(side) for side in ("left", "bottom")})  # given: shown
    w.setMinimumSize(240, 170)
    p = w.getPlotItem()
    p.setTitle(f"<b>{title}</b>", size="10pt")
    p.setLabel("bottom", x_label)
    p.setLabel("left", y_label)
    for ax in ("left", "bottom", "right"):
        p.getAxis(ax).enableAutoSIPrefix(False)
        # major and minor ticks only: pyqtgraph's third level (every tenth of a major step) is ~0.5 ms of Python
        # per axis redraw, and the grid shows two levels
        p.getAxis(ax).setStyle(maxTickLevel=1)
    bottom = p.getAxis("bottom")
    # the tick labels' row as tall as a line of the axis' font from the start: left to grow with the labels drawn,
    # a plot laid out before its first labels (a re-opened run) kept a row too short, and its axis title was cut
    font = bottom.style.get("tickFont") or w.font()
    bottom.setStyle(autoExpandTextSpace=False, tickTextHeight=math.ceil(QFontMetricsF(font).height()) + 4)
    p.tick_grid = add_tick_grid(p)
    # pyqtgraph's own thinning of long series (per-token decode, telemetry): at most a few points per pixel,
    # only the visible part; every PlotDataItem added to the plot takes these
    p.setDownsampling(auto=True, mode="peak")
    p.setClipToView(True)
    cache_text(p.titleLabel)
    for ax in ("left", "bottom"):
        cache_text(p.getAxis(ax).label)
    legend = TopLegend("8pt", columns)
    legend.max_columns = columns
    p.layout.removeItem(p.getAxis("top"))  # its cell (above the data) holds the legend; the axis stays hidden
    p.layout.addItem(legend, 1, 1)
    p.legend = legend
    style_plot(w)
    return w


def style_plot(w: pg.PlotWidget) -> None:
    """The current page's colours (light or dark, :mod:`app.gui.theme`) on a plot: background, axes, their
    labels and ticks, title, grid and legend text. Its data items keep theirs until they are made again."""
    bg, fg = theme.plot_background(), theme.plot_foreground()
    w.setBackground(bg)
    p = w.getPlotItem()
    for name in ("left", "bottom", "right"):
        ax = p.getAxis(name)
        ax.setPen(fg)
        ax.setTextPen(fg)
        if ax.labelText:
            ax.setLabel(ax.labelText, units=ax.labelUnits or None, color=fg)
    if p.titleLabel.text:
        p.titleLabel.setText(p.titleLabel.text, color=fg)
    grid = getattr(p, "tick_grid", None)
    if grid is not None:
        grid.set_colour(fg)
    legend = getattr(p, "legend", None)
    if legend is not None:
        legend.setLabelTextColor(fg)
        header = getattr(legend, "header", None)
        if header is not None:
            header.setAttr("color", theme.ink("link"))
            header.setText(header.text)


def scatter(name: str | None, c: str, symbol: str = "o", size: float = 8) -> pg.PlotDataItem:
    """Markers only (measured points)."""
    return pg.PlotDataItem([], [], pen=None, symbol=symbol, symbolSize=size, symbolBrush=pg.mkBrush(c),
                           symbolPen=pg.mkPen(theme.plot_background(), width=0.8), name=name)


def hollow(name: str | None, c: str) -> pg.PlotDataItem:
    """Small open markers: single repetitions, before their test's mean is in."""
    return pg.PlotDataItem([], [], pen=None, symbol="o", symbolSize=6, symbolBrush=None,
                           symbolPen=pg.mkPen(c, width=1.2), name=name)


def ring(name: str | None) -> pg.PlotDataItem:
    """Large orange rings around the selected tests' points."""
    return pg.PlotDataItem([], [], pen=None, symbol="o", symbolSize=17, symbolBrush=None,
                           symbolPen=pg.mkPen(HILITE, width=2.6), name=name)


def unstable_rings() -> pg.PlotDataItem:
    """Dashed amber squares around unstable measurements (spread ≥ 10 % of the mean)."""
    return pg.PlotDataItem([], [], pen=None, symbol="s", symbolSize=20, symbolBrush=None,
                           symbolPen=pg.mkPen("#e0a000", width=2.2, style=Qt.PenStyle.DashLine),
                           name="⚠ unstable (spread ≥ 10 %)")


def line(name: str | None, c: str, width: float = 1.8, dashed: bool = False, alpha: int = 255,
         long: bool = False) -> pg.PlotDataItem:
    """A plain (or dashed: predicted) line. ``long``: a series that grows through a run (per token, telemetry),
    drawn one pixel wide without antialiasing: Qt's antialiased wide pens over thousands of segments were the
    window's longest repaints (over 100 ms late in a standard sweep, benchmarks/gui_stall.py)."""
    qc = pg.mkColor(c)
    qc.setAlpha(alpha)
    style = Qt.PenStyle.DashLine if dashed else Qt.PenStyle.SolidLine
    if long:
        return pg.PlotDataItem([], [], pen=pg.mkPen(qc, width=1, style=style), name=name, antialias=False)
    return pg.PlotDataItem([], [], pen=pg.mkPen(qc, width=width, style=style), name=name)


def what_if_line(name: str | None, c: str) -> pg.PlotDataItem:
    """A thin dotted line: the prediction for another profile than the one measured on (a what-if)."""
    qc = pg.mkColor(c)
    qc.setAlpha(150)
    return pg.PlotDataItem([], [], pen=pg.mkPen(qc, width=1.3, style=Qt.PenStyle.DotLine), name=name)


def expected_line(name: str | None, c: str) -> pg.PlotDataItem:
    """A dash-dot line: an expected figure (a fit of measurements), beside the dashed ceiling."""
    return pg.PlotDataItem([], [], pen=pg.mkPen(c, width=1.6, style=Qt.PenStyle.DashDotLine), name=name)


def band_between(low: pg.PlotDataItem, high: pg.PlotDataItem, c: str) -> pg.FillBetweenItem:
    """A pale fill between two curves: an expected figure's band."""
    qc = pg.mkColor(c)
    qc.setAlpha(38)
    return pg.FillBetweenItem(low, high, brush=pg.mkBrush(qc))


def marked_line(name: str | None, c: str) -> pg.PlotDataItem:
    """Markers joined by a line (a run's measured means in the compare view)."""
    return pg.PlotDataItem([], [], pen=pg.mkPen(c, width=2), symbol="o", symbolSize=8, symbolBrush=pg.mkBrush(c),
                           symbolPen=pg.mkPen(theme.plot_background()), name=name)


def error_bars(c: str) -> pg.ErrorBarItem:
    """±1 sd bars, filled with ``setData(x=, y=, top=, bottom=)``."""
    empty = np.zeros(0)
    return pg.ErrorBarItem(x=empty, y=empty, top=empty, bottom=empty, beam=6, pen=pg.mkPen(c, width=1.2))


#: What ``show_curve`` last gave each item (the curve object and where along ``xs``); an item that goes away drops out.
_SHOWN_CURVES: weakref.WeakKeyDictionary[pg.PlotDataItem, tuple[np.ndarray, tuple[Any, ...]]] = \
    weakref.WeakKeyDictionary()


def show_curve(item: pg.PlotDataItem, xs: np.ndarray, curve: np.ndarray | None, part: int | None = None) -> None:
    """``item`` shows ``curve`` (its row ``part``, for a stacked value/low/high curve) along ``xs``; nothing when
    ``curve`` is None. A cached prediction is the same object from one redraw to the next, and an item that
    already shows it is left alone: setData re-bounds the item and re-ranges its view each time."""
    stamp = (part, len(xs), float(xs[-1]) if len(xs) else None)
    shown = _SHOWN_CURVES.get(item)
    if curve is not None and shown is not None and shown[0] is curve and shown[1] == stamp:
        return
    if curve is None:
        _SHOWN_CURVES.pop(item, None)
        item.setData([], [])
    else:
        _SHOWN_CURVES[item] = (curve, stamp)
        item.setData(xs, curve if part is None else curve[part])


def rename(plot: pg.PlotItem, item: Any, name: str) -> None:
    """Change an item's legend label (names that carry the profile change when the profile does)."""
    legend = plot.legend
    if legend is None or item.name() == name:
        return
    item.opts["name"] = name
    for sample, label in legend.items:
        if sample.item is item:
            label.setText(name)
            legend.refit()  # cut again to the plot's width where it is too long
            legend.updateSize()
            return


def connect_reps(starts: np.ndarray) -> np.ndarray:
    """pyqtgraph connect array: point i joins i+1 unless i+1 begins a new repetition."""
    if starts.size == 0:
        return np.zeros(0, dtype=bool)
    return np.append(starts[1:] < 0.5, False)
