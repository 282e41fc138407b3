"""Decode speed against position in the context: per-token rates, test means (±1 sd) and the predicted ceiling.

The x axis runs to the deepest test or to the context asked in the inspector, whichever is further, with a line at
that context; the y axis fits the measurements and the predictions for the hardware they ran on, recomputed when
those predictions change (a live run's first model load says which hardware that is). The inspector's other
hardware is a what-if: the answer's decode figure along the context (expected where a source gives one, else the
ceiling), which does not stretch the y axis; where it runs above the scale, a note in the plot gives its figure at
the asked context.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt

from app.gui import theme
from app.gui.plots.envelope import chunk_tokens, envelope
from app.gui.plots.interaction import BACKDROP_ALPHA, figure_text, row_series
from app.gui.plots.items import line, ring, what_if_line
from app.gui.plots.panel import PlotPanel, PlotView
from app.gui.plots.streams import Stream
from app.gui.plots.style import CURVE_POINTS, HILITE, color, finite_max, profile_name
from app.predict.questions import decode_depth_at
from app.run.live import decode_mean_position as mean_pos

__all__ = ["DecodePlot", "asked_depth", "curve_positions", "mean_pos"]


MEANS_LABEL = "test mean (±1 sd)"
MEANS_MARKER = ("s", 10)  # symbol, size of the measured means
NOTE_MARGIN_PX = 4.0


def asked_depth(n_ctx: int) -> int:
    """The KV depth the inspector's decode figure at a context of ``n_ctx`` tokens is for (``at_context``'s)."""
    return decode_depth_at(n_ctx)


def curve_positions(x_max: float, depth: int = 0, first: float = 16.0) -> np.ndarray:
    """Where the predicted curves are asked: from an empty cache, then from ``first`` (half the shallowest test's
    first decoded position) to ``x_max``, spaced evenly on a log axis (the plot's default) and so closer together
    where the context is short, and at ``depth`` exactly (the asked context's figure is one of the curve's own
    points)."""
    xs = np.geomspace(min(max(first, 8.0), x_max / 4.0), x_max, CURVE_POINTS)
    extra = [float(depth)] if 0 < depth <= x_max else []
    return np.unique(np.concatenate(([0.0], xs, extra)))


class DecodePlot(PlotPanel):
    """Decode tok/s vs position in context (tokens); keeps the ceilings it drew for the inter-token plot."""

    name = "dec"
    title = "Decode vs context position"
    x_label = "position in context (tokens)"
    y_label = "decode speed (tok/s)"
    points_key = "mean"
    log_axes = ("x",)  # contexts from hundreds to tens of thousands of tokens
    log_default = True  # a short test's tokens and the asked context (thousands) on one axis

    def __init__(self, title: str | None = None, columns: int | None = None) -> None:
        super().__init__(title, columns)
        self.curves: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # model index -> (positions, predicted tok/s)
        self.expected: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # model index -> (positions, expected tok/s)
        #: model index -> (what it is: "RTX 4060 Laptop, expected" and the model where there are several,
        #: positions, its figure at each): drawn, never stretching the y axis
        self.what_ifs: dict[int, tuple[str, np.ndarray, np.ndarray]] = {}
        self.predictions = 0  # how many times the curves were asked for (the inter-token plot follows them)
        self.asked_ctx = 0  # the inspector's context (tokens), marked by a line
        self.asked_depth = 0  # the depth its decode figure is for
        self._mean_hi = float("nan")
        self._x_max = 64.0
        self._multi = False
        self._ctx_line: pg.InfiniteLine | None = None
        self.note = pg.TextItem(anchor=(1, 0))  # what runs above the scale, in the data area's top right corner
        self.note.setParentItem(self.plot.getViewBox())
        self.note.setZValue(950)
        self.note.hide()
        self._note_colours: tuple[str, str] = ("", "")
        self.pointer.covers.append(self.note)  # the hover readout takes the corner while it shows
        self.plot.getViewBox().sigResized.connect(self._place_note)
        self.forget_taken()

    def reset(self) -> None:
        super().reset()
        self.curves = {}
        self.expected = {}
        self.what_ifs = {}
        self._mean_hi = float("nan")
        if self._ctx_line is not None:
            self.plot.removeItem(self._ctx_line)
            self._ctx_line = None
        self.note.setText("")
        self.note.hide()

    @staticmethod
    def _token_line(view: PlotView, m: int, path: str) -> Callable[[], Any]:
        name = view.label("per token (measured)", path)
        return lambda: line(name, color(m), 1.0, alpha=110, long=True)

    def forget_taken(self) -> None:
        self._n_tok = 0
        self._models: tuple[str, ...] = ()

    def x_max(self, view: PlotView) -> float:
        """The x axis' end: the deepest position a test reaches or the asked context, and a little room."""
        return max([t.n_depth + t.n_prompt + t.n_gen for t in view.tests] + [int(view.kv_ctx_max or 0), 64]) * 1.05

    def prediction_key(self, view: PlotView) -> tuple[Any, ...]:
        """The curves run to the asked context too."""
        return (*view.prediction_key, view.kv_ctx_max)

    def predict(self, view: PlotView) -> None:
        """Each model's decode ceiling and expected band on the hardware it ran on, the inspector's what-if, and
        the asked context's line; the axis ranges are fitted to them afresh."""
        self._x_max = self.x_max(view)
        self.asked_ctx = int(view.kv_ctx_max or 0)
        self.asked_depth = asked_depth(self.asked_ctx) if self.asked_ctx else 0
        self._multi = view.multi
        first = min([t.n_depth + t.n_prompt for t in view.tests] or [32]) / 2
        xs = curve_positions(self._x_max, self.asked_depth, first)
        curves: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self.expected = {}
        self.what_ifs = {}
        for m, path in enumerate(view.models):
            ys = self._draw_ceiling(view, m, path, xs)
            if ys is not None:
                curves[m] = (xs, ys)
        self.curves = curves
        self.predictions += 1
        self._draw_asked_context()
        self.reset_ranges()  # the hardware the curves are for may have changed (a live run's first model load)

    def _draw_asked_context(self) -> None:
        """A dotted vertical line at the inspector's context, where its decode figure is read."""
        if not self.asked_ctx:
            if self._ctx_line is not None:
                self._ctx_line.hide()
            return
        fg = theme.plot_foreground()
        if self._ctx_line is None:
            self._ctx_line = pg.InfiniteLine(angle=90, movable=False, pen=pg.mkPen(fg, width=1,
                                                                                  style=Qt.PenStyle.DotLine),
                                             label="", labelOpts={"position": 0.06, "color": fg})
            self.plot.addItem(self._ctx_line, ignoreBounds=True)
        self._ctx_line.label.setFormat(f"context {self.asked_ctx:,}")
        self._ctx_line.setToolTip(f"The context asked in the inspector ({self.asked_ctx:,} tokens): its decode "
                                  f"figure is for depth {self.asked_depth:,}")
        x = float(self.asked_depth or self.asked_ctx)
        self._ctx_line.setPos(np.log10(x) if self.log_scale else x)  # an InfiniteLine is placed in view units
        self._ctx_line.show()

    def take_rows(self, view: PlotView) -> None:
        """Test means (±1 sd) per model, unstable ones ringed, the selected tests highlighted (their tokens too)."""
        s = view.session
        rows = [(r, r.decode_tps) for r in s.ok_rows() if r.decode_tps is not None]
        if tuple(view.models) != self._models:  # tokens are split by model: another model list splits them again
            self._models = tuple(view.models)
            self._n_tok = 0
            for key, stream in self.streams.items():
                if key[0] == "tok":
                    stream.clear()
        for m, path in enumerate(view.models):
            self.item(("tok", m), self._token_line(view, m, path), view.label("per token (measured)", path))
            mine = [(r, tps) for r, tps in rows if r.model_path == path]
            mx, my = np.array([mean_pos(r) for r, _ in mine]), np.array([tps for _, tps in mine])
            name = view.label(MEANS_LABEL, path)
            item = self.points_with_sd(m, name, color(m), (
                mx, my, np.array([float(r.decode_tps_stddev or 0.0) for r, _ in mine])), *MEANS_MARKER,
                depths=[r.n_depth or 0 for r, _ in mine])
            self.pickable((self.points_key, m), row_series(
                name, mx, my, [r for r, _ in mine], lambda v: f"mean position {v:.0f} tok",
                lambda r: figure_text("decode", r.decode_tps, r.decode_tps_stddev, "tok/s"), item))
        self.item(("hltok",), lambda: line(None, HILITE, 1.6))
        hl = self.stream(("hltok",))
        hl.clear()  # the tokens taken so far; take_new adds the rest
        n = self._n_tok
        in_sel = view.selected_tokens()[:n]
        hl.extend(*(a.view()[:n][in_sel] for a in (s.tok_pos, s.tok_rate, s.tok_rep_start)))
        self.mark_unstable([(mean_pos(r), tps) for r, tps in rows if "decode_tps" in (r.unstable_metrics or "")])
        hi = [(r, tps) for r, tps in rows if r.test_index in view.selected]
        self.stage(("hl",), lambda: ring(None), [mean_pos(r) for r, _ in hi], [tps for _, tps in hi])
        self._mean_hi = max((tps + float(r.decode_tps_stddev or 0) for r, tps in rows), default=np.nan)

    def take_new(self, view: PlotView) -> None:
        """The per-token rates that came since, appended to their model's line (and to the highlight's)."""
        s = view.session
        n0, n = self._n_tok, len(s.tok_t_ns)
        if n == n0:
            return
        self._n_tok = n
        pos, rate, starts = (a.view()[n0:n] for a in (s.tok_pos, s.tok_rate, s.tok_rep_start))
        tok_m = view.model_of_tokens(n0)
        for m in np.unique(tok_m):
            if m >= 0:
                mask = tok_m == m
                self.stream(("tok", int(m))).extend(pos[mask], rate[mask], starts[mask])
        in_sel = view.selected_tokens(n0)
        if in_sel.any():
            self.stream(("hltok",)).extend(pos[in_sel], rate[in_sel], starts[in_sel])

    def show_stream(self, key: tuple[Any, ...], stream: Stream, item: Any) -> None:
        """Per-token lines as their min/max envelope, about one pixel per chunk of tokens."""
        span = self._x_max
        x = stream.x.view()
        if self.log_scale and x.size and np.nanmin(x) > 0:  # a pixel holds fewest tokens where x is least
            lo = float(np.nanmin(x))
            span = lo * np.log(10.0) * max(np.log10(self._x_max) - np.floor(np.log10(lo)), 0.1)
        chunk = chunk_tokens(span, self.plot.getViewBox().width())  # repetitions overlap: runs, not x
        x, y, conn = envelope(stream.x.view(), stream.y.view(), stream.connect(), chunk)
        item.setData(x, y, connect=conn)

    def fit_ranges(self) -> None:
        """x from zero to the deepest test or the asked context; y to the per-token rates' 99th percentile, the
        means' tops and the ceilings of the hardware measured, whichever is highest (only ever growing until the
        predictions change). What-ifs above that are named in the note instead."""
        rates = [s.y.view() for key, s in self.streams.items() if key[0] == "tok" and len(s)]
        tok_hi = float(np.percentile(np.concatenate(rates), 99)) if rates else float("nan")
        y_hi = finite_max(tok_hi, self._mean_hi, *[ys for _xs, ys in self.curves.values()])
        if not np.isfinite(y_hi):  # nothing measured and no ceiling: the what-ifs alone set the scale
            y_hi = finite_max(*[ys for _n, _xs, ys in self.what_ifs.values()])
        self.set_range(self.plot.getViewBox(), (0.0, float(self._x_max)), y_hi if np.isfinite(y_hi) else None)
        self._note_off_scale()

    def y_top(self) -> float:
        """The y axis' top as set (data units), NaN before any."""
        y = self._ranges.get("main", (None, None))[1]
        return float(y[1]) if y is not None else float("nan")

    def _note_off_scale(self) -> None:
        """Each what-if whose figure at the asked context lies above the y axis, with that figure: in the data
        area's top right corner, so the figure the inspector gives is on the plot even when it is off the scale."""
        top = self.y_top()
        lines = []
        for _m, (name, xs, ys) in sorted(self.what_ifs.items()):
            at = self.asked_depth if self.asked_depth and xs[0] <= self.asked_depth <= xs[-1] else float(xs[-1])
            value = float(np.interp(at, xs, ys))
            if np.isfinite(top) and value > top:  # its figure at the asked context is off the plot: said here
                lines.append(f"{name}: {value:,.0f} tok/s at depth {at:,.0f}")
        text = "\n".join(["↑ what-if above this scale:", *lines]) if lines else ""
        colours = (theme.plot_foreground(), theme.plot_background())
        if text != self.note.toPlainText() or colours != self._note_colours:  # only on a change (every redraw)
            self._note_colours = colours
            backdrop = pg.mkColor(colours[1])
            backdrop.setAlpha(BACKDROP_ALPHA)  # the curves under the note show through, faint: the text reads
            self.note.fill = pg.mkBrush(backdrop)
            self.note.setText(text, color=colours[0])
            self._place_note()
        self.note.setVisible(bool(text) and self.note not in self.pointer.covered)

    def _place_note(self, *_args: Any) -> None:
        """In the data area's top right corner, wrapped to most of its width."""
        rect = self.plot.getViewBox().boundingRect()
        self.note.setTextWidth(-1)
        if self.note.boundingRect().width() > rect.width() * 0.9:
            self.note.setTextWidth(max(rect.width() * 0.9, 80.0))
        self.note.setPos(rect.right() - NOTE_MARGIN_PX, rect.top() + NOTE_MARGIN_PX)

    def _draw_ceiling(self, view: PlotView, m: int, path: str, xs: np.ndarray) -> np.ndarray | None:
        """Model ``m``'s predicted decode ceiling along ``xs`` on the hardware it ran on (None while it is being
        computed), its expected band, and the inspector's other profile as a dotted what-if: the answer's figure
        (expected where a source gives one, else the ceiling), as the inspector gives it."""
        settings = view.settings(path)
        ran_on, what_if = view.hardware(path)
        items = tuple(sorted(settings.items()))
        ys = None
        if ran_on is None:
            self.drop(("pred", m))
        else:
            curve = view.curve(("dec", path, float(xs[-1]), len(xs), ran_on, items),
                               lambda: view.predictor.decode_curve(path, xs, ran_on, **settings))
            name = view.label(f"ceiling ({profile_name(ran_on)})", path)
            self.show_predicted(("pred", m), self.item(("pred", m), lambda: line(name, color(m), 2.0, dashed=True),
                                                       name), xs, curve)
            ys = curve
        if what_if is None:
            self.drop(("whatif", m))
        else:
            got = view.curve(("dec-whatif", path, float(xs[-1]), len(xs), what_if, items),
                             lambda: view.predictor.decode_figure_curve(path, xs, what_if, **settings))
            kind = got[0] if got is not None else "ceiling"
            what = "what-if ceiling" if kind == "ceiling" else "what-if, expected"
            name = view.label(f"{what} ({profile_name(what_if)})", path)
            figures = got[1] if got is not None else None
            item = self.item(("whatif", m), lambda: what_if_line(name, color(m)), name)
            self.show_predicted(("whatif", m), item, xs, figures, 0, band=None if kind == "ceiling" else (1, 2))
            if figures is not None:
                label = f"{profile_name(what_if)}, {'ceiling' if kind == 'ceiling' else 'expected'}"
                if view.multi:  # the part of the file name that differs (Q4_1, Q8_0)
                    label += f", {view.model_names[path]}"
                self.what_ifs[m] = (label, xs, figures[0])
        exp = None if ran_on is None else view.curve(
            ("dec-exp", path, float(xs[-1]), len(xs), ran_on, items),
            lambda: view.predictor.expected_curve(path, xs, "decode", 0, ran_on, **settings))
        self.draw_expected(("exp", m), view.label(f"expected ± band ({profile_name(ran_on)})", path), color(m), xs,
                           exp)
        if exp is not None:
            self.expected[m] = (xs, exp[0])
        return ys
