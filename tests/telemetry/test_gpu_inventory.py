"""GPU inventory sources: vulkaninfo parsing, and llama.cpp's ggml registry asked in a child process.

``vulkaninfo_summary_llvmpipe.txt`` was recorded on this machine (Debian 12, vulkan-tools 1.3.239, Mesa 22.3.6);
``vulkaninfo_summary_amd_handwritten.txt`` is a HAND-WRITTEN input in the same layout (this machine has no GPU).
The registry tests run the real child against the installed llama-cpp-python.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from app.telemetry.gpu_inventory import VulkanDevice, parse_vulkaninfo_summary
from app.telemetry.llama_build import installed_gpu_backends
from app.telemetry.llama_devices import parse_registry, query_llama_devices, vk_visible_devices

RECORDED = Path(__file__).parent / "recorded"


def test_parses_the_recorded_llvmpipe_summary() -> None:
    devices = parse_vulkaninfo_summary((RECORDED / "vulkaninfo_summary_llvmpipe.txt").read_text())
    assert devices == [VulkanDevice(0, "llvmpipe (LLVM 15.0.6, 256 bits)", "cpu", "Mesa (software)", "llvmpipe")]
    assert devices[0].software


def test_parses_a_discrete_gpu_beside_llvmpipe() -> None:
    devices = parse_vulkaninfo_summary((RECORDED / "vulkaninfo_summary_amd_handwritten.txt").read_text())
    assert [(d.index, d.kind, d.vendor, d.software) for d in devices] == [
        (0, "discrete", "AMD", False), (1, "cpu", "Mesa (software)", True)]
    assert devices[0].name == "AMD Radeon RX 7600 (RADV NAVI33)" and devices[0].driver == "radv"


def test_no_devices_section_gives_no_devices() -> None:
    assert parse_vulkaninfo_summary("ERROR: [Loader Message] Code 0 : vkCreateInstance: Found no drivers!\n") == []


def test_visible_devices_for_the_child() -> None:
    amd, soft = VulkanDevice(0, "AMD", "discrete"), VulkanDevice(1, "llvmpipe", "cpu")
    assert vk_visible_devices([amd, soft]) == "0"  # the real GPU, as llama.cpp would pick by default
    assert vk_visible_devices([soft]) == "1"  # only software: show it (what GGML_VK_VISIBLE_DEVICES=... enables)
    assert vk_visible_devices(None) == "0"  # vulkaninfo unknown
    assert vk_visible_devices([]) is None  # an index would be invalid: llama.cpp throws on it


@pytest.mark.heavy  # a subprocess
def test_registry_child_reports_this_build() -> None:
    """The real child on the installed llama.cpp: CPU is always a backend with a CPU-type device."""
    done = subprocess.run([sys.executable, "-m", "engines.ggml_devices", "--json"], capture_output=True, text=True,
                          timeout=60, check=True)
    reg = parse_registry(json.loads(done.stdout.strip().splitlines()[-1]))
    assert "CPU" in reg.backends
    assert any(d.type == "CPU" and d.backend == "CPU" and d.memory_total_bytes > 2**28 for d in reg.devices)
    if installed_gpu_backends() == []:  # a CPU-only build sees no GPU device
        assert reg.gpu_backends == [] and reg.gpu_devices == []


@pytest.mark.heavy  # a subprocess
def test_registry_child_without_libraries_says_why(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "engines.ggml_devices", "--json", "--lib-dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and done.stdout == ""
    assert "ggml registry unavailable" in done.stderr and "libggml" in done.stderr


@pytest.mark.heavy  # a subprocess
def test_a_crashing_child_is_a_reason_not_a_crash() -> None:
    found = query_llama_devices([], command=[sys.executable, "-c", "import os; print('ggml_vulkan: boom'); "
                                            "import sys; sys.stderr.write('driver exploded\\n'); os.abort()"])
    assert found.devices == () and found.error is not None
    assert "killed by signal 6" in found.error and "driver exploded" in found.error


@pytest.mark.heavy  # a subprocess
def test_a_hanging_child_times_out() -> None:
    found = query_llama_devices([], timeout_s=0.5, command=[sys.executable, "-c", "import time; time.sleep(30)"])
    assert found.error == "the llama.cpp device query did not answer within 0.5 s"
