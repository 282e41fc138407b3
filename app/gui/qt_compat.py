"""Work around a PySide6 6.12 refcount bug on Python 3.11: some Qt calls return a singleton without a new reference.

Every void method (``QPainter.setPen``, ``QLabel.setText``...) returns ``None``, and ``Signal.emit`` returns
``True``, without taking a reference. On Python 3.11 those objects are not yet immortal (PEP 683 made them so in
3.12) and start with a few thousand references, so a PySide6 window aborts with "Fatal Python error: none_dealloc"
(or bool_dealloc) after a few seconds of painting. The guard measures the leak once and, only when it is there,
gives the singletons that 3.12 makes immortal a practically endless reference count. No effect on Python ≥ 3.12
or on a fixed PySide6.
"""

from __future__ import annotations

import ctypes
import sys

_HEADROOM = 1 << 40
_applied = False


def singleton_leak_per_call(samples: int = 64) -> float:
    """References lost per call by ``None`` (void method) or ``True`` (signal emit); 0 on a healthy build."""
    from PySide6.QtCore import QObject, QPoint

    point = QPoint()
    obj = QObject()
    before = sys.getrefcount(None), sys.getrefcount(True)
    for _ in range(samples):
        point.setX(1)
        obj.objectNameChanged.emit("x")
    after = sys.getrefcount(None), sys.getrefcount(True)
    return max(before[0] - after[0], before[1] - after[1]) / samples


def _immortal_like() -> list[object]:
    return [None, True, False, NotImplemented, Ellipsis, (), "", *range(-5, 257)]


def guard_none_refcount() -> bool:
    """Apply the workaround when needed; True when it was applied (now or earlier)."""
    global _applied
    if _applied:
        return True
    if sys.version_info >= (3, 12):  # these singletons are immortal there
        return False
    if singleton_leak_per_call() < 0.5:
        return False
    for obj in _immortal_like():
        ctypes.c_ssize_t.from_address(id(obj)).value += _HEADROOM
    _applied = True
    return True


_gc_timer: object | None = None


def collect_garbage_on_the_gui_thread(interval_s: float = 1.0) -> None:
    """Switch Python's automatic cyclic GC off and run it from a timer on the GUI thread (once per process).

    The window reads GGUF files and runs sweeps on background threads; an automatic collection that starts
    there can destroy a Qt object left in a cycle (an old window, a menu) off the GUI thread, which
    deadlocks on Qt's locks (seen: a QMenu destroyed from a GGUF-reading thread while the GUI thread painted).
    """
    global _gc_timer
    if _gc_timer is not None:
        return
    from pyqtgraph.util.garbage_collector import GarbageCollector

    _gc_timer = GarbageCollector(interval=interval_s)


def settle_heap() -> None:
    """Collect everything now, then freeze what survives out of later collections.

    A full collection looks at every tracked object: ~95,000 once the window is up (Qt wrappers, pyqtgraph, the
    modules), 50-80 ms on this machine, one stretch of the GUI thread that the 1 s collector ran in the middle of
    long sweeps. Frozen objects are left out of collections (and so are freed only by their reference counts), so
    this runs where a pause is not seen: once the window is built, and when it has been idle after a sweep
    (:meth:`SweepController`); each time it first unfreezes, so nothing stays out of a collection for long.
    """
    import gc

    gc.unfreeze()
    gc.collect()
    gc.freeze()
