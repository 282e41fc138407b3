"""Issue #54 item 8: a quality run whose worker is killed, or whose reference is truncated while it runs, left every
file "failed" with no reason in its table and none on stderr. Each file not scored now says why, in one line."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from app.paths import REPO_ROOT
from tests.process_helpers import wait_for, workers_of

pytestmark = pytest.mark.heavy  # quality runs of the real model in workers, broken on purpose


def _start_quality(tmp_path: Path, smollm2_path: Path) -> tuple[subprocess.Popen[str], Path, Path]:
    """A quality run of a copy of SmolLM2 (the reference) against another copy: eight chunks, so the reference is
    still being scored when the test breaks it. Returns the process, the reference and the temporary folder."""
    ref, other, tmp = tmp_path / "ref.gguf", tmp_path / "other.gguf", tmp_path / "tmp"
    shutil.copyfile(smollm2_path, ref)
    shutil.copyfile(smollm2_path, other)
    tmp.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "app.cli.main", "quality", "-m", str(ref), "-m", str(other),
                             "--ref", str(ref), "--tokens", "4096", "--ctx", "512", "--no-store"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO_ROOT), "TMPDIR": str(tmp)})
    return proc, ref, tmp


def _scoring_the_reference(tmp: Path) -> bool:
    return bool(list(tmp.glob("gguf-quality-*/reference-logp.f16")))


def _reasons(stderr: str) -> dict[str, str]:
    """file name -> the reason its FAILED line gives."""
    out = {}
    for line in stderr.splitlines():
        if ": FAILED: " in line:
            head, reason = line.split(": FAILED: ", 1)
            out[head.rsplit(" ", 1)[-1]] = reason
    return out


def test_a_killed_worker_is_the_reason_every_file_not_scored_gives(tmp_path: Path, smollm2_path: Path) -> None:
    proc, _ref, tmp = _start_quality(tmp_path, smollm2_path)
    try:
        assert wait_for(lambda: _scoring_the_reference(tmp), 120), "the reference was never scored"
        workers = workers_of(proc.pid)
        assert workers
        os.kill(workers[0], signal.SIGKILL)
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 1, err
    reasons = _reasons(err)
    assert set(reasons) == {"ref.gguf", "other.gguf"}, err
    assert all(r == "worker process was killed by SIGKILL (out of memory?)" for r in reasons.values()), err
    assert out.count("| failed |") == 2


def test_a_reference_truncated_mid_run_is_named_as_the_reason(tmp_path: Path, smollm2_path: Path) -> None:
    proc, ref, tmp = _start_quality(tmp_path, smollm2_path)
    size = ref.stat().st_size
    try:
        assert wait_for(lambda: _scoring_the_reference(tmp), 120), "the reference was never scored"
        os.truncate(ref, 1_000_000)
        _out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 1, err
    reasons = _reasons(err)
    assert set(reasons) == {"ref.gguf", "other.gguf"}, err
    says = f"ref.gguf changed during the run ({size:,} bytes, now 1,000,000)"
    assert all(r.startswith(says) for r in reasons.values()), err
