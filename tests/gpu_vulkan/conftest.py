"""Tests on a real Vulkan device (Mesa's lavapipe where there is no GPU): they run only when this interpreter's
llama.cpp was built with Vulkan and sees a device, and are skipped with the reason otherwise.

Build such an interpreter with ``packaging/build-vulkan-venv.sh`` (it makes ``.venv-vulkan``), then run
``GGML_VK_VISIBLE_DEVICES=0 .venv-vulkan/bin/python -m pytest -m vulkan``. llama.cpp skips CPU-type Vulkan devices
(lavapipe) unless ``GGML_VK_VISIBLE_DEVICES`` is set; these tests set it to 0 when it is not set.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

VISIBLE = "GGML_VK_VISIBLE_DEVICES"
_PROBE = "import llama_cpp as lc; lc.llama_backend_init(); print('gpu' if lc.llama_supports_gpu_offload() else 'none')"


@functools.cache
def skip_reason() -> str | None:
    """Why the Vulkan tests cannot run here, or None when they can (asked once, in a child process)."""
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or spec.origin is None:
        return "llama-cpp-python is not installed"
    lib_dir = Path(os.environ.get("LLAMA_CPP_LIB_PATH") or Path(spec.origin).parent / "lib")  # llama_cpp's override
    if not any(lib_dir.glob("libggml-vulkan*")):
        return "this llama.cpp has no Vulkan backend (build one with packaging/build-vulkan-venv.sh)"
    env = {**os.environ, VISIBLE: os.environ.get(VISIBLE, "0")}
    try:
        out = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return "asking llama.cpp for its Vulkan devices took over 60 s"
    if out.stdout.strip().splitlines()[-1:] != ["gpu"]:
        return "llama.cpp's Vulkan backend sees no device (install mesa-vulkan-drivers for lavapipe)"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    mine = [item for item in items if here in Path(str(item.fspath)).parents]  # each module is marked vulkan
    if mine and (reason := skip_reason()) is not None:
        for item in mine:
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(autouse=True, scope="session")
def vulkan_devices_visible() -> Iterator[None]:
    """Let llama.cpp use a CPU-type Vulkan device (lavapipe) in the workers these tests start. Session-scoped: a
    module-scoped sweep fixture is set up before any function-scoped one, so a per-test setting came too late
    for it (its workers saw no Vulkan device unless the variable was exported)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(VISIBLE, os.environ.get(VISIBLE, "0"))
        yield
