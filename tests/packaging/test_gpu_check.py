"""benchmarks/gpu_check.sh and packaging/build-cuda-carry.sh in their dry modes (this machine has no GPU), and the
report of a gpu_check folder. The carries here are PLACEHOLDERS (empty files with the carry's names): the dry run
checks that the files exist, never loads them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from app.paths import REPO_ROOT

GPU_CHECK = REPO_ROOT / "benchmarks" / "gpu_check.sh"
CARRY_BUILD = REPO_ROOT / "packaging" / "build-cuda-carry.sh"
STEPS = ["cuda-libs", "doctor", "nvidia-smi", "gpu-tests", "ngl-sweep", "ctx-sweep", "fidelity", "report"]
sys.path.insert(0, str(REPO_ROOT / "benchmarks"))
from gpu_check_report import summary  # noqa: E402


def dry_check(out: Path, carry: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GPU_CARRY": str(carry), "PYTHON": sys.executable}
    return subprocess.run(["bash", str(GPU_CHECK), *args, str(out)], capture_output=True, text=True, timeout=60,
                          env=env)


def placeholder_carry(carry: Path) -> Path:
    for rel in ("llama_cpp/__init__.py", "llama_cpp/lib/libggml-cuda.so", "bin/llama-bench", "lib/libcudart.so.13"):
        (carry / rel).parent.mkdir(parents=True, exist_ok=True)
        (carry / rel).touch()
    (carry / "bin/llama-bench").chmod(0o755)
    return carry


def plan(out: Path) -> list[list[str]]:
    return [line.split("\t") for line in (out / "plan.txt").read_text().splitlines()]


@pytest.mark.heavy  # a subprocess
def test_dry_run_without_a_carry_plans_every_step_and_lists_what_is_missing(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = dry_check(out, tmp_path / "no-carry", "--dry-run")
    assert done.returncode == 3, done.stdout + done.stderr
    steps = plan(out)
    assert [s[0] for s in steps] == STEPS
    assert sum(int(s[1].removesuffix(" s")) for s in steps) <= 570  # inside the 10 minutes, with room to spare
    status = [line.split("\t") for line in (out / "status.tsv").read_text().splitlines()]
    assert [(s[0], s[1]) for s in status] == [(name, "planned") for name in STEPS]
    assert (out / "logs").is_dir() and (out / "results").is_dir() and not list((out / "logs").iterdir())
    missing = (out / "missing.txt").read_text()
    assert "no-carry/llama_cpp/lib/libggml-cuda.so" in missing and "the CUDA llama_cpp package" in missing
    commands = dict((s[0], s[2]) for s in steps)
    assert "-ngl 0,1,16,31,99" in commands["ngl-sweep"] and "-d 0,2048,6144" in commands["ctx-sweep"]
    assert "--device-mem-limit 0,200" in commands["ctx-sweep"]
    assert commands["doctor"].endswith(f"doctor --json > {out}/results/doctor.json")
    assert "-m gpu" in commands["gpu-tests"] and "--llama-bench" not in commands["fidelity"]
    assert (out / "env.txt").read_text().startswith(f"PYTHONPATH={tmp_path}/no-carry")


@pytest.mark.heavy  # a subprocess
def test_dry_run_with_a_carry_is_ready(tmp_path: Path) -> None:
    carry = placeholder_carry(tmp_path / "carry")
    out = tmp_path / "out"
    done = subprocess.run(["bash", str(GPU_CHECK), str(out)], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "GPU_CARRY": str(carry), "PYTHON": sys.executable, "GPU_CHECK_DRY": "1"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert (out / "missing.txt").read_text() == ""
    commands = dict((s[0], s[2]) for s in plan(out))
    assert f"--llama-bench {carry}/bin/llama-bench" in commands["fidelity"]
    env = (out / "env.txt").read_text()
    assert f"LD_LIBRARY_PATH={carry}/llama_cpp/lib:{carry}/lib" in env


@pytest.mark.heavy  # a subprocess
def test_a_carried_wheel_is_unpacked_offline(tmp_path: Path) -> None:
    carry = tmp_path / "carry"
    carry.mkdir()
    with zipfile.ZipFile(carry / "llama_cpp_python-0.3.36-cp311-cp311-linux_x86_64.whl", "w") as whl:
        whl.writestr("llama_cpp/__init__.py", "")
        whl.writestr("llama_cpp/lib/libggml-cuda.so", "")
    out = tmp_path / "out"
    done = dry_check(out, carry, "--dry-run")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (out / "overlay/llama_cpp/lib/libggml-cuda.so").is_file()
    assert (out / "env.txt").read_text().startswith(f"PYTHONPATH={out}/overlay")


@pytest.mark.heavy  # a worker and a subprocess
def test_build_cuda_carry_dry_run(tmp_path: Path) -> None:
    env = {**os.environ, "GGUF_CUDA_WORK": str(tmp_path / "work"), "CUDA_ARCH": "89"}
    done = subprocess.run(["bash", str(CARRY_BUILD), "--dry-run", str(tmp_path / "carry")], capture_output=True,
                          text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "nvidia-cuda-nvcc nvidia-nvvm nvidia-cuda-runtime nvidia-cuda-cccl nvidia-cublas" in out
    assert "-DGGML_CUDA=on -DGGML_CUDA_NO_VMM=ON -DCMAKE_CUDA_ARCHITECTURES=89" in out
    assert "libcublas.so -> libcublas.so.13" in out and "--target llama-bench" in out
    assert not (tmp_path / "work").exists() and not (tmp_path / "carry").exists()  # a dry run changes nothing
    bad = subprocess.run(["bash", str(CARRY_BUILD), "--dry-run"], capture_output=True, text=True, timeout=60,
                         env={**env, "CUDA_ARCH": "sm_90"})
    assert bad.returncode == 2 and "CUDA_ARCH must be numbers" in bad.stderr


def test_report_of_a_folder(tmp_path: Path) -> None:
    """Rows written out by hand (HAND-WRITTEN, in gguf-bench's JSON columns), as a CUDA run would give them."""
    (tmp_path / "results").mkdir()
    (tmp_path / "status.tsv").write_text("doctor\tok\t3\tlogs/doctor.log\nfidelity\ttimeout\t120\tlogs/fidelity.log\n")
    row = {"n_gpu_layers": 99, "n_gpu_layers_effective": 31, "backends": "CUDA", "n_depth": 0, "n_ctx": 768,
           "status": "ok", "prefill_tps": 30000.0, "decode_tps": 900.0, "vram_delta_bytes": 200 * 2**20,
           "pred_mem_bytes": 160 * 2**20, "power_avg_w_decode": 150.0, "energy_j_per_token": 0.1667}
    (tmp_path / "results" / "ngl_sweep.json").write_text(json.dumps([row]))
    text = summary(tmp_path)
    assert ("| 99 | 31 | CUDA | 0 | 768 | n/a | ok | 30000.0 | 900.0 | 200.0 | 160.0 | 1.25 | 150.0 | 0.1667 |  |"
            in text)
    assert "| fidelity | timeout | 120 | logs/fidelity.log |" in text
    assert "## Context sweep\n(no rows: see the step's log)" in text and "- nvidia-smi: no output" in text
    assert "(no doctor report)" in text and "## Fidelity against llama-bench (same -ngl)\n(not run)" in text
