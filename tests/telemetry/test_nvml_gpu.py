"""Real NVML readings, on a machine with an NVIDIA GPU and driver only (skipped elsewhere)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest

from app.telemetry import nvml
from app.telemetry.sampler import TelemetrySampler

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def _real_nvml() -> Iterator[None]:
    nvml.set_nvml_module(None)
    if not nvml.nvml_available():
        pytest.skip(f"no NVIDIA GPU/driver: {nvml.nvml_unavailable_reason()}")
    yield
    nvml.set_nvml_module(None)


def test_real_gpus_listed_with_sane_facts() -> None:
    gpus = nvml.list_gpus()
    assert gpus
    for i, gpu in enumerate(gpus):
        assert gpu.index == i
        assert gpu.name and gpu.uuid and gpu.uuid.startswith(("GPU-", "MIG-"))
        assert gpu.driver_version
        assert gpu.vram_total_bytes and gpu.vram_total_bytes > 2**30
        if gpu.memory_bus_bits and gpu.max_memory_clock_mhz:
            assert 32 <= gpu.memory_bus_bits <= 8192
            assert 100 <= gpu.max_memory_clock_mhz <= 20_000
            assert 50 <= gpu.theoretical_bandwidth_gbps <= 20_000


def test_real_sample_readings_are_sane() -> None:
    first = nvml.read_gpu_sample(0, pid=os.getpid())
    time.sleep(0.2)
    second = nvml.read_gpu_sample(0, pid=os.getpid())
    assert set(first) == set(nvml.GPU_SAMPLE_KEYS)
    assert 0 < first["vram_used_bytes"] <= first["vram_total_bytes"]
    for key in ("gpu_util_pct", "mem_util_pct"):
        if first[key] is not None:
            assert 0 <= first[key] <= 100
    if first["sm_clock_mhz"] is not None:
        assert 0 < first["sm_clock_mhz"] < 5000
    if first["power_w"] is not None:
        assert 0 < first["power_w"] < 2000
    if first["temperature_c"] is not None:
        assert 0 < first["temperature_c"] < 120
    if first["energy_mj"] is not None and second["energy_mj"] is not None:
        assert second["energy_mj"] >= first["energy_mj"]
    if first["throttle_reasons"] is not None:
        assert isinstance(first["throttle_reasons"], int)
    if first["process_vram_bytes"] is not None:  # only if this test process holds a CUDA context
        assert first["process_vram_bytes"] >= 0


def test_real_sampler_reads_gpu() -> None:
    sampler = TelemetrySampler(os.getpid(), interval_s=0.05)
    sampler.start()
    time.sleep(0.3)
    sampler.stop()
    samples = sampler.samples
    assert sampler.gpu_enabled
    assert all(s.vram_used_bytes is not None and s.rss_bytes is not None for s in samples)
    summary = sampler.summary(samples[0].t_ns, samples[-1].t_ns)
    assert summary["vram_peak_bytes"] > 0
    if summary["energy_j"] is not None:
        assert summary["energy_j"] >= 0 and summary["power_avg_w"] >= 0
