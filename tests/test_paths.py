"""The data dir (issue #13): a file, a ``logs`` file or a read-only folder is one DataDirError line; the window
falls back to a temporary folder for the session and says why."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from app.paths import DataDirError, check_writable_data_dir, data_dir, fall_back_if_unusable, logs_dir


def test_a_data_dir_that_is_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    odd = tmp_path / "data"
    odd.write_text("")
    monkeypatch.setenv("GGUF_WORKBENCH_DATA_DIR", str(odd))
    with pytest.raises(DataDirError, match=rf"^{odd}: the data dir \(GGUF_WORKBENCH_DATA_DIR\) is a file"):
        data_dir()


def test_a_logs_file(isolated_data_dir: Path) -> None:
    (isolated_data_dir / "logs").write_text("")
    with pytest.raises(DataDirError, match="logs folder of the data dir is a file, not a folder"):
        logs_dir()


def test_a_data_dir_that_cannot_be_created(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("GGUF_WORKBENCH_DATA_DIR", str(tmp_path / "file" / "data"))
    with pytest.raises(DataDirError, match="cannot create the data dir"):
        data_dir()


def test_a_usable_data_dir_is_kept(isolated_data_dir: Path) -> None:
    assert fall_back_if_unusable() is None
    assert check_writable_data_dir() == isolated_data_dir and (isolated_data_dir / "logs").is_dir()


def test_the_window_falls_back_to_a_temporary_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    odd = tmp_path / "data"
    odd.write_text("keep me")
    monkeypatch.setenv("GGUF_WORKBENCH_DATA_DIR", str(odd))
    message = fall_back_if_unusable()
    assert message is not None and str(odd) in message and "is a file" in message and "\n" not in message
    fallback = Path(os.environ["GGUF_WORKBENCH_DATA_DIR"])
    assert fallback != odd and str(fallback) in message and data_dir() == fallback
    assert odd.read_text() == "keep me"
