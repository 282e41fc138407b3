"""The window opens whatever the data dir is (issue #13): with a data dir that is a file it opens on a temporary
data dir for the session, shows why in its message area, and leaves the file alone."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytestmark = pytest.mark.heavy  # the repack probe's child process


def test_the_window_opens_with_a_data_dir_that_is_a_file(qtbot, tmp_path: Path,  # noqa: ANN001 - pytest-qt
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from app.gui.main import open_main_window

    odd = tmp_path / "data"
    odd.write_text("not a folder")
    monkeypatch.setenv("GGUF_WORKBENCH_DATA_DIR", str(odd))
    win = open_main_window()
    qtbot.addWidget(win)
    messages = " ".join(win.messages.messages())
    assert f"{odd}: the data dir (GGUF_WORKBENCH_DATA_DIR) is a file, not a folder" in messages
    assert os.environ["GGUF_WORKBENCH_DATA_DIR"] in messages and Path(os.environ["GGUF_WORKBENCH_DATA_DIR"]).is_dir()
    assert win.messages.isVisibleTo(win)
    qtbot.waitUntil(lambda: win.hardware.probe_done, timeout=60_000)  # the fresh data dir probes the CPU once
    assert odd.read_text() == "not a folder"
