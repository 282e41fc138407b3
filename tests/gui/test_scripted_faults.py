"""The window's scripted modes on the remaining hostile inputs of issue #13: every one ends by itself, non-zero,
with one line on stderr, and leaves no picture behind."""

from __future__ import annotations

import gzip
import random
from pathlib import Path

import pytest

from tests.gguf_synth import write_not_gguf
from tests.gui.conftest import RECORDED
from tests.gui.test_scripted_modes import assert_one_line_failure, run_workbench

pytestmark = pytest.mark.heavy  # the window in a subprocess


def _half_cut(path: Path) -> Path:
    text = RECORDED.read_text(encoding="utf-8")
    path.write_text(text[: len(text) // 2], encoding="utf-8")  # cut mid-line, as a crash leaves it
    return path


def _garbage(path: Path) -> Path:
    path.write_bytes(random.Random(5).randbytes(4096))
    return path


def _truncated_gz(path: Path) -> Path:
    data = gzip.compress(RECORDED.read_bytes())
    path.write_bytes(data[: len(data) // 2])
    return path


def _directory(path: Path) -> Path:
    path.mkdir()
    return path


@pytest.mark.parametrize(("name", "make", "needle"), [
    ("half.jsonl", _half_cut, "not JSON"),
    ("garbage.jsonl", _garbage, "codec can't decode"),
    ("cut.jsonl.gz", _truncated_gz, "cannot replay"),
    ("a-directory.jsonl", _directory, "Is a directory"),
])
def test_replay_of_a_damaged_recording_fails_in_one_line(gui_data_dir: Path, tmp_path: Path, name: str,
                                                         make: object, needle: str) -> None:
    path = make(tmp_path / name)  # type: ignore[operator]
    shot = tmp_path / "x.png"
    rc, lines, took_s = run_workbench(["--replay", str(path), "--screenshot", str(shot)], gui_data_dir, timeout_s=60)
    assert rc == 2
    assert_one_line_failure(rc, lines, "cannot replay", str(path), needle)
    assert not shot.exists() and took_s < 60


def test_demo_run_of_a_file_that_is_not_gguf_fails_in_one_line(gui_data_dir: Path, tmp_path: Path) -> None:
    model = write_not_gguf(tmp_path / "not-a-model.gguf")
    rc, lines, _ = run_workbench(["--demo-run", "--screenshot", str(tmp_path / "x.png"), str(model)], gui_data_dir,
                                 timeout_s=60)
    assert rc == 2
    assert_one_line_failure(rc, lines, "cannot run the sweep", "not-a-model.gguf")
    assert not (tmp_path / "x.png").exists()


def test_demo_run_whose_worker_cannot_start_says_why_and_exits_1(gui_data_dir: Path, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.gguf_synth import write_synthetic_gguf

    model = write_synthetic_gguf(tmp_path / "tiny.gguf")
    monkeypatch.setenv("LLAMA_CPP_LIB_PATH", str(tmp_path / "nonexistent"))
    rc, lines, _ = run_workbench(["--demo-run", "--screenshot", str(tmp_path / "x.png"), str(model)], gui_data_dir)
    assert rc == 1
    assert_one_line_failure(rc, lines, "before any test finished", "worker cannot start",
                            "llama-cpp-python is not usable")
    assert not (tmp_path / "x.png").exists()
