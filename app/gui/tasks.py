"""Run slow, Qt-free work (reading GGUF facts, scanning folders, the CPU probe) off the GUI thread."""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from PySide6.QtCore import QObject, Signal

Callback = Callable[[Any, BaseException | None], None]
_POOLS: weakref.WeakSet[ThreadPoolExecutor] = weakref.WeakSet()


def wait_for_background_work(timeout_s: float = 30.0) -> bool:
    """Cancel queued tasks and wait (bounded) for running ones: call before the process exits.

    A task still running when the interpreter shuts down (the CPU probe's numpy threads, a GGUF read) can
    crash the process at exit. Each pool's ``shutdown(wait=True)`` runs on a thread of its own, so that the wait
    for it has a bound. True when every pool has shut down (its threads ended).
    """
    deadline = time.monotonic() + timeout_s
    waiters = [threading.Thread(target=pool.shutdown, kwargs={"wait": True, "cancel_futures": True},
                                name="gui-task-shutdown", daemon=True) for pool in list(_POOLS)]
    for w in waiters:
        w.start()
    for w in waiters:
        w.join(max(0.0, deadline - time.monotonic()))
    return all(not w.is_alive() for w in waiters)


class Tasks(QObject):
    """``submit(fn, on_done, *args)``: ``fn`` runs on a pool thread, ``on_done(result, error)`` on the GUI thread."""

    _done = Signal(object, object, object)

    def __init__(self, parent: QObject | None = None, max_workers: int = 1) -> None:
        super().__init__(parent)
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="gui-task")
        _POOLS.add(self._pool)
        self._done.connect(self._deliver)
        self.pending = 0
        self.closed = False

    def submit(self, fn: Callable[..., Any], on_done: Callback | None, *args: Any) -> Future[Any]:
        """Run ``fn(*args)`` on the pool and ``on_done(result, error)`` on the GUI thread; after ``shutdown``
        (a late signal while the window closes) nothing runs and the future comes back cancelled."""
        if self.closed:
            late: Future[Any] = Future()
            late.cancel()
            return late
        self.pending += 1
        fut = self._pool.submit(fn, *args)

        def finished(f: Future[Any]) -> None:
            if f.cancelled():  # shut down with the window
                return
            err = f.exception()
            try:
                self._done.emit(on_done, None if err else f.result(), err)
            except RuntimeError:  # the window is gone
                pass

        fut.add_done_callback(finished)
        return fut

    def _deliver(self, on_done: Callback | None, result: Any, err: BaseException | None) -> None:
        self.pending -= 1
        if on_done is not None:
            on_done(result, err)

    def shutdown(self) -> None:
        self.closed = True
        self._pool.shutdown(wait=False, cancel_futures=True)
