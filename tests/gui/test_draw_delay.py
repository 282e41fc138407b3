"""New data is drawn within half a second of its event (issue #42): events handed to the window as the sweep thread
hands them, the window's own timer takes them in and the plots show them; no plot holds data back."""

from __future__ import annotations

import time
from collections import deque

import pytest
from PySide6.QtWidgets import QApplication

from app.gui.bridge import read_event_stream
from app.run.events import Event
from app.run.live import LiveRun
from tests.gui.conftest import RECORDED

pytestmark = pytest.mark.heavy  # the real window

DRAW_WITHIN_S = 0.5
BATCH = 12  # events per arrival: the worker's event writer sends a batch every 50 ms


def _kept_ticks(events: list[Event]) -> int:
    """Per-token latencies the events give (a repetition's first token and warmups give none)."""
    return sum(1 for e in events if e.type == "token_tick" and e.rep >= 0 and e.token_index > 0)


def test_the_window_draws_each_batch_of_events_within_half_a_second(window, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    w = window
    arrived: deque[Event] = deque()
    monkeypatch.setattr(w.sweeps.bridge, "drain", lambda: [arrived.popleft() for _ in range(len(arrived))])
    w.sweeps.show_session(LiveRun("live"), "live")
    events = [e for e in read_event_stream(RECORDED) if e.type != "sweep_finished"]
    plots = w.plots
    delays: list[float] = []
    for k in range(0, len(events), BATCH):
        so_far = events[: k + BATCH]
        want_tokens = _kept_ticks(so_far)
        want_samples = sum(1 for e in so_far if e.type == "telemetry_sample")
        want_rows = sum(1 for e in so_far if e.type == "test_finished")
        arrived.extend(events[k : k + BATCH])
        t0 = time.perf_counter()

        def shown(want_tokens: int = want_tokens, want_samples: int = want_samples, want_rows: int = want_rows) -> bool:
            return (len(plots.data_of("itl", "meas")[0]) == want_tokens
                    and (not plots.tel.widget.isVisible() or len(plots.data_of("tel2", "cpu")[0]) == want_samples)
                    and len(plots.data_of("ttft", "meas", 0)[0]) == want_rows)

        while not shown():
            assert time.perf_counter() - t0 < 5.0, f"events {k}..{k + BATCH} not drawn in 5 s"
            QApplication.processEvents()
            time.sleep(0.002)
        delays.append(time.perf_counter() - t0)
    assert len(delays) > 10
    assert max(delays) <= DRAW_WITHIN_S, f"slowest batch drawn {max(delays) * 1000:.0f} ms after it arrived"
