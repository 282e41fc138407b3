"""Issue #24: ``--repack`` as in llama-bench, and the guard that finds llama.cpp's AMX crash once and remembers it.

The crash itself only happens on Intel CPUs with AMX (llama.cpp issue #20824). Elsewhere it is shown with a labelled
TEST DOUBLE (engines/amx_crash_double.py, chosen by GGUF_WORKBENCH_TEST_DOUBLE=amx-crash): the real llama.cpp
engine, which says its weights sit in an AMX buffer whenever repacking is on and dies by SIGSEGV at the first
prefill of more than one token, as the real crash does. The last test runs the real thing where the CPU has AMX.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.run.params import PARAM, REPACK_AUTO, PlanError
from app.run.plan import SweepSpec, TestSpec, count_loads, load_sweep_preset
from app.telemetry import repack_guard
from tests.cli_helpers import gguf_bench

pytestmark = [pytest.mark.skipif(os.name != "posix", reason="the crash is a POSIX signal"),
              pytest.mark.cpu_identity]

DOUBLE = {"GGUF_WORKBENCH_TEST_DOUBLE": "amx-crash"}


def _run(monkeypatch: pytest.MonkeyPatch, model: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``gguf-bench run -p 64 -n 16 -r 1`` (the issue's command) on the AMX-crash test double."""
    monkeypatch.setenv("GGUF_WORKBENCH_TEST_DOUBLE", "amx-crash")
    return gguf_bench("run", "-m", str(model), "-p", "64", "-n", "16", "-r", "1", "-t", "1", "--no-predict",
                      "-o", "json", *args)


# --- the parameter ------------------------------------------------------------------------------------
def test_repack_reads_as_llama_bench_and_is_a_load_setting(tmp_path: Path) -> None:
    p = PARAM["repack"]
    assert p.flags == ("--repack",) and p.scope == "load" and p.parse_text("0,1") == [0, 1]
    assert p.parse_text("auto") == [REPACK_AUTO]
    with pytest.raises(PlanError, match="--repack: cannot read '2'"):
        p.parse_text("2")
    spec = SweepSpec(models=["m.gguf"], repack=[0, 1], n_prompt=[16, 32])
    tests = spec.tests()
    assert [t.repack for t in tests] == [0, 0, 1, 1] and count_loads(tests) == 2  # a change reloads the model
    assert tests[0].short_name().endswith("repack0") and "repack" not in tests[2].short_name()
    preset = tmp_path / "r.toml"
    preset.write_text("[sweep]\nrepack = [0]\n")
    assert load_sweep_preset(preset).repack == [0]
    preset.write_text("[sweep]\nrepack = 'yes'\n")
    with pytest.raises(PlanError, match="r.toml: repack value 'yes' is not 0, 1 or auto"):
        load_sweep_preset(preset)
    assert TestSpec.from_dict({"model_path": "m"}).repack == REPACK_AUTO  # tests stored before the setting
    assert TestSpec("m").with_repack_default(0).repack == 0
    assert TestSpec("m", repack=1).with_repack_default(0).repack == 1


# --- the guard, for real on this machine ------------------------------------------------------------------
@pytest.mark.heavy  # the repack probe's child process
def test_the_probe_runs_once_per_machine_and_build_and_is_remembered(tmp_path: Path) -> None:
    path = tmp_path / repack_guard.VERDICT_FILE
    first, probed = repack_guard.ensure_verdict(path)
    assert probed and first.safe is not None, first.detail
    again, probed_again = repack_guard.ensure_verdict(path)
    assert not probed_again and again == first
    assert first.default_repack == (1 if first.safe else 0) == repack_guard.default_repack(path)
    assert first.probe_s is not None and first.probe_s < repack_guard.PROBE_TIMEOUT_S
    stored = json.loads(path.read_text())["verdicts"][first.key]
    assert stored["cpu_model"] and stored["build"].startswith("llama-cpp-python")


@pytest.mark.heavy  # the repack probe's child process
def test_a_probe_that_cannot_decide_is_not_remembered(tmp_path: Path) -> None:
    path = tmp_path / repack_guard.VERDICT_FILE
    verdict, probed = repack_guard.ensure_verdict(path, python=str(tmp_path / "no-such-python"))
    assert probed and verdict.safe is None and verdict.default_repack == 1 and "not checked" in verdict.detail
    assert not path.exists()


# --- the guard against the labelled test double -----------------------------------------------------------
@pytest.mark.heavy  # the real model in a worker
def test_repack_1_on_a_crashing_cpu_gives_one_failed_row_naming_amx_and_the_fix(
        smollm2_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    proc = _run(monkeypatch, smollm2_path, "--repack", "1")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    (row,) = json.loads(proc.stdout)
    assert row["status"] == "failed" and row["repack"] == 1
    assert "SIGSEGV" in row["error"] and "AMX" in row["error"] and "--repack 0" in row["error"]
    assert "#20824" in row["error"]


@pytest.mark.heavy  # the real model in a worker
def test_repack_0_and_1_in_one_sweep_give_one_ok_row_and_one_failed_row(
        smollm2_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    proc = _run(monkeypatch, smollm2_path, "--repack", "0,1")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    rows = {r["repack"]: r for r in json.loads(proc.stdout)}
    assert rows[0]["status"] == "ok" and rows[0]["decode_tps"] > 0 and rows[0]["extra_buffers"] == ""
    assert rows[1]["status"] == "failed" and "AMX" in rows[1]["error"]


@pytest.mark.heavy  # the real model and the CLI in a subprocess
def test_the_default_on_a_crashing_cpu_becomes_repack_0_said_once(
        smollm2_path: Path, monkeypatch: pytest.MonkeyPatch, isolated_data_dir: Path) -> None:
    (isolated_data_dir / repack_guard.VERDICT_FILE).unlink()  # a machine never checked
    monkeypatch.setenv("GGUF_WORKBENCH_TEST_DOUBLE", "amx-crash")
    proc = gguf_bench("run", "-m", str(smollm2_path), "-p", "16,32", "-n", "8", "-r", "1", "-t", "1", "--no-predict",
                      "-o", "json")
    assert proc.returncode == 0, proc.stderr
    assert [r["repack"] for r in json.loads(proc.stdout)] == [0, 0]
    says = [line for line in proc.stderr.splitlines() if "repack 0 on this machine" in line]
    assert len(says) == 1 and "SIGSEGV" in says[0] and "--repack 1 forces it" in says[0], proc.stderr
    verdict = json.loads((isolated_data_dir / repack_guard.VERDICT_FILE).read_text())["verdicts"]
    assert [v["safe"] for v in verdict.values()] == [False]
    # remembered: the next run does not probe again, and an explicit --repack 1 is obeyed (and crashes)
    before = (isolated_data_dir / repack_guard.VERDICT_FILE).stat().st_mtime_ns
    proc = gguf_bench("run", "-m", str(smollm2_path), "-p", "16", "-n", "8", "-r", "1", "-t", "1", "--no-predict",
                      "--repack", "1", "-o", "json")
    assert proc.returncode == 1 and json.loads(proc.stdout)[0]["repack"] == 1
    assert (isolated_data_dir / repack_guard.VERDICT_FILE).stat().st_mtime_ns == before


@pytest.mark.heavy  # the CLI in a subprocess
def test_doctor_and_hw_report_the_verdict(monkeypatch: pytest.MonkeyPatch, isolated_data_dir: Path) -> None:
    (isolated_data_dir / repack_guard.VERDICT_FILE).unlink()
    monkeypatch.setenv("GGUF_WORKBENCH_TEST_DOUBLE", "amx-crash")
    proc = gguf_bench("doctor", "--json")
    extra = json.loads(proc.stdout)["extra_buffers"]
    assert extra["safe"] is False and extra["default_repack"] == 0 and "AMX" in extra["used_by_probe"]
    assert isinstance(extra["types"], list) and "SIGSEGV" in extra["detail"]
    text = gguf_bench("hw", "--no-probe").stdout
    assert "repacked weights: NOT safe" in text and "default: --repack 0" in text
    monkeypatch.delenv("GGUF_WORKBENCH_TEST_DOUBLE")  # the real engine's verdict is kept apart from the double's
    extra = json.loads(gguf_bench("doctor", "--json").stdout)["extra_buffers"]
    assert extra["safe"] is not None
    if not _has_amx():
        assert extra["safe"] is True and extra["default_repack"] == 1


@pytest.mark.heavy  # the real model and a subprocess
def test_self_test_passes_through_the_guard(smollm2_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            isolated_data_dir: Path) -> None:
    (isolated_data_dir / repack_guard.VERDICT_FILE).unlink()
    env = {**os.environ, **DOUBLE, "QT_QPA_PLATFORM": "offscreen"}
    proc = subprocess.run([sys.executable, "-m", "app.gui.main", "--self-test"], capture_output=True, text=True,
                          timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "self-test passed" in proc.stdout + proc.stderr


# --- the real crash, where this machine has AMX -------------------------------------------------------------
def _has_amx() -> bool:
    try:
        return "amx_int8" in Path("/proc/cpuinfo").read_text().split()
    except OSError:
        return False


@pytest.mark.heavy  # the real model, the CLI in a subprocess and the repack probe's child process
@pytest.mark.skipif(not _has_amx(), reason="this CPU has no AMX (amx_int8): the real crash cannot happen here")
def test_on_an_amx_cpu_the_real_engine_follows_the_verdict(smollm2_path: Path, repack_verdict_file: Path) -> None:
    verdict = repack_guard.remembered(repack_verdict_file)
    assert verdict is not None and verdict.safe is not None
    auto = gguf_bench("run", "-m", str(smollm2_path), "-p", "16", "-n", "8", "-r", "1", "-t", "1", "--no-predict",
                      "-o", "json")
    assert auto.returncode == 0 and json.loads(auto.stdout)[0]["repack"] == verdict.default_repack, auto.stderr
    forced = gguf_bench("run", "-m", str(smollm2_path), "-p", "16", "-n", "8", "-r", "1", "-t", "1", "--no-predict",
                        "--repack", "1", "-o", "json")
    (row,) = json.loads(forced.stdout)
    if verdict.safe:
        assert row["status"] == "ok"
    else:
        assert row["status"] == "failed" and "--repack 0" in row["error"] and "AMX" in row["error"]
