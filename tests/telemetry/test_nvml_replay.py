"""NVML mapping, checked against recorded readings replayed by a TEST DOUBLE (this machine has no NVIDIA GPU)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from app.telemetry import nvml
from app.telemetry.hw_report import format_hw_report
from app.telemetry.machine import scan_machine
from tests.telemetry.nvml_replay import ReplayNvml, replay

PID = 4242  # the worker pid in the recordings


@pytest.fixture(autouse=True)
def _restore_real_nvml() -> Iterator[None]:
    yield
    nvml.set_nvml_module(None)


def use(double: ReplayNvml) -> ReplayNvml:
    nvml.set_nvml_module(double)
    return double


def test_list_gpus_maps_static_facts() -> None:
    use(replay("rtx4060_laptop_linux"))
    assert nvml.nvml_available()
    assert nvml.nvml_unavailable_reason() is None
    (gpu,) = nvml.list_gpus()
    assert gpu.index == 0
    assert gpu.name == "NVIDIA GeForce RTX 4060 Laptop GPU"
    assert gpu.uuid.startswith("GPU-")
    assert gpu.vram_total_bytes == 8585740288  # 8188 MiB, as nvidia-smi shows
    assert gpu.driver_version == "550.120"
    assert gpu.memory_bus_bits == 128
    assert gpu.max_memory_clock_mhz == 8001
    # 128 bit / 8 * 8001 MHz * 2 (NVML clock = half the data rate) = 256.032 GB/s: the 16 Gbps GDDR6 spec figure
    assert gpu.theoretical_bandwidth_gbps == pytest.approx(256.032)


@pytest.mark.parametrize(
    ("bus_bits", "clock_mhz", "expected_gbps"),
    [
        (128, 8001, 256.0),  # RTX 4060 Laptop, GDDR6 16 Gbps
        (384, 10501, 1008.0),  # RTX 4090, GDDR6X 21 Gbps
        (512, 14001, 1792.0),  # RTX 5090, GDDR7 28 Gbps
        (5120, 1215, 1555.0),  # A100 40GB, HBM2e
        (5120, 2619, 3352.0),  # H100 SXM, HBM3
    ],
)
def test_theoretical_bandwidth_matches_spec_sheets(bus_bits: int, clock_mhz: int, expected_gbps: float) -> None:
    assert nvml.theoretical_bandwidth_gbps(bus_bits, clock_mhz) == pytest.approx(expected_gbps, rel=2e-3)


def test_theoretical_bandwidth_unknown_inputs() -> None:
    assert nvml.theoretical_bandwidth_gbps(None, 8001) is None
    assert nvml.theoretical_bandwidth_gbps(128, None) is None


def test_samples_replay_in_order_with_units() -> None:
    use(replay("rtx4060_laptop_linux"))
    idle = nvml.read_gpu_sample(0, pid=PID)
    assert set(idle) == set(nvml.GPU_SAMPLE_KEYS)
    assert idle == {
        "vram_used_bytes": 359661568.0,
        "vram_total_bytes": 8585740288.0,
        "process_vram_bytes": None,  # the worker has no CUDA context yet
        "gpu_util_pct": 0.0,
        "mem_util_pct": 0.0,
        "sm_clock_mhz": 210.0,
        "mem_clock_mhz": 405.0,
        "power_w": pytest.approx(2.89),  # 2890 mW
        "energy_mj": 18402113.0,
        "temperature_c": 44.0,
        "throttle_reasons": 1,  # GpuIdle
        "pcie_rx_kbps": 0.0,
        "pcie_tx_kbps": 0.0,
    }
    load = nvml.read_gpu_sample(0, pid=PID)
    assert load["process_vram_bytes"] == 792723456.0
    assert load["pcie_rx_kbps"] == 2850000.0  # KB/s: weights going up the bus
    assert load["pcie_tx_kbps"] == 12000.0
    assert load["power_w"] == pytest.approx(18.4)
    prefill = nvml.read_gpu_sample(0, pid=PID)
    assert prefill["gpu_util_pct"] == 98.0
    assert prefill["sm_clock_mhz"] == 2370.0
    assert prefill["mem_clock_mhz"] == 8001.0
    assert prefill["power_w"] == pytest.approx(71.3)
    decode = nvml.read_gpu_sample(0, pid=PID)
    assert decode["throttle_reasons"] == 4  # SwPowerCap
    assert decode["energy_mj"] == 18414468.0
    assert isinstance(decode["throttle_reasons"], int)


def test_no_pid_gives_no_process_memory() -> None:
    use(replay("rtx4060_laptop_linux"))
    nvml.read_gpu_sample(0)
    assert nvml.read_gpu_sample(0)["process_vram_bytes"] is None


def test_unsupported_readings_are_none() -> None:
    use(replay("rtx4060_laptop_wddm_partial"))
    sample = nvml.read_gpu_sample(0, pid=PID)
    assert sample["energy_mj"] is None
    assert sample["throttle_reasons"] is None
    assert sample["pcie_rx_kbps"] is None and sample["pcie_tx_kbps"] is None
    assert sample["process_vram_bytes"] is None  # WDDM: driver gives no per-process figure
    assert sample["power_w"] == pytest.approx(60.0)
    assert sample["vram_used_bytes"] == 1610612736.0


def test_unsupported_static_facts_are_none() -> None:
    double = replay("rtx4060_laptop_linux")
    double.recording["devices"][0]["memory_bus_width_bits"] = "NOT_SUPPORTED"
    use(double)
    (gpu,) = nvml.list_gpus()
    assert gpu.memory_bus_bits is None
    assert gpu.theoretical_bandwidth_gbps is None
    assert gpu.max_memory_clock_mhz == 8001


def test_a_reading_that_breaks_mid_run_is_none() -> None:
    double = use(replay("rtx4060_laptop_linux"))

    def lost(*_args: object) -> int:
        raise double.NVMLError_GpuIsLost()

    double.nvmlDeviceGetPowerUsage = lost  # type: ignore[method-assign]
    double.nvmlDeviceGetTemperature = lambda *_a: 1 / 0  # type: ignore[method-assign] # any exception at all
    sample = nvml.read_gpu_sample(0, pid=PID)
    assert sample["power_w"] is None
    assert sample["temperature_c"] is None
    assert sample["sm_clock_mhz"] == 210.0


def test_bad_index_gives_all_none() -> None:
    use(replay("rtx4060_laptop_linux"))
    assert nvml.read_gpu_sample(7, pid=PID) == nvml.empty_gpu_sample()


@pytest.mark.parametrize("error", ["LibraryNotFound", "DriverNotLoaded"])
def test_nvml_missing_is_not_available_with_reason(error: str) -> None:
    use(ReplayNvml(init_error=error))
    assert nvml.nvml_available() is False
    reason = nvml.nvml_unavailable_reason()
    words = {"LibraryNotFound": "no NVIDIA driver installed", "DriverNotLoaded": "driver is installed but not loaded"}
    assert reason is not None and words[error] in reason and "NVMLError" not in reason  # words, not a class name
    assert nvml.list_gpus() == []
    assert nvml.read_gpu_sample(0, pid=PID) == nvml.empty_gpu_sample()


def test_no_devices_is_not_available() -> None:
    use(ReplayNvml({"driver_version": "550.120", "devices": []}))
    assert nvml.nvml_available() is False
    assert nvml.nvml_unavailable_reason() == "NVML found no GPUs"


def test_real_pynvml_on_this_machine_never_raises() -> None:
    nvml.set_nvml_module(None)
    if nvml.nvml_available():
        pytest.skip("this machine has an NVIDIA GPU; see test_nvml_gpu.py")
    assert nvml.nvml_unavailable_reason()  # e.g. "no NVIDIA driver installed (its NVML library was not found)"
    assert nvml.list_gpus() == []
    assert nvml.read_gpu_sample(0, pid=1) == nvml.empty_gpu_sample()


def test_hw_report_lists_replayed_gpu() -> None:
    use(replay("rtx4060_laptop_linux"))
    report = scan_machine().report()
    assert report["gpu_note"] is None
    assert report["gpus"][0]["name"] == "NVIDIA GeForce RTX 4060 Laptop GPU"
    text = format_hw_report(report)
    assert "RTX 4060 Laptop GPU" in text
    assert "256 GB/s (theoretical)" in text
    assert "8.0 GiB" in text


def test_hw_report_without_gpu_says_so_and_shows_cpu() -> None:
    use(ReplayNvml(init_error="LibraryNotFound"))
    report = scan_machine().report()
    assert report["gpus"] == []
    assert report["gpu_note"] == "no NVIDIA GPU/driver found (NVML: no NVIDIA driver installed (its NVML library " \
                                 "was not found))"
    report["cpu_probe"] = {
        "bandwidth_gbps": 21.5,
        "gflops_f32": 190.2,
        "n_threads": 2,
        "measured_at": "2025-01-01T00:00:00+00:00",
        "cached": True,
    }
    text = format_hw_report(report)
    assert "no NVIDIA GPU/driver found" in text
    assert report["machine"]["cpu_model"] in text
    assert "21.5 GB/s" in text and "190 GFLOPS" in text
    assert "GiB" in text
