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

