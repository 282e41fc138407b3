"""Per-test telemetry inside the worker: memory taken, peak memory, power and energy per phase.

The sampler runs on a thread of the worker process itself (the process whose memory and GPU use we
measure) and every sample also goes out as a TelemetrySample event, so a recorded stream carries the
trace. Readings a device cannot give stay None ("not available"); nothing here raises after start.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from app.run.events import Event, TelemetrySample
from app.telemetry import nvml
from app.telemetry.host import ProcessProbe, power_source
from app.telemetry.sampler import TelemetrySampler, summarize
from engines.base import RunTimings


class TestTelemetry:
    """Baselines at start, phase windows per repetition, and a summary per test."""

    __test__ = False

    def __init__(self, emit: Callable[[Event], None], interval_s: float | None = 0.1) -> None:
        self.emit = emit
        self.interval_s = interval_s
        self.pid = os.getpid()
        self.probe = ProcessProbe(self.pid)
        self.sampler: TelemetrySampler | None = None
        self.gpu = False
        self.rss0_bytes: float | None = None
        self.vram0_bytes: float | None = None
        self._t0_ns = 0
        self._windows: dict[str, list[tuple[int, int]]] = {"prefill": [], "decode": []}
        self._decode_tokens = 0

    def start(self) -> None:
        self.rss0_bytes = self.probe.read().get("rss_bytes")
        try:
            self.gpu = nvml.nvml_available()
        except Exception:  # noqa: BLE001 - no telemetry is no reason to stop a run
            self.gpu = False
        if self.gpu:
            self.vram0_bytes = nvml.read_gpu_sample(0, self.pid).get("vram_used_bytes")
        if self.interval_s:
            self.sampler = TelemetrySampler(self.pid, interval_s=self.interval_s, on_sample=self._forward,
                                            use_gpu=self.gpu)
            self.sampler.start()

    def _forward(self, sample: Any) -> None:
        values = sample.as_dict()
        t_ns = values.pop("t_ns")
        self.emit(TelemetrySample(t_ns=t_ns, values=values))

    def stop(self) -> None:
        if self.sampler is not None:
            self.sampler.stop()

    def begin_test(self) -> None:
        self._t0_ns = time.perf_counter_ns()
        self._windows = {"prefill": [], "decode": []}
        self._decode_tokens = 0

    def add_phases(self, t: RunTimings, decode_tokens: int) -> None:
        """Remember one timed repetition's phase windows (warmups are not passed here)."""
        if t.prefill_end_ns > t.start_ns:
            self._windows["prefill"].append((t.start_ns, t.prefill_end_ns))
        if t.token_ns:
            self._windows["decode"].append((t.prefill_end_ns, t.token_ns[-1]))
            self._decode_tokens += decode_tokens

    def end_test(self, test: Any) -> dict[str, Any]:
        """Memory taken (RSS / VRAM delta from before any model), peaks, and power/energy by phase."""
        out: dict[str, Any] = {}
        rss = self.probe.read().get("rss_bytes")
        out["mem_rss_delta_bytes"] = rss - self.rss0_bytes if rss is not None and self.rss0_bytes is not None else None
        out["vram_delta_bytes"] = None
        if self.gpu and self.vram0_bytes is not None:
            vram = nvml.read_gpu_sample(0, self.pid).get("vram_used_bytes")
            out["vram_delta_bytes"] = vram - self.vram0_bytes if vram is not None else None
        on_gpu = self.gpu and out["vram_delta_bytes"] is not None
        out["mem_measured_bytes"] = out["vram_delta_bytes"] if on_gpu else out["mem_rss_delta_bytes"]
        out["mem_source"] = "vram_delta" if on_gpu else "rss_delta"
        samples = self.sampler.samples if self.sampler is not None else []
        whole = summarize(samples, self._t0_ns, time.perf_counter_ns()) if samples else {}
        out["mem_peak_rss_bytes"] = whole.get("rss_peak_bytes")
        out["vram_peak_bytes"] = whole.get("vram_peak_bytes")
        for phase, windows in self._windows.items():
            energy = [summarize(samples, a, b).get("energy_j") for a, b in windows] if samples else []
            known = [e for e in energy if e is not None]
            seconds = sum(b - a for a, b in windows) / 1e9
            total_j = sum(known) if known and len(known) == len(windows) else None
            out[f"energy_j_{phase}"] = total_j
            out[f"power_avg_w_{phase}"] = total_j / seconds if total_j is not None and seconds > 0 else None
        e_dec = out["energy_j_decode"]
        out["energy_j_per_token"] = e_dec / self._decode_tokens if e_dec is not None and self._decode_tokens else None
        out.update(self._laptop(samples))
        return out

    def _laptop(self, samples: list[Any]) -> dict[str, Any]:
        """What a laptop changes under a test: the power source, the GPU's enforced power limit and its range, and
        whether its clocks were held back by power or temperature during the timed part (NVML clock-event reasons of
        the samples inside the timed prefill and decode windows)."""
        out: dict[str, Any] = {"power_source": power_source(), "throttled": None, "throttle_reasons": None,
                               "gpu_power_limit_w": None, "gpu_power_limit_min_w": None, "gpu_power_limit_max_w": None}
        if not self.gpu:
            return out
        limit, low, high = nvml.power_limits_w(0)
        out.update(gpu_power_limit_w=limit, gpu_power_limit_min_w=low, gpu_power_limit_max_w=high)
        masks = [summarize(samples, a, b).get("clock_events_mask") for ws in self._windows.values() for a, b in ws]
        known = [m for m in masks if m is not None]
        if known:
            held = 0
            for m in known:
                held |= m & nvml.HELD_BACK_REASONS
            out["throttled"] = int(bool(held))
            out["throttle_reasons"] = nvml.clock_event_words(held)
        return out
