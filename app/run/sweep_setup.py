"""Setting a sweep up, the same way for the CLI and the window: read each model's facts once, look at the
machine once, build the row predictor, and turn every test of an unreadable model into a failed row.

``gguf-bench run`` and the window both call :func:`prepare_sweep` and :meth:`SweepSetup.session`, so the
same sweep gives the same rows from either, failed rows included.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from app.model.facts import ModelFacts
from app.model.facts_cache import FACTS, cached_facts
from app.model.gguf_facts import GGUFFileError
from app.predict.machine import HardwareContext, Machine, hardware_context, names_this_machine
from app.predict.row_predictions import RowPredictor
from app.results.row_types import ResultRow
from app.results.store import ResultStore
from app.run.events import FailureKind
from app.run.model_limits import context_warnings, too_big_for_memory
from app.run.plan import TestSpec
from app.run.session import SweepSession, UpfrontFailure
from app.telemetry.machine import ProbeMode, scan_machine


def read_models(paths: list[str], known: Mapping[str, ModelFacts] | None = None
                ) -> tuple[dict[str, ModelFacts], dict[str, str]]:
    """(facts by path, one-line reason by path) for each distinct model; ``known`` facts are not read again."""
    good: dict[str, ModelFacts] = {}
    bad: dict[str, str] = {}
    for path in dict.fromkeys(paths):
        if known and path in known:
            FACTS.put(path, known[path])
            good[path] = known[path]
            continue
        try:
            good[path] = cached_facts(path)
        except GGUFFileError as e:
            bad[path] = str(e)
    return good, bad


@dataclass
class SweepSetup:
    """A sweep ready to run: the tests to measure, those that fail before they start, the machine and predictor."""

    tests: list[TestSpec]
    facts: dict[str, ModelFacts]
    unreadable: dict[str, str]  # model path -> why its GGUF header cannot be read
    machine: dict[str, Any]
    hw: HardwareContext | None = None
    predictor: RowPredictor | None = None
    runnable: list[TestSpec] = field(init=False)
    too_big: dict[TestSpec, str] = field(init=False)  # KV cache beyond RAM + VRAM: failed without a worker
    warnings: list[str] = field(init=False)  # tests past a model's trained context (they run)

    def __post_init__(self) -> None:
        self.too_big = too_big_for_memory(self.tests, self.facts, self.machine)
        self.warnings = context_warnings(self.tests, self.facts)
        self.runnable = [t for t in self.tests if t.model_path not in self.unreadable and t not in self.too_big]

    def upfront_failures(self) -> list[UpfrontFailure]:
        return [UpfrontFailure(t, self.unreadable[t.model_path], FailureKind.LOAD_ERROR)
                if t.model_path in self.unreadable else UpfrontFailure(t, self.too_big[t], FailureKind.OUT_OF_MEMORY)
                for t in self.tests if t.model_path in self.unreadable or t in self.too_big]

    def session(self, store: ResultStore | None, *, sweep_name: str = "", command: str = "",
                token_ticks: bool = True) -> SweepSession:
        """The session that runs the readable tests and records a failed row for each test of an unreadable model."""
        extra: Callable[[ResultRow], dict[str, Any]] | None = self.predictor
        return SweepSession(self.runnable, store=store, sweep_name=sweep_name, command=command, machine=self.machine,
                            token_ticks=token_ticks, extra_row=extra, failed_upfront=self.upfront_failures())


def prepare_sweep(tests: list[TestSpec], store: ResultStore | None, *, predict: bool = True,
                  gpu_query: str | None = None, known_facts: Mapping[str, ModelFacts] | None = None) -> SweepSetup:
    """Read the models, look at the machine (probing the CPU once when predicting) and build the predictor.

    ``gpu_query`` is ``run --hw``, read by the one rule (:meth:`Machine.profile_for`). Raises ProfileError for an
    unknown one. Never loads a model.
    """
    good, bad = read_models([t.model_path for t in tests], known_facts)
    scan = scan_machine(ProbeMode.RUN if predict else ProbeMode.NONE)
    machine = scan.run_facts()
    if not predict:
        return SweepSetup(tests, good, bad, machine)
    hw = hardware_context(scan)  # this machine's CPU and GPU (ProfileError without CPU figures)
    answers_machine = Machine.load(scan, store_path=store.path if store is not None else None)
    hw = _asked_hardware(hw, answers_machine, gpu_query)
    predictor = RowPredictor(hw, answers_machine)
    for path, model_facts in good.items():
        predictor.prime(path, model_facts)
    return SweepSetup(tests, good, bad, machine, hw, predictor)


def _asked_hardware(here: HardwareContext, machine: Machine, gpu_query: str | None) -> HardwareContext:
    """The hardware rows are predicted against: ``gpu_query`` by the one rule (:meth:`Machine.profile_for`); "cpu"
    predicts every row on this CPU, a GPU that is not this machine's takes the place of its GPU."""
    profile = machine.profile_for(gpu_query)
    if profile.kind == "cpu":
        return replace(here, gpu=None, note=here.note + "; --hw cpu: every row predicted on this CPU") \
            if here.gpu is not None else here
    if names_this_machine(gpu_query) or machine.is_this(profile):
        return here
    return replace(here, gpu=profile, note=f"GPU profile chosen: {profile.name}", gpu_problem=False)
