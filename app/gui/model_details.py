"""The left column's model side: GGUF facts read in the background for the library, and what the inspector and
the scenario panel show for the current model on the chosen hardware.
"""

from __future__ import annotations

import os
from typing import Any

from PySide6.QtCore import QObject, Signal

from app.gui.panels.inspector import InspectorPanel
from app.gui.panels.library import LibraryPanel
from app.gui.panels.scenario import ScenarioPanel
from app.gui.predictions import PredictionService, same_hardware
from app.gui.sweep_controller import SweepController
from app.gui.tasks import Tasks
from app.model.facts_cache import cached_facts
from app.model.gguf_facts import GGUFFileError
from app.predict.profiles import HardwareProfile
from app.predict.questions import Question
from app.predict.scenario_totals import scenario_totals
from app.results.row_types import ResultRow
from app.views.scenario import RequestRates, request_rates


class ModelDetails(QObject):
    """Facts per library entry (once per path), the inspector and the scenario for the current model."""

    message = Signal(str, str)  # (text, level)
    predictionsChanged = Signal()  # new facts or another profile: whatever shows predictions redraws

    def __init__(self, library: LibraryPanel, inspector: InspectorPanel, scenario: ScenarioPanel,
                 predictor: PredictionService, tasks: Tasks, sweeps: SweepController, default_model: str,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.library = library
        self.inspector = inspector
        self.scenario = scenario
        self.predictor = predictor
        self.tasks = tasks
        self.sweeps = sweeps
        self.default_model = default_model
        self._pending: set[str] = set()

    # --- facts ------------------------------------------------------------------------------------
    def request_facts(self, path: str) -> None:
        """Read a model's GGUF facts in the background (once per path)."""
        if path in self.predictor.facts:
            self.library.set_facts(path, self.predictor.facts[path])
            return
        if path in self.predictor.fact_errors:
            self.library.set_error(path, self.predictor.fact_errors[path])
            return
        if path in self._pending:
            return
        self._pending.add(path)
        self.tasks.submit(cached_facts, lambda res, err, p=path: self._facts_done(p, res, err), path)

    def _facts_done(self, path: str, facts: Any, err: BaseException | None) -> None:
        self._pending.discard(path)
        if err is not None:
            msg = err.cause if isinstance(err, GGUFFileError) else f"{type(err).__name__}: {err}"
            self.predictor.set_fact_error(path, msg)
            self.library.set_error(path, msg)
            if path in self.library.selected_paths():
                self.message.emit(f"{os.path.basename(path)}: cannot read this file ({msg}).", "error")
        else:
            self.predictor.set_facts(path, facts)
            self.library.set_facts(path, facts)
        self._predictions_changed()

    def models_selected(self, paths: list[str]) -> None:
        for p in paths:
            err = self.predictor.fact_errors.get(p)
            if err:
                self.message.emit(f"{os.path.basename(p)}: cannot read this file ({err}).", "error")
        self.refresh()

    def current_model(self) -> str:
        """The first selected model, else the shown session's first, else the built-in one."""
        sel = self.library.selected_paths()
        if sel:
            return sel[0]
        models = self.sweeps.session.models()
        return models[0] if models else self.default_model

    # --- predictions ------------------------------------------------------------------------------
    def set_profile(self, profile: HardwareProfile | None) -> None:
        self.predictor.set_profile(profile)
        self._predictions_changed()

    def _predictions_changed(self) -> None:
        self.predictionsChanged.emit()
        self.refresh()

    def refresh(self) -> None:
        self.update_inspector()
        self.update_scenario()

    def update_inspector(self) -> None:
        path = self.current_model()
        self.inspector.show_model(path, self.predictor.facts.get(path), self.predictor.fact_errors.get(path),
                                  self.predictor)

    def update_scenario(self) -> None:
        """The scenario for the current model: the estimate from its own measured rates beside the prediction for
        the hardware they were measured on; the inspector's other profile as a what-if."""
        p, n = self.scenario.lengths()
        path, rows = self._measured_model()
        ran_on = self.predictor.hardware_of(rows) if rows else None
        chosen = self.predictor.profile
        main = ran_on or chosen
        what_if = chosen if ran_on is not None and not same_hardware(ran_on, chosen) else None
        main_rates, what_if_rates = self._rates(path, p, n, main), self._rates(path, p, n, what_if)
        totals = scenario_totals(p, n, main_rates.rates if main_rates else None, rows, path)
        what_if_total = scenario_totals(p, n, what_if_rates.rates if what_if_rates else None, [], path).predicted
        facts = self.predictor.facts.get(path)
        self.scenario.show_totals(totals, _named(main, main_rates), what_if=what_if_total,
                                  what_if_name=_named(what_if, what_if_rates), model=os.path.basename(path),
                                  n_ctx_train=facts.n_ctx_train if facts is not None else 0)

    def _measured_model(self) -> tuple[str, list[ResultRow]]:
        """The selected model and its ok rows in the shown run; when it has none there (a replayed or re-opened run
        of another file), the run's first model that has some, so the estimate always comes from a measurement."""
        ok = self.sweeps.session.ok_rows()
        path = self.current_model()
        for candidate in [path, *self.sweeps.session.models()]:
            rows = [r for r in ok if r.model_path == candidate]
            if rows:
                return candidate, rows
        return path, []

    def _rates(self, path: str, p: int, n: int, profile: HardwareProfile | None) -> RequestRates | None:
        """One request's predicted rates on ``profile``, per phase (app.views.scenario): ``predict``'s question for
        ``-p``/``-n`` at the inspector's context, KV type and -ngl."""
        if not path or profile is None:
            return None
        question = Question(n_ctx=self.inspector.ctx.value(), type_k=self.inspector.kv_type.currentText(),
                            n_gpu_layers=self.inspector.ngl.value(), n_prompt=max(p, 1), n_gen=n)
        return request_rates(self.predictor.asker(path, profile), question)


def _named(profile: HardwareProfile | None, rates: RequestRates | None) -> str:
    """A profile's name as the scenario panel says it, with what its TTFT and decode figures are (a phase marked
    ceiling has no expected figure: the least it can take)."""
    if profile is None:
        return ""
    return rates.named(profile.name) if rates is not None else profile.name
