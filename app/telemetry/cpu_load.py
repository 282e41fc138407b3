"""How busy the machine is with other work while this process measures it: for the CPU probe, and for every
test the worker times (a row's ``host_other_cpu_pct``).

Over a window, other processes' CPU use = (all CPUs' busy time − this process's CPU time) ÷ wall time, in
logical CPUs (1.0 = one CPU kept busy by others on average). The 1-minute load average is kept beside it, and
stands in where the OS gives no CPU times. The readings come through :class:`LoadSources`, so tests replay
recorded ones.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from app.telemetry.host import cpu_busy_seconds, parent_cpu_seconds

#: others' CPU use, as a share of the logical CPUs the probe uses, from which a reading is marked busy
BUSY_SHARE = 0.1
MIN_BUSY_CPUS = 0.2
#: Shortest window whose others' CPU use is recorded for a test (``others_cpu_pct``): the OS counts busy time in
#: clock ticks (10 ms on Linux), so over half a second a few ticks of rounding are a few percent of one CPU.
MIN_TEST_WINDOW_S = 0.5


def load_1min() -> float | None:
    """The 1-minute load average (runnable threads), None where the OS has none (Windows)."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


@dataclass(frozen=True)
class LoadSources:
    """Where readings come from: all CPUs' busy seconds, this process's CPU seconds, wall seconds, load average."""

    busy_s: Callable[[], float | None] = cpu_busy_seconds
    own_s: Callable[[], float] = time.process_time
    wall_s: Callable[[], float] = time.perf_counter
    load_1min: Callable[[], float | None] = load_1min


@dataclass(frozen=True)
class LoadReading:
    """Other processes' CPU use over a window (logical CPUs, None when unknown) and the load average at its start."""

    others_cpus: float | None
    load_1min: float | None
    window_s: float

    def busy(self, n_threads: int) -> bool:
        """True when others used enough CPU to lower a figure measured on ``n_threads`` threads.

        Without CPU times, the load average at the start (this process idle then) is the others' share.
        """
        limit = max(MIN_BUSY_CPUS, BUSY_SHARE * n_threads)
        others = self.others_cpus if self.others_cpus is not None else self.load_1min
        return others is not None and others >= limit


def workbench_cpu_seconds() -> float:
    """CPU seconds of this process and its parent: in the worker, the measurement and the window or CLI that
    drives it, which are the workbench, not other programs taking CPU from the measurement."""
    return time.process_time() + parent_cpu_seconds()


def row_load_window() -> LoadWindow:
    """The window a test's ``host_other_cpu_pct`` is read over: others are everything but the workbench."""
    return LoadWindow(LoadSources(own_s=workbench_cpu_seconds))


def others_cpu_pct(reading: LoadReading, min_window_s: float = MIN_TEST_WINDOW_S) -> float | None:
    """Other processes' CPU use over ``reading``'s window in percent of one logical CPU (a row's
    ``host_other_cpu_pct``); None without CPU times or when the window is shorter than ``min_window_s``."""
    if reading.others_cpus is None or reading.window_s < min_window_s:
        return None
    return round(reading.others_cpus * 100.0, 1)


@dataclass
class LoadWindow:
    """``start()`` then ``stop()``: the others' CPU use in between."""

    sources: LoadSources = field(default_factory=LoadSources)
    _start: tuple[float | None, float, float, float | None] | None = None

    def start(self) -> LoadWindow:
        s = self.sources
        self._start = (s.busy_s(), s.own_s(), s.wall_s(), s.load_1min())
        return self

    def stop(self) -> LoadReading:
        if self._start is None:
            raise RuntimeError("LoadWindow.stop() before start()")
        busy0, own0, wall0, load = self._start
        s = self.sources
        busy1, own1, wall1 = s.busy_s(), s.own_s(), s.wall_s()
        window_s = max(wall1 - wall0, 1e-9)
        others = None
        if busy0 is not None and busy1 is not None:
            others = max(0.0, ((busy1 - busy0) - (own1 - own0)) / window_s)
        return LoadReading(others_cpus=others, load_1min=load, window_s=window_s)
