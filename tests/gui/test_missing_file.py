"""Issue #28: a model file deleted after it was added is marked in the library and the inspector, and a sweep of
it says so once instead of failing test after test."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.gui.conftest import wait_for

pytestmark = pytest.mark.heavy  # the real model and the real window's background jobs


def test_a_deleted_file_is_marked_and_said_once(window, smollm2_path: Path, tmp_path: Path) -> None:  # noqa: ANN001
    w = window
    copy = tmp_path / "Gone.Q4_1.gguf"
    shutil.copy2(smollm2_path, copy)
    w.library.add_files([str(copy)])
    wait_for(lambda: str(copy) in w.predictor.facts)
    w.library.select_paths([str(copy)])
    w.editor.set_preset("quick")
    copy.unlink()
    before = len(w.messages.messages())
    why = w.run_sweep()
    assert why is not None and "gone" in why and not w.sweeps.busy  # nothing started
    said = [m for m in w.messages.messages() if "Gone.Q4_1.gguf" in m]
    assert len(said) == 1 and "no longer there" in said[0] and len(w.messages.messages()) == before + 1
    w.run_sweep()  # asked again: the same message, updated in place
    assert len([m for m in w.messages.messages() if "Gone.Q4_1.gguf" in m]) == 1
    item = w.library._items[str(copy)]
    assert item.text(1) == "missing" and "no longer exists" in item.toolTip(0)
    w.details.refresh()
    assert "no longer exists" in w.inspector.text.text()
