"""``gguf-bench doctor`` and the window's hardware facts: what llama.cpp can use, what the machine has, the fix.

Two looks, compared: the backends and devices of the installed llama.cpp (asked from ggml's registry in a child
process, :mod:`app.telemetry.llama_devices`) and the GPUs the machine has (:mod:`app.telemetry.gpu_inventory`:
NVML, vulkaninfo, Apple). When they disagree (an NVIDIA GPU beside a build without CUDA, an AMD or Intel GPU
beside a build without Vulkan, an Apple GPU without Metal) the advice gives the exact command that fixes it.
:func:`advise` is pure; :func:`run_doctor` takes the two looks.
"""

from __future__ import annotations

import shlex
import sys
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

from app.paths import REPO_ROOT
from app.telemetry.gpu_inventory import GpuInventory, VulkanDevice, scan_gpus
from app.telemetry.llama_devices import LlamaDevices, query_llama_devices
from app.telemetry.repack_guard import RepackVerdict, ensure_verdict

INSTALL_SCRIPT = REPO_ROOT / "packaging" / "install-gpu.sh"
VULKAN_VENV_SCRIPT = REPO_ROOT / "packaging" / "build-vulkan-venv.sh"
SOFTWARE_VULKAN_NOTE = ("a software Vulkan device (Mesa's llvmpipe/lavapipe) computes on the CPU: it exercises "
                        "llama.cpp's GPU path (offload, device buffers) but it is not a real GPU and is slow")
#: ggml backend registry names per install route (GGML_CUDA_NAME, GGML_VK_NAME, GGML_METAL_NAME).
ROUTE_BACKENDS = {"cuda": ("CUDA",), "vulkan": ("Vulkan",), "rocm": ("ROCm",), "metal": ("MTL", "Metal")}


class Level(StrEnum):
    OK = "ok"
    INFO = "info"
    FIX = "fix"  # the machine has a GPU this build cannot use: a command fixes it
    ERROR = "error"  # llama.cpp could not be asked


@dataclass(frozen=True)
class Advice:
    level: Level
    text: str
    command: str | None = None  # the exact shell command that fixes it


@dataclass(frozen=True)
class DoctorReport:
    llama: LlamaDevices
    gpus: GpuInventory
    advice: tuple[Advice, ...]
    repack: RepackVerdict | None = None  # the repack crash guard's verdict for this machine and build

    def to_json(self) -> dict[str, Any]:
        llama = asdict(self.llama)
        for d, dev in zip(llama["devices"], self.llama.devices, strict=True):
            d["software"] = dev.software
        return {"llama_cpp": llama, "machine_gpus": self.gpus.to_json(),
                "extra_buffers": extra_buffers_json(self.repack),
                "advice": [{**asdict(a), "level": str(a.level)} for a in self.advice]}


def extra_buffers_json(verdict: RepackVerdict | None) -> dict[str, Any]:
    """The guard's verdict as doctor --json gives it: the types llama.cpp would use and whether they were safe."""
    if verdict is None:
        return {"types": [], "safe": None, "default_repack": 1, "detail": "not checked"}
    return {"types": list(verdict.extra_buffers), "used_by_probe": list(verdict.used_buffers), "safe": verdict.safe,
            "default_repack": verdict.default_repack, "detail": verdict.detail, "checked_at": verdict.checked_at,
            "cpu_model": verdict.cpu_model, "build": verdict.build}


def repack_lines(verdict: RepackVerdict | None) -> list[str]:
    """The guard's verdict in words: extra buffer types, whether repacked weights ran here, the default."""
    if verdict is None:
        return ["  not checked"]
    safe = {True: "safe", False: "NOT safe: crashes llama.cpp here", None: "not checked"}[verdict.safe]
    return [f"  extra buffer types: {', '.join(verdict.extra_buffers) or 'none'} (this build's CPU backend)",
            f"  repacked weights: {safe} ({verdict.detail}; checked {verdict.checked_at or 'never'})",
            f"  default: --repack {verdict.default_repack}" + ("" if verdict.default_repack else
                                                             " (--repack 1 forces repacking)")]


def install_command(route: str, python: str | None = None) -> str:
    """The install-gpu.sh command for ``route`` into this venv (the Python that runs now, unless given)."""
    py = python or sys.executable
    return f"PYTHON={shlex.quote(py)} {shlex.quote(str(INSTALL_SCRIPT))} {route}"


def _has(llama: LlamaDevices, route: str) -> bool:
    return any(b in llama.backends for b in ROUTE_BACKENDS[route])


def _fix(route: str, why: str, python: str | None) -> Advice:
    frozen = " (the packaged app: run it in a source install, then rebuild the app)" if getattr(
        sys, "frozen", False) else ""
    return Advice(Level.FIX, f"{why}: rebuild llama-cpp-python with {route}{frozen}", install_command(route, python))


def _route_advice(llama: LlamaDevices, gpus: GpuInventory, python: str | None) -> list[Advice]:
    """One fix per GPU kind the machine has and the build cannot drive."""
    out = []
    build = "CPU-only build" if not llama.gpu_backends else f"build with {', '.join(llama.gpu_backends)} only"
    vk_usable = _has(llama, "vulkan") and any(not d.software for d in llama.gpu_devices)
    if gpus.nvidia and not _has(llama, "cuda") and not vk_usable:
        names = ", ".join(g.name or "unnamed" for g in gpus.nvidia)
        out.append(_fix("cuda", f"NVIDIA GPU ({names}) but a {build}", python))
    others = [d for d in gpus.vulkan_gpus if d.vendor != "NVIDIA"]
    amd = [d for d in others if d.vendor == "AMD"]
    if others and not _has(llama, "vulkan") and not (amd and len(amd) == len(others) and _has(llama, "rocm")):
        names = ", ".join(d.name for d in others)
        out.append(_fix("vulkan", f"Vulkan GPU ({names}) but a {build} without Vulkan", python))
    if gpus.apple_metal and not _has(llama, "metal"):
        out.append(_fix("metal", f"Apple silicon GPU but a {build} without Metal", python))
    return out


def _device_advice(llama: LlamaDevices, soft_vk: list[VulkanDevice]) -> list[Advice]:
    """Backends without devices, and software Vulkan devices (``soft_vk``: the machine's, from vulkaninfo)."""
    out = []
    for b in llama.gpu_backends:
        if any(d.backend == b for d in llama.devices):
            continue
        if b == "Vulkan" and soft_vk and llama.vk_visible_devices is None:
            indices = ",".join(str(d.index) for d in soft_vk)
            out.append(Advice(Level.INFO, "llama.cpp's Vulkan backend sees no device: it skips software Vulkan "
                                          f"devices ({soft_vk[0].name}) unless GGML_VK_VISIBLE_DEVICES is set",
                              f"export GGML_VK_VISIBLE_DEVICES={indices}"))
        else:
            out.append(Advice(Level.INFO, f"llama.cpp has the {b} backend but it sees no {b} device (is the "
                                          "driver installed and the GPU visible to this user?)"))
    soft = [d for d in llama.gpu_devices if d.software]
    if not soft and soft_vk and not _has(llama, "vulkan"):
        out.append(Advice(Level.INFO, f"{soft_vk[0].name}: {SOFTWARE_VULKAN_NOTE}; to try that path without a GPU, "
                                      "build a Vulkan llama.cpp in a second venv, .venv-vulkan",
                          shlex.quote(str(VULKAN_VENV_SCRIPT))))
    if soft:
        out.append(Advice(Level.INFO, f"{', '.join(d.name for d in soft)}: {SOFTWARE_VULKAN_NOTE}"))
        if llama.vk_visible_set_here:
            out.append(Advice(Level.INFO, f"llama.cpp skips CPU-type Vulkan devices unless GGML_VK_VISIBLE_DEVICES "
                                          f"is set: this query set it to {llama.vk_visible_devices}; set it for runs "
                                          "too", f"export GGML_VK_VISIBLE_DEVICES={llama.vk_visible_devices}"))
    return out


def advise(llama: LlamaDevices, gpus: GpuInventory, python: str | None = None) -> list[Advice]:
    """Compare what llama.cpp can use with what the machine has; ``python``: the venv to fix (default: this one)."""
    if llama.error:
        return [Advice(Level.ERROR, f"llama.cpp could not be asked: {llama.error}")]
    soft_vk = [d for d in gpus.vulkan if d.software]
    out = _route_advice(llama, gpus, python) + _device_advice(llama, soft_vk)
    if not any(a.level is Level.FIX for a in out):
        real = [d for d in llama.gpu_devices if not d.software]
        text = (f"llama.cpp can offload to {', '.join(d.name for d in real)}" if real
                else "no GPU on this machine that llama.cpp could use: the CPU build is the right one"
                if not llama.gpu_backends else "no GPU device that llama.cpp can use: it runs on the CPU")
        if not real and llama.gpu_devices:
            text = "no real GPU on this machine; the software Vulkan device is for trying the GPU path"
        out.insert(0, Advice(Level.OK, text))
    return out


def repack_advice(verdict: RepackVerdict | None) -> list[Advice]:
    """A finding when repacked weights crash llama.cpp here (runs already default to --repack 0)."""
    if verdict is None or verdict.safe is not False:
        return []
    return [Advice(Level.INFO, verdict.notice)]


def run_doctor(python: str | None = None) -> DoctorReport:
    """Take the looks (seconds: vulkaninfo, child processes, the repack probe once) and compare them. Never raises."""
    gpus = scan_gpus()
    llama = query_llama_devices(list(gpus.vulkan) if gpus.vulkan_listed else None)
    verdict, _probed = ensure_verdict()
    return DoctorReport(llama, gpus, tuple(advise(llama, gpus, python) + repack_advice(verdict)), verdict)


def _gib(n_bytes: int | None) -> str:
    return f"{n_bytes / 2**30:.1f} GiB" if n_bytes else "memory n/a"


def llama_lines(llama: LlamaDevices) -> list[str]:
    """What llama.cpp was built with and sees."""
    if llama.error:
        return [f"  not available: {llama.error}"]
    lines = [f"  backends: {', '.join(llama.backends) or 'none'}"]
    for d in llama.devices:
        soft = "  ← software Vulkan (CPU), not a real GPU" if d.software else ""
        lines.append(f"  device {d.name} [{d.backend}, {d.type}]: {d.description} ({_gib(d.memory_total_bytes)}){soft}")
    if llama.vk_visible_devices is not None:
        who = "set for this query" if llama.vk_visible_set_here else "from your environment"
        lines.append(f"  GGML_VK_VISIBLE_DEVICES={llama.vk_visible_devices} ({who})")
    return lines


def gpu_lines(gpus: GpuInventory) -> list[str]:
    """What GPUs the machine has, per source."""
    lines = [f"  NVIDIA (NVML): {g.name or 'unnamed'} ({_gib(g.vram_total_bytes)}, driver {g.driver_version})"
             for g in gpus.nvidia] or [f"  NVIDIA (NVML): none ({gpus.nvidia_note})"]
    lines += [f"  Vulkan: GPU{d.index} {d.name} ({d.kind}{', ' + d.vendor if d.vendor else ''})"
              + ("  ← software, not a real GPU" if d.software else "") for d in gpus.vulkan]
    if not gpus.vulkan:
        lines.append(f"  Vulkan: none ({gpus.vulkan_note or 'no device'})")
    lines.append(f"  Apple: {'Metal GPU (' + gpus.machine + ')' if gpus.apple_metal else 'no (not macOS on arm64)'}")
    return lines


def advice_lines(advice: tuple[Advice, ...] | list[Advice]) -> list[str]:
    """Each finding, with its command on the next line."""
    lines = []
    for a in advice:
        lines.append(f"  [{a.level}] {a.text}")
        if a.command:
            lines.append(f"      {a.command}")
    return lines


def report_text(report: DoctorReport) -> str:
    """The plain-text report of ``gguf-bench doctor``."""
    return "\n".join(["llama.cpp (asked from its ggml backend registry)", *llama_lines(report.llama),
                      "Weight repacking (llama.cpp's extra buffer types, --repack)", *repack_lines(report.repack),
                      "GPUs on this machine", *gpu_lines(report.gpus), "Verdict", *advice_lines(report.advice)])


def short_summary(report: DoctorReport) -> str:
    """One line for the window: llama.cpp's backends and offload devices, the machine's GPUs."""
    llama = report.llama
    if llama.error:
        built = "llama.cpp: not asked (see tooltip)"
    else:
        devs = [d.name + (" (software)" if d.software else "") for d in llama.gpu_devices]
        built = f"llama.cpp: {', '.join(llama.backends) or 'no backend'}" + (f" → {', '.join(devs)}" if devs else "")
    gpus = [g.name or "NVIDIA GPU" for g in report.gpus.nvidia]
    gpus += [d.name for d in report.gpus.vulkan_gpus if d.vendor != "NVIDIA"]
    gpus += ["Apple GPU (Metal)"] if report.gpus.apple_metal else []
    soft = [d for d in report.gpus.vulkan if d.software]
    seen = ", ".join(gpus) or ("none (llvmpipe is software Vulkan, not a GPU)" if soft else "none")
    return f"{built} · GPUs: {seen}"
