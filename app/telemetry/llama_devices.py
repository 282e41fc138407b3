"""The backends and devices the installed llama.cpp can see, asked from ggml's registry in a short child process.

The child is ``python -m engines.ggml_devices --json`` (in a frozen app: the bundle's own executable with
``--ggml-devices``). A GPU driver that crashes or hangs while a backend enumerates its devices then costs a note,
not the CLI or the window. llama.cpp's Vulkan backend skips CPU-type Vulkan devices (llvmpipe) unless
``GGML_VK_VISIBLE_DEVICES`` is set, so when the user has not set it and the build has the Vulkan backend, the
child gets the Vulkan devices the machine has (:func:`vk_visible_devices`); a child that fails with that setting is
asked once more without it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from app.telemetry.gpu_inventory import VulkanDevice
from app.telemetry.llama_build import installed_gpu_backends

REGISTRY_TIMEOUT_S = 30.0
VK_ENV = "GGML_VK_VISIBLE_DEVICES"


@dataclass(frozen=True)
class LlamaDevice:
    """One ggml device: ``type`` is ggml's (CPU, GPU, IGPU, ACCEL); memory in bytes as the backend reports it."""

    name: str
    description: str
    type: str
    backend: str
    memory_free_bytes: int = 0
    memory_total_bytes: int = 0

    @property
    def software(self) -> bool:
        """Mesa's llvmpipe/lavapipe seen through Vulkan: a Vulkan device that computes on the CPU."""
        return "llvmpipe" in self.description.lower() or "lavapipe" in self.description.lower()


@dataclass(frozen=True)
class LlamaDevices:
    """What the child found: backends, devices, the environment it ran with, or why it found nothing."""

    backends: tuple[str, ...] = ()
    devices: tuple[LlamaDevice, ...] = ()
    lib_dir: str | None = None
    vk_visible_devices: str | None = None  # the GGML_VK_VISIBLE_DEVICES the child ran with (None: unset)
    vk_visible_set_here: bool = False  # True when doctor set it (the user had not)
    error: str | None = None

    @property
    def gpu_backends(self) -> list[str]:
        """Backends other than the CPU and its helpers (BLAS, AMX, RPC)."""
        return [b for b in self.backends if b not in ("CPU", "BLAS", "AMX", "RPC")]

    @property
    def gpu_devices(self) -> list[LlamaDevice]:
        """Devices llama.cpp can offload layers to (GPU or integrated GPU types)."""
        return [d for d in self.devices if d.type in ("GPU", "IGPU")]


def registry_command() -> list[str]:
    """The child's command line (a frozen app has no python: its executable takes ``--ggml-devices``)."""
    if getattr(sys, "frozen", False):
        return [sys.executable, "--ggml-devices", "--json"]
    return [sys.executable, "-m", "engines.ggml_devices", "--json"]


def vk_visible_devices(vulkan: Sequence[VulkanDevice] | None) -> str | None:
    """The GGML_VK_VISIBLE_DEVICES for the child: the real GPUs' indices, else every (software) device's; "0"
    when the Vulkan device list is unknown; None when vulkaninfo listed none (an index would be invalid)."""
    if vulkan is None:
        return "0"
    chosen = [d.index for d in vulkan if not d.software] or [d.index for d in vulkan]
    return ",".join(map(str, chosen)) if chosen else None


def parse_registry(payload: dict[str, Any]) -> LlamaDevices:
    """LlamaDevices from the child's JSON (unknown keys ignored)."""
    keys = LlamaDevice.__dataclass_fields__
    devices = tuple(LlamaDevice(**{k: v for k, v in d.items() if k in keys}) for d in payload.get("devices", []))
    return LlamaDevices(backends=tuple(payload.get("backends", [])), devices=devices, lib_dir=payload.get("lib_dir"))


def _ask(command: list[str], env: dict[str, str], timeout_s: float) -> LlamaDevices:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, env=env,
                              check=False)
    except subprocess.TimeoutExpired:
        return LlamaDevices(error=f"the llama.cpp device query did not answer within {timeout_s:g} s")
    except OSError as e:
        return LlamaDevices(error=f"the llama.cpp device query could not start: {e}")
    for line in reversed(done.stdout.splitlines()):  # backends may print their own lines first
        if line.startswith("{"):
            try:
                return parse_registry(json.loads(line))
            except (ValueError, TypeError):
                break
    tail = [ln for ln in done.stderr.strip().splitlines() if ln.strip()][-1:] or ["no output"]
    how = f"exit {done.returncode}" if done.returncode >= 0 else f"killed by signal {-done.returncode}"
    return LlamaDevices(error=f"the llama.cpp device query failed ({how}): {tail[0][:300]}")


def query_llama_devices(vulkan: Sequence[VulkanDevice] | None = None, timeout_s: float = REGISTRY_TIMEOUT_S,
                        command: list[str] | None = None) -> LlamaDevices:
    """Ask ggml's registry in a child process; ``vulkan``: the machine's Vulkan devices (None: unknown);
    ``command``: the child's command line (default :func:`registry_command`).

    Never raises: a crash, hang or missing library becomes ``error``.
    """
    env = dict(os.environ)
    user_vk = env.get(VK_ENV)
    has_vulkan = "Vulkan" in (installed_gpu_backends() or [])
    ours = vk_visible_devices(vulkan) if user_vk is None and has_vulkan else None
    if ours is not None:
        env[VK_ENV] = ours
    command = command or registry_command()
    found = _ask(command, env, timeout_s)
    if found.error and ours is not None:  # e.g. an index the Vulkan backend rejects: ask as llama.cpp would run
        env.pop(VK_ENV)
        found, ours = _ask(command, env, timeout_s), None
    vk = user_vk if user_vk is not None else ours
    return LlamaDevices(found.backends, found.devices, found.lib_dir, vk, ours is not None, found.error)
