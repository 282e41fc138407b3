"""Decode speed against position in the context: per-token rates, test means (±1 sd) and the predicted ceiling."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from app.gui.plots.envelope import chunk_tokens, envelope
from app.gui.plots.interaction import figure_text, row_series
from app.gui.plots.items import connect_reps, line, ring, show_curve, what_if_line
from app.gui.plots.panel import PlotPanel, PlotView
from app.gui.plots.style import CURVE_POINTS, HILITE, color, finite_max, profile_name


def mean_pos(row: dict[str, Any]) -> float:
    """Average context position of a test's decode steps: depth + prompt + half the generated tokens."""
    return float(int(row.get("n_depth") or 0) + int(row.get("n_prompt") or 0) + int(row.get("n_gen") or 0) / 2)


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

    def reset(self) -> None:
        super().reset()
        self.curves = {}
        self.expected = {}

    @staticmethod
    def _token_line(view: PlotView, m: int, path: str) -> Callable[[], Any]:
        name = view.label("per token (measured)", path)
        return lambda: line(name, color(m), 1.0, alpha=110, long=True)

    def key(self, view: PlotView) -> tuple[Any, ...]:
        s = view.session
        return (*view.base_key, s.rows_version, len(s.tests), view.selected, len(s.tok_t_ns))

    def draw(self, view: PlotView) -> None:
        s = view.session
        xmax = max([int(t.get("n_depth") or 0) + int(t.get("n_prompt") or 0) + int(t.get("n_gen") or 0)
                    for t in view.tests] + [64]) * 1.05
        xs = np.linspace(0, xmax, CURVE_POINTS)
        tok_m = view.model_of_tokens()
        chunk = chunk_tokens(xmax, self.plot.getViewBox().width())  # repetitions overlap: per-token runs, not x
        pos, rate, starts = s.tok_pos.view(), s.tok_rate.view(), s.tok_rep_start.view()
        rows = [r for r in s.ok_rows() if r.get("decode_tps") is not None]
        curves: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self.expected = {}
        for m, path in enumerate(view.models):
            c, mask = color(m), tok_m == m
            x, y, conn = envelope(pos[mask], rate[mask], connect_reps(starts[mask]), chunk)
            self.item(("tok", m), self._token_line(view, m, path), view.label("per token (measured)", path)).setData(
                x, y, connect=conn)
            mine = [r for r in rows if r.get("model_path") == path]
            mx, my = np.array([mean_pos(r) for r in mine]), np.array([float(r["decode_tps"]) for r in mine])
            name = view.label(MEANS_LABEL, path)
            item = self.points_with_sd(m, name, c, (
                mx, my, np.array([float(r.get("decode_tps_stddev") or 0.0) for r in mine])), *MEANS_MARKER,
                depths=[int(r.get("n_depth") or 0) for r in mine])
            self.pickable((self.points_key, m), row_series(
                name, mx, my, mine, lambda v: f"mean position {v:.0f} tok",
                lambda r: figure_text("decode", r["decode_tps"], r.get("decode_tps_stddev"), "tok/s"), item))
            ys = self._draw_ceiling(view, m, path, xs)
            if ys is not None:
                curves[m] = (xs, ys)
        self.curves = curves
        in_sel = view.selected_tokens()
        x, y, conn = envelope(pos[in_sel], rate[in_sel], connect_reps(starts[in_sel]), chunk)
        self.item(("hltok",), lambda: line(None, HILITE, 1.6)).setData(x, y, connect=conn)
        self.mark_unstable([(mean_pos(r), float(r["decode_tps"])) for r in rows
                            if "decode_tps" in str(r.get("unstable_metrics") or "")])
        hi = [r for r in rows if r.get("test_index") in view.selected]
        self.item(("hl",), lambda: ring(None)).setData([mean_pos(r) for r in hi],
                                                       [float(r["decode_tps"]) for r in hi])
        tok_hi = float(np.percentile(rate, 99)) if rate.size else float("nan")
        mean_hi = max((float(r["decode_tps"]) + float(r.get("decode_tps_stddev") or 0) for r in rows), default=np.nan)
        y_hi = finite_max(tok_hi, mean_hi, *[ys for _xs, ys in curves.values()])
        self.set_range(self.plot.getViewBox(), (0.0, float(xmax)), y_hi if np.isfinite(y_hi) else None)

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
