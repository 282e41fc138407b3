"""The per-token envelope: min and max per run of tokens, never across a repetition's end."""

from __future__ import annotations

import numpy as np

from app.gui.plots.envelope import chunk_tokens, envelope


def _reps(starts: list[int], n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    x = np.concatenate([np.arange(s, s + n, dtype=float) for s in starts])
    y = rng.uniform(10, 200, x.size)
    conn = np.ones(x.size, dtype=bool)
    conn[n - 1::n] = False  # the last token of each repetition joins nothing
    return x, y, conn


def test_each_chunk_keeps_its_extremes_and_no_line_crosses_a_repetitions_end() -> None:
    rng = np.random.default_rng(3)
    x, y, conn = _reps([128, 128, 4224, 4608], 100, rng)  # two repetitions overlap at the same positions
    x2, y2, c2 = envelope(x, y, conn, 8)
    assert x2.size == 2 * 4 * 13  # 100 tokens a repetition: 12 chunks of 8 and one of 4, two points each
    assert y2.max() == y.max() and y2.min() == y.min()
    for rep in range(4):  # every repetition keeps its own extremes, at its own positions
        sl = slice(rep * 26, (rep + 1) * 26)
        assert y2[sl].max() == y[rep * 100:(rep + 1) * 100].max()
        assert x2[sl].min() == x[rep * 100] and x2[sl].max() <= x[rep * 100 + 99]
    joins = [(x2[i], x2[i + 1]) for i in range(x2.size - 1) if c2[i]]
    assert all(b - a <= 8 for a, b in joins)  # no segment joins points further apart than a chunk
    assert c2.sum() == x2.size - 4  # only the four repetitions' ends are left unjoined


def test_short_series_and_one_token_chunks_are_unchanged_and_nan_is_skipped() -> None:
    rng = np.random.default_rng(4)
    x, y, conn = _reps([0], 10, rng)
    assert envelope(x, y, conn, 1)[0] is x and envelope(x, y, conn, 8)[1] is y  # under two chunks of points
    y[3] = np.nan
    _x2, y2, _c2 = envelope(x, y, conn, 4)
    assert np.isfinite(y2).all() and y2[0] == np.nanmax(y[:4])
    assert chunk_tokens(4800, 352) == 13 and chunk_tokens(200, 352) == 1 and chunk_tokens(10, 0) == 10
