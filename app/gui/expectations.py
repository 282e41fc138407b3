"""What the window's expected figures come from (no Qt): the one policy's sources (app.predict.expected_sources).

Loaded off the GUI thread after the machine scan, and again after a calibration; the prediction service asks
:meth:`ExpectedSources.inputs` for every prediction, as sweep rows, ``predict`` and the chooser do.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from app.predict.calibration_fit import MachineFit
from app.predict.expected_sources import ExpectedSources
from app.predict.public_fit import PublicGpuModel
from app.results.store import ResultStore, StoreError
from app.telemetry.machine import MachineScan


@dataclass(frozen=True)
class Expectations:
    """The sources behind expected figures, and this machine's CPU as rows record it (``cpu_info``: rows of that CPU
    were measured here, so this machine's fit applies to them)."""

    sources: ExpectedSources = field(default_factory=ExpectedSources)
    note: str = ""  # why a source is missing, for the status line
    cpu_model: str = ""

    @property
    def machine_fit(self) -> MachineFit | None:
        return self.sources.machine_fit

    @property
    def public(self) -> PublicGpuModel | None:
        return self.sources.public


def load_expectations(scan: MachineScan | None, store_path: str | Path | None = None) -> Expectations:
    """This machine's saved fit, its stored-row efficiencies (from ``store_path``) and the public GPU model."""
    facts = scan.run_facts() if scan is not None else {}
    cpu_model, gpu_info = str(facts.get("cpu_model") or ""), str(facts.get("gpu_info") or "")
    store = None
    if scan is not None:
        try:
            store = ResultStore(store_path)
        except (StoreError, OSError):
            store = None
    try:
        sources = ExpectedSources.load(cpu_model, gpu_info, store)
    finally:
        if store is not None:
            store.close()
    return Expectations(sources=sources, note="; ".join(sources.notes), cpu_model=cpu_model)
