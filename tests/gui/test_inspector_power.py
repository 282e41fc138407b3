"""The window's GPU power fields (issue #53 item 5): a laptop GPU's power limit and the battery, chosen beside the
hardware in the inspector, give the prefill ``predict --power-limit`` and ``--on-battery`` give, and say why; the
chooser window's give the TTFT ``choose --power-limit`` gives.

"This machine has an RTX 4060 Laptop, calibrated" is a TEST DOUBLE of NVML and of a saved fit (no GPU here, and a
calibration takes minutes): the machine is built with that profile and a fit of known figures; the inspector, the
prediction service and answer() are the real ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.calibrate.synth_models import SynthShape, write_synth_model
from app.gui.chooser_view import ChooserView
from app.gui.expectations import Expectations
from app.gui.panels.inspector import InspectorPanel
from app.gui.predictions import PredictionService
from app.model.gguf_facts import read_model_facts
from app.predict.answer import answer, with_power_state
from app.predict.profiles import find_profile, load_profiles
from tests.arch_ggufs import write_all
from tests.cli_helpers import main_json
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
        got = answer(facts, profile, panel.question().short_prompt(), machine)  # the prefill row's question
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


@pytest.mark.heavy  # the public fit and a full-size header-only MoE shape, chosen on the window's pool thread
def test_the_chooser_windows_power_fields_give_chooses_ttft(qtbot, isolated_data_dir: Path, tmp_path: Path,  # noqa: ANN001
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """The chooser window asks the power state ``choose --power-limit`` asks, through the same request: an -ncmoe
    file's TTFT is the CLI's at 60 W, slower than at the top; its fields are off for this machine, whose GPU is at
    the state NVML and psutil read."""
    path = str(write_all(tmp_path, ["gpt-oss-20b"])["gpt-oss-20b"])
    argv = [path, "--hw", "RTX 4060 Laptop", "--ctx", "8192", "--ram", "32"]
    top = main_json("choose", argv, capsys)["files"][0]["ttft_ms"]
    at_60 = main_json("choose", [*argv, "--power-limit", "60"], capsys)["files"][0]["ttft_ms"]
    view = ChooserView()
    qtbot.addWidget(view)
    assert not view.power_fields.power.isEnabled() and not view.power_fields.battery.isEnabled()  # this machine
    view.set_sources([path])
    view.hw.setCurrentText("RTX 4060 Laptop")
    view.ctx.setValue(8192)
    view.ram.setValue(32)
    assert view.power_fields.power.isEnabled() and view.power_fields.battery.isEnabled()
    view.power_fields.power.setValue(60)
    req = view.request()
    assert req.power_limit_w == 60.0 and not req.on_battery
    assert view.start() is None
    qtbot.waitUntil(lambda: view.report is not None, timeout=60_000)
    (c,) = view.report.choices
    assert c.n_cpu_moe > 0 and c.ttft_ms.kind == "split"
    assert c.ttft_ms.value == pytest.approx(at_60["value"], rel=1e-9) and c.ttft_ms.value > top["value"]
    view.hw.setCurrentText("RTX 4090")  # a desktop part: a limit, no battery
    assert view.power_fields.power.isEnabled() and not view.power_fields.battery.isEnabled()
    assert view.request().power_limit_w is None  # a new GPU starts at the top of its range
