"""Issue #28: a sweep's progress counts each test's work, so the time left does not grow when long tests come."""

from __future__ import annotations

from dataclasses import replace

import pytest

from app.gui.sweep_controller import _duration
from app.results.row_types import ResultRow
from app.run.events import TestFinished
from app.run.live import DECODE_TOKEN_COST, LiveRun
from app.run.plan import TestSpec


def _tests() -> list[TestSpec]:
    short = TestSpec("m.gguf", n_prompt=128, n_gen=32, n_depth=0, repetitions=3)
    return [short, replace(short, n_prompt=512, n_depth=4096)]


def test_a_short_test_done_is_a_small_share_of_a_sweep_with_a_long_one() -> None:
    run = LiveRun("p")
    run.plan(_tests())
    assert run.progress() == 0.0
    short, long = (LiveRun.test_work(t) for t in _tests())
    assert long > 15 * short  # 4,608 context tokens against 128, at the same 32 generated tokens
    run.extend([TestFinished(t_ns=1, test_index=0, row=ResultRow(test_index=0, status="ok", n_prompt=128, n_gen=32,
                                                                 prefill_tps=400.0, decode_tps=50.0))])
    assert run.decode_token_cost() == pytest.approx(8.0)  # learned from the finished test
    assert run.progress() == pytest.approx(LiveRun.test_work(_tests()[0], 8.0) / sum(
        LiveRun.test_work(t, 8.0) for t in _tests()))
    assert run.progress() < 0.1  # counted by tests it would say 0.5, and the time left would then double


def test_before_any_test_finishes_the_default_cost_is_used() -> None:
    run = LiveRun("p")
    run.plan(_tests())
    assert run.decode_token_cost() == DECODE_TOKEN_COST


def test_durations_read_as_a_person_says_them() -> None:
    assert _duration(45) == "45 s"
    assert _duration(200) == "3 min 20 s"
    assert _duration(3900) == "1 h 05 min"


def test_calibration_progress_has_a_share_a_pass_and_a_second_look() -> None:
    from app.gui.calibrate_action import CalibrationProgress

    p = CalibrationProgress(passes=2)
    p.read("writing model 1/6: dense-a")
    assert p.fraction() == 0.0 and "writing model" in p.text("writing model 1/6: dense-a")
    p.read("test 1/36: dense-a p64 d0")
    p.started_s -= 60.0  # a minute in
    p.read("test 19/36: dense-c p64 d0")
    first = p.fraction()
    assert 0.2 < first < 0.3 and "pass 1 of 2" in p.text("x")
    p.read("pass 2 of 2 over the ladder")
    p.read("test 13/36: dense-b p64 d0")
    assert p.fraction() > 0.5 * 0.95 and "pass 2 of 2" in p.text("x")
    p.read("measuring 4 disturbed tests again")
    p.read("test 2/4: dense-a p64 d0")
    assert p.fraction() >= 0.95 and "second look at 4 disturbed tests: 2/4" in p.text("x")
    assert p.left_s() is not None and "min left" in p.text("x")
