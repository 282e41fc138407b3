"""One CPU profile per machine while the app runs: rows measured here name the latest probe's profile, so a probe
that moved between sessions (19.4 → 17.2 GB/s) never shows the same CPU twice with two ceilings."""

from __future__ import annotations

from app.gui.expectations import Expectations
from app.gui.predictions import PredictionService, same_hardware
from app.predict.profiles import cpu_profile

GIB = 2**30


def _row(cpu_info: str, bandwidth_gbps: float) -> dict[str, object]:
    return {"hw_profile": f"CPU: {cpu_info}", "cpu_info": cpu_info, "pred_bandwidth_gbps": bandwidth_gbps,
            "pred_tflops": 0.3, "n_gpu_layers_effective": 0}


def test_rows_measured_here_use_this_machines_latest_profile() -> None:
    service = PredictionService()
    latest = cpu_profile("This CPU: AMD EPYC", 17.2, 300.0, 24 * GIB)
    service.set_machine(latest, [latest])
    service.set_expectations(Expectations(cpu_model="AMD EPYC"))
    older_probe = _row("AMD EPYC", 19.4)  # stored in an earlier session, when the probe read more
    assert service.hardware_of([older_probe]) is latest
    assert same_hardware(service.hardware_of([older_probe]), latest)


def test_rows_from_another_cpu_keep_their_own_figures() -> None:
    service = PredictionService()
    latest = cpu_profile("This CPU: AMD EPYC", 17.2, 300.0, 24 * GIB)
    service.set_machine(latest, [latest])
    service.set_expectations(Expectations(cpu_model="AMD EPYC"))
    elsewhere = service.hardware_of([_row("Intel Xeon", 40.0)])
    assert elsewhere is not None and elsewhere.peak_bandwidth_gbps == 40.0
    assert not same_hardware(elsewhere, latest)
