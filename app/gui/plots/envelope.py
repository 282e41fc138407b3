"""Per-token series drawn as their min/max envelope, about one pixel per chunk.

A standard sweep makes ~3,000 noisy per-token points; stroking them all (antialiased) took 8-14 ms on every repaint
of the decode and inter-token plots. Within one pixel a run of tokens shows only as its extent, so drawing each
run's min and max looks the same. Runs never cross a repetition's end (pyqtgraph's own peak downsampling chunks
the whole array, and a chunk spanning two repetitions drew a line across the gap between them).
"""

from __future__ import annotations

import numpy as np


def chunk_tokens(x_span: float, width_px: float) -> int:
    """Tokens per chunk when ``x_span`` token positions (or tokens) lie across ``width_px`` pixels."""
    return max(1, int(x_span / max(width_px, 1.0)))


def envelope(x: np.ndarray, y: np.ndarray, connect: np.ndarray, chunk: int,
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(x, y, connect)`` thinned to two points (max, then min, at the chunk's first x) per ``chunk`` consecutive
    points of one segment; ``connect[i]`` False ends a segment after point i (pyqtgraph's connect array).

    Unchanged where ``chunk`` is 1 or there are fewer than two chunks' worth of points. NaN values are skipped
    (a chunk of only NaN stays NaN, and so is not drawn).
    """
    n = x.size
    if chunk <= 1 or n < 2 * chunk:
        return x, y, connect
    ends = ~connect[:-1].astype(bool)
    seg = np.concatenate(([0], np.cumsum(ends)))  # segment id of every point
    first = np.flatnonzero(np.concatenate(([True], seg[1:] != seg[:-1])))  # each segment's first point
    offset = np.arange(n) - np.repeat(first, np.diff(np.append(first, n)))
    part = offset // chunk
    starts = np.flatnonzero(np.concatenate(([True], (seg[1:] != seg[:-1]) | (part[1:] != part[:-1]))))
    with np.errstate(invalid="ignore"):
        hi = np.fmax.reduceat(y, starts)
        lo = np.fmin.reduceat(y, starts)
    x2 = np.repeat(x[starts], 2)
    y2 = np.empty(2 * starts.size)
    y2[0::2], y2[1::2] = hi, lo
    conn2 = np.ones(2 * starts.size, dtype=bool)
    same_seg_next = np.append(seg[starts[1:]] == seg[starts[:-1]], False)
    conn2[1::2] = same_seg_next  # a chunk's min joins the next chunk's max only within one segment
    return x2, y2, conn2
