"""Issue #29 case 9: a FIFO (or a device) where a regular file is expected hung the command or filled its memory.
Each input is now checked before it is opened and read in bounded bytes: one line, exit 2 (or the file ignored,
for the workbench's own caches), within seconds."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli_helpers import gguf_bench
from tests.gguf_synth import write_synthetic_gguf

pytestmark = [pytest.mark.heavy,  # the CLI in a subprocess
              pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")]


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def _one_line(proc: subprocess.CompletedProcess[str], says: str) -> None:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert any(says in line for line in lines), proc.stderr


def test_sweep_text_and_profiles_that_are_fifos_fail_in_one_line(tmp_path: Path, isolated_data_dir: Path) -> None:
    model = write_synthetic_gguf(tmp_path / "m.gguf")
    t0 = time.monotonic()
    _one_line(gguf_bench("run", "-m", str(model), "--sweep", str(_fifo(tmp_path / "s.toml")), timeout=30),
              "is a FIFO (named pipe), not a regular file")
    _one_line(gguf_bench("quality", "-m", str(model), "--text", str(_fifo(tmp_path / "t.txt")), timeout=30),
              "is a FIFO (named pipe), not a regular file")
    (isolated_data_dir / "hardware").mkdir()
    _fifo(isolated_data_dir / "hardware" / "mine.toml")
    _one_line(gguf_bench("predict", "-m", str(model), "--hw", "RTX 4060 Laptop", timeout=30), "mine.toml")
    assert time.monotonic() - t0 < 60


def test_a_presets_prompt_file_that_is_a_fifo_fails_its_test_not_the_worker(tmp_path: Path) -> None:
    model = write_synthetic_gguf(tmp_path / "m.gguf")
    fifo = _fifo(tmp_path / "prompt.txt")
    preset = tmp_path / "p.toml"
    preset.write_text(f"[sweep]\nn_prompt = [8]\nn_gen = [2]\nrepetitions = 1\nprompt_file = '{fifo}'\n")
    proc = gguf_bench("run", "-m", str(model), "--sweep", str(preset), "-t", "1", "--no-predict", "-o", "json",
                      timeout=60)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "is a FIFO (named pipe), not a regular file" in proc.stderr


def test_the_workbenchs_own_caches_as_fifos_are_ignored_not_waited_on(tmp_path: Path,
                                                                      isolated_data_dir: Path) -> None:
    for name in ("cpu_probe.json", "repack-guard.json"):
        (isolated_data_dir / name).unlink(missing_ok=True)
        _fifo(isolated_data_dir / name)
    (isolated_data_dir / "calibration").mkdir()
    model = write_synthetic_gguf(tmp_path / "m.gguf")
    proc = gguf_bench("predict", "-m", str(model), "--json", timeout=60)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    proc = gguf_bench("run", "-m", str(model), "-p", "8", "-n", "2", "-r", "1", "-t", "1", "-o", "json", timeout=120)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr  # probes, and replaces the FIFOs
    assert (isolated_data_dir / "repack-guard.json").is_file()


def test_replaying_a_fifo_says_why(tmp_path: Path, isolated_data_dir: Path) -> None:
    fifo = _fifo(tmp_path / "events.jsonl")
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "GGUF_WORKBENCH_DATA_DIR": str(isolated_data_dir)}
    proc = subprocess.run([sys.executable, "-m", "app.gui.main", "--replay", str(fifo), "--screenshot",
                           str(tmp_path / "s.png")], capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode != 0 and "FIFO" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
