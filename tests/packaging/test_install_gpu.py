"""packaging/install-gpu.sh --dry-run: the pinned version, each route's CMake flag, and what is missing, by name."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from app.paths import REPO_ROOT

pytestmark = pytest.mark.heavy  # a subprocess

SCRIPT = REPO_ROOT / "packaging" / "install-gpu.sh"
#: glslc installed in the base system folders the script's PATH keeps (packaging/build-vulkan-venv.sh installs it)
SYSTEM_GLSLC = shutil.which("glslc", path="/usr/bin:/bin") is not None
PINNED = re.search(r'"llama-cpp-python==([^"]+)"', (REPO_ROOT / "pyproject.toml").read_text()).group(1)  # type: ignore[union-attr]


def run(args: list[str], bin_dir: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """The script with a PATH of only ``bin_dir`` and the base system folders (no /usr/local: a real nvcc)."""
    base = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(bin_dir), "PYTHON": str(bin_dir / "python")}
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=30, env={**base, **env})


def fake_tool(bin_dir: Path, name: str) -> None:
    tool = bin_dir / name
    tool.write_text("#!/bin/sh\nexit 0\n")
    tool.chmod(0o755)


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    fake_tool(tmp_path, "python")  # stands for the venv's Python: a dry run never calls it
    return tmp_path


@pytest.mark.parametrize("route,flag,tools", [
    ("cuda", "-DGGML_CUDA=on", ["nvcc"]),
    ("rocm", "-DGGML_HIP=on", ["hipcc"]),
])
def test_dry_run_prints_the_pinned_rebuild_with_the_route_flag(bin_dir: Path, route: str, flag: str,
                                                               tools: list[str]) -> None:
    for t in tools:
        fake_tool(bin_dir, t)
    out = run([route, "--dry-run"], bin_dir)
    assert out.returncode == 0, out.stderr
    assert (f'would run: CMAKE_ARGS="{flag}" {bin_dir}/python -m pip install llama-cpp-python=={PINNED} '
            "--force-reinstall --no-cache-dir --no-deps") in out.stdout
    assert "dry run:" in out.stdout and out.stderr == ""


def test_vulkan_needs_new_enough_headers_and_glslc(bin_dir: Path, tmp_path: Path) -> None:
    inc = tmp_path / "include"
    (inc / "vulkan").mkdir(parents=True)
    (inc / "vulkan" / "vulkan.hpp").write_text("// Vulkan 1.3.239\n")
    old = run(["vulkan", "--dry-run"], bin_dir, VULKAN_INCLUDE_DIR=str(inc))
    assert old.returncode == 3
    assert "too old" in old.stderr and ("glslc" in old.stderr) != SYSTEM_GLSLC
    (inc / "vulkan" / "vulkan_structs.hpp").write_text("struct LayerSettingEXT {};\n")
    spirv = tmp_path / "share" / "cmake" / "SPIRV-Headers"  # unpacked beside the headers, as Debian lays it out
    spirv.mkdir(parents=True)
    (spirv / "SPIRV-HeadersConfig.cmake").write_text("# SPIRV-Headers\n")
    fake_tool(bin_dir, "glslc")
    ok = run(["vulkan", "--dry-run"], bin_dir, VULKAN_INCLUDE_DIR=str(inc))
    assert ok.returncode == 0, ok.stderr
    assert f'CMAKE_ARGS="-DGGML_VULKAN=on -DVulkan_INCLUDE_DIR={inc} -DCMAKE_PREFIX_PATH={tmp_path}"' in ok.stdout


@pytest.mark.parametrize("route,names", [
    ("cuda", ["nvcc", "CUDA toolkit"]),
    ("vulkan", ["Vulkan headers", "glslc"]),
    ("metal", ["macOS"] if os.uname().sysname != "Darwin" else []),
    ("rocm", ["hipcc"]),
])
def test_says_exactly_what_is_missing_and_builds_nothing(bin_dir: Path, route: str, names: list[str]) -> None:
    if not names:
        pytest.skip("on macOS the Metal check depends on this machine's Xcode tools")
    out = run([route, "--dry-run"], bin_dir, VULKAN_INCLUDE_DIR=str(bin_dir / "none"))
    assert out.returncode == 3
    assert f"cannot build the {route} backend; missing:" in out.stderr
    for name in names:
        assert (name in out.stderr) != (name == "glslc" and SYSTEM_GLSLC), name


def test_a_missing_venv_python_is_named(tmp_path: Path) -> None:
    fake_tool(tmp_path, "nvcc")
    out = run(["cuda", "--dry-run"], tmp_path)  # PYTHON points at tmp_path/python, which does not exist
    assert out.returncode == 3 and f"{tmp_path}/python" in out.stderr


@pytest.mark.parametrize("args", [[], ["opencl"], ["cuda", "--now"]])
def test_usage_errors_exit_2(bin_dir: Path, args: list[str]) -> None:
    out = run(args, bin_dir)
    assert out.returncode == 2 and "usage: packaging/install-gpu.sh" in out.stderr


def test_nvcc_is_found_in_cuda_home_when_not_on_path(bin_dir: Path, tmp_path: Path) -> None:
    cuda_bin = tmp_path / "cuda" / "bin"
    cuda_bin.mkdir(parents=True)
    fake_tool(cuda_bin, "nvcc")
    out = run(["cuda", "--dry-run"], bin_dir, CUDA_HOME=str(cuda_bin.parent))
    assert out.returncode == 0, out.stderr
    assert f"found nvcc: {cuda_bin}/nvcc" in out.stdout
