"""Issue #45: the tests that read this CPU's name, flags or repack verdict (marked ``cpu_identity``) pass as the other
kind of CPU sees them too: an AMD EPYC machine runs them once more as an Intel Xeon with AMX whose repacked weights
crash llama.cpp (its /proc/cpuinfo, tests/data/cpuinfo/, and the AMX crash double), and a machine with AMX runs them
as the AMD EPYC. What llama.cpp itself computes is the real CPU's either way (app/telemetry/cpu_identity.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.telemetry.cpu_features import cpuinfo_flags
from app.telemetry.cpu_identity import CPUINFO_ENV, PROC_CPUINFO, read_cpuinfo
from app.telemetry.repack_guard import TEST_DOUBLE_ENV

pytestmark = pytest.mark.heavy  # a subprocess

REPO = Path(__file__).resolve().parents[1]
CPUINFO = REPO / "tests" / "data" / "cpuinfo"
#: The nested run takes about a minute on two cores; far past that something hangs.
TIMEOUT_S = 900


def other_identity() -> tuple[Path, dict[str, str]]:
    """(the other kind's cpuinfo, the environment that goes with it) for the CPU this runs on."""
    if "amx_int8" in cpuinfo_flags(read_cpuinfo(PROC_CPUINFO) or ""):
        return CPUINFO / "amd-epyc.txt", {}
    return CPUINFO / "intel-xeon-amx.txt", {TEST_DOUBLE_ENV: "amx-crash"}  # the crash AMX has, which AMD cannot


def test_the_cpu_dependent_tests_pass_as_the_other_kind_of_cpu() -> None:
    cpuinfo, extra = other_identity()
    env = {k: v for k, v in os.environ.items() if k not in (CPUINFO_ENV, TEST_DOUBLE_ENV)}
    env |= {CPUINFO_ENV: str(cpuinfo), "QT_QPA_PLATFORM": "offscreen", **extra}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "cpu_identity",
                           "tests"], cwd=REPO, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    tail = (done.stdout + done.stderr)[-4000:]
    assert done.returncode == 0, f"as {cpuinfo.name}:\n{tail}"
    assert " passed" in tail and " failed" not in tail, tail
