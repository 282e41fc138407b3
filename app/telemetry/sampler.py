"""Background telemetry: GPU (NVML, when present) and host (psutil) readings on a daemon thread.

Timestamps come from an injected clock, ``time.perf_counter_ns`` by default, the clock benchmark events use. The
benchmark worker is another process, so the clock must be system-wide: on Linux ``perf_counter`` is
``clock_gettime(CLOCK_MONOTONIC)`` (``time.get_clock_info("perf_counter").implementation``), one counter for every
process since boot, so a worker's event timestamps and this sampler's line up (tests/telemetry/test_sampler.py checks
it with a child process). On Windows (QueryPerformanceCounter) and macOS (mach_absolute_time) it is also system-wide.

With no NVIDIA driver the sampler runs on psutil alone and every GPU field is None ("not available").
"""

from __future__ import annotations

import bisect
import csv
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from app.telemetry import nvml
from app.telemetry.host import ProcessProbe

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Reading:
    """One set of readings at ``t_ns`` (injected clock, midpoint of the reading); None = not available."""

    t_ns: int
    # host (psutil)
    rss_bytes: float | None = None
    cpu_pct: float | None = None  # percent of one logical CPU
    sys_ram_used_bytes: float | None = None
    sys_ram_total_bytes: float | None = None
    # GPU (NVML)
    vram_used_bytes: float | None = None
    vram_total_bytes: float | None = None
    process_vram_bytes: float | None = None
    gpu_util_pct: float | None = None
    mem_util_pct: float | None = None
    sm_clock_mhz: float | None = None
    mem_clock_mhz: float | None = None
    power_w: float | None = None
    energy_mj: float | None = None  # NVML total energy counter since driver load
    temperature_c: float | None = None
    throttle_reasons: int | None = None  # NVML clock-event reasons bitmask
    pcie_rx_kbps: float | None = None  # KB/s, as NVML reports
    pcie_tx_kbps: float | None = None

    def as_dict(self) -> dict[str, Any]:
        """Plain dict (JSON-ready)."""
        return asdict(self)


SAMPLE_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Reading))
_READING_FIELDS = frozenset(SAMPLE_FIELDS) - {"t_ns"}


class TelemetrySampler:
    """Samples host and GPU readings every ``interval_s`` on a daemon thread until :meth:`stop`.

    ``on_sample`` is called on the sampler thread with each new sample; an exception in it is logged, not raised.
    ``use_gpu=None`` reads the GPU when NVML is available.
    """

    def __init__(
        self,
        pid: int | None,
        interval_s: float = 0.1,
        gpu_index: int = 0,
        clock_ns: Callable[[], int] = time.perf_counter_ns,
        on_sample: Callable[[Reading], None] | None = None,
        *,
        use_gpu: bool | None = None,
    ) -> None:
        if interval_s <= 0:
            raise ValueError("interval_s must be > 0")
        self.pid = pid
        self.interval_s = interval_s
        self.gpu_index = gpu_index
        self.clock_ns = clock_ns
        self.on_sample = on_sample
        self._use_gpu = use_gpu
        self._gpu = False
        self._probe: ProcessProbe | None = None
        self._samples: list[Reading] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def gpu_enabled(self) -> bool:
        """Whether GPU readings are being taken (decided at :meth:`start`)."""
        return self._gpu

    @property
    def samples(self) -> list[Reading]:
        """A copy of the samples so far, oldest first."""
        with self._lock:
            return list(self._samples)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _prepare(self) -> None:
        if self._probe is None:
            self._probe = ProcessProbe(self.pid)
            self._gpu = nvml.nvml_available() if self._use_gpu is None else self._use_gpu

    def start(self) -> None:
        """Start sampling (first sample at once); a second call while running does nothing."""
        if self.running:
            return
        self._prepare()
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="telemetry-sampler", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 2.0) -> None:
        """Stop sampling; the thread takes one last sample before it ends."""
        self._stop.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout_s)
        self._thread = None

    def sample_once(self) -> Reading:
        """Take one sample now, keep it and pass it to ``on_sample``. Never raises."""
        self._prepare()
        t_before_ns = self.clock_ns()
        readings: dict[str, Any] = {}
        try:
            if self._probe is not None:
                readings.update(self._probe.read())
            if self._gpu:
                readings.update(nvml.read_gpu_sample(self.gpu_index, self.pid))
        except Exception:  # the probes do not raise; this guards the thread all the same
            log.exception("telemetry reading failed")
        t_after_ns = self.clock_ns()
        readings = {k: v for k, v in readings.items() if k in _READING_FIELDS}
        sample = Reading(t_ns=(t_before_ns + t_after_ns) // 2, **readings)
        with self._lock:
            self._samples.append(sample)
        if self.on_sample is not None:
            try:
                self.on_sample(sample)
            except Exception:
                log.exception("on_sample callback failed")
        return sample

    def _run(self) -> None:
        next_s = time.monotonic()
        while True:
            self.sample_once()
            next_s += self.interval_s
            now_s = time.monotonic()
            if next_s < now_s:  # fell behind (slow reading, busy machine): skip, do not burst
                next_s = now_s + self.interval_s
            if self._stop.wait(next_s - now_s):
                break
        self.sample_once()

    def summary(self, t0_ns: int, t1_ns: int) -> dict[str, Any]:
        """Power, energy and peak memory over ``[t0_ns, t1_ns]`` (see :func:`summarize`)."""
        return summarize(self.samples, t0_ns, t1_ns)


def _series(samples: Sequence[Reading], name: str) -> list[tuple[int, float]]:
    return sorted((s.t_ns, float(v)) for s in samples if (v := getattr(s, name)) is not None)


def _interp(points: list[tuple[int, float]], t_ns: int) -> float:
    """Linear interpolation in ``points`` (sorted by time), held constant beyond the ends."""
    i = bisect.bisect_left(points, t_ns, key=lambda p: p[0])
    if i == 0:
        return points[0][1]
    if i == len(points):
        return points[-1][1]
    (ta, va), (tb, vb) = points[i - 1], points[i]
    return vb if tb == ta else va + (vb - va) * (t_ns - ta) / (tb - ta)


def _clip(points: list[tuple[int, float]], t0_ns: int, t1_ns: int) -> tuple[int, int] | None:
    """The part of ``[t0_ns, t1_ns]`` the points cover, or None."""
    if len(points) < 2:
        return None
    lo, hi = max(t0_ns, points[0][0]), min(t1_ns, points[-1][0])
    return (lo, hi) if hi > lo else None


def _integrate(points: list[tuple[int, float]], lo_ns: int, hi_ns: int) -> float:
    """Trapezoid integral of the piecewise-linear series over ``[lo_ns, hi_ns]``, in value x seconds."""
    knots = [(lo_ns, _interp(points, lo_ns))] + [p for p in points if lo_ns < p[0] < hi_ns]
    knots.append((hi_ns, _interp(points, hi_ns)))
    total = sum((tb - ta) * (va + vb) / 2 for (ta, va), (tb, vb) in zip(knots, knots[1:], strict=False))
    return total / 1e9


def summarize(samples: Sequence[Reading], t0_ns: int, t1_ns: int) -> dict[str, Any]:
    """Average power, energy and peak memory over the window ``[t0_ns, t1_ns]``.

    Energy comes from the NVML energy counter where it is available (interpolated at the window edges), else from
    integrating ``power_w`` (trapezoids); ``energy_source`` says which. ``power_avg_w`` = energy / covered time, and
    ``energy_window_s`` is the time the samples cover (less than the window if sampling started late or stopped
    early). Peaks are maxima of the samples inside the window. A figure that cannot be had is None.
    """
    inside = [s for s in samples if t0_ns <= s.t_ns <= t1_ns]

    def peak(name: str) -> float | None:
        vals = [v for s in inside if (v := getattr(s, name)) is not None]
        return max(vals) if vals else None

    energy_j: float | None = None
    source: str | None = None
    span: tuple[int, int] | None = None
    counter = _series(samples, "energy_mj")
    span = _clip(counter, t0_ns, t1_ns)
    if span is not None:
        delta_mj = _interp(counter, span[1]) - _interp(counter, span[0])
        if delta_mj >= 0:  # a negative delta means the counter reset (driver reload)
            energy_j, source = delta_mj / 1e3, "energy_counter"
    if energy_j is None:
        power = _series(samples, "power_w")
        span = _clip(power, t0_ns, t1_ns)
        if span is not None:
            energy_j, source = _integrate(power, *span), "power_integral"
    covered_s = (span[1] - span[0]) / 1e9 if span is not None and energy_j is not None else None
    return {
        "t0_ns": t0_ns,
        "t1_ns": t1_ns,
        "n_samples": len(inside),
        "power_avg_w": energy_j / covered_s if energy_j is not None and covered_s else None,
        "energy_j": energy_j,
        "energy_source": source,
        "energy_window_s": covered_s,
        "vram_peak_bytes": peak("vram_used_bytes"),
        "process_vram_peak_bytes": peak("process_vram_bytes"),
        "rss_peak_bytes": peak("rss_bytes"),
        "sys_ram_peak_bytes": peak("sys_ram_used_bytes"),
        "gpu_util_avg_pct": _mean([s.gpu_util_pct for s in inside]),
        "cpu_avg_pct": _mean([s.cpu_pct for s in inside]),
        "clock_events_mask": _either([s.throttle_reasons for s in inside]),
    }


def _either(masks: Iterable[int | None]) -> int | None:
    """The bits any of ``masks`` has (None when none was read)."""
    known = [m for m in masks if m is not None]
    out = 0
    for m in known:
        out |= int(m)
    return out if known else None


def _mean(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


def phase_at(t_ns: int, markers: Sequence[tuple[int, str]]) -> str:
    """Label of the last marker at or before ``t_ns`` (markers sorted by time), or "" before the first."""
    label = ""
    for marker_t_ns, marker_label in markers:
        if marker_t_ns > t_ns:
            break
        label = marker_label
    return label


def write_trace_csv(
    samples: Sequence[Reading],
    path: str | Path,
    phase_markers: Sequence[tuple[int, str]] = (),
) -> Path:
    """Write samples as CSV: ``t_ns``, ``t_s`` (from the first sample), ``phase`` and every reading.

    ``phase_markers`` are ``(t_ns, label)`` pairs on the same clock, each opening a phase that lasts until the next
    marker; a sample before the first marker has an empty phase. A missing reading is an empty cell.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    markers = sorted(phase_markers)
    ordered = sorted(samples, key=lambda s: s.t_ns)
    t_first_ns = ordered[0].t_ns if ordered else 0
    readings = [name for name in SAMPLE_FIELDS if name != "t_ns"]
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["t_ns", "t_s", "phase", *readings])
        for s in ordered:
            row: list[Any] = [s.t_ns, f"{(s.t_ns - t_first_ns) / 1e9:.6f}", phase_at(s.t_ns, markers)]
            row += ["" if (v := getattr(s, name)) is None else v for name in readings]
            writer.writerow(row)
    return path
