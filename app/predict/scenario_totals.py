"""One request's predicted and measured totals for a prompt and output length (the window's scenario panel).

Predicted: the ceilings' prefill and decode rates. Estimated from measured rates: from a run's ok rows, the prefill
rate of the test whose prompt length is closest to the scenario's and the mean decode rate of all tests. Measured:
a test of exactly the scenario's lengths from an empty context ("Run this scenario"). All go through
:func:`app.predict.scenario.scenario_time`; a total that cannot be made (no rates, a rate ≤ 0, nothing to do)
is None.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from app.predict.scenario import Scenario, scenario_time
from app.results.fields import RowStatus
from app.results.row_types import ResultRow


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
    exact: Scenario | None = None  # a test of exactly these lengths at depth 0, measured as it ran


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


def measured_rates(rows: Iterable[ResultRow], n_prompt: int, model_path: str = "") -> MeasuredRates | None:
    """Rates from ok rows: ``model_path``'s rows when it has any, else all of them; None without both phases."""
    ok = [r for r in rows if r.status == RowStatus.OK]
    rows_used = [r for r in ok if r.model_path == model_path] or ok
    prefill = [(r, r.prefill_tps) for r in rows_used if r.prefill_tps]
    decode = [r.decode_tps for r in rows_used if r.decode_tps]
    if not prefill or not decode:
        return None
    best, best_tps = min(prefill, key=lambda pair: abs((pair[0].n_prompt or 0) - n_prompt))
    return MeasuredRates(prefill_tps=best_tps, prefill_n_prompt=best.n_prompt or 0,
                         decode_tps=sum(decode) / len(decode), n_decode_tests=len(decode))


def exact_measurement(rows: Iterable[ResultRow], n_prompt: int, n_gen: int,
                      model_path: str = "") -> Scenario | None:
    """The request as measured: the latest ok test of ``model_path`` with exactly these lengths from an empty
    context, its TTFT and its decode time (``n_gen`` ÷ its decode rate); None when there is no such test."""
    hits = [(r, r.ttft_ms) for r in rows if r.status == RowStatus.OK and r.model_path == model_path
            and (r.n_prompt or 0) == n_prompt and (r.n_gen or 0) == n_gen
            and not r.n_depth and r.ttft_ms and (r.decode_tps or not n_gen)]
    if not hits or n_prompt <= 0:
        return None
    r, ttft_ms = hits[-1]
    ttft_s = ttft_ms / 1000.0
    decode_tps = r.decode_tps or 1.0  # unused when n_gen is 0
    return scenario_time(n_prompt, n_gen, n_prompt / ttft_s, decode_tps) if ttft_s > 0 and decode_tps > 0 else None


def scenario_totals(n_prompt: int, n_gen: int, predicted_rates: tuple[float, float] | None,
                    rows: Iterable[ResultRow], model_path: str = "") -> ScenarioTotals:
    """Predicted and measured totals of one request of ``n_prompt`` prompt and ``n_gen`` output tokens."""
    rates = measured_rates(rows, n_prompt, model_path)
    measured = request_total(n_prompt, n_gen, (rates.prefill_tps, rates.decode_tps)) if rates else None
    return ScenarioTotals(predicted=request_total(n_prompt, n_gen, predicted_rates), measured=measured, rates=rates,
                          exact=exact_measurement(rows, n_prompt, n_gen, model_path))
