"""Host facts and process probe, on this real machine with real psutil."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from app.telemetry import host


def test_machine_facts_are_sane() -> None:
    facts = host.machine_facts()
    assert isinstance(facts["cpu_model"], str) and facts["cpu_model"]
    assert facts["cpu_threads"] >= 1
    if facts["cpu_cores_physical"] is not None:
        assert 1 <= facts["cpu_cores_physical"] <= facts["cpu_threads"]
    assert 1 <= facts["cpu_threads_usable"] <= facts["cpu_threads"]
    assert facts["ram_total_bytes"] > 512 * 2**20
    assert facts["os"] == platform.platform()
    assert facts["python"] == platform.python_version()


def test_cpu_model_read_from_proc_cpuinfo_format(tmp_path: Path) -> None:
    x86 = tmp_path / "x86"
    x86.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel\t\t: 97\nmodel name\t: AMD Ryzen 9 7950X\n")
    assert host._cpu_model_linux(x86) == "AMD Ryzen 9 7950X"
    arm = tmp_path / "arm"
    arm.write_text("processor\t: 0\nBogoMIPS\t: 108.00\n\nHardware\t: BCM2835\nModel\t\t: Raspberry Pi 4 Model B\n")
    assert host._cpu_model_linux(arm) == "BCM2835"
    assert host._cpu_model_linux(tmp_path / "missing") is None


def test_process_probe_reads_this_process() -> None:
    probe = host.ProcessProbe(os.getpid())
    sum(i * i for i in range(200_000))  # some CPU time to see
    reading = probe.read()
    assert set(reading) == set(host.HOST_SAMPLE_KEYS)
    assert reading["rss_bytes"] > 0
    assert reading["cpu_pct"] >= 0
    assert 0 < reading["sys_ram_used_bytes"] <= reading["sys_ram_total_bytes"]


def test_process_probe_of_system_only() -> None:
    reading = host.ProcessProbe(None).read()
    assert reading["rss_bytes"] is None and reading["cpu_pct"] is None
    assert reading["sys_ram_total_bytes"] > 0


@pytest.mark.heavy  # a subprocess
def test_process_probe_when_process_is_gone() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        probe = host.ProcessProbe(child.pid)
        assert probe.read()["rss_bytes"] > 0
    finally:
        child.kill()
        child.wait()
    reading = probe.read()  # must not raise
    assert reading["rss_bytes"] is None and reading["cpu_pct"] is None
    assert reading["sys_ram_total_bytes"] > 0
    gone = host.ProcessProbe(child.pid).read()
    assert gone["rss_bytes"] is None
