"""``gguf-workbench --self-test`` on the source install (a real subprocess, the real worker and model), and the
frozen app's worker: the client starts the app's own executable with ``--worker``, the entry point dispatches."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.paths import REPO_ROOT
from app.run import client
from app.run.plan import SweepSpec
from app.run.session import SweepSession

ENTRY = REPO_ROOT / "packaging" / "gguf_workbench_entry.py"


def headless_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    env["PYTHONPATH"] = str(REPO_ROOT)
    return env


@pytest.mark.heavy  # the real model and a subprocess
def test_self_test_runs_the_default_model_and_prints_the_figures(smollm2_path: Path, isolated_data_dir: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "app.gui.main", "--self-test"], capture_output=True, text=True,
                         timeout=120, env=headless_env(), cwd=REPO_ROOT)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == f"self-test: {smollm2_path.name}, p16 n8 r1 t1"
    assert lines[1].startswith("backend: CPU")  # this suite's llama.cpp is the CPU build
    for figure in ("TTFT", "ms", "prefill", "decode", "tok/s"):
        assert figure in lines[2]
    assert "n/a" not in lines[2]
    assert lines[3].startswith("self-test passed in")
    assert not list(isolated_data_dir.glob("*.sqlite*")), "a self-test must not write to the results store"


@pytest.mark.heavy  # a subprocess
def test_self_test_without_a_readable_model_fails_in_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "missing.gguf"
    out = subprocess.run([sys.executable, "-m", "app.gui.main", "--self-test", "-m", str(missing)],
                         capture_output=True, text=True, timeout=60, env=headless_env(), cwd=REPO_ROOT)
    assert out.returncode == 2
    assert out.stdout == ""
    assert out.stderr.count("\n") == 1 and out.stderr.startswith("gguf-workbench: self-test failed:")
    assert str(missing) in out.stderr


def test_worker_command_is_python_in_a_source_install_and_the_app_itself_when_frozen(
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert client.worker_command(7) == [sys.executable, "-m", "app.worker.main", "--event-fd", "7"]
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setattr(sys, "executable", "/opt/gguf-workbench/gguf-workbench")
    assert client.worker_command(7) == ["/opt/gguf-workbench/gguf-workbench", "--worker", "--event-fd", "7"]


@pytest.mark.heavy  # the real model in a worker
def test_a_frozen_app_runs_its_worker_through_the_entry_point(smollm2_path: Path, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A stand-in for the frozen executable (the entry script under this Python) runs a real test as the worker."""
    app_exe = tmp_path / "gguf-workbench"
    marker = tmp_path / "started-as"
    app_exe.write_text(f'#!/bin/sh\necho "$@" > "{marker}"\nexec "{sys.executable}" "{ENTRY}" "$@"\n')
    app_exe.chmod(0o755)
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setattr(sys, "executable", str(app_exe))
    tests = SweepSpec(models=[str(smollm2_path)], n_prompt=[8], n_gen=[4], repetitions=1, n_threads=[1]).tests()
    outcome = SweepSession(tests, machine={}, token_ticks=False).run()
    assert marker.read_text().split()[:2] == ["--worker", "--event-fd"]
    assert [r.status for r in outcome.rows] == ["ok"], outcome.rows
    assert outcome.rows[0].n_gen == 4 and (outcome.rows[0].decode_tps or 0) > 0
