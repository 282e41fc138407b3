"""Scenario totals: TTFT and decode shares of one request."""

from __future__ import annotations

import pytest

from app.predict.scenario import scenario_time


def test_scenario_chat() -> None:
    s = scenario_time(1000, 300, prefill_tps=2000, decode_tps=40)
    assert s.ttft_s == pytest.approx(0.5) and s.decode_s == pytest.approx(7.5)
    assert s.total_s == pytest.approx(8.0)
    assert s.decode_share == pytest.approx(0.9375) and round(s.decode_share * 100) == 94
    assert s.chars_per_s == pytest.approx(160.0) and s.effective_chars_per_s == pytest.approx(150.0)


def test_scenario_long_prompt() -> None:
    s = scenario_time(12_000, 500, prefill_tps=1500, decode_tps=40)
    assert s.total_s == pytest.approx(20.5)
    assert s.ttft_share == pytest.approx(8 / 20.5) and round(s.ttft_share * 100) == 39
    assert s.ttft_share + s.decode_share == pytest.approx(1.0)
    with pytest.raises(ValueError):
        scenario_time(1, 1, 0, 1)
