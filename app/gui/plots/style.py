"""The look every plot shares: colours, phase shading, round axis bounds, short model names."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import numpy.ma  # noqa: F401 - np.percentile imports it on first use: 36 ms inside a plot's first draw
import pyqtgraph as pg

pg.setConfigOptions(antialias=True, background="w", foreground="#222")

COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f")
HILITE = "#ff8c00"
PREFILL_BRUSH = (255, 190, 60, 55)
DECODE_BRUSH = (70, 150, 255, 40)
MIB = 1024.0**2
CURVE_POINTS = 20


def nice_ceil(v: float) -> float:
    """A round number a little above ``v`` (steps of half a decade: 150 → 200, 0.73 → 0.8)."""
    if not np.isfinite(v) or v <= 0:
        return 1.0
    half = 10 ** np.floor(np.log10(v)) / 2
    return float(np.ceil(v * 1.04 / half) * half)


def finite_max(*arrays: Any) -> float:
    """The largest finite value over all ``arrays``; NaN when there is none."""
    vals = [float(np.nanmax(a)) for a in arrays if np.size(a) and np.isfinite(a).any()]
    return max(vals) if vals else float("nan")


def color(i: int) -> str:
    """The i-th series colour (models in the live plots, entries in the compare view), lightened on a dark page."""
    from app.gui.theme import series_colour

    return series_colour(COLORS[i % len(COLORS)])


def profile_name(profile: Any) -> str:
    """A hardware profile's name for a legend ("no profile" without one)."""
    return str(profile.name) if profile is not None else "no profile"


def short_model(path: str) -> str:
    """A model file's name without its directory and ``.gguf``."""
    name = os.path.basename(path)
    return name[:-5] if name.lower().endswith(".gguf") else name
