"""Which GPUs this machine has, whatever llama.cpp was built with: NVIDIA (NVML), Vulkan devices, Apple silicon.

- NVIDIA: :mod:`app.telemetry.nvml` (the driver's own list).
- Vulkan: ``vulkaninfo --summary`` (Debian/Ubuntu package ``vulkan-tools``; the Vulkan SDK) when installed; each
  ``GPUn:`` block's ``deviceName`` and ``deviceType``. A ``PHYSICAL_DEVICE_TYPE_CPU`` device (Mesa's llvmpipe,
  lavapipe) is software rendering on the CPU, not a GPU.
- Apple: Darwin on arm64 has a Metal GPU (no query needed).

Nothing here raises: a source that cannot be asked gives no devices and a note saying why.
"""

from __future__ import annotations

import platform
import re
import shutil
import subprocess
from dataclasses import asdict, dataclass, field
from typing import Any

from app.telemetry import nvml

VULKANINFO_TIMEOUT_S = 15.0
_FIELD = re.compile(r"^\s*(\w+)\s*=\s*(.*?)\s*$")
_GPU_HEADER = re.compile(r"^GPU(\d+):\s*$")
#: vulkaninfo's deviceType values → short words.
VK_DEVICE_TYPES = {"PHYSICAL_DEVICE_TYPE_DISCRETE_GPU": "discrete", "PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU": "integrated",
                   "PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU": "virtual", "PHYSICAL_DEVICE_TYPE_CPU": "cpu",
                   "PHYSICAL_DEVICE_TYPE_OTHER": "other"}
#: PCI vendor ids vulkaninfo prints (vendorID = 0x10de).
VK_VENDORS = {0x10DE: "NVIDIA", 0x1002: "AMD", 0x8086: "Intel", 0x106B: "Apple", 0x13B5: "ARM", 0x5143: "Qualcomm",
              0x10005: "Mesa (software)"}


@dataclass(frozen=True)
class VulkanDevice:
    """One device in ``vulkaninfo --summary``."""

    index: int
    name: str
    kind: str  # discrete, integrated, virtual, cpu, other (VK_DEVICE_TYPES)
    vendor: str | None = None
    driver: str | None = None

    @property
    def software(self) -> bool:
        """A CPU-type device (llvmpipe/lavapipe, SwiftShader): runs on the CPU, not a real GPU."""
        return self.kind == "cpu"


@dataclass(frozen=True)
class GpuInventory:
    """The GPUs one look at the machine found, each source with a note when it could not answer."""

    nvidia: tuple[nvml.GpuInfo, ...] = ()
    nvidia_note: str | None = None
    vulkan: tuple[VulkanDevice, ...] = ()
    vulkan_note: str | None = None  # e.g. vulkaninfo not installed
    vulkan_listed: bool = False  # vulkaninfo ran, so ``vulkan`` is the whole list (maybe empty)
    apple_metal: bool = False
    system: str = field(default_factory=platform.system)
    machine: str = field(default_factory=platform.machine)

    @property
    def vulkan_gpus(self) -> list[VulkanDevice]:
        """The Vulkan devices that are real GPUs (software devices left out)."""
        return [d for d in self.vulkan if not d.software]

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["vulkan"] = [{**asdict(d), "software": d.software} for d in self.vulkan]
        return out


def parse_vulkaninfo_summary(text: str) -> list[VulkanDevice]:
    """The devices of ``vulkaninfo --summary`` output: one per ``GPUn:`` block under ``Devices:``."""
    blocks: dict[int, dict[str, str]] = {}
    current: dict[str, str] | None = None
    for line in text.splitlines():
        if m := _GPU_HEADER.match(line):
            current = blocks.setdefault(int(m.group(1)), {})
        elif current is not None and (m := _FIELD.match(line)):
            current[m.group(1)] = m.group(2)
        elif current is not None and line.strip() and not line.startswith((" ", "\t")):
            current = None  # the next section
    devices = []
    for index, f in sorted(blocks.items()):
        if "deviceName" not in f:
            continue
        try:
            vendor = VK_VENDORS.get(int(f.get("vendorID", ""), 16))
        except ValueError:
            vendor = None
        kind = VK_DEVICE_TYPES.get(f.get("deviceType", ""), "other")
        devices.append(VulkanDevice(index, f["deviceName"], kind, vendor, f.get("driverName") or None))
    return devices


def vulkan_devices(timeout_s: float = VULKANINFO_TIMEOUT_S) -> tuple[list[VulkanDevice] | None, str | None]:
    """(devices, note): ``vulkaninfo --summary`` parsed; None when it could not run, [] when it listed none."""
    exe = shutil.which("vulkaninfo")
    if exe is None:
        return None, "vulkaninfo not installed (Debian/Ubuntu: sudo apt install vulkan-tools)"
    try:
        done = subprocess.run([exe, "--summary"], capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.SubprocessError) as e:
        return None, f"vulkaninfo failed: {e}"
    devices = parse_vulkaninfo_summary(done.stdout)
    if not devices:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        return [], f"vulkaninfo listed no device (exit {done.returncode}: {tail[0][:200]})"
    return devices, None


def _nvidia() -> tuple[tuple[nvml.GpuInfo, ...], str | None]:
    try:
        if not nvml.nvml_available():
            return (), f"no NVIDIA GPU/driver (NVML: {nvml.nvml_unavailable_reason()})"
        return tuple(nvml.list_gpus()), None
    except Exception as e:  # noqa: BLE001 - no GPU is a normal answer, whatever NVML says
        return (), f"NVML failed: {e}"


def scan_gpus() -> GpuInventory:
    """Look for GPUs through every source this machine offers. Never raises."""
    nvidia, nvidia_note = _nvidia()
    vulkan, vulkan_note = vulkan_devices()
    apple = platform.system() == "Darwin" and platform.machine() == "arm64"
    return GpuInventory(nvidia=nvidia, nvidia_note=nvidia_note, vulkan=tuple(vulkan or ()), vulkan_note=vulkan_note,
                        vulkan_listed=vulkan is not None, apple_metal=apple)
