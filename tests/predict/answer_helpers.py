"""Machines for answer() tests, with sources of known figures. Each stand-in is a TEST DOUBLE of a saved source (a
calibration fit takes minutes to make; stored-row efficiencies need a store of runs), with the interface answer()
reads; the answers themselves are the real function's."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from app.model.facts import ModelFacts
from app.predict.answer import Machine
from app.predict.machine_fit.crossing_fit import CrossingCost
from app.predict.machine_fit.fitted_model import Expected
from app.predict.machine_fit.store_efficiency import Efficiency
from app.predict.profiles import GIB, HardwareProfile, cpu_profile
from app.predict.settings import PredictSettings
from app.results.row_types import ResultRow

Expect = Callable[[ModelFacts, PredictSettings], Mapping[str, Expected | None]]


@dataclass
class StandInFit:
    """A saved machine fit with known figures per backend (MachineFit's interface as answer() reads it)."""

    by_backend: dict[str, Expect]
    crossings: dict[str, CrossingCost] = field(default_factory=dict)
    build: str = "test build"

    @property
    def fits(self) -> dict[str, dict[str, Any]]:
        return {b: {} for b in self.by_backend}

    def expected(self, facts: ModelFacts, settings: PredictSettings, backend: str = "CPU") -> Mapping[str, Any]:
        return self.by_backend[backend](facts, settings)


def fixed(decode: float | None, prefill: float | None = None, band: float = 0.1, source: str = "stand-in fit"
          ) -> Expect:
    """A fit that says ``decode`` and ``prefill`` tok/s (± ``band``) whatever it is asked."""
    def expect(_facts: ModelFacts, _s: PredictSettings) -> dict[str, Expected | None]:
        return {p: Expected(v, v * (1 - band), v * (1 + band), source) if v else None
                for p, v in (("decode", decode), ("prefill", prefill))}
    return expect


@dataclass
class StandInEfficiency:
    """Stored rows' efficiency (StoreCalibration's interface as answer() reads it)."""

    efficiency: Efficiency | None
    source: str = "3 rows (same type) of other.gguf at 2 threads"

    def __call__(self, backends: str, model_filename: str, file_type: str = "",
                 n_threads: int | None = None) -> tuple[Efficiency | None, str]:
        return self.efficiency, self.source if self.efficiency else ""

    def why_none(self, backends: str, model_filename: str, file_type: str = "", n_threads: int | None = None) -> str:
        return "" if self.efficiency else "no stable, quiet rows of other models"


HOST = cpu_profile("CPU: test host", 40.0, 400.0, 32 * GIB)


def machine_of(profile: HardwareProfile | None = None, *, fit: StandInFit | None = None,
               efficiency: StandInEfficiency | None = None, public: Any = None,
               rows: tuple[ResultRow, ...] = (), gpu_backends: tuple[str, ...] = ()) -> Machine:
    """This machine as ``profile`` (a CPU profile: its CPU; a GPU profile: its GPU, beside HOST), with the sources
    given; ``profile`` None: a machine elsewhere (the public fit only)."""
    if profile is None:
        return Machine(public=public)
    cpu, gpu = (profile, None) if profile.kind == "cpu" else (HOST, profile)
    return Machine(cpu=cpu, gpu=gpu, cpu_model=cpu.name.split(": ", 1)[-1], fit=fit,  # type: ignore[arg-type]
                   efficiency=efficiency, public=public, rows=rows, gpu_backends=gpu_backends)  # type: ignore[arg-type]
