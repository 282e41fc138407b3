"""The plots' predicted curves and a table row's predicted columns, decided once and Qt-free: which question each
point asks (``app.predict.questions``) and which figure of the answer it draws. The window draws them and keeps the
answers in its cache (``app.gui.predictions``); compare draws the same curves for its files."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from app.model.facts import ModelFacts
from app.predict.answer import Answer, Figure, memory_by_context
from app.predict.questions import prompt_point, run_context, settings_of
from app.views.inspector import Ask


@dataclass(frozen=True)
class TestPrediction:
    """What the selected hardware allows for one test's settings: its ceilings (TTFT ms for its prompt, prefill
    and decode tok/s, decode at the generation's average position), the memory it needs and its fit."""

    __test__ = False

    ttft_ms: float | None
    prefill_tps: float | None
    decode_tps: float | None
    kv_bytes: float | None
    needed_bytes: float | None
    fit_status: str


def positive(x: Any) -> float | None:
    """``x`` as a finite positive float, else None (a figure that is not one is drawn as a gap)."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) and v > 0 else None


def _int(table: Mapping[str, Any], key: str, default: int) -> int:
    try:
        return int(table.get(key, default) if table.get(key) is not None else default)
    except (TypeError, ValueError):
        return default


def row_prediction(ask: Ask, table: Mapping[str, Any]) -> TestPrediction | None:
    """The ceilings for a test's table (a row as it ran, or a curve's point), in the context a run gives it."""
    n_prompt, n_gen = _int(table, "n_prompt", 512), _int(table, "n_gen", 128)
    got = ask(settings_of(table, n_ctx=run_context(table)))
    if got is None:
        return None
    pred = got.prediction
    prefill = positive(pred.prefill_ceiling_tps) if n_prompt > 0 else None
    return TestPrediction(
        ttft_ms=n_prompt / prefill * 1000.0 if prefill else None,
        prefill_tps=prefill,
        decode_tps=positive(pred.decode_ceiling_tps) if n_gen > 0 else None,
        kv_bytes=positive(pred.kv_bytes),
        needed_bytes=positive(pred.weight_bytes + pred.kv_bytes + pred.compute_buffer_bytes),
        fit_status=str(pred.fit.status),
    )


def ttft_curve(ask: Ask, path: str, xs: Sequence[float], depth: int = 0,
               settings: Mapping[str, Any] | None = None) -> np.ndarray | None:
    """TTFT ceilings (ms) for prompt lengths ``xs`` after ``depth`` cached tokens."""
    ys = []
    for x in xs:
        p = row_prediction(ask, dict(settings or {}, model_path=path, n_prompt=int(x), n_gen=0, n_depth=depth))
        if p is None:
            return None
        ys.append(p.ttft_ms if p.ttft_ms is not None else np.nan)
    return np.asarray(ys, dtype=float)


def decode_curve(ask: Ask, positions: Sequence[float], settings: Mapping[str, Any]) -> np.ndarray | None:
    """Decode ceilings (tok/s) for a token at each context position."""
    base = settings_of(settings)
    ys = []
    for x in positions:
        got = ask(base.decode_at(float(x)))
        if got is None:
            return None
        ys.append(positive(got.prediction.decode_ceiling_tps) or np.nan)
    return np.asarray(ys, dtype=float)


def expected_of(got: Answer, phase: str) -> Figure | None:
    """An answer's expected figure for ``phase`` (with its band where its source gives one), None where the answer
    is a ceiling (or measured: a plot's expected line is what the sources say)."""
    fig = got.expected_prefill if phase == "prefill" else got.expected_decode
    return fig if fig is not None and fig.value > 0 else None


def expected_curve(ask: Ask, path: str, xs: Sequence[float], phase: str, depth: int = 0,
                   settings: Mapping[str, Any] | None = None) -> np.ndarray | None:
    """Expected figures along ``xs`` as rows (value, low, high): TTFT (ms) against prompt length for
    ``phase="prefill"``, decode tok/s against position for ``"decode"``; None where no fit gives one."""
    base = settings_of(dict(settings or {}, model_path=path))
    out = []
    for x in xs:
        got = ask(prompt_point(base, int(x), depth) if phase == "prefill" else base.decode_at(float(x)))
        e = expected_of(got, phase) if got is not None else None
        if e is None or e.low is None or e.high is None:
            return None
        if phase == "prefill":  # a faster prefill is a shorter TTFT: the band flips
            n = max(int(x), 1)
            out.append((n / e.value * 1000.0, n / e.high * 1000.0, n / e.low * 1000.0))
        else:
            out.append((e.value, e.low, e.high))
    return np.asarray(out, dtype=float).T


def decode_figure_curve(ask: Ask, positions: Sequence[float], settings: Mapping[str, Any]
                        ) -> tuple[str, np.ndarray] | None:
    """The answer's decode figure at each position, as the inspector gives it for a context (expected with its band
    where a source gives one, else the ceiling): (its kind, rows value, low, high; the band's ends are the value
    where there is no band). The kind is "ceiling" where any position has only a ceiling, else the first
    position's (``fit``, ``public``…)."""
    base = settings_of(settings)
    rows, kinds = [], []
    for x in positions:
        got = ask(base.decode_at(float(x)))
        if got is None:
            return None
        fig = got.decode
        value = positive(fig.value) or np.nan
        rows.append((value, positive(fig.low) or value, positive(fig.high) or value))
        kinds.append(str(fig.kind))
    if not rows:
        return None
    kind = "ceiling" if "ceiling" in kinds else kinds[0]
    return kind, np.asarray(rows, dtype=float).T


def kv_curve(facts: ModelFacts, ctxs: Sequence[float], settings: Mapping[str, Any],
             n_ctx: int | None = None) -> tuple[np.ndarray, np.ndarray] | None:
    """(KV-cache bytes, weights + KV + compute bytes) llama.cpp allocates at each context size."""
    try:
        kv, total = memory_by_context(facts, settings_of(settings, n_ctx=n_ctx), ctxs)
    except Exception:  # noqa: BLE001 - a curve that cannot be drawn is left out, as a prediction is shown as "—"
        return None
    return np.asarray(kv, dtype=float), np.asarray(total, dtype=float)


__all__ = ["TestPrediction", "decode_curve", "decode_figure_curve", "expected_curve", "expected_of", "kv_curve",
           "positive", "row_prediction", "ttft_curve"]
