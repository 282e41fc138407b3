"""A warning during a run when other processes use the CPU (or the GPU) the measurement needs. No Qt here.

The worker's telemetry says how much CPU the benchmark itself uses (``cpu_pct``, percent of one logical CPU)
and how much VRAM is in use beside its own; the machine's load average says how many threads want to run.
Whatever runnable load the worker does not account for belongs to other processes, and competes with it.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np

from app.run.live import LiveRun

OTHER_CORES_WARN = 0.7  # runnable threads beyond the benchmark's own, on average over the last minute
OTHER_VRAM_WARN_BYTES = 512 * 1024**2
RECENT_SAMPLES = 10


def _load_1min() -> float | None:
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):  # Windows has no load average
        return None


def _recent_mean(values: np.ndarray) -> float | None:
    tail = values[-RECENT_SAMPLES:]
    tail = tail[np.isfinite(tail)]
    return float(tail.mean()) if tail.size else None


class ContentionWatch:
    """Looks at a running session now and then; says once per run what competes with the measurement."""

    def __init__(self, load_1min: Callable[[], float | None] = _load_1min,
                 n_cpus: int | None = None) -> None:
        self.load_1min = load_1min
        self.n_cpus = n_cpus or os.cpu_count() or 1
        self._warned: set[tuple[int, str]] = set()

    def check(self, session: LiveRun) -> list[tuple[str, str]]:
        """New warnings for ``session`` as (kind, text), kind "cpu" or "gpu" (each kind once per session)."""
        out = []
        for kind, text in (("cpu", self._cpu(session)), ("gpu", self._gpu(session))):
            if text and (id(session), kind) not in self._warned:
                self._warned.add((id(session), kind))
                out.append((kind, text))
        return out

    def _cpu(self, session: LiveRun) -> str | None:
        load = self.load_1min()
        own_pct = _recent_mean(session.tel["cpu_pct"].view())
        if load is None or own_pct is None:
            return None
        others = load - own_pct / 100.0
        if others < OTHER_CORES_WARN:
            return None
        return (f"Other processes are using about {others:.1f} of this machine's {self.n_cpus} CPU threads while "
                f"the benchmark runs: results may be unstable. Close them, or re-run when the machine is quiet.")

    def _gpu(self, session: LiveRun) -> str | None:
        used = _recent_mean(session.tel["vram_used_bytes"].view())
        own = _recent_mean(session.tel["process_vram_bytes"].view())
        util = _recent_mean(session.tel["gpu_util_pct"].view())
        if used is None or own is None or util is None or own <= 0:
            return None
        if used - own < OTHER_VRAM_WARN_BYTES or util < 5:
            return None
        return (f"Other processes hold {(used - own) / 1024**3:.1f} GiB of VRAM on the GPU the benchmark uses: "
                f"they may slow it down or push layers off the GPU.")
