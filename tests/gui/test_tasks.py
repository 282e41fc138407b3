"""Background work ends before the process does: queued tasks are cancelled, running ones waited for (bounded)."""

from __future__ import annotations

import threading
import time

from app.gui.tasks import Tasks, wait_for_background_work


def test_waiting_for_background_work_cancels_the_queue_and_waits_for_the_running_task(qtbot) -> None:  # noqa: ANN001
    tasks = Tasks()
    release = threading.Event()
    ran: list[str] = []
    running = tasks.submit(lambda: (release.wait(5.0), ran.append("first")), None)
    queued = tasks.submit(lambda: ran.append("second"), None)
    qtbot.waitUntil(running.running, timeout=2000)
    assert not wait_for_background_work(timeout_s=0.1)  # still running: the bound holds
    release.set()
    t0 = time.monotonic()
    assert wait_for_background_work(timeout_s=5.0)
    assert time.monotonic() - t0 < 5.0 and ran == ["first"] and queued.cancelled()
