"""Start-up time to a visible window (``gguf-workbench --startup-time``): process start to the first paint.

The start is the kernel's record of when the process began (``/proc/self/stat``, 10 ms ticks), so the figure
includes the interpreter's own start and every import, not only what runs after ``main()``; off Linux it falls
back to the moment this module was imported.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from PySide6.QtCore import QEvent, QObject, QTimer
from PySide6.QtWidgets import QWidget

_IMPORTED_S = time.monotonic()


def process_age_s() -> float:
    """Seconds since this process started (Linux: from the kernel; elsewhere: since this module's import)."""
    try:
        with open("/proc/self/stat", encoding="ascii") as f:
            fields = f.read().rpartition(")")[2].split()
        start_ticks = int(fields[19])  # field 22 of stat(5); the two before the ')' are cut off
        return time.clock_gettime(time.CLOCK_BOOTTIME) - start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return time.monotonic() - _IMPORTED_S


class FirstPaint(QObject):
    """Calls ``then(ms since process start)`` once, when ``widget`` has painted for the first time."""

    def __init__(self, widget: QWidget, then: Callable[[float], object]) -> None:
        super().__init__(widget)
        self._then = then
        self._done = False
        widget.installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802
        if not self._done and event.type() == QEvent.Type.Paint:
            self._done = True
            ms = process_age_s() * 1000.0
            QTimer.singleShot(0, lambda: self._then(ms))  # after this paint has reached the screen
        return False
