"""What the window's expected figures come from (no Qt): this machine's calibration fit and the public GPU fit.

Loaded off the GUI thread after the machine scan, and again after a calibration; the prediction service applies
the machine's fit to this CPU's profile only, and the public fit to GPU profiles.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.predict.calibration import fitted_expectation
from app.predict.calibration_store import load_fit
from app.predict.prediction import FittedExpectation
from app.predict.public_fit import PublicGpuModel, load_public_model
from app.telemetry.machine import MachineScan


@dataclass(frozen=True)
class Expectations:
    """The fits behind expected figures; either may be missing (not calibrated; no public table)."""

    machine_fit: FittedExpectation | None = None  # this CPU, from `gguf-bench calibrate`
    public: PublicGpuModel | None = None  # GPU profiles, from published llama-bench results
    note: str = ""  # why one is missing, for the status line
    cpu_model: str = ""  # this machine's CPU as rows record it (``cpu_info``): their CPU is the one calibrated


def load_expectations(scan: MachineScan | None) -> Expectations:
    """This machine's saved fit (CPU backend) and the public GPU model; a missing or unreadable one is None."""
    notes = []
    machine_fit: FittedExpectation | None = None
    cpu_model = ""
    if scan is not None:
        facts = scan.run_facts()
        cpu_model = str(facts.get("cpu_model") or "")
        machine_fit = fitted_expectation(load_fit(cpu_model, str(facts.get("gpu_info") or "")))
        if machine_fit is None:
            notes.append("this machine is not calibrated (Sweep → Calibrate this machine…)")
    try:
        public: PublicGpuModel | None = load_public_model()
    except (OSError, ValueError) as e:
        public = None
        notes.append(f"no public GPU fit: {e}")
    return Expectations(machine_fit=machine_fit, public=public, note="; ".join(notes), cpu_model=cpu_model)
