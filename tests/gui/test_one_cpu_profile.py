"""One CPU profile per machine while the app runs: rows measured here name the latest probe's profile, so a probe
that moved between sessions (19.4 → 17.2 GB/s) never shows the same CPU twice with two ceilings."""

from __future__ import annotations

import pytest
from PySide6.QtGui import QAction

from app.gui.expectations import Expectations
from app.gui.predictions import PredictionService, same_hardware
from app.predict.answer import Machine
from app.predict.profiles import cpu_profile
from app.results.row_types import ResultRow

pytestmark = pytest.mark.cpu_identity  # reads this CPU (tests/test_other_cpu.py runs it as the other kind)

GIB = 2**30


def _row(cpu_info: str, bandwidth_gbps: float) -> ResultRow:
    return ResultRow(hw_profile=f"CPU: {cpu_info}", cpu_info=cpu_info, pred_bandwidth_gbps=bandwidth_gbps,
                     pred_tflops=0.3, n_gpu_layers_effective=0)


def test_rows_measured_here_use_this_machines_latest_profile() -> None:
    service = PredictionService()
    latest = cpu_profile("This CPU: AMD EPYC", 17.2, 300.0, 24 * GIB)
    service.set_machine(latest, [latest])
    service.set_expectations(Expectations(Machine(cpu=latest, cpu_model="AMD EPYC")))
    older_probe = _row("AMD EPYC", 19.4)  # stored in an earlier session, when the probe read more
    assert service.hardware_of([older_probe]) is latest
    assert same_hardware(service.hardware_of([older_probe]), latest)


def test_rows_from_another_cpu_keep_their_own_figures() -> None:
    service = PredictionService()
    latest = cpu_profile("This CPU: AMD EPYC", 17.2, 300.0, 24 * GIB)
    service.set_machine(latest, [latest])
    service.set_expectations(Expectations(Machine(cpu=latest, cpu_model="AMD EPYC")))
    elsewhere = service.hardware_of([_row("Intel Xeon", 40.0)])
    assert elsewhere is not None and elsewhere.peak_bandwidth_gbps == 40.0
    assert not same_hardware(elsewhere, latest)


@pytest.mark.heavy  # the real window's background jobs
def test_measure_this_cpu_again_replaces_its_one_profile(window) -> None:  # noqa: ANN001 - the window fixture
    """Sweep → Measure this CPU again: a real probe (a few seconds) replaces the profile's figures. A probe keeps the
    better of the new and the stored figures (a quiet one first), so the stored one is set busy and far below any
    real reading first."""
    from app.telemetry.cpu_probe import CpuProbe, save_probe
    from tests.gui.conftest import wait_for

    action = next(a for a in window.findChildren(QAction) if a.text() == "Measure this CPU again")
    before = window.hardware.cpu
    assert before is not None and before.peak_bandwidth_gbps == 20.0  # the fixture's cached probe
    save_probe(CpuProbe(bandwidth_gbps=0.5, gflops_f32=1.0, n_threads=2, measured_at="test: far too low", busy=True))
    action.trigger()
    wait_for(lambda: "measured again" in window.status_label.text(), timeout_s=120)
    after = window.hardware.cpu
    assert after is not None and after is not before and after.peak_bandwidth_gbps not in (0.5, 20.0)
    assert window.predictor.machine_cpu is after  # the predictions use the new profile
    labels = [window.inspector.profile_combo.itemText(i) for i in range(window.inspector.profile_combo.count())]
    assert sum(label.startswith("This CPU") for label in labels) == 1  # still one entry for this CPU
