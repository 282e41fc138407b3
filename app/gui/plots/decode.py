"""Decode speed against position in the context: per-token rates, test means (±1 sd) and the predicted ceiling."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from app.gui.plots.envelope import chunk_tokens, envelope
from app.gui.plots.interaction import figure_text, row_series
from app.gui.plots.items import line, ring, show_curve, what_if_line
from app.gui.plots.panel import PlotPanel, PlotView
from app.gui.plots.streams import Stream
from app.gui.plots.style import CURVE_POINTS, HILITE, color, finite_max, profile_name
from app.run.live import decode_mean_position as mean_pos

__all__ = ["DecodePlot", "mean_pos"]


MEANS_LABEL = "test mean (±1 sd)"
MEANS_MARKER = ("s", 10)  # symbol, size of the measured means


class DecodePlot(PlotPanel):
    """Decode tok/s vs position in context (tokens); keeps the ceilings it drew for the inter-token plot."""

    name = "dec"
    title = "Decode speed vs position in context"
    x_label = "position in context (tokens)"
    y_label = "decode speed (tok/s)"
    points_key = "mean"
    log_axes = ("x",)  # contexts from hundreds to tens of thousands of tokens

    def __init__(self, title: str | None = None, columns: int | None = None) -> None:
        super().__init__(title, columns)
        self.curves: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # model index -> (positions, predicted tok/s)
        self.expected: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # model index -> (positions, expected tok/s)
        self.predictions = 0  # how many times the curves were asked for (the inter-token plot follows them)
        self._mean_hi = float("nan")
        self._x_max = 64.0
        self.forget_taken()

    def reset(self) -> None:
        super().reset()
        self.curves = {}
        self.expected = {}
        self._mean_hi = float("nan")

    @staticmethod
    def _token_line(view: PlotView, m: int, path: str) -> Callable[[], Any]:
        name = view.label("per token (measured)", path)
        return lambda: line(name, color(m), 1.0, alpha=110, long=True)

    def forget_taken(self) -> None:
        self._n_tok = 0
        self._models: tuple[str, ...] = ()

    def x_max(self, view: PlotView) -> float:
        """The x axis' end: the deepest position a test reaches, and a little room."""
        return max([int(t.get("n_depth") or 0) + int(t.get("n_prompt") or 0) + int(t.get("n_gen") or 0)
                    for t in view.tests] + [64]) * 1.05

    def predict(self, view: PlotView) -> None:
        """Each model's decode ceiling and expected band on the hardware it ran on, and the inspector's what-if."""
        self._x_max = self.x_max(view)
        xs = np.linspace(0, self._x_max, CURVE_POINTS)
        curves: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self.expected = {}
        for m, path in enumerate(view.models):
            ys = self._draw_ceiling(view, m, path, xs)
            if ys is not None:
                curves[m] = (xs, ys)
        self.curves = curves
        self.predictions += 1

    def take_rows(self, view: PlotView) -> None:
        """Test means (±1 sd) per model, unstable ones ringed, the selected tests highlighted (their tokens too)."""
        s = view.session
        rows = [r for r in s.ok_rows() if r.get("decode_tps") is not None]
        if tuple(view.models) != self._models:  # tokens are split by model: another model list splits them again
            self._models = tuple(view.models)
            self._n_tok = 0
            for key, stream in self.streams.items():
                if key[0] == "tok":
                    stream.clear()
        for m, path in enumerate(view.models):
            self.item(("tok", m), self._token_line(view, m, path), view.label("per token (measured)", path))
            mine = [r for r in rows if r.get("model_path") == path]
            mx, my = np.array([mean_pos(r) for r in mine]), np.array([float(r["decode_tps"]) for r in mine])
            name = view.label(MEANS_LABEL, path)
            item = self.points_with_sd(m, name, color(m), (
                mx, my, np.array([float(r.get("decode_tps_stddev") or 0.0) for r in mine])), *MEANS_MARKER,
                depths=[int(r.get("n_depth") or 0) for r in mine])
            self.pickable((self.points_key, m), row_series(
                name, mx, my, mine, lambda v: f"mean position {v:.0f} tok",
                lambda r: figure_text("decode", r["decode_tps"], r.get("decode_tps_stddev"), "tok/s"), item))
        self.item(("hltok",), lambda: line(None, HILITE, 1.6))
        hl = self.stream(("hltok",))
        hl.clear()  # the tokens taken so far; take_new adds the rest
        n = self._n_tok
        in_sel = view.selected_tokens()[:n]
        hl.extend(*(a.view()[:n][in_sel] for a in (s.tok_pos, s.tok_rate, s.tok_rep_start)))
        self.mark_unstable([(mean_pos(r), float(r["decode_tps"])) for r in rows
                            if "decode_tps" in str(r.get("unstable_metrics") or "")])
        hi = [r for r in rows if r.get("test_index") in view.selected]
        self.stage(("hl",), lambda: ring(None), [mean_pos(r) for r in hi], [float(r["decode_tps"]) for r in hi])
        self._mean_hi = max((float(r["decode_tps"]) + float(r.get("decode_tps_stddev") or 0) for r in rows),
                            default=np.nan)

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
        chunk = chunk_tokens(self._x_max, self.plot.getViewBox().width())  # repetitions overlap: runs, not x
        x, y, conn = envelope(stream.x.view(), stream.y.view(), stream.connect(), chunk)
        item.setData(x, y, connect=conn)

    def fit_ranges(self) -> None:
        """x from zero to the deepest test; y to the per-token rates' 99th percentile, the means' tops and the
        ceilings, whichever is highest (only ever growing within a run)."""
        rates = [s.y.view() for key, s in self.streams.items() if key[0] == "tok" and len(s)]
        tok_hi = float(np.percentile(np.concatenate(rates), 99)) if rates else float("nan")
        y_hi = finite_max(tok_hi, self._mean_hi, *[ys for _xs, ys in self.curves.values()])
        self.set_range(self.plot.getViewBox(), (0.0, float(self._x_max)), y_hi if np.isfinite(y_hi) else None)

    def _draw_ceiling(self, view: PlotView, m: int, path: str, xs: np.ndarray) -> np.ndarray | None:
        """Model ``m``'s predicted decode ceiling along ``xs`` on the hardware it ran on (None while it is being
        computed), and the inspector's other profile as a dotted what-if."""
        settings = view.settings(path)
        ran_on, what_if = view.hardware(path)
        ys = None
        for key, prof, make in ((("pred", m), ran_on, lambda name: line(name, color(m), 2.0, dashed=True)),
                                (("whatif", m), what_if, lambda name: what_if_line(name, color(m)))):
            if prof is None:
                self.drop(key)
                continue
            curve = view.curve(("dec", path, float(xs[-1]), prof, tuple(sorted(settings.items()))),
                               lambda prof=prof: view.predictor.decode_curve(path, xs, prof, **settings))
            name = view.label(f"{'ceiling' if key[0] == 'pred' else 'what-if'} ({profile_name(prof)})", path)
            show_curve(self.item(key, lambda make=make, name=name: make(name), name), xs, curve)
            ys = curve if key[0] == "pred" else ys
        exp = None if ran_on is None else view.curve(
            ("dec-exp", path, float(xs[-1]), ran_on, tuple(sorted(settings.items()))),
            lambda: view.predictor.expected_curve(path, xs, "decode", 0, ran_on, **settings))
        self.draw_expected(("exp", m), view.label(f"expected ± band ({profile_name(ran_on)})", path), color(m), xs,
                           exp)
        if exp is not None:
            self.expected[m] = (xs, exp[0])
        return ys
