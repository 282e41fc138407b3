"""Time to first token against prompt length: measured means (±1 sd) beside the predicted prefill curves."""

from __future__ import annotations

from typing import Any

import numpy as np

from app.gui.plots.items import line, rename, ring
from app.gui.plots.panel import PlotPanel, PlotView
from app.gui.plots.style import CURVE_POINTS, color

MAX_DEPTHS = 3  # predicted curves per model, one per context depth the run used


class TtftPlot(PlotPanel):
    """TTFT (ms) vs prompt length (tokens), one colour per model, a dashed prediction per depth."""

    name = "ttft"
    title = "Time to first token (prefill)"
    x_label = "prompt length (tokens)"
    y_label = "TTFT (ms)"
    columns = 1

    def key(self, view: PlotView) -> tuple[Any, ...]:
        s = view.session
        return (*view.base_key, s.rows_version, len(s.tests), view.selected)

    def draw(self, view: PlotView) -> None:
        rows = [r for r in view.session.ok_rows() if r.get("ttft_ms") is not None]
        xmax = max([int(t.get("n_prompt") or 0) for t in view.tests] + [64]) * 1.15
        xs = np.linspace(1, xmax, CURVE_POINTS)
        for m, path in enumerate(view.models):
            mine = [r for r in rows if r.get("model_path") == path]
            self.points_with_sd(m, view.label("measured (±1 sd)", path), color(m), (
                np.array([float(r["n_prompt"]) for r in mine]), np.array([float(r["ttft_ms"]) for r in mine]),
                np.array([float(r.get("ttft_ms_stddev") or 0.0) for r in mine])))
            self._draw_predicted(view, m, path, xs)
        hi = [r for r in rows if r.get("test_index") in view.selected]
        self.item(("hl",), lambda: ring(None)).setData([float(r["n_prompt"]) for r in hi],
                                                       [float(r["ttft_ms"]) for r in hi])

    def _draw_predicted(self, view: PlotView, m: int, path: str, xs: np.ndarray) -> None:
        """Model ``m``'s predicted TTFT at each of (up to three of) the depths its tests ran at."""
        depths = sorted({int(t.get("n_depth") or 0) for t in view.tests
                         if t.get("model_path") == path})[:MAX_DEPTHS] or [0]
        settings = view.settings(path)
        for j, d in enumerate(depths):
            ys = view.curve(("ttft", path, d, float(xs[-1]), tuple(sorted(settings.items()))),
                            lambda d=d: view.predictor.ttft_curve(path, xs, d, **settings))
            name = view.label(f"predicted ({view.profile_name})" + (f", depth {d}" if len(depths) > 1 else ""), path)
            item = self.item(("pred", m, j), lambda name=name, j=j: line(name, color(m), 1.8, dashed=True,
                                                                          alpha=255 - 60 * j))
            rename(self.plot, item, name)
            item.setData(*((xs, ys) if ys is not None else ([], [])))
