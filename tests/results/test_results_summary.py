"""Phase figures from timestamps, checked against hand computation."""

from __future__ import annotations

import pytest

from app.results.phases import summarise_phases
from app.results.stats import percentile
from app.run.plan import TestSpec

MS = 1_000_000


def test_phase_figures_by_hand() -> None:
    test = TestSpec("m.gguf", n_prompt=100, n_gen=4, repetitions=2)
    # rep 0: prefill 50 ms, decode steps of 10 ms; rep 1: prefill 100 ms, steps 20 ms
    starts = [0, 1000 * MS]
    ends = [50 * MS, 1100 * MS]
    toks = [[60 * MS, 70 * MS, 80 * MS, 90 * MS], [1120 * MS, 1140 * MS, 1160 * MS, 1180 * MS]]
    row = summarise_phases(test, starts, ends, toks)
    assert row["ttft_samples_ms"] == [50.0, 100.0]
    assert row["ttft_ms"] == pytest.approx(75.0)
    assert row["prefill_samples_tps"] == pytest.approx([2000.0, 1000.0])
    assert row["decode_samples_tps"] == pytest.approx([100.0, 50.0])
    assert row["decode_tps"] == pytest.approx(75.0)
    assert row["tpot_ms"] == pytest.approx(1000 / 75.0)
    assert row["itl_p50_ms"] == pytest.approx(15.0)
    assert row["samples_ns"] == [90 * MS, 180 * MS]
    assert row["avg_ts"] == pytest.approx(((104 / 0.09) + (104 / 0.18)) / 2)
    assert row["unstable"] == 1 and "decode_tps" in row["unstable_metrics"]


def test_stable_results_are_not_flagged() -> None:
    test = TestSpec("m.gguf", n_prompt=10, n_gen=2, repetitions=3)
    row = summarise_phases(test, [0, 0, 0], [10 * MS, 10 * MS, 10 * MS],
                           [[20 * MS, 30 * MS], [20 * MS, 30 * MS], [21 * MS, 31 * MS]])
    assert row["unstable"] == 0


def test_parallel_sequences_count_every_prompt_and_aggregate_decode() -> None:
    test = TestSpec("m.gguf", n_prompt=10, n_gen=2, n_parallel=4, repetitions=1)
    row = summarise_phases(test, [0], [100 * MS], [[150 * MS, 200 * MS]])
    assert row["prefill_tps"] == pytest.approx(400.0)
    assert row["decode_tps"] == pytest.approx(20.0)
    assert row["decode_tps_aggregate"] == pytest.approx(80.0)


def test_decode_only_test_has_no_ttft() -> None:
    test = TestSpec("m.gguf", n_prompt=0, n_gen=2, repetitions=1)
    row = summarise_phases(test, [0], [0], [[10 * MS, 20 * MS]])
    assert row["ttft_ms"] is None and row["decode_tps"] == pytest.approx(100.0)


def test_percentile_interpolates() -> None:
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([5], 99) == 5
    assert percentile([], 50) is None
