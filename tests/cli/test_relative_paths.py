"""Issue #44 point 1: every path from a flag, the environment or the window is made absolute where it enters. The
worker runs in the install folder, so ``quantize -m model.gguf`` failed for every type ("failed to open GGUF file
'model.gguf'") and a relative ``GGUF_WORKBENCH_DATA_DIR`` made the worker fail to start (the run stored as crashed)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from app.paths import REPO_ROOT, data_dir
from app.quantize.plan import plan_quantize


def test_quantize_plans_absolute_paths_from_relative_flags(make_gguf: Callable[..., Path],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    model = make_gguf("model.gguf")
    monkeypatch.chdir(model.parent)
    items = plan_quantize("model.gguf", ["q8_0"], "out")
    assert items[0].src == str(model) and os.path.isabs(items[0].dst) and os.path.isabs(items[0].part)
    assert Path(items[0].dst).parent == model.parent / "out"


def test_a_relative_data_dir_is_taken_from_the_current_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GGUF_WORKBENCH_DATA_DIR", "rel/data")
    assert data_dir() == tmp_path / "rel" / "data" and data_dir().is_dir()
    from app.paths import absolute_path_env

    env = absolute_path_env({"GGUF_WORKBENCH_DATA_DIR": "rel/data", "GGUF_WORKBENCH_CACHE_DIR": "~/c", "OTHER": "x"})
    assert env == {"GGUF_WORKBENCH_DATA_DIR": str(tmp_path / "rel" / "data"),
                   "GGUF_WORKBENCH_CACHE_DIR": os.path.expanduser("~/c"), "OTHER": "x"}


def test_a_path_with_a_nul_is_one_line() -> None:
    from app.paths import DataDirError, absolute_path

    with pytest.raises(DataDirError, match="holds a NUL"):
        absolute_path("a\0b", "-m")


def _bench(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), **(env or {})}
    return subprocess.run([sys.executable, "-m", "app.cli.main", *args], cwd=cwd, env=full_env, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.heavy  # the quantizer in a worker
def test_quantize_with_relative_paths_from_another_folder(tmp_path: Path, smollm2_path: Path) -> None:
    shutil.copy(smollm2_path, tmp_path / "model.gguf")
    proc = _bench(tmp_path, "quantize", "-m", "model.gguf", "--allow-requantize", "--types", "q8_0", "--out", "out",
                  "-o", "csv")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "out" / "model.Q8_0.gguf").is_file() and "failed to open" not in proc.stdout + proc.stderr
    assert not list((tmp_path / "out").glob("*.part"))


@pytest.mark.heavy  # a sweep in a worker
def test_a_run_with_a_relative_data_dir(tmp_path: Path, smollm2_path: Path, isolated_data_dir: Path) -> None:
    shutil.copytree(isolated_data_dir, tmp_path / "rel-data")  # the session's repack verdict: no probe again
    proc = _bench(tmp_path, "run", "-m", str(smollm2_path), "-p", "8", "-n", "2", "-r", "1", "--no-predict",
                  "-o", "csv", env={"GGUF_WORKBENCH_DATA_DIR": "rel-data"})
    assert proc.returncode == 0, proc.stderr
    assert "1 ok, 0 failed, finished" in proc.stderr
    assert (tmp_path / "rel-data" / "results.sqlite3").is_file()
    assert list((tmp_path / "rel-data" / "logs").glob("worker-*.log"))
    assert not (REPO_ROOT / "rel-data").exists()
