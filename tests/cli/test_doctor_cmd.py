"""``gguf-bench doctor`` run for real on this machine (the installed llama.cpp, its real child process)."""

from __future__ import annotations

import json

import pytest

from app.telemetry.llama_build import installed_gpu_backends
from tests.cli_helpers import gguf_bench

pytestmark = pytest.mark.heavy  # the CLI in a subprocess


def test_doctor_json_on_this_machine() -> None:
    done = gguf_bench("doctor", "--json", timeout=120)
    report = json.loads(done.stdout)
    llama, gpus, advice = report["llama_cpp"], report["machine_gpus"], report["advice"]
    assert llama["error"] is None and "CPU" in llama["backends"]
    assert any(d["type"] == "CPU" for d in llama["devices"])
    assert {"nvidia", "vulkan", "apple_metal"} <= gpus.keys()
    assert all(set(a) == {"level", "text", "command"} for a in advice)
    fixes = [a for a in advice if a["level"] == "fix"]
    assert done.returncode == (1 if fixes else 0), done.stderr
    if installed_gpu_backends() == [] and not gpus["nvidia"] and not any(not d["software"] for d in gpus["vulkan"]):
        # this machine: a CPU build, no NVIDIA GPU, at most a software Vulkan device -> nothing to fix
        assert llama["backends"] == ["CPU"] and all(d["type"] == "CPU" for d in llama["devices"])
        assert fixes == [] and advice[0]["level"] == "ok"
    for d in gpus["vulkan"]:
        assert d["software"] == (d["kind"] == "cpu")


def test_doctor_text_names_the_three_parts() -> None:
    done = gguf_bench("doctor", timeout=120)
    out = done.stdout
    assert out.startswith("llama.cpp (asked from its ggml backend registry)\n  backends: ")
    assert "\nGPUs on this machine\n  NVIDIA (NVML): " in out and "\nVerdict\n  [" in out
    if "llvmpipe" in out:
        assert "not a real GPU" in out
