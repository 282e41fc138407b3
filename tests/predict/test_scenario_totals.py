"""Scenario totals against hand-computed numbers: which rows the measured rates come from, and when there is none."""

from __future__ import annotations

import pytest

from app.predict.scenario_totals import measured_rates, request_total, scenario_totals
from app.results.row_types import ResultRow

ROWS = [
    ResultRow(status="ok", model_path="/a.gguf", n_prompt=128, prefill_tps=400.0, decode_tps=50.0),
    ResultRow(status="ok", model_path="/a.gguf", n_prompt=1024, prefill_tps=800.0, decode_tps=30.0),
    ResultRow(status="failed", model_path="/a.gguf", n_prompt=1000, prefill_tps=9999.0, decode_tps=9999.0),
    ResultRow(status="ok", model_path="/b.gguf", n_prompt=1000, prefill_tps=100.0, decode_tps=10.0),
]


def test_request_total_splits_ttft_and_decode() -> None:
    sc = request_total(1000, 300, (500.0, 100.0))
    assert sc is not None
    assert sc.ttft_s == pytest.approx(2.0) and sc.decode_s == pytest.approx(3.0) and sc.total_s == pytest.approx(5.0)
    assert sc.ttft_share == pytest.approx(0.4)


@pytest.mark.parametrize("rates", [None, (0.0, 10.0), (10.0, -1.0)])
def test_request_total_is_none_without_usable_rates(rates: tuple[float, float] | None) -> None:
    assert request_total(1000, 300, rates) is None


def test_request_total_is_none_for_an_empty_request() -> None:
    assert request_total(0, 0, (500.0, 100.0)) is None


def test_measured_rates_take_the_closest_prompt_and_the_mean_decode_of_the_model() -> None:
    r = measured_rates(ROWS, 1000, "/a.gguf")
    assert r is not None
    assert (r.prefill_tps, r.prefill_n_prompt) == (800.0, 1024)  # 1024 is nearer 1000 than 128; failed rows ignored
    assert r.decode_tps == pytest.approx(40.0) and r.n_decode_tests == 2


def test_measured_rates_fall_back_to_every_ok_row_for_an_unmeasured_model() -> None:
    r = measured_rates(ROWS, 1000, "/c.gguf")
    assert r is not None
    assert (r.prefill_tps, r.prefill_n_prompt) == (100.0, 1000)
    assert r.decode_tps == pytest.approx(30.0) and r.n_decode_tests == 3


def test_measured_rates_need_both_phases() -> None:
    assert measured_rates([ResultRow(status="ok", prefill_tps=100.0, n_prompt=64)], 64) is None
    assert measured_rates([], 64) is None


def test_scenario_totals_predicted_and_measured() -> None:
    t = scenario_totals(1000, 300, (1000.0, 100.0), ROWS, "/a.gguf")
    assert t.predicted is not None and t.predicted.total_s == pytest.approx(1.0 + 3.0)
    assert t.measured is not None and t.measured.total_s == pytest.approx(1000 / 800 + 300 / 40)
    assert t.rates is not None and t.rates.prefill_n_prompt == 1024
    none = scenario_totals(1000, 300, None, [], "/a.gguf")
    assert none.predicted is None and none.measured is None and none.rates is None
