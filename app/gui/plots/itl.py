"""Inter-token latency over the run, against the floor the decode ceiling predicts (1000 / ceiling)."""

from __future__ import annotations

from typing import Any

import numpy as np

from app.gui.plots.decode import DecodePlot
from app.gui.plots.envelope import chunk_tokens, envelope
from app.gui.plots.interaction import PickSeries, number, settings_text
from app.gui.plots.items import connect_reps, expected_line, line
from app.gui.plots.panel import PlotPanel, PlotView
from app.gui.plots.style import HILITE, finite_max, nice_ceil
from app.gui.theme import series_colour as sc


class ItlPlot(PlotPanel):
    """Inter-token latency (ms) vs time since sweep start (s); reads the ceilings ``decode`` drew last."""

    name = "itl"
    title = "Inter-token latency over the run"
    x_label = "time since sweep start (s)"
    y_label = "inter-token latency (ms)"
    columns = 1
    log_axes = ("y",)  # stalls of ten times the typical step stay readable beside it

    def __init__(self, decode: DecodePlot, title: str | None = None, columns: int | None = None) -> None:
        super().__init__(title, columns)
        self.decode = decode
        self.plot.setClipToView(True)
        self.plot.setDownsampling(auto=True, mode="peak")

    def key(self, view: PlotView) -> tuple[Any, ...]:
        s = view.session
        return (*view.base_key, len(s.tok_t_ns), view.selected, s.rows_version)

    def draw(self, view: PlotView) -> None:
        s = view.session
        t = np.asarray(s.t_s(s.tok_t_ns.view()))
        itl, starts = s.tok_itl_ms.view(), s.tok_rep_start.view()
        conn = connect_reps(starts)
        tx, ty, tconn = envelope(t, itl, conn, chunk_tokens(itl.size, self.plot.getViewBox().width()))
        measured = self.item(("meas",), lambda: line("measured, per token", sc("#1f77b4"), 1.0, long=True))
        measured.setData(tx, ty, connect=tconn)
        self.pickable(("meas",), self._tokens(view, t, itl, measured))
        floor = self._floor(view, itl.size, self.decode.curves)
        self.item(("pred",), lambda: line("predicted floor (1000 / ceiling)", sc("#d62728"), 1.6, dashed=True)).setData(
            t, floor, connect=conn)
        if self.decode.expected:
            self.item(("exp",), lambda: expected_line("expected (1000 / expected decode)", sc("#7a3db8"))).setData(
                t, self._floor(view, itl.size, self.decode.expected), connect=conn)
        else:
            self.drop(("exp",))
        in_sel = view.selected_tokens()
        self.item(("hl",), lambda: line(None, HILITE, 1.6)).setData(
            t[in_sel], itl[in_sel], connect=connect_reps(starts[in_sel]))
        if itl.size:
            y_hi = min(float(np.nanmax(itl)), 4 * float(np.percentile(itl, 95)))
            self.set_range(self.plot.getViewBox(), (0.0, nice_ceil(float(t[-1]))), finite_max([y_hi], floor))

    @staticmethod
    def _tokens(view: PlotView, t: np.ndarray, itl: np.ndarray, item: object) -> PickSeries:
        """Every token's latency (not the thinned line drawn) with its test, for the readout and a click."""
        s = view.session
        tests = s.tok_test.view().astype(int)

        def describe(i: int) -> str:
            k = int(tests[i])
            spec = s.rows.get(k) or s.tests.get(k) or {}
            return "\n".join(("measured, per token", f"{t[i]:.2f} s since start · ITL {number(float(itl[i]))} ms",
                              settings_text(spec, k)))

        return PickSeries(t, np.asarray(itl, dtype=float), tests, describe, item, sorted_x=True)

    def _floor(self, view: PlotView, n: int, curves: dict[int, tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
        """Per token: 1000 / the decode rate ``curves`` give at its position (NaN where there is none)."""
        floor = np.full(n, np.nan)
        if curves and n:
            tok_m = view.model_of_tokens()
            pos = view.session.tok_pos.view()
            for m, (xs, ys) in curves.items():
                mask = tok_m == m
                floor[mask] = 1000.0 / np.interp(pos[mask], xs, ys)
        return floor
