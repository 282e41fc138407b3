"""benchmarks/public_gpu_variants.py runs, and its shipped-form line agrees with the leave-one-GPU-out error of the
shipped form on the table it reads (llama_bench_public.toml, its default; the shipped model also learns from
llama_bench_public_2025.toml)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from app.paths import HARDWARE_PROFILES_DIR, REPO_ROOT
from app.predict.machine_fit.workload import PHASES
from app.predict.profiles import load_profiles
from app.predict.public.arch_fit import summarize
from app.predict.public.data import load_reference
from app.predict.public.fit import PublicGpuModel

pytestmark = pytest.mark.heavy  # a subprocess


def test_variants_report_starts_from_the_shipped_form() -> None:
    proc = subprocess.run([sys.executable, "benchmarks/public_gpu_variants.py"], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    model = PublicGpuModel(load_reference(), load_profiles([HARDWARE_PROFILES_DIR]))
    for phase in PHASES:
        s = summarize(h for h in model.held_out if h.phase == phase)
        assert f"| shipped form | {phase} | {s.median:.1%} | {s.worst:.1%} |" in proc.stdout
    assert "| Apple M1 Max | Llama 3 8B Q4_K_M | 35.7 | 41% | 26.0 |" in proc.stdout  # share of spec bandwidth
    assert proc.stdout.count("| Apple grouped per generation (M1 / M2 / M3) |") == 2
