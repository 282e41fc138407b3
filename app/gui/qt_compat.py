"""Where Qt and Python's memory management meet: the cyclic garbage collector runs on the GUI thread only, and
the heap is settled where a pause is not seen.

(PySide6 6.12.0 dropped references to None/True on Python 3.11 and aborted the process; pyproject.toml excludes
that version, so nothing here works around it.)
"""

from __future__ import annotations

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
