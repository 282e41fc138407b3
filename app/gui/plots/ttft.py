"""Time to first token against prompt length: measured means (±1 sd) beside the predicted prefill curves for the
hardware they ran on, and the inspector's other profile as a labelled what-if."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from app.gui.plots.interaction import figure_text, row_series
from app.gui.plots.items import hollow, line, ring, what_if_line
from app.gui.plots.panel import PlotPanel, PlotView
from app.gui.plots.style import CURVE_POINTS, color, profile_name
from app.predict.profiles import HardwareProfile

MAX_DEPTHS = 3  # predicted curves per model, one per context depth the run used


MEASURED_LABEL = "measured (±1 sd)"
REPS_LABEL = "repetition (as it lands)"


class TtftPlot(PlotPanel):
    """TTFT (ms) vs prompt length (tokens), one colour per model, a dashed prediction per depth."""

    name = "ttft"
    title = "Time to first token (prefill)"
    x_label = "prompt length (tokens)"
    y_label = "TTFT (ms)"
    columns = 1
    log_axes = ("x", "y")  # prefill time grows as a power of the prompt length: straight on log-log

    def __init__(self, title: str | None = None, columns: int | None = None) -> None:
        super().__init__(title, columns)
        self._n_phases = 0  # the run's phases taken

    def forget_taken(self) -> None:
        self._n_phases = 0

    def predict(self, view: PlotView) -> None:
        """Each model's predicted TTFT curves (one per depth its tests ran at), expected band and what-if."""
        xmax = max([t.n_prompt for t in view.tests] + [64]) * 1.15
        xs = np.linspace(1, xmax, CURVE_POINTS)
        for m, path in enumerate(view.models):
            self._draw_predicted(view, m, path, xs)

    def take_rows(self, view: PlotView) -> None:
        """Measured means (±1 sd) per model, unstable ones ringed, the selected ones highlighted."""
        rows = [(r, r.ttft_ms) for r in view.session.ok_rows() if r.ttft_ms is not None]
        for m, path in enumerate(view.models):
            mine = [(r, ttft) for r, ttft in rows if r.model_path == path]
            x, y = np.array([float(r.n_prompt or 0) for r, _ in mine]), np.array([ttft for _, ttft in mine])
            name = view.label(MEASURED_LABEL, path)
            item = self.points_with_sd(m, name, color(m), (
                x, y, np.array([float(r.ttft_ms_stddev or 0.0) for r, _ in mine])),
                depths=[r.n_depth or 0 for r, _ in mine])
            self.pickable((self.points_key, m), row_series(
                name, x, y, [r for r, _ in mine], lambda v: f"prompt {v:.0f} tok",
                lambda r: figure_text("TTFT", r.ttft_ms, r.ttft_ms_stddev, "ms"), item))
        self.mark_unstable([(float(r.n_prompt or 0), ttft) for r, ttft in rows
                            if "ttft_ms" in (r.unstable_metrics or "")])
        hi = [(r, ttft) for r, ttft in rows if r.test_index in view.selected]
        self.stage(("hl",), lambda: ring(None), [float(r.n_prompt or 0) for r, _ in hi], [ttft for _, ttft in hi])
        self._n_phases = -1  # a row in: its repetitions give way to its mean

    def take_new(self, view: PlotView) -> None:
        """The repetitions that landed since, for tests whose mean is not in yet."""
        n = len(view.session.phases)
        if n != self._n_phases:
            self._n_phases = n
            for m, path in enumerate(view.models):
                self._draw_repetitions(view, m, path)

    @staticmethod
    def _rep_markers(view: PlotView, m: int, path: str) -> Callable[[], Any]:
        name = view.label(REPS_LABEL, path)
        return lambda: hollow(name, color(m))

    def _draw_repetitions(self, view: PlotView, m: int, path: str) -> None:
        """Each timed repetition's prefill time as it lands, for tests whose mean is not in yet."""
        s = view.session
        spans = [p for p in s.phases if p.phase == "prefill" and p.test_index not in s.rows
                 and p.test_index in s.tests and s.tests[p.test_index].model_path == path]
        xs = [float(s.tests[p.test_index].n_prompt) for p in spans]
        ys = [(p.end_ns - p.start_ns) / 1e6 for p in spans]
        if not xs:
            self.drop(("rep", m))
            return
        self.stage(("rep", m), self._rep_markers(view, m, path), xs, ys, name=view.label(REPS_LABEL, path))

    def _draw_predicted(self, view: PlotView, m: int, path: str, xs: np.ndarray) -> None:
        """Model ``m``'s TTFT at the ceilings (the least it can take) of the hardware it ran on, at each of (up to
        three of) the depths its tests ran at; the inspector's other profile as a dotted what-if at the first depth."""
        depths = sorted({t.n_depth for t in view.tests if t.model_path == path})[:MAX_DEPTHS] or [0]
        settings = view.settings(path)
        ran_on, what_if = view.hardware(path)
        for j, d in enumerate(depths):
            name = view.label(f"ceiling ({profile_name(ran_on)})" + (f", depth {d}" if len(depths) > 1 else ""),
                              path)
            self._curve(view, ("pred", m, j), name, path, xs, d, ran_on, settings,
                        lambda name=name, j=j: line(name, color(m), 1.8, dashed=True, alpha=255 - 60 * j))
        self._draw_expected(view, m, path, xs, depths[0], ran_on, settings)
        name = view.label(f"what-if ({profile_name(what_if)})", path)
        self._curve(view, ("whatif", m), name, path, xs, depths[0], what_if, settings,
                    lambda: what_if_line(name, color(m)))

    def _draw_expected(self, view: PlotView, m: int, path: str, xs: np.ndarray, depth: int,
                       profile: HardwareProfile | None, settings: dict[str, Any]) -> None:
        """The expected TTFT (a fit of measurements, with its band) on the hardware measured, at the first depth."""
        curve = None if profile is None else view.curve(
            ("ttft-exp", path, depth, float(xs[-1]), profile, tuple(sorted(settings.items()))),
            lambda: view.predictor.expected_curve(path, xs, "prefill", depth, profile, **settings))
        self.draw_expected(("exp", m), view.label(f"expected ± band ({profile_name(profile)})", path), color(m), xs,
                           curve)

    def _curve(self, view: PlotView, key: tuple[Any, ...], name: str, path: str, xs: np.ndarray, depth: int,
               profile: HardwareProfile | None, settings: dict[str, Any], make: Any) -> None:
        """One predicted TTFT line; empty while computing, or without a profile (no what-if)."""
        if profile is None:
            self.drop(key)
            return
        ys = view.curve(("ttft", path, depth, float(xs[-1]), profile, tuple(sorted(settings.items()))),
                        lambda: view.predictor.ttft_curve(path, xs, depth, profile, **settings))
        self.show_predicted(key, self.item(key, make, name), xs, ys)
