"""The doctor's comparison of llama.cpp's devices with the machine's GPUs, on recorded and written-out inputs.

NVIDIA GPUs come from NVML readings replayed by a TEST DOUBLE (tests/telemetry/nvml_replay.py: this machine has
no NVIDIA GPU); the AMD Vulkan device from a HAND-WRITTEN vulkaninfo sample; llama.cpp's registry answers are
written out as the child reports them (backend and device names as ggml registers them: CUDA0, Vulkan0, MTL0).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.doctor.report import DoctorReport, Level, advise, install_command, report_text, run_doctor
from app.paths import REPO_ROOT
from app.telemetry import nvml
from app.telemetry.gpu_inventory import GpuInventory, VulkanDevice, parse_vulkaninfo_summary
from app.telemetry.llama_build import installed_gpu_backends
from app.telemetry.llama_devices import LlamaDevice, LlamaDevices
from tests.telemetry.nvml_replay import replay

RECORDED = Path(__file__).parents[1] / "telemetry" / "recorded"
PY = "/home/u/gguf-workbench/.venv/bin/python"
CPU = LlamaDevice("CPU", "AMD EPYC", "CPU", "CPU", 2**34, 2**34)
CPU_BUILD = LlamaDevices(backends=("CPU",), devices=(CPU,))
LLVMPIPE = VulkanDevice(0, "llvmpipe (LLVM 15.0.6, 256 bits)", "cpu", "Mesa (software)", "llvmpipe")


@pytest.fixture
def rtx4060() -> Iterator[tuple[nvml.GpuInfo, ...]]:
    """The GPU list NVML gives on an RTX 4060 laptop (TEST DOUBLE replaying a recording)."""
    nvml.set_nvml_module(replay("rtx4060_laptop_linux"))
    yield tuple(nvml.list_gpus())
    nvml.set_nvml_module(None)


def fixes(advice: list) -> list[str | None]:
    return [a.command for a in advice if a.level is Level.FIX]


def test_nvidia_gpu_with_a_cpu_build_gives_the_cuda_command(rtx4060: tuple[nvml.GpuInfo, ...]) -> None:
    advice = advise(CPU_BUILD, GpuInventory(nvidia=rtx4060), python=PY)
    assert fixes(advice) == [f"PYTHON={PY} {REPO_ROOT}/packaging/install-gpu.sh cuda"]
    assert "NVIDIA GPU (NVIDIA GeForce RTX 4060 Laptop GPU) but a CPU-only build" in advice[0].text


def test_nvidia_gpu_with_cuda_is_fine(rtx4060: tuple[nvml.GpuInfo, ...]) -> None:
    cuda0 = LlamaDevice("CUDA0", "NVIDIA GeForce RTX 4060 Laptop GPU", "GPU", "CUDA", 7 * 2**30, 8 * 2**30)
    advice = advise(LlamaDevices(backends=("CUDA", "CPU"), devices=(cuda0, CPU)), GpuInventory(nvidia=rtx4060))
    assert [a.level for a in advice] == [Level.OK]
    assert advice[0].text == "llama.cpp can offload to CUDA0"


def test_cuda_backend_without_a_device_is_explained() -> None:
    advice = advise(LlamaDevices(backends=("CUDA", "CPU"), devices=(CPU,)), GpuInventory())
    assert any(a.level is Level.INFO and "the CUDA backend but it sees no CUDA device" in a.text for a in advice)


def test_amd_vulkan_gpu_with_a_cpu_build_gives_the_vulkan_command() -> None:
    vk = tuple(parse_vulkaninfo_summary((RECORDED / "vulkaninfo_summary_amd_handwritten.txt").read_text()))
    advice = advise(CPU_BUILD, GpuInventory(vulkan=vk, vulkan_listed=True), python=PY)
    assert fixes(advice) == [install_command("vulkan", PY)]
    assert "Vulkan GPU (AMD Radeon RX 7600 (RADV NAVI33)) but a CPU-only build without Vulkan" in advice[0].text
    rocm = LlamaDevice("ROCm0", "AMD Radeon RX 7600", "GPU", "ROCm", 2**33, 2**33)
    assert fixes(advise(LlamaDevices(backends=("ROCm", "CPU"), devices=(rocm, CPU)), GpuInventory(vulkan=vk))) == []


def test_apple_silicon_without_metal() -> None:
    advice = advise(CPU_BUILD, GpuInventory(apple_metal=True, system="Darwin", machine="arm64"), python=PY)
    assert fixes(advice) == [install_command("metal", PY)]
    mtl = LlamaDevice("MTL0", "Apple M3", "GPU", "MTL", 2**34, 2**34)
    assert fixes(advise(LlamaDevices(backends=("MTL", "CPU"), devices=(mtl, CPU)),
                        GpuInventory(apple_metal=True))) == []


def test_no_gpu_anywhere_is_ok_with_no_command() -> None:
    advice = advise(CPU_BUILD, GpuInventory())
    assert [(a.level, a.command) for a in advice] == [(Level.OK, None)]
    assert "the CPU build is the right one" in advice[0].text


def test_software_vulkan_device_is_never_called_a_gpu() -> None:
    """A CPU build beside llvmpipe: no fix, a pointer to the Vulkan venv; a Vulkan build on llvmpipe: no fix either."""
    advice = advise(CPU_BUILD, GpuInventory(vulkan=(LLVMPIPE,), vulkan_listed=True))
    assert fixes(advice) == [] and advice[0].level is Level.OK
    assert advice[1].command and advice[1].command.endswith("packaging/build-vulkan-venv.sh")
    assert "not a real GPU" in advice[1].text
    vk0 = LlamaDevice("Vulkan0", "llvmpipe (LLVM 15.0.6, 256 bits)", "GPU", "Vulkan", 2**34, 2**34)
    vk_build = LlamaDevices(backends=("Vulkan", "CPU"), devices=(vk0, CPU), vk_visible_devices="0",
                            vk_visible_set_here=True)
    gpus = GpuInventory(vulkan=(LLVMPIPE,), vulkan_listed=True)
    advice = advise(vk_build, gpus)
    assert fixes(advice) == []
    assert advice[0].text == "no real GPU on this machine; the software Vulkan device is for trying the GPU path"
    assert [a.command for a in advice if a.command] == ["export GGML_VK_VISIBLE_DEVICES=0"]
    text = report_text(DoctorReport(vk_build, gpus, tuple(advice)))
    assert "software Vulkan (CPU), not a real GPU" in text and "GGML_VK_VISIBLE_DEVICES=0 (set for this query)" in text


def test_vulkan_build_that_skipped_llvmpipe_says_how_to_see_it() -> None:
    """The user ran with GGML_VK_VISIBLE_DEVICES unset and a child the doctor did not set it for (as recorded from
    a Vulkan build's registry on this machine: the backend registered, no Vulkan device)."""
    advice = advise(LlamaDevices(backends=("Vulkan", "CPU"), devices=(CPU,)),
                    GpuInventory(vulkan=(LLVMPIPE,), vulkan_listed=True))
    assert [(a.level, a.command) for a in advice] == [(Level.OK, None),
                                                      (Level.INFO, "export GGML_VK_VISIBLE_DEVICES=0")]
    assert advice[0].text == "no GPU device that llama.cpp can use: it runs on the CPU"
    assert advice[1].text.startswith("llama.cpp's Vulkan backend sees no device: it skips software Vulkan devices")


def test_query_failure_is_an_error() -> None:
    advice = advise(LlamaDevices(error="the llama.cpp device query failed (killed by signal 11): "), GpuInventory())
    assert [a.level for a in advice] == [Level.ERROR]


@pytest.mark.heavy  # a child process
def test_whole_doctor_with_a_replayed_nvidia_gpu(rtx4060: tuple[nvml.GpuInfo, ...]) -> None:
    """Real child and vulkaninfo, NVML replayed: this (non-CUDA) build is told the cuda command for this venv."""
    if "CUDA" in (installed_gpu_backends() or []):
        pytest.skip("this llama.cpp has CUDA")
    report = run_doctor(python=PY)
    assert "CPU" in report.llama.backends and report.gpus.nvidia == rtx4060
    assert install_command("cuda", PY) in fixes(list(report.advice))
    assert report.to_json()["advice"][0]["level"] == "fix"
