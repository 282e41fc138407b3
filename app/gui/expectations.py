"""What the window's figures are answered on (no Qt): this machine (app.predict.answer.Machine) and a status note.

Loaded off the GUI thread after the machine scan, and again after a calibration. Loading is also the window's
explicit recovery step for the results store (app.results.store.ResultStore.recover): a damaged store set aside,
the writes kept in the side file stored, runs left 'running' by a dead process marked 'interrupted'.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from app.predict.answer import Machine
from app.results.store import ResultStore, StoreError
from app.telemetry.machine import MachineScan


@dataclass(frozen=True)
class Expectations:
    """This machine as answers see it, and why a source is missing (for the status line)."""

    machine: Machine = field(default_factory=Machine)
    note: str = ""

    @property
    def cpu_model(self) -> str:
        """This machine's CPU as rows record it (``cpu_info``): rows of that CPU were measured here."""
        return self.machine.cpu_model

    @property
    def machine_fit(self) -> object | None:
        return self.machine.fit

    @property
    def public(self) -> object | None:
        return self.machine.public


def load_expectations(scan: MachineScan | None, store_path: str | Path | None = None) -> Expectations:
    """Recover the results store, then load this machine (its fit, its stored rows, the public GPU fit)."""
    if scan is None:
        return Expectations(Machine.elsewhere())
    try:
        ResultStore.recover(store_path).close()
    except (StoreError, OSError):
        pass  # the store is read below, or its problem noted there
    machine = Machine.load(scan, store_path=store_path)
    return Expectations(machine=machine, note="; ".join(machine.notes))
