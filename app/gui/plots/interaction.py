"""Pointing at a plot: the nearest measured point's figures under the mouse, a click that selects its test, and the
plot's log-scale toggle.

Each plot registers its measured points as it draws them (:meth:`PlotPointer.set_series`): data units, each point's
test index and a function that writes its text, called only for the point under the mouse. The work is done on a
mouse move or click over the plot, never on the redraw timer.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent, QObject, QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QToolButton

from app.gui import theme
from app.gui.plots.style import short_model
from app.results.row_types import ResultRow
from app.run.plan import RemoteTest, TestSpec

HOVER_RADIUS_PX = 12.0  # the farthest a point may be from the mouse to be the one read out
LONG_SERIES = 2000  # a series longer than this is searched only in the x window under the mouse (its x sorted)
READOUT_MARGIN_PX = 4.0
READOUT_MAX_SHARE = 0.7  # the readout wraps beyond this share of the data area's width
READOUT_POINT_SIZE = 8.0
BACKDROP_ALPHA = 215  # the readout's backdrop: the plot's background, slightly see-through

Key = tuple[Any, ...]


@dataclass(frozen=True)
class PickSeries:
    """One plot item's measured points, as :class:`PlotPointer` finds them: ``xs``, ``ys`` in data units (not
    log10), ``tests`` each point's test index (-1: none) and ``describe(i)``, point i's readout."""

    xs: np.ndarray
    ys: np.ndarray
    tests: np.ndarray
    describe: Callable[[int], str]
    item: Any = None  # the item drawing them: hidden (its legend entry clicked off), its points are not picked
    sorted_x: bool = False


@dataclass(frozen=True)
class PickLine:
    """A predicted curve, read anywhere along it: ``xs`` (sorted) and ``ys`` in data units; ``describe(x, y)`` the
    readout at a point of the line (its value interpolated at the mouse's x, in view units as drawn)."""

    xs: np.ndarray
    ys: np.ndarray
    describe: Callable[[float, float], str]
    item: Any = None


def number(v: float) -> str:
    """A figure with about three significant digits (812, 98.8, 5.62)."""
    if not math.isfinite(v):
        return "n/a"
    a = abs(v)
    return f"{v:.0f}" if a >= 100 else f"{v:.1f}" if a >= 10 else f"{v:.2f}"


def figure_text(what: str, mean: Any, sd: Any, unit: str) -> str:
    """``TTFT 812 ms ±3 %``: a measured mean and its spread relative to it (where there is one)."""
    m = float(mean)
    text = f"{what} {number(m)} {unit}"
    if sd is not None and m:
        pct = abs(float(sd)) / abs(m) * 100
        text += f" ±{pct:.1f} %" if pct < 1 else f" ±{pct:.0f} %"
    return text


def axis_text(label: str, v: float) -> str:
    """A value named as its axis names it: ``TTFT (ms)``, 812 → ``TTFT 812 ms``."""
    what, _, unit = label.partition(" (")
    unit = unit.rstrip(")").split(",")[0]
    return f"{what} {number(float(v))} {unit}".rstrip()


def settings_text(test: ResultRow | TestSpec | RemoteTest | None, test_index: int | None = None) -> str:
    """A test's shape and settings where known: ``test 3 · prompt 512 · gen 16 · depth 64 · KV q8_0 · ngl 99``,
    read from the test or from a row (the test it ran); a remote test has no KV or layer settings."""
    parts = [] if test_index is None or test_index < 0 else [f"test {test_index}"]
    for key, label in (("n_prompt", "prompt"), ("n_gen", "gen"), ("n_depth", "depth")):
        value = getattr(test, key, None)
        if value is not None and (key != "n_depth" or value):
            parts.append(f"{label} {value}")
    k, v = getattr(test, "type_k", None), getattr(test, "type_v", None)
    if k:
        parts.append(f"KV {k}" if v in (None, k) else f"KV {k}/{v}")
    for key, label in (("n_gpu_layers", "ngl"), ("n_ubatch", "ubatch")):
        value = getattr(test, key, None)
        if value is not None:
            parts.append(f"{label} {value}")
    fa = getattr(test, "flash_attn", None)
    if fa is not None:
        parts.append("fa " + {-1: "auto", 0: "off", 1: "on"}.get(fa, str(fa)))
    return " · ".join(parts)


def row_series(name: str, xs: Sequence[float] | np.ndarray, ys: Sequence[float] | np.ndarray,
               rows: Sequence[ResultRow], x_text: Callable[[float], str], figure: Callable[[ResultRow], str],
               item: Any = None) -> PickSeries:
    """Points that are result rows (one per test): the readout names the series and model, the point's x and its
    figure, and the test's settings."""
    xs_a, ys_a = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)

    def describe(i: int) -> str:
        r = rows[i]
        what = name.split(" · ", 1)[-1]  # a legend's short model part gives way to the whole name
        head = f"{what} — {short_model(r.model_path)}" if r.model_path else name
        return "\n".join((head, f"{x_text(float(xs_a[i]))} · {figure(r)}", settings_text(r, _test_index(r))))

    tests = np.array([_test_index(r) for r in rows], dtype=int)
    return PickSeries(xs_a, ys_a, tests, describe, item)


def _test_index(row: ResultRow) -> int:
    return -1 if row.test_index is None else row.test_index


def log10_or_nan(values: Any) -> np.ndarray:
    """log10 of each value (data to view units on a log axis); NaN where it is not positive."""
    a = np.asarray(values, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(a > 0, np.log10(np.where(a > 0, a, 1.0)), np.nan)


def _to_view(values: np.ndarray, log: bool) -> np.ndarray:
    return log10_or_nan(values) if log else np.asarray(values, dtype=float)


class PlotPointer(QObject):
    """Hover readout and click-to-select over one plot's registered points.

    The readout is a text item in the data area's top corner away from the point, with a ring on the point; it goes
    when the mouse leaves the data area or the plot. A left click on a point with a test emits ``testClicked``
    (test index, whether Ctrl was held: add to or take from the selection rather than replace it).
    """

    testClicked = Signal(int, bool)

    def __init__(self, widget: pg.PlotWidget) -> None:
        super().__init__(widget)
        self.widget = widget
        self.plot: pg.PlotItem = widget.getPlotItem()
        self.vb: pg.ViewBox = self.plot.getViewBox()
        self.series: dict[Key, PickSeries] = {}
        self.lines: dict[Key, PickLine] = {}
        self.hovered: tuple[Key, Any] | None = None
        self.text = ""  # what the readout shows ("" while hidden)
        self.covers: list[Any] = []  # items in the readout's corners: hidden while it shows, shown again after
        self.covered: list[Any] = []  # those hidden now
        self._last_pos: QPointF | None = None
        self._colours: tuple[str, str] | None = None
        self.readout: pg.TextItem | None = None
        self.marker = pg.ScatterPlotItem(size=16, brush=None)
        self.marker.setZValue(900)
        self.vb.addItem(self.marker, ignoreBounds=True)
        self.marker.hide()
        scene = self.plot.scene()
        scene.sigMouseMoved.connect(self._moved)
        scene.sigMouseClicked.connect(self._clicked)
        widget.installEventFilter(self)
        widget.viewport().installEventFilter(self)

    # --- the points ---------------------------------------------------------------------------------------
    def set_series(self, key: Key, series: PickSeries) -> None:
        """Register (or replace) the points under ``key``; a readout showing one of them follows the new data."""
        self.series[key] = series
        if self.hovered is not None and self.hovered[0] == key and self._last_pos is not None:
            self._moved(self._last_pos)

    def set_line(self, key: Key, line: PickLine) -> None:
        """Register (or replace) a predicted curve under ``key``: the readout gives its value under the mouse."""
        self.lines[key] = line
        if self.hovered is not None and self.hovered[0] == key and self._last_pos is not None:
            self._moved(self._last_pos)

    def drop(self, key: Key) -> None:
        dropped = (self.series.pop(key, None), self.lines.pop(key, None))
        if any(d is not None for d in dropped) and self.hovered is not None and self.hovered[0] == key:
            self.hide()

    def clear(self) -> None:
        self.series.clear()
        self.lines.clear()
        self.hide()

    def log_modes(self) -> tuple[bool, bool]:
        return bool(self.plot.getAxis("bottom").logMode), bool(self.plot.getAxis("left").logMode)

    def nearest(self, scene_pos: QPointF) -> tuple[Key, int] | None:
        """The registered point nearest ``scene_pos`` (a scene position over the data area) within
        :data:`HOVER_RADIUS_PX`, as (series key, point index); None where there is none."""
        if not self.series or not self.vb.sceneBoundingRect().contains(scene_pos):
            return None
        at = self.vb.mapSceneToView(scene_pos)
        px_x, px_y = self.vb.viewPixelSize()
        if not (px_x > 0 and px_y > 0):
            return None
        log_x, log_y = self.log_modes()
        best: tuple[Key, int] | None = None
        best_d2 = HOVER_RADIUS_PX**2
        for key, s in self.series.items():
            if s.item is not None and not s.item.isVisible():
                continue
            idx = self._window(s, at.x(), px_x, log_x)
            if idx.size == 0:
                continue
            dx = (_to_view(s.xs[idx], log_x) - at.x()) / px_x
            dy = (_to_view(s.ys[idx], log_y) - at.y()) / px_y
            d2 = dx * dx + dy * dy
            if not np.isfinite(d2).any():
                continue
            k = int(np.nanargmin(d2))
            if d2[k] <= best_d2:
                best, best_d2 = (key, int(idx[k])), float(d2[k])
        return best

    def nearest_line(self, scene_pos: QPointF) -> tuple[Key, float, float] | None:
        """The registered curve passing nearest ``scene_pos`` (vertically, at the mouse's x) within
        :data:`HOVER_RADIUS_PX`, as (key, x, y) in data units; None where none passes that close."""
        if not self.lines or not self.vb.sceneBoundingRect().contains(scene_pos):
            return None
        at = self.vb.mapSceneToView(scene_pos)
        px_x, px_y = self.vb.viewPixelSize()
        if not (px_x > 0 and px_y > 0):
            return None
        log_x, log_y = self.log_modes()
        best: tuple[Key, float, float] | None = None
        best_d = HOVER_RADIUS_PX
        for key, line in self.lines.items():
            if line.item is not None and not line.item.isVisible():
                continue
            vx, vy = _to_view(line.xs, log_x), _to_view(line.ys, log_y)
            ok = np.isfinite(vx) & np.isfinite(vy)
            vx, vy = vx[ok], vy[ok]
            if vx.size < 2 or not vx[0] <= at.x() <= vx[-1]:
                continue
            y_at = float(np.interp(at.x(), vx, vy))
            d = abs(y_at - at.y()) / px_y
            if d <= best_d:
                x = 10.0 ** at.x() if log_x else at.x()
                best, best_d = (key, float(x), float(10.0 ** y_at if log_y else y_at)), d
        return best

    @staticmethod
    def _window(s: PickSeries, at_x: float, px_x: float, log_x: bool) -> np.ndarray:
        """Indices of the points worth measuring: all of a short series; of a long one with sorted x, those within
        the hover radius in x."""
        n = min(s.xs.size, s.ys.size, s.tests.size)
        if n <= LONG_SERIES or not s.sorted_x:
            return np.arange(n)
        lo, hi = at_x - HOVER_RADIUS_PX * px_x, at_x + HOVER_RADIUS_PX * px_x
        if log_x:
            lo, hi = 10.0**lo, 10.0**hi
        a, b = np.searchsorted(s.xs[:n], [lo, hi])
        return np.arange(int(a), int(b))

    # --- the mouse ----------------------------------------------------------------------------------------
    def _moved(self, scene_pos: QPointF) -> None:
        self._last_pos = QPointF(scene_pos)
        hit = self.nearest(scene_pos)
        if hit is not None:  # a measured point first: it is what the plot is about
            key, i = hit
            s = self.series[key]
            text = s.describe(i)
            if hit == self.hovered and text == self.text:
                return
            self.hovered = hit
            log_x, log_y = self.log_modes()
            self._show(text, float(_to_view(s.xs[i : i + 1], log_x)[0]), float(_to_view(s.ys[i : i + 1], log_y)[0]))
            return
        on_line = self.nearest_line(scene_pos)
        if on_line is None:
            self.hide()
            return
        key, x, y = on_line
        text = self.lines[key].describe(x, y)
        self.hovered = (key, None)
        log_x, log_y = self.log_modes()
        self._show(text, float(_to_view(np.array([x]), log_x)[0]), float(_to_view(np.array([y]), log_y)[0]))

    def _clicked(self, ev: Any) -> None:
        if ev.button() != Qt.MouseButton.LeftButton or ev.double():
            return
        hit = self.nearest(ev.scenePos())
        if hit is None:
            return
        test = int(self.series[hit[0]].tests[hit[1]])
        if test < 0:
            return
        ev.accept()
        self.testClicked.emit(test, bool(ev.modifiers() & Qt.KeyboardModifier.ControlModifier))

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt's name
        if event.type() == QEvent.Type.Leave:
            self._last_pos = None
            self.hide()
        return False

    # --- the readout --------------------------------------------------------------------------------------
    def _readout(self) -> pg.TextItem:
        """The text item, made again in the page's colours after a theme switch."""
        colours = (theme.plot_foreground(), theme.plot_background())
        if self.readout is None or colours != self._colours:
            if self.readout is not None:
                self.readout.setParentItem(None)
                if self.readout.scene() is not None:
                    self.readout.scene().removeItem(self.readout)
            fg, bg = colours
            fill = pg.mkColor(bg)
            fill.setAlpha(BACKDROP_ALPHA)
            self.readout = pg.TextItem(color=fg, fill=pg.mkBrush(fill), border=pg.mkPen(fg, width=0.8))
            font = self.widget.font()
            font.setPointSizeF(READOUT_POINT_SIZE)
            self.readout.setFont(font)
            self.readout.setParentItem(self.vb)  # in the view box's pixels, not the data's: it stays in its corner
            self.readout.setZValue(1000)
            self._colours = colours
            self.marker.setPen(pg.mkPen(fg, width=1.6))
        return self.readout

    def _show(self, text: str, vx: float, vy: float) -> None:
        """The readout in a corner of the data area where it does not cover the point (a top one if it can),
        wrapped where it would take most of the width; a ring on the point (``vx``, ``vy``: view units)."""
        readout = self._readout()
        readout.setTextWidth(-1)
        readout.setText(text)
        self.text = text
        rect = self.vb.boundingRect()
        limit = max(rect.width() * READOUT_MAX_SHARE, 160.0)
        if readout.boundingRect().width() > limit:
            readout.setTextWidth(limit)
        w, h = readout.boundingRect().width(), readout.boundingRect().height()
        self.marker.setData([vx], [vy])
        self.marker.show()
        point = self.vb.mapFromView(QPointF(vx, vy))
        m = READOUT_MARGIN_PX
        left, right = (rect.left() + m, (0, 0)), (rect.right() - m, (1, 0))
        sides = (right, left) if point.x() < rect.center().x() else (left, right)
        corners = [(x, rect.top() + m, (ax, 0)) for x, (ax, _) in sides]
        corners += [(x, rect.bottom() - m, (ax, 1)) for x, (ax, _) in sides]
        for x, y, (ax, ay) in corners:
            box = QRectF(x - ax * w, y - ay * h, w, h).adjusted(-HOVER_RADIUS_PX, -HOVER_RADIUS_PX,
                                                               HOVER_RADIUS_PX, HOVER_RADIUS_PX)
            if not box.contains(point):
                break
        else:
            x, y, (ax, ay) = corners[0]
        readout.setAnchor((ax, ay))
        readout.setPos(x, y)
        readout.show()
        for item in self.covers:
            if item.isVisible():
                item.hide()
                self.covered.append(item)

    def hide(self) -> None:
        self.hovered = None
        self.text = ""
        if self.readout is not None:
            self.readout.hide()
        self.marker.hide()
        covered, self.covered = self.covered, []
        for item in covered:
            item.show()


def log_label(label: str) -> str:
    """An axis label for its log scale: ``TTFT (ms)`` → ``TTFT (ms, log scale)``."""
    return f"{label[:-1]}, log scale)" if label.endswith(")") else f"{label} (log scale)"


class LogScaleToggle(QObject):
    """A plot's log-scale switch: a checkable action in the plot's context menu and a small "log" button in its top
    left corner (Tab reaches it, Space switches it). ``toggled(bool)`` when the user switches it; ``changed(plot)``
    once the plot named ``plot`` has switched (by the user or a restored setting)."""

    toggled = Signal(bool)
    changed = Signal(str)

    def __init__(self, widget: pg.PlotWidget, axes: Sequence[str], axis_names: Sequence[str], plot: str) -> None:
        super().__init__(widget)
        self.widget = widget
        self.plot = plot
        which = " and ".join(axis_names)
        self.action = QAction(f"Log scale ({'both axes' if len(axes) > 1 else axis_names[0]})", widget)
        self.action.setCheckable(True)
        self.action.setIconText("log")
        self.action.setToolTip(f"Logarithmic {which} axis{'es' if len(axes) > 1 else ''} (remembered)")
        self.action.triggered.connect(self.toggled)
        self.button = QToolButton(widget)
        self.button.setDefaultAction(self.action)
        self.button.setAutoRaise(True)
        self.button.setFocusPolicy(Qt.FocusPolicy.TabFocus)
        font = self.button.font()
        font.setPointSizeF(max(font.pointSizeF() - 1, 7.0))
        self.button.setFont(font)
        menu = widget.getPlotItem().getViewBox().getMenu(None)
        menu.addSeparator()
        menu.addAction(self.action)
        self._place()

    @property
    def checked(self) -> bool:
        return self.action.isChecked()

    def set_checked(self, on: bool) -> None:
        """Show ``on`` without emitting ``toggled`` (the plot set it)."""
        self.action.setChecked(on)

    def _place(self) -> None:
        size = self.button.sizeHint()  # the top left corner: the title is centred, the y axis' label lower down
        self.button.setGeometry(2, 2, size.width(), size.height())
        self.button.raise_()


