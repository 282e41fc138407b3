"""The window's deferred work run one piece per turn of the event loop, a few milliseconds apart.

Independent timers (the 10 Hz tick, a plot's redraw, the tick pictures built before its repaint, the repaint) came
due together now and then and ran as one stretch of the GUI thread, 20-40 ms, though no piece took more than 12.
Queued here, the pieces run in order with at least ``gap_ms`` between the end of one and the start of the next,
so input, the window's own repaints and every other timer get their turn in between.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Hashable

from PySide6.QtCore import QObject, Qt, QTimer

#: More than a frame's worth of a 5 ms heartbeat (what ``benchmarks/gui_stall.py`` measures with) and short enough
#: that a tick's four pieces (events, one plot's redraw, its tick pictures, its repaint) take well under its 100 ms.
GAP_MS = 8


class Pacer(QObject):
    """A queue of callables run one per timer shot, FIFO, ``gap_ms`` apart; a keyed piece is queued once."""

    def __init__(self, parent: QObject | None = None, gap_ms: int = GAP_MS) -> None:
        super().__init__(parent)
        self.gap_ms = gap_ms
        self._queue: deque[tuple[Hashable | None, Callable[[], None]]] = deque()
        self._keys: set[Hashable] = set()
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setTimerType(Qt.TimerType.PreciseTimer)
        self._timer.timeout.connect(self.run_next)
        self._last_end = 0.0
        self._running = False
        #: (start, perf_counter s; the GUI thread's CPU in it, ms; what ran) per piece, when ``keep_log`` asked
        self.log: deque[tuple[float, float, str]] | None = None

    def keep_log(self, n: int = 20000) -> None:
        """Record the last ``n`` pieces run (for ``benchmarks/gui_stall.py``: what ran inside its worst gap)."""
        self.log = deque(maxlen=n)

    def __len__(self) -> int:
        return len(self._queue)

    def post(self, fn: Callable[[], None], key: Hashable | None = None) -> bool:
        """Queue ``fn``; with ``key``, not if a piece of that key is still waiting (False then)."""
        if key is not None:
            if key in self._keys:
                return False
            self._keys.add(key)
        self._queue.append((key, fn))
        if not self._timer.isActive() and not self._running:  # while a piece runs, its end starts the timer
            wait_ms = self.gap_ms - (time.perf_counter() - self._last_end) * 1000
            self._timer.start(max(1, round(wait_ms)))  # at least one turn of the event loop, even after a long idle
        return True

    def pending(self, key: Hashable) -> bool:
        return key in self._keys

    def run_next(self) -> None:
        """Run the first queued piece now (the timer does this; tests step with it)."""
        if not self._queue:
            return
        key, fn = self._queue.popleft()
        if key is not None:
            self._keys.discard(key)
        self._running = True
        t0, cpu0 = time.perf_counter(), time.thread_time()
        try:
            fn()
        finally:
            self._running = False
            if self.log is not None:
                self.log.append((t0, (time.thread_time() - cpu0) * 1000, piece_name(fn)))
            self._last_end = time.perf_counter()
            if self._queue and not self._timer.isActive():
                self._timer.start(self.gap_ms)

    def clear(self) -> None:
        """Drop everything queued (the window is closing)."""
        self._timer.stop()
        self._queue.clear()
        self._keys.clear()

    def run_all(self) -> None:
        """Run everything queued now, in order (closing the window, tests)."""
        self._timer.stop()
        while self._queue:
            self.run_next()
        self._timer.stop()


def piece_name(fn: Callable[[], None]) -> str:
    """A short name for a queued callable: its qualified name, or its owner's for a lambda."""
    name = getattr(fn, "__qualname__", None) or type(fn).__name__
    return name.replace(".<locals>.<lambda>", " (step)")
