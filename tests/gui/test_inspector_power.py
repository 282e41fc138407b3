"""The window's GPU power fields (issue #53 item 5): a laptop GPU's power limit and the battery, chosen beside the
hardware in the inspector, give the prefill ``predict --power-limit`` and ``--on-battery`` give, and say why.

"This machine has an RTX 4060 Laptop, calibrated" is a TEST DOUBLE of NVML and of a saved fit (no GPU here, and a
calibration takes minutes): the machine is built with that profile and a fit of known figures; the inspector, the
prediction service and answer() are the real ones."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from app.calibrate.synth_models import SynthShape, write_synth_model
from app.gui.expectations import Expectations
from app.gui.panels.inspector import InspectorPanel
from app.gui.predictions import PredictionService
from app.model.gguf_facts import read_model_facts
from app.predict.answer import answer, with_power_state
from app.predict.profiles import find_profile, load_profiles
from app.predict.settings import at_context
from tests.predict.answer_helpers import HOST, StandInFit, fixed, machine_of


def _prefill_shown(panel: InspectorPanel) -> str:
    html = panel.text.text()
    at = html.index("Prefill expected")
    return html[at:at + 120]


def test_the_power_fields_scale_the_inspectors_prefill_as_predict_does(qtbot, tmp_path: Path) -> None:  # noqa: ANN001
    path = str(write_synth_model(tmp_path / "m.gguf", SynthShape(384, 6, "Q8_0", gqa=2)))
    facts = read_model_facts(path)
    laptop = find_profile("RTX 4060 Laptop", load_profiles())
    machine = machine_of(laptop, fit=StandInFit({"CUDA,CPU": fixed(60.0, prefill=3000.0)}))
    predictor = PredictionService()
    predictor.set_expectations(Expectations(machine))
    predictor.set_facts(path, facts)
    panel = InspectorPanel()
    qtbot.addWidget(panel)
    panel.profileChanged.connect(lambda: predictor.set_profile(panel.current_profile()))
    panel.set_profiles([("CPU", HOST), ("RTX 4060 Laptop", laptop)], "RTX 4060 Laptop")
    assert panel.power.isEnabled() and panel.battery.isEnabled()
    assert (panel.power.minimum(), panel.power.maximum()) == (31, 115)  # "top of range", then 32-115 W
    panel.show_model(path, facts, None, predictor)
    top = _prefill_shown(panel)

    def expected(watts: float | None, battery: bool) -> str:
        profile = with_power_state(laptop, watts, battery, "the window's GPU power fields")
        short = replace(at_context(panel.ctx.value(), n_gpu_layers=panel.ngl.value()), n_prompt=512, n_gen=128)
        got = answer(facts, profile, short, machine)
        assert got.prefill is not None
        return f"{got.prefill.value:,.1f} tok/s"

    assert expected(None, False) in top
    panel.power.setValue(60)
    assert panel.current_profile().power_limit_set_w == 60.0  # type: ignore[union-attr]
    panel.show_model(path, facts, None, predictor)
    at_60 = _prefill_shown(panel)
    assert at_60 != top and expected(60.0, False) in at_60
    assert "power (the window's GPU power fields): at 60 W" in panel.text.toolTip()
    panel.power.setValue(panel.power.minimum())
    panel.battery.setChecked(True)
    panel.show_model(path, facts, None, predictor)
    on_battery = _prefill_shown(panel)
    assert on_battery not in (top, at_60) and expected(None, True) in on_battery
    assert "on battery" in panel.text.toolTip()
    panel.set_profiles([("CPU", HOST), ("RTX 4060 Laptop", laptop)], "CPU")  # a CPU has no GPU power
    assert not panel.power.isEnabled() and not panel.battery.isEnabled() and panel.current_profile() is HOST
    with pytest.raises(ValueError):
        with_power_state(laptop, 20.0, False, "given")
