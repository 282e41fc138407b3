"""Inter-token latency over the run, against the floor the decode ceiling predicts (1000 / ceiling)."""

from __future__ import annotations

from typing import Any

import numpy as np

from app.gui.plots.decode import DecodePlot
from app.gui.plots.envelope import chunk_tokens, envelope
from app.gui.plots.interaction import PickSeries, number, settings_text
from app.gui.plots.items import expected_line, line
from app.gui.plots.panel import PlotPanel, PlotView
from app.gui.plots.streams import Stream
from app.gui.plots.style import HILITE, finite_max, nice_ceil
from app.gui.theme import series_colour as sc
from app.run.live import LiveRun


class ItlPlot(PlotPanel):
    """Inter-token latency (ms) vs time since sweep start (s); reads the ceilings ``decode`` drew last."""

    name = "itl"
    title = "Inter-token latency"
    x_label = "time since sweep start (s)"
    y_label = "inter-token latency (ms)"
    columns = 1
    log_axes = ("y",)  # stalls of ten times the typical step stay readable beside it

    def __init__(self, decode: DecodePlot, title: str | None = None, columns: int | None = None) -> None:
        super().__init__(title, columns)
        self.decode = decode
        self.plot.setClipToView(True)
        self.plot.setDownsampling(auto=True, mode="peak")
        self._n_tok = 0

    def forget_taken(self) -> None:
        self._n_tok = 0

    def prediction_key(self, view: PlotView) -> tuple[Any, ...]:
        """The floors follow the decode plot's curves: asked again when it asked again."""
        return (*view.prediction_key, self.decode.predictions)

    def predict(self, view: PlotView) -> None:
        """Every token's floor again, from the decode plot's new ceilings and expected figures."""
        s = view.session
        n = self._n_tok
        tok_m, pos = view.model_of_tokens()[:n], s.tok_pos.view()[:n]
        for key, curves in (("pred", self.decode.curves), ("exp", self.decode.expected)):
            stream = self.stream((key,))
            stream.clear()
            stream.extend(self.meas.x.view()[:n], _floor(tok_m, pos, curves), self.meas.starts.view()[:n])
        self._floor_items()

    def _floor_items(self) -> None:
        """The floor lines' items: the ceiling's always, the expected one's where the decode plot has one."""
        self.item(("pred",), lambda: line("predicted floor (1000 / ceiling)", sc("#d62728"), 1.6, dashed=True))
        if self.decode.expected:
            self.item(("exp",), lambda: expected_line("expected (1000 / expected decode)", sc("#7a3db8")))
        else:
            hit = self.items.pop((self.name, "exp"), None)  # the item goes; its stream stays, filled for later
            if hit is not None:
                hit[0].removeItem(hit[1])

    @property
    def meas(self) -> Stream:
        return self.stream(("meas",))

    def take_rows(self, view: PlotView) -> None:
        """The selected tests' tokens, highlighted (the ones taken so far; take_new adds the rest)."""
        self.item(("meas",), lambda: line("measured, per token", sc("#1f77b4"), 1.0, long=True))
        self._floor_items()
        self.item(("hl",), lambda: line(None, HILITE, 1.6))
        hl = self.stream(("hl",))
        hl.clear()
        n = self._n_tok
        in_sel = view.selected_tokens()[:n]
        m = self.meas
        hl.extend(m.x.view()[:n][in_sel], m.y.view()[:n][in_sel], m.starts.view()[:n][in_sel])

    def take_new(self, view: PlotView) -> None:
        """The latencies of the tokens that came since, with their floors from the curves shown now."""
        s = view.session
        n0, n = self._n_tok, len(s.tok_t_ns)
        if n == n0:
            return
        self._n_tok = n
        t = np.asarray(s.t_s(s.tok_t_ns.view()[n0:n]))
        itl, starts, tests = (a.view()[n0:n] for a in (s.tok_itl_ms, s.tok_rep_start, s.tok_test))
        self.meas.extend(t, itl, starts, tests)
        tok_m, pos = view.model_of_tokens(n0), s.tok_pos.view()[n0:n]
        self.stream(("pred",)).extend(t, _floor(tok_m, pos, self.decode.curves), starts)
        self.stream(("exp",)).extend(t, _floor(tok_m, pos, self.decode.expected), starts)
        in_sel = view.selected_tokens(n0)
        if in_sel.any():
            self.stream(("hl",)).extend(t[in_sel], itl[in_sel], starts[in_sel])

    def show_stream(self, key: tuple[Any, ...], stream: Stream, item: Any) -> None:
        """The measured latencies as their min/max envelope (and pickable, every token); the rest as they are."""
        if key != ("meas",):
            super().show_stream(key, stream, item)
            return
        t, itl = stream.x.view(), stream.y.view()
        tx, ty, tconn = envelope(t, itl, stream.connect(), chunk_tokens(itl.size, self.plot.getViewBox().width()))
        item.setData(tx, ty, connect=tconn)
        self.pickable(key, self._tokens(self._session, t, itl, stream.tags.view().astype(int), item))

    def fit_ranges(self) -> None:
        """x from zero to the last token; y to the latencies' top (at most four times their 95th percentile)."""
        m = self.meas
        if not len(m):
            return
        t, itl = m.x.view(), m.y.view()
        y_hi = min(float(np.nanmax(itl)), 4 * float(np.percentile(itl, 95)))
        self.set_range(self.plot.getViewBox(), (0.0, nice_ceil(float(t[-1]))),
                       finite_max([y_hi], self.stream(("pred",)).y.view()))

    @staticmethod
    def _tokens(s: LiveRun | None, t: np.ndarray, itl: np.ndarray, tests: np.ndarray, item: object) -> PickSeries:
        """Every token's latency (not the thinned line drawn) with its test, for the readout and a click."""

        def describe(i: int) -> str:
            k = int(tests[i])
            spec = (s.rows.get(k) or s.tests.get(k)) if s is not None else None
            return "\n".join(("measured, per token", f"{t[i]:.2f} s since start · ITL {number(float(itl[i]))} ms",
                              settings_text(spec, k)))

        return PickSeries(t, np.asarray(itl, dtype=float), tests, describe, item, sorted_x=True)


def _floor(tok_m: np.ndarray, pos: np.ndarray, curves: dict[int, tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """Per token: 1000 / the decode rate ``curves`` give at its position (NaN where there is none)."""
    floor = np.full(pos.size, np.nan)
    for m, (xs, ys) in curves.items():
        mask = tok_m == m
        floor[mask] = 1000.0 / np.interp(pos[mask], xs, ys)
    return floor
