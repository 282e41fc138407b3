"""One request's predicted and measured totals for a prompt and output length (the window's scenario panel).

Predicted: the ceilings' prefill and decode rates. Measured: from a run's ok rows, the prefill rate of the test
whose prompt length is closest to the scenario's and the mean decode rate of all tests. Both go through
:func:`app.predict.scenario.scenario_time`; a total that cannot be made (no rates, a rate ≤ 0, nothing to do)
is None.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from app.predict.scenario import Scenario, scenario_time

Row = Mapping[str, Any]


@dataclass(frozen=True)
class MeasuredRates:
    """Rates read from result rows, with where they came from."""

    prefill_tps: float
    prefill_n_prompt: int  # prompt length of the test the prefill rate comes from
    decode_tps: float  # mean over the tests that decoded
    n_decode_tests: int


@dataclass(frozen=True)
class ScenarioTotals:
    predicted: Scenario | None
    measured: Scenario | None
    rates: MeasuredRates | None  # the measured rates behind ``measured``


def request_total(n_prompt: int, n_gen: int, rates: tuple[float, float] | None) -> Scenario | None:
    """The split of one request at (prefill tok/s, decode tok/s), or None when it cannot be made."""
    if rates is None or n_prompt + n_gen <= 0:
        return None
    prefill_tps, decode_tps = rates
    if not prefill_tps or not decode_tps or prefill_tps <= 0 or decode_tps <= 0:
        return None
    try:
        return scenario_time(n_prompt, n_gen, prefill_tps, decode_tps)
    except ValueError:
        return None


def measured_rates(rows: Iterable[Row], n_prompt: int, model_path: str = "") -> MeasuredRates | None:
    """Rates from ok rows: ``model_path``'s rows when it has any, else all of them; None without both phases."""
    ok = [r for r in rows if r.get("status") == "ok"]
    rows_used = [r for r in ok if r.get("model_path") == model_path] or ok
    prefill = [r for r in rows_used if r.get("prefill_tps")]
    decode = [r for r in rows_used if r.get("decode_tps")]
    if not prefill or not decode:
        return None
    best = min(prefill, key=lambda r: abs(int(r.get("n_prompt") or 0) - n_prompt))
    mean_decode = sum(float(r["decode_tps"]) for r in decode) / len(decode)
    return MeasuredRates(prefill_tps=float(best["prefill_tps"]), prefill_n_prompt=int(best.get("n_prompt") or 0),
                         decode_tps=mean_decode, n_decode_tests=len(decode))


def scenario_totals(n_prompt: int, n_gen: int, predicted_rates: tuple[float, float] | None, rows: Iterable[Row],
                    model_path: str = "") -> ScenarioTotals:
    """Predicted and measured totals of one request of ``n_prompt`` prompt and ``n_gen`` output tokens."""
    rates = measured_rates(rows, n_prompt, model_path)
    measured = request_total(n_prompt, n_gen, (rates.prefill_tps, rates.decode_tps)) if rates else None
    return ScenarioTotals(predicted=request_total(n_prompt, n_gen, predicted_rates), measured=measured, rates=rates)
