"""Issue #44 point 5: a later run removes what a killed one left: ``quantize``'s ``.part`` files (SIGKILL leaves them)
and ``quality``'s temporary folder (49 MB once), when the process that made them is gone; a run still going keeps
its own."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from app.paths import REPO_ROOT
from tests.process_helpers import gone, wait_for, workers_of


def _dead_pid() -> int:
    from app.paths import process_alive

    for pid in range(4_000_000, 4_100_000, 7919):
        if not process_alive(pid):
            return pid
    pytest.skip("no free process id found")


def test_parts_of_gone_processes_are_removed_and_live_ones_kept(tmp_path: Path) -> None:
    from app.quantize.plan import remove_stale_parts

    dead = tmp_path / f"m.Q8_0.gguf.{_dead_pid()}-0123abcd.part"
    mine = tmp_path / f"m.Q6_K.gguf.{os.getpid()}-0123abcd.part"
    init = tmp_path / "m.Q4_0.gguf.1-0123abcd.part"  # process 1 is alive and started before the file was written
    reused = tmp_path / "m.Q2_K.gguf.1-89abcdef.part"  # written before process 1 started: its id was reused
    old_style = tmp_path / "m.Q3_K_M.gguf.part"
    other = tmp_path / "notes.part"
    for p in (dead, mine, init, reused, old_style, other):
        p.write_bytes(b"half a model")
    os.utime(reused, (0, 0))
    os.utime(old_style, (time.time() - 2 * 86400,) * 2)
    removed = remove_stale_parts(tmp_path)
    assert sorted(removed) == sorted([dead, reused, old_style])
    assert mine.exists() and init.exists() and other.exists()


def test_quality_folders_of_gone_processes_are_removed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from app.paths import remove_leftovers
    from app.quality.session import OLD_TMP_NAME, TMP_NAME, TMP_PREFIX

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = tmp_path / f"{TMP_PREFIX}{_dead_pid()}-abcd1234"
    live = tmp_path / f"{TMP_PREFIX}{os.getpid()}-abcd1234"
    young_old_style = tmp_path / f"{TMP_PREFIX}k2j4_x9a"
    for d in (dead, live, young_old_style):
        d.mkdir()
        (d / "reference-logp.f16").write_bytes(b"\0" * 1024)
    removed = remove_leftovers(tmp_path, TMP_NAME, unowned=OLD_TMP_NAME)
    assert removed == [dead] and live.is_dir() and young_old_style.is_dir()
    assert re.match(TMP_NAME, f"{TMP_PREFIX}{os.getpid()}-x") and not OLD_TMP_NAME.match(f"{TMP_PREFIX}12-x")


def _start(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "app.cli.main", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO_ROOT), **(env or {})})


def _kill_parent_and_check_its_worker_ends(proc: subprocess.Popen[str]) -> None:
    """Issue #54 item 7: SIGKILL the parent; its worker must end with it (it stayed alive, reparented to PID 1, and
    went on working for minutes)."""
    workers = workers_of(proc.pid) if sys.platform.startswith("linux") else []
    os.kill(proc.pid, signal.SIGKILL)
    if not sys.platform.startswith("linux"):
        return
    assert workers, "no worker found under the parent"
    assert wait_for(lambda: all(gone(w) for w in workers), 3), f"the worker {workers} outlived its parent"


@pytest.mark.heavy  # the quantizer in a worker, killed, then run again
def test_a_quantize_killed_with_sigkill_leaves_a_part_the_next_run_removes(tmp_path: Path, smollm2_path: Path) -> None:
    out = tmp_path / "out"
    proc = _start("quantize", "-m", str(smollm2_path), "--allow-requantize", "--types", "q8_0", "--out", str(out))
    try:
        assert wait_for(lambda: list(out.glob("*.part")), 120), "no .part appeared"
        _kill_parent_and_check_its_worker_ends(proc)  # no chance to clean up
    finally:
        proc.kill()
        proc.communicate()
    assert wait_for(lambda: not any(p.stat().st_mtime > time.time() - 1 for p in out.glob("*.part")), 30)
    left = list(out.glob("*.part"))
    assert left, "the killed run left nothing to clean up"
    again = subprocess.run([sys.executable, "-m", "app.cli.main", "quantize", "-m", str(smollm2_path),
                            "--allow-requantize", "--types", "q8_0", "--force", "--out", str(out)],
                           capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
                           timeout=300)
    assert again.returncode == 0, again.stderr
    assert not list(out.glob("*.part")) and "removed 1 .part file" in again.stderr, again.stderr


@pytest.mark.heavy  # a quality run in a worker, killed, then run again
def test_a_quality_run_killed_with_sigkill_leaves_a_folder_the_next_run_removes(tmp_path: Path,
                                                                                 smollm2_path: Path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    args = ("quality", "-m", str(smollm2_path), "--tokens", "512", "--ctx", "256", "--no-store")
    proc = _start(*args, env={"TMPDIR": str(tmp)})
    try:
        assert wait_for(lambda: list(tmp.glob("gguf-quality-*")), 120), "no temporary folder appeared"
        assert wait_for(lambda: workers_of(proc.pid), 60), "no worker started"
        _kill_parent_and_check_its_worker_ends(proc)
    finally:
        proc.kill()
        proc.communicate()
    assert list(tmp.glob("gguf-quality-*"))
    again = subprocess.run([sys.executable, "-m", "app.cli.main", *args], capture_output=True, text=True,
                           env={**os.environ, "PYTHONPATH": str(REPO_ROOT), "TMPDIR": str(tmp)}, timeout=300)
    assert again.returncode == 0, again.stderr
    assert not list(tmp.glob("gguf-quality-*")) and "removed 1 temporary folder" in again.stderr, again.stderr


@pytest.mark.heavy  # a quality run in a worker, its parent killed mid-chunk
def test_a_quality_worker_ends_with_its_killed_parent_even_mid_chunk(tmp_path: Path, smollm2_path: Path) -> None:
    """A chunk of 4,096 tokens sends no event for seconds: a worker that only noticed its reader was gone at its
    next event went on scoring that long, and a long chunk of a large model for minutes."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc = _start("quality", "-m", str(smollm2_path), "--tokens", "4096", "--ctx", "4096", "--no-store",
                  env={"TMPDIR": str(tmp)})
    try:
        assert wait_for(lambda: list(tmp.glob("gguf-quality-*/text.txt")), 120), "no temporary folder appeared"
        assert wait_for(lambda: workers_of(proc.pid), 60), "no worker started"
        time.sleep(2.0)  # the worker is loading the model or scoring its one chunk: no event comes for seconds
        _kill_parent_and_check_its_worker_ends(proc)
    finally:
        proc.kill()
        proc.communicate()


@pytest.mark.heavy  # calibrations in workers, the first killed
def test_a_calibration_killed_with_sigkill_leaves_a_ladder_folder_the_next_run_removes(
        tmp_path: Path, isolated_data_dir: Path) -> None:
    """Issue #54 item 7: calibrate's ``ladder-*`` folder (its synthetic models) was named at random, so no later run
    could tell a killed calibration's from a running one's, and it stayed for ever."""
    root = isolated_data_dir / "calibration"
    first = _start("calibrate", "--quick")
    try:
        assert wait_for(lambda: list(root.glob(f"ladder-{first.pid}-*/*.gguf")), 300), "no ladder folder appeared"
        assert wait_for(lambda: workers_of(first.pid), 300), "no worker started"
        _kill_parent_and_check_its_worker_ends(first)
    finally:
        first.kill()
        first.communicate()
    left = list(root.glob(f"ladder-{first.pid}-*"))
    assert left, "the killed calibration left nothing to clean up"
    second = _start("calibrate", "--quick")
    try:
        assert wait_for(lambda: not any(p.exists() for p in left), 300), f"{left} was not removed"
        assert wait_for(lambda: list(root.glob(f"ladder-{second.pid}-*")), 60)  # its own, made after
    finally:
        second.kill()
        _, err = second.communicate()
    assert "removed 1 ladder folder(s) a killed calibration left behind" in err, err
