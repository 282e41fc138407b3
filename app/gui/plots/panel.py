"""What every plot shares: ``PlotView`` (what a refresh reads) and ``PlotPanel`` (one plot widget).

A plot is kept up to date in three steps, each doing only what changed:

* :meth:`PlotPanel.update_predictions`: the predicted curves (ceilings, expected bands, what-ifs), asked of the
  PredictionService only when the answer's inputs changed (the predictor, the tests planned, the hardware each
  model ran on), never for more data;
* :meth:`PlotPanel.take`: what the run holds that the plot has not taken yet, appended to each series' own buffer
  (:class:`~app.gui.plots.streams.Stream`), or a small series built again from the rows when a row arrives;
* :meth:`PlotPanel.flush`: ``setData`` for the series whose buffers changed (PyMeasure's way: no scheduler).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, ClassVar

import numpy as np
import pyqtgraph as pg

from app.compare.entries import LEGEND_MODEL_CHARS, shared_prefix
from app.gui import theme
from app.gui.plots.interaction import (
    LogScaleToggle,
    PickLine,
    PickSeries,
    PlotPointer,
    axis_text,
    log10_or_nan,
    log_label,
    number,
)
from app.gui.plots.items import (
    TopLegend,
    band_between,
    error_bars,
    expected_line,
    line,
    make_plot,
    marked_line,
    rename,
    scatter,
    show_curve,
    unstable_rings,
)
from app.gui.plots.streams import Stream
from app.gui.plots.style import finite_max, nice_ceil, short_model
from app.gui.predictions import PredictionService, same_hardware
from app.predict.profiles import HardwareProfile
from app.results.row_types import ResultRow
from app.run.live import LiveRun
from app.run.plan import RemoteTest, TestSpec

MODEL_SEP = " · "  # between a legend entry's model and what it is
DEPTH_SYMBOLS = ("o", "s", "t", "d")  # marker shapes by context depth (colours are models)
SYMBOL_GLYPHS = {"o": "●", "s": "■", "t": "▼", "d": "◆"}
SETTING_KEYS = ("n_gpu_layers", "type_k", "type_v", "flash_attn", "n_ubatch")
MIN_DATA_HEIGHT_PX = 160  # the least data area a plot keeps for its legend
PLOT_FRAME_PX = 75  # title, bottom axis and its label
LEGEND_ROW_PX = 21  # one legend row (8 pt text): two rows always fit
BEAM = 6.0  # error bar caps' width in x units (tokens) on a linear x axis
LOG_BEAM_DECADES = 0.03  # and on a log one


@dataclass(frozen=True)
class PlotView:
    """What one redraw reads: a run, its predictions, the selected tests and the inspector's context size."""

    session: LiveRun
    predictor: PredictionService
    selected: frozenset[int] = frozenset()
    kv_ctx_max: int = 4096
    _hw: dict[str, tuple[HardwareProfile | None, HardwareProfile | None]] = field(default_factory=dict,
                                                                                 compare=False, repr=False)

    @cached_property
    def models(self) -> list[str]:
        return self.session.models()

    @property
    def multi(self) -> bool:
        """Several models in one run: legend labels then name their model."""
        return len(self.models) > 1

    @property
    def prediction_key(self) -> tuple[Any, ...]:
        """What the predicted curves depend on: the run and its planned tests, the predictor's answers (and the
        curves computed since), and the hardware each model's measurements ran on."""
        return (id(self.session), id(self.predictor), self.predictor.version, self.predictor.curves_version,
                self.session.tests_version, tuple(self.hardware(p) for p in self.models))

    @property
    def rows_key(self) -> tuple[Any, ...]:
        """What the series built from result rows depend on: the rows, the models (their legend names) and the
        selection (its rings)."""
        return id(self.session), self.session.rows_version, tuple(self.models), self.selected

    @cached_property
    def model_of_test(self) -> dict[int, int]:
        """Each test's model, as an index into :attr:`models`."""
        index = {p: i for i, p in enumerate(self.models)}
        return {i: index.get(t.model_path, -1) for i, t in self.session.tests.items()}

    @cached_property
    def tests(self) -> list[TestSpec | RemoteTest]:
        return [self.session.tests[i] for i in sorted(self.session.tests)]

    @property
    def profile_name(self) -> str:
        profile = self.predictor.profile
        return profile.name if profile else "no profile"

    def hardware(self, path: str) -> tuple[HardwareProfile | None, HardwareProfile | None]:
        """(the hardware ``path``'s measurements ran on, the inspector's profile as a what-if or None).

        The first is what its rows (or its model load) say; where they do not say (before a run, old recordings)
        it is the inspector's profile and there is no what-if. A what-if is never the same hardware.
        """
        cached = self._hw.get(path)
        if cached is not None:
            return cached
        s = self.session
        evidence = [r for r in s.rows.values() if r.model_path == path]
        evidence += [ResultRow(n_gpu_layers_effective=e.n_gpu_layers_effective)  # a load says where layers went
                     for e in s.loads if e.model_path == path]
        ran_on = self.predictor.hardware_of(evidence)
        chosen = self.predictor.profile
        pair = (chosen, None) if ran_on is None else (ran_on, None if same_hardware(ran_on, chosen) else chosen)
        self._hw[path] = pair
        return pair

    def settings(self, path: str) -> dict[str, Any]:
        """The settings the run's first test of ``path`` used (the predicted curves are drawn for them)."""
        for t in self.tests:
            if t.model_path == path:  # a remote test has none of these settings
                return {k: getattr(t, k, None) for k in SETTING_KEYS}
        return {}

    def curve(self, key: tuple[Any, ...], compute: Callable[[], Any]) -> Any:
        """A predicted curve from the predictor's cache; None while it is being computed in the background."""
        return self.predictor.cached_curve((*key, self.predictor.version), compute)

    @cached_property
    def model_names(self) -> dict[str, str]:
        """Each model as legends name it: its file's short name less the start every model of the run shares
        (``Q4_1``, ``Q8_0`` of two SmolLM2 files), the middle elided past LEGEND_MODEL_CHARS: a legend line fits a
        laptop's plot, and the hover readout gives the whole name."""
        names = [short_model(p) for p in self.models]
        cut = len(shared_prefix(names))
        out = {}
        for path, name in zip(self.models, names, strict=True):
            part = name[cut:]
            if len(part) > LEGEND_MODEL_CHARS:
                half = (LEGEND_MODEL_CHARS - 1) // 2
                part = f"{part[:half]}…{part[-half:]}"
            out[path] = part
        return out

    def label(self, what: str, path: str) -> str:
        """A legend entry's name: what it is, after its model where the run has several (the model first, so a
        label cut at a narrow plot's edge still names it)."""
        return f"{self.model_names.get(path) or short_model(path)}{MODEL_SEP}{what}" if self.multi else what

    def model_of_tokens(self, start: int = 0) -> np.ndarray:
        """The model index in ``models`` (-1 where unknown) of each per-token sample from ``start`` on."""
        tt = self.session.tok_test.view()[start:].astype(int)
        if tt.size == 0:
            return tt
        lut = np.full(max(int(tt.max()), max(self.session.tests, default=0)) + 1, -1, dtype=int)
        for i, m in self.model_of_test.items():
            if 0 <= i < lut.size:
                lut[i] = m
        return lut[tt]

    def selected_tokens(self, start: int = 0) -> np.ndarray:
        """A mask over the per-token samples from ``start`` on: True for the selected tests' tokens."""
        tok_t = self.session.tok_test.view()[start:]
        return np.isin(tok_t, list(self.selected)) if self.selected else np.zeros(tok_t.size, dtype=bool)


@dataclass
class Curve:
    """One named series for :meth:`PlotPanel.draw_curves`: measured (markers and line) or predicted (dashed)."""

    name: str
    xs: np.ndarray
    ys: np.ndarray
    color: str
    measured: bool = True
    scale: bool = True  # counts for the y range (False: a what-if on other hardware, noted when off-scale)


class PlotPanel:
    """One plot: its widget, legend, items and axis ranges, kept up to date from a :class:`PlotView` (see the
    module's docstring); each series is one item, found by its key."""

    name: ClassVar[str]  # the first element of the keys of its items (``data_of``)
    title: ClassVar[str]
    x_label: ClassVar[str]
    y_label: ClassVar[str]
    columns: ClassVar[int] = 2  # legend columns
    points_key: ClassVar[str] = "meas"  # the key of the measured means in ``points_with_sd``
    log_axes: ClassVar[tuple[str, ...]] = ()  # the axes ("x", "y") its log-scale toggle switches; () no toggle
    log_default: ClassVar[bool] = False

    def __init__(self, title: str | None = None, columns: int | None = None) -> None:
        self.widget = make_plot(title or self.title, self.x_label, self.y_label, columns or self.columns)
        self.plot: pg.PlotItem = self.widget.getPlotItem()
        # pyqtgraph's "Plot Options" (log, FFT, averaging, downsampling) would transform the items behind the
        # drawing's back; the view's own menu (ranges, mouse mode) stays, with the log toggle added to it
        self.plot.setMenuEnabled(enableMenu=False, enableViewBoxMenu=True)
        self.legend: TopLegend = self.plot.legend
        self.items: dict[tuple[Any, ...], tuple[Any, Any]] = {}  # key -> (owner, item): one item per series
        self.streams: dict[tuple[Any, ...], Stream] = {}  # key -> the growing series its item shows
        self._staged: dict[tuple[Any, ...], tuple[tuple[Any, ...], dict[str, Any]]] = {}  # key -> setData's args
        self._predicted_key: tuple[Any, ...] | None = None  # the prediction inputs the curves shown were made for
        self._predicted = False  # curves set since the last flush
        self._session: LiveRun | None = None  # the run taken from
        self._rows_key: tuple[Any, ...] | None = None
        self._ranges: dict[str, tuple[Any, Any]] = {}  # which view -> (x, y) bounds in data units
        self._applied: dict[str, tuple[Any, Any]] = {}  # which view -> the bounds set on it, in view units
        self.pointer = PlotPointer(self.widget)
        self._log_scale = False
        self.log_toggle: LogScaleToggle | None = None
        if self.log_axes:
            names = [self.x_label.split(" (")[0] if a == "x" else self.y_label.split(" (")[0] for a in self.log_axes]
            self.log_toggle = LogScaleToggle(self.widget, self.log_axes, names, self.name)
            self.log_toggle.toggled.connect(self.set_log_scale)
            self.set_log_scale(self.log_default)

    @property
    def log_scale(self) -> bool:
        """Whether the plot's :attr:`log_axes` are logarithmic now."""
        return self._log_scale

    def set_log_scale(self, on: bool) -> None:
        """Make :attr:`log_axes` logarithmic (or linear again): the items follow (pyqtgraph maps their data), the
        axis labels say so, the fixed ranges are forgotten (they were in the other units) and the toggle's
        ``changed`` asks the owner to redraw what pyqtgraph does not map (error bars, lines placed by value)."""
        if self.log_toggle is None:
            return
        on = bool(on)
        self.log_toggle.set_checked(on)
        if on == self._log_scale:
            return
        self._log_scale = on
        self.plot.setLogMode(x=on and "x" in self.log_axes, y=on and "y" in self.log_axes)
        fg = theme.plot_foreground()
        for axis, name, label in (("x", "bottom", self.x_label), ("y", "left", self.y_label)):
            if axis in self.log_axes:
                self.plot.setLabel(name, log_label(label) if on else label, color=fg)
        self.reset_ranges()
        self.log_toggle.changed.emit(self.name)

    # --- keeping up to date ----------------------------------------------------------------------
    def draw(self, view: PlotView) -> bool:
        """Bring the plot up to date with ``view`` now, shown or not: the run's new data, the predictions where
        their inputs changed, then ``setData``; True when an item was given new data."""
        self.take(view)
        self.update_predictions(view)
        return self.flush()

    def update_predictions(self, view: PlotView) -> None:
        """The predicted curves, asked again only when :meth:`prediction_key` changed (curves the predictor is
        still computing come with its next ``curves_version``)."""
        key = self.prediction_key(view)
        if key != self._predicted_key:
            self._predicted_key = key
            self.predict(view)
            self._predicted = True  # the curves were set: the ranges fit them at the next flush

    def prediction_key(self, view: PlotView) -> tuple[Any, ...]:
        """What this plot's predicted curves depend on."""
        return view.prediction_key

    def predict(self, view: PlotView) -> None:
        """Show the predicted curves for ``view`` (subclasses; none by default)."""

    def take(self, view: PlotView) -> None:
        """Take what the run holds that this plot has not shown yet: new points appended to their streams, the
        series built from rows again when the rows (or the selection) changed. Another run starts over."""
        if view.session is not self._session:
            self._session = view.session
            self._rows_key = None
            for stream in self.streams.values():
                stream.clear()
            self.forget_taken()
        if view.rows_key != self._rows_key:
            self._rows_key = view.rows_key
            self.take_rows(view)
        self.take_new(view)

    def forget_taken(self) -> None:
        """Another run: a subclass's cursors into the old one start again from zero."""

    def take_rows(self, view: PlotView) -> None:
        """The series built from the run's rows and the selection (subclasses)."""

    def take_new(self, view: PlotView) -> None:
        """Append the run's new per-token or telemetry points to their streams (subclasses)."""

    def restage(self) -> None:
        """Everything is shown again at the next refresh (after the log scale switched: error bars and lines placed
        by value are in view units)."""
        self._predicted_key = None
        self._rows_key = None
        for stream in self.streams.values():
            stream.dirty = True

    def stage(self, key: tuple[Any, ...], make: Callable[[], Any], *args: Any, name: str | None = None,
              **kwargs: Any) -> Any:
        """The item for ``key`` (made on first use, renamed to ``name``) gets ``setData(*args, **kwargs)`` at the
        next :meth:`flush`; returns the item."""
        item = self.item(key, make, name)
        self._staged[(self.name, *key)] = (args, kwargs)
        return item

    def stream(self, key: tuple[Any, ...]) -> Stream:
        """The growing series the item for ``key`` shows (made on first use)."""
        found = self.streams.get(key)
        if found is None:
            found = self.streams[key] = Stream()
        return found

    def flush(self) -> bool:
        """``setData`` for every staged series and every stream that grew since it was shown, then the axis ranges;
        True when anything was set."""
        staged, self._staged = self._staged, {}
        for full, (args, kwargs) in staged.items():
            hit = self.items.get(full)
            if hit is not None:
                hit[1].setData(*args, **kwargs)
        grown = [(key, s) for key, s in self.streams.items() if s.dirty]
        for key, s in grown:
            hit = self.items.get((self.name, *key))
            if hit is not None:
                self.show_stream(key, s, hit[1])
            s.shown()
        if not staged and not grown and not self._predicted:
            return False
        self._predicted = False
        self.fit_ranges()
        return True

    def show_stream(self, key: tuple[Any, ...], stream: Stream, item: Any) -> None:
        """``setData`` of one stream's item: its points, lines broken where they start again."""
        item.setData(stream.x.view(), stream.y.view(), connect=stream.connect())

    def fit_ranges(self) -> None:
        """Set the axis ranges after new data (subclasses; pyqtgraph's autorange by default)."""

    @property
    def dirty(self) -> bool:
        """Some series has data its item does not show yet (or its ranges do not fit new curves yet)."""
        return bool(self._staged) or self._predicted or any(s.dirty for s in self.streams.values())

    def reset(self) -> None:
        """Remove everything drawn (a new sweep, another past run) and forget the axis ranges."""
        for owner, item in self.items.values():
            owner.removeItem(item)
        self.items.clear()
        self.streams.clear()
        self._staged.clear()
        self._predicted_key = None
        self._session = None
        self._rows_key = None
        self.forget_taken()
        self.pointer.clear()
        self.reset_ranges()

    def reset_ranges(self) -> None:
        """Forget the fixed axis ranges; the next redraw sets them from what it draws."""
        self._ranges.clear()
        self._applied.clear()
        self.plot.enableAutoRange()

    def item(self, key: tuple[Any, ...], make: Callable[[], Any], name: str | None = None,
             owner: Any = None) -> Any:
        """The plot's item for ``(name, *key)``, made and added (to ``owner``, default the plot) on first use;
        ``name``: its legend label now (names that carry a profile change with it)."""
        full = (self.name, *key)
        hit = self.items.get(full)
        if hit is None:
            owner = owner if owner is not None else self.plot
            hit = (owner, make())
            owner.addItem(hit[1])
            self.items[full] = hit
        if name is not None:
            rename(self.plot, hit[1], name)
        return hit[1]

    def drop(self, key: tuple[Any, ...]) -> None:
        """Take the item for ``(name, *key)`` and its legend entry off the plot, if there is one."""
        hit = self.items.pop((self.name, *key), None)
        if hit is not None:
            hit[0].removeItem(hit[1])
        self._staged.pop((self.name, *key), None)
        self.streams.pop(key, None)
        self.pointer.drop(key)

    def pickable(self, key: tuple[Any, ...], series: PickSeries) -> None:
        """The measured points the item for ``key`` draws, for the hover readout and click-to-select (dropped
        with the item)."""
        self.pointer.set_series(key, series)

    def show_predicted(self, key: tuple[Any, ...], item: pg.PlotDataItem, xs: np.ndarray, curve: np.ndarray | None,
                       part: int | None = None, band: tuple[int, int] | None = None) -> None:
        """``show_curve`` for a predicted line, which the mouse then reads anywhere along it: its name, the x and
        the value there (with the band's ends, rows ``band`` of a stacked curve, where it has one)."""
        show_curve(item, xs, curve, part)
        if curve is None:
            self.pointer.drop(key)
            return
        ys = np.asarray(curve if part is None else curve[part], dtype=float)
        xs_a = np.asarray(xs, dtype=float)
        lo, hi = (np.asarray(curve[band[0]], dtype=float), np.asarray(curve[band[1]], dtype=float)) if band else (
            None, None)

        # the text's inputs as defaults: a closure over ``self`` would make a cycle through the Qt objects
        def describe(x: float, y: float, name: str = str(item.name() or ""), xl: str = self.x_label,
                     yl: str = self.y_label, xs: np.ndarray = xs_a, lo: np.ndarray | None = lo,
                     hi: np.ndarray | None = hi) -> str:
            text = f"{name}\n{axis_text(xl, x)} · {axis_text(yl, y)}"
            if lo is not None and hi is not None:
                text += f" ({number(float(np.interp(x, xs, lo)))}–{number(float(np.interp(x, xs, hi)))})"
            return text

        self.pointer.set_line(key, PickLine(xs_a, ys, describe, item))

    def view_xy(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Data to view coordinates (log10 on a log axis, NaN where it has no place): for the items pyqtgraph does
        not map itself (error bars)."""
        log_x, log_y = self.pointer.log_modes()
        return log10_or_nan(x) if log_x else x, log10_or_nan(y) if log_y else y

    def data_of(self, *key: Any) -> tuple[np.ndarray, np.ndarray]:
        """(x, y) drawn by one item, e.g. ``data_of("ttft", "meas", 0)`` (the plot's name may be left out); empty if
        none."""
        if not key or key[0] != self.name:
            key = (self.name, *key)
        hit = self.items.get(tuple(key))
        return xy_of(hit[1] if hit is not None else None)

    def mark_unstable(self, points: list[tuple[float, float]]) -> None:
        """Amber rings with a ⚠ legend entry around measured means whose spread is ≥ 10 % of the mean; the item
        (and its legend entry) exists only while there are such points."""
        if not points:
            self.drop(("unstable",))
            return
        x, y = zip(*points, strict=True)
        self.stage(("unstable",), unstable_rings, list(x), list(y))

    def points_with_sd(self, m: int, name: str, c: str, xyz: tuple[np.ndarray, np.ndarray, np.ndarray],
                       symbol: str = "o", size: float = 8, depths: Sequence[int] = ()) -> pg.PlotDataItem:
        """Model ``m``'s measured means (``meas`` for TTFT, ``mean`` for decode) with ±1 sd error bars: colour by
        model, and where the tests ran at several ``depths``, a marker shape per depth that the legend names; returns
        the markers' item."""
        x, y, e = xyz
        vx, vy = self.view_xy(x, y)
        top = bottom = e
        if self.pointer.log_modes()[1]:  # ±1 sd on a log axis: uneven, and the low end above zero
            top = log10_or_nan(y + e) - vy
            bottom = vy - log10_or_nan(np.maximum(y - e, y * 1e-3))
        ok = np.isfinite(vx) & np.isfinite(vy)
        beam = LOG_BEAM_DECADES if self.pointer.log_modes()[0] else BEAM  # in x units: a decade is not a token
        self.stage(("err", m), lambda: error_bars(c), x=vx[ok], y=vy[ok], top=np.asarray(top)[ok],
                   bottom=np.asarray(bottom)[ok], beam=beam)
        def make() -> pg.PlotDataItem:
            return scatter(name, c, symbol, size)

        distinct = sorted(set(depths))
        if len(distinct) > 1 and len(depths) == len(x):
            shape = {d: DEPTH_SYMBOLS[k % len(DEPTH_SYMBOLS)] for k, d in enumerate(distinct)}
            name += "; " + ", ".join(f"{SYMBOL_GLYPHS[shape[d]]} depth {d}" for d in distinct)
            item = self.stage((self.points_key, m), make, x, y, name=name, symbol=[shape[d] for d in depths])
            # a shape per point: pyqtgraph's clipping to the view would drop points but not their shapes (and
            # raise); a few means need neither clipping nor thinning
            item.setClipToView(False)
            item.setDownsampling(ds=1, auto=False)
            return item
        return self.stage((self.points_key, m), make, x, y, name=name, symbol=symbol)

    def draw_expected(self, key: tuple[Any, ...], name: str, c: str, xs: np.ndarray,
                      curve: np.ndarray | None) -> None:
        """An expected curve (rows value, low, high along ``xs``) as a dash-dot line in a pale band; nothing
        where there is no expected figure (no fit for that hardware) or while it is being computed."""
        parts = [(*key, part) for part in ("band", "lo", "hi", "mid")]
        if curve is None:
            for k in parts:
                self.drop(k)
            return
        lo = self.item(parts[1], lambda: line(None, c, 0.5, alpha=60))
        hi = self.item(parts[2], lambda: line(None, c, 0.5, alpha=60))
        show_curve(lo, xs, curve, 1)
        show_curve(hi, xs, curve, 2)
        self.item(parts[0], lambda: band_between(lo, hi, c))
        mid = self.item(parts[3], lambda: expected_line(name, c))
        rename(self.plot, mid, name)
        self.show_predicted(parts[3], mid, xs, curve, 0, band=(1, 2))

    def set_range(self, vb: pg.ViewBox, x: tuple[float, float] | None, y_hi: float | None,
                  y_lo: float = 0.0, which: str = "main") -> None:
        """Fix a view's range to 'nice' bounds (in data units) that only grow within a session: axes are redrawn
        (costly text) only when the data outgrows them, not on every appended point. On a log axis the bounds are
        set in log10 units, from the decade below the smallest positive value drawn where the low bound is 0."""
        prev_x, prev_y = self._ranges.get(which, (None, None))
        if x is not None and prev_x is not None:
            x = (min(x[0], prev_x[0]), max(x[1], prev_x[1]))
        y = None
        if y_hi is not None:
            hi = nice_ceil(y_hi)
            y = (y_lo, max(hi, prev_y[1]) if prev_y is not None else hi)
        if x is None and y is None:
            return
        x, y = (x if x is not None else prev_x), (y if y is not None else prev_y)
        self._ranges[which] = (x, y)
        log_x, log_y = self.pointer.log_modes() if vb is self.plot.getViewBox() else (False, False)
        applied = (self._log_bounds(x, 0) if log_x else x, self._log_bounds(y, 1) if log_y else y)
        if applied == self._applied.get(which):
            return
        self._applied[which] = applied
        vb.disableAutoRange()
        vb.setRange(xRange=applied[0], yRange=applied[1], padding=0.0)

    def _log_bounds(self, bounds: tuple[float, float] | None, axis: int) -> tuple[float, float] | None:
        """(lo, hi) in data units as log10 bounds; a low bound ≤ 0 becomes the decade below the smallest positive
        value the plot's lines and markers draw on that axis (0 = x, 1 = y)."""
        if bounds is None or not bounds[1] > 0:
            return None
        lo, hi = bounds
        if not lo > 0:
            least = [float(np.min(a[a > 0])) for _o, item in self.items.values() if isinstance(item, pg.PlotDataItem)
                     for a in (np.asarray(xy_of(item)[axis], dtype=float),) if np.any(a > 0)]
            lo = 10.0 ** math.floor(math.log10(min(least))) if least else hi / 1000.0
        return math.log10(lo), math.log10(hi)

    def fit_legend(self) -> None:
        """Fewer legend columns where the plot is too narrow for them; a legend that would leave the data less
        than :data:`MIN_DATA_HEIGHT_PX` (or take more than 40 % of the plot) collapses to one line."""
        h = self.widget.height()
        budget = min(h - PLOT_FRAME_PX - MIN_DATA_HEIGHT_PX, 0.4 * h)
        self.legend.fit(self.plot.getViewBox().width() or self.widget.width() - 60, max(budget, 2 * LEGEND_ROW_PX))

    def draw_curves(self, curves: Sequence[Curve]) -> list[str]:
        """Show only ``curves`` (the compare view): measured ones as points on a line, predicted ones as a line.
        The y axis runs from zero (speeds and times read best from there; on a log axis from the smallest value)
        up to what the curves that ``scale`` reach; returns the names of the others that run above it."""
        self.reset()
        for k, c in enumerate(curves):
            make = (lambda c=c: marked_line(c.name, c.color)) if c.measured else \
                (lambda c=c: line(c.name, c.color, 2.0, dashed=not c.scale))
            item = self.item(("curve", k), make)
            item.setData(c.xs, c.ys)
            if c.measured:
                xs, ys = np.asarray(c.xs, dtype=float), np.asarray(c.ys, dtype=float)
                # the text's inputs as defaults: a closure over ``self`` would make a cycle through the Qt objects
                self.pickable(("curve", k), PickSeries(xs, ys, np.full(xs.size, -1), lambda i, c=c, xs=xs, ys=ys,
                                                       xl=self.x_label, yl=self.y_label: (
                    f"{c.name}\n{axis_text(xl, xs[i])} · {axis_text(yl, ys[i])}"), item))
        scaled = [c for c in curves if c.scale] or list(curves)
        hi = finite_max(*(c.ys for c in scaled))
        if not np.isfinite(hi) or hi <= 0:
            return []
        off = [c.name for c in curves if not c.scale and finite_max(c.ys) > hi * 1.06]
        vb = self.plot.getViewBox()
        if self.plot.getAxis("left").logMode:
            lows = [float(np.nanmin(c.ys[c.ys > 0])) for c in scaled if np.any(c.ys > 0)]
            lo = min(lows) if lows else hi / 100
            vb.setYRange(np.log10(lo / 1.5), np.log10(hi * 1.5), padding=0.0)
        else:
            vb.setYRange(0.0, hi * 1.06, padding=0.0)
        return off


def xy_of(item: Any) -> tuple[np.ndarray, np.ndarray]:
    """(x, y) an item draws, as arrays (empty where there is no item or no data)."""
    if item is None:
        return np.zeros(0), np.zeros(0)
    # a line's data as given, not as downsampled and clipped for the screen
    x, y = item.getOriginalDataset() if isinstance(item, pg.PlotDataItem) else item.getData()
    return (np.zeros(0) if x is None else np.asarray(x)), (np.zeros(0) if y is None else np.asarray(y))
