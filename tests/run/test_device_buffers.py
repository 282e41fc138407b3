"""Per-device accounting read from llama.cpp's log lines, the row columns made from it, and the device limit.

The lines are llama.cpp's own format strings (src/llama-model.cpp load_tensors, src/llama-kv-cache.cpp,
src/llama-context.cpp of the vendored 0.3.36 source), as a Vulkan build with -ngl 16 of a 30-layer model prints them.
"""

from __future__ import annotations

import json

import pytest

from app.worker.device_columns import check_device_limit, device_columns
from engines import llama_log
from engines.base import ContextAllocError, MemoryReport
from engines.device_buffers import memory_report

MIB = 2**20
DEBUG, INFO = llama_log.LOG_DEBUG, 2

LOAD_LOG = [
    *((DEBUG, f"load_tensors: layer {il:3d} assigned to device {'CPU' if il < 15 else 'Vulkan0'}, is_swa = 0\n")
      for il in range(31)),
    (INFO, "load_tensors: offloading output layer to GPU\n"),
    (INFO, "load_tensors: offloading 15 repeating layers to GPU\n"),
    (INFO, "load_tensors: offloaded 16/31 layers to GPU\n"),
    (INFO, "load_tensors:   CPU_Mapped model buffer size =    41.92 MiB\n"),
    (INFO, "load_tensors:      Vulkan0 model buffer size =    36.60 MiB\n"),
]
CONTEXT_LOG = [
    (INFO, "llama_kv_cache:        CPU KV buffer size =     2.81 MiB\n"),
    (INFO, "llama_kv_cache:    Vulkan0 KV buffer size =     2.81 MiB\n"),
    (INFO, "llama_context:    Vulkan0 compute buffer size =    25.67 MiB\n"),
    (INFO, "llama_context: Vulkan_Host compute buffer size =     1.01 MiB\n"),
    (INFO, "llama_context: Vulkan_Host  output buffer size =     0.19 MiB\n"),
]


def _feed(lines: list[tuple[int, str]]) -> None:
    llama_log.clear_lines()
    for level, msg in lines:
        llama_log.keep_line(level, msg)


@pytest.mark.parametrize(("name", "device"), [
    ("CPU", "CPU"), ("CPU_Mapped", "CPU"), ("CPU_REPACK", "CPU"), ("Vulkan_Host", "CPU"), ("CUDA_Host", "CPU"),
    ("Vulkan0", "Vulkan0"), ("CUDA1", "CUDA1"), ("CUDA0_Split", "CUDA0"),
])
def test_buffer_names_map_to_devices(name: str, device: str) -> None:
    assert llama_log.buffer_device(name) == device


def test_load_log_gives_layers_and_weights_per_device() -> None:
    _feed(LOAD_LOG)
    assert llama_log.offloaded_layers() == 16
    assert llama_log.layers_per_device() == {"CPU": 15, "Vulkan0": 16}
    assert llama_log.device_buffers() == {"CPU": {"weights": 41.92 * MIB, "kv": 0.0, "compute": 0.0},
                                          "Vulkan0": {"weights": 36.60 * MIB, "kv": 0.0, "compute": 0.0}}
    assert llama_log.reported_buffers()["weights"] == pytest.approx((41.92 + 36.60) * MIB)
    assert not any("assigned to device" in m for _, m in llama_log.LINES)  # debug lines are still not kept


def test_context_log_gives_kv_and_compute_per_device_and_pinned_host_counts_as_cpu() -> None:
    _feed(CONTEXT_LOG)
    per_device = llama_log.device_buffers()
    assert per_device["CPU"] == {"weights": 0.0, "kv": 2.81 * MIB, "compute": 1.01 * MIB}
    assert per_device["Vulkan0"] == {"weights": 0.0, "kv": 2.81 * MIB, "compute": 25.67 * MIB}
    assert llama_log.layers_per_device() == {}  # the clear before the context forgot the load's layers


def test_a_cpu_build_logs_no_offload_and_every_layer_on_the_cpu() -> None:
    _feed([*((DEBUG, f"load_tensors: layer {il:3d} assigned to device CPU, is_swa = 0\n") for il in range(31)),
           (INFO, "load_tensors:   CPU_Mapped model buffer size =    78.52 MiB\n")])
    assert llama_log.offloaded_layers() is None
    assert llama_log.layers_per_device() == {"CPU": 31}


def _report() -> MemoryReport:
    _feed(LOAD_LOG)
    load, layers = llama_log.device_buffers(), llama_log.layers_per_device()
    _feed(CONTEXT_LOG)
    return memory_report(load, llama_log.device_buffers(), layers)


def test_memory_report_puts_load_and_context_together_host_first() -> None:
    report = _report()
    assert [d.device for d in report.devices] == ["CPU", "Vulkan0"]
    cpu, gpu = report.devices
    assert (cpu.n_layers, gpu.n_layers) == (15, 16)
    assert gpu.total_bytes == pytest.approx((36.60 + 2.81 + 25.67) * MIB)
    assert report.total_bytes == pytest.approx((41.92 + 36.60 + 2 * 2.81 + 25.67 + 1.01) * MIB)


def test_row_columns_from_the_report() -> None:
    cols = device_columns(_report())
    assert cols["gpu_weights_bytes"] == round(36.60 * MIB)
    assert cols["gpu_kv_bytes"] == round(2.81 * MIB)
    assert cols["gpu_compute_bytes"] == round(25.67 * MIB)
    per_device = json.loads(cols["device_buffers"])
    assert list(per_device) == ["CPU", "Vulkan0"]
    assert per_device["Vulkan0"]["layers"] == 16 and per_device["CPU"]["layers"] == 15
    assert per_device["CPU"]["compute_bytes"] == round(1.01 * MIB)
    assert device_columns(None) == {} and device_columns(MemoryReport()) == {}


def test_cpu_only_report_has_zero_gpu_columns() -> None:
    report = memory_report({"CPU": {"weights": 80 * MIB}}, {"CPU": {"kv": 5 * MIB, "compute": 3 * MIB}}, {"CPU": 31})
    cols = device_columns(report)
    assert (cols["gpu_weights_bytes"], cols["gpu_kv_bytes"], cols["gpu_compute_bytes"]) == (0, 0, 0)
    check_device_limit(report, 1)  # the host is never limited


def test_device_limit_fails_with_llama_cpps_figures() -> None:
    report = _report()  # 65.08 MiB on Vulkan0
    check_device_limit(report, 0)
    check_device_limit(report, 66)
    with pytest.raises(ContextAllocError, match=r"65\.1 MiB on Vulkan0 .* more than the 65 MiB of --device-mem-limit"):
        check_device_limit(report, 65)
