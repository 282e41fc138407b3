"""Predictions for the window: a cache in front of :func:`app.predict.answer.answer` and a background runner for
curves. No Qt, no figures and no questions of its own.

Every figure comes from ``answer`` on this machine (``Expectations.machine``); what each table row, curve and the
inspector asks is :mod:`app.views` (through :mod:`app.predict.questions`); this module remembers the answers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from app.gui.expectations import Expectations
from app.model.facts import ModelFacts
from app.predict.answer import Answer, answer, same_hardware
from app.predict.placement import FitVerdict, fit_verdict
from app.predict.profiles import HardwareProfile, cpu_profile
from app.predict.questions import Question, run_context
from app.results.row_types import ResultRow
from app.run.plan import RemoteTest, TestSpec
from app.views import curves
from app.views.curves import TestPrediction, expected_of
from app.views.curves import positive as _f

if TYPE_CHECKING:  # the type of what the questions build; the window never builds one itself
    from app.predict.settings import PredictSettings

GIB = 1024**3
__all__ = ["PredictionService", "TestPrediction", "expected_of", "n_ctx_for", "same_hardware"]


def n_ctx_for(test: Mapping[str, Any] | ResultRow) -> int:
    """The context size the runner gives a test (TestSpec.n_ctx): depth + prompt + generated (+1), per sequence."""
    return run_context(test.to_mapping() if isinstance(test, ResultRow) else test)


class PredictionService:
    """Model facts by path, the chosen hardware profile, and cached ceilings."""

    def __init__(self) -> None:
        self.facts: dict[str, ModelFacts] = {}
        self.fact_errors: dict[str, str] = {}
        self.profile: HardwareProfile | None = None  # chosen in the inspector: a what-if beside measurements
        self.machine_cpu: HardwareProfile | None = None  # this machine's CPU (probed): what CPU rows ran on
        self.known: dict[str, HardwareProfile] = {}  # every profile in the hardware list, by name
        self.expectations = Expectations()  # the fits behind expected figures (this CPU; public GPU data)
        self.version = 0
        self.curves_version = 0
        self._cache: dict[tuple[Any, ...], Any] = {}
        self._curves: dict[tuple[Any, ...], Any] = {}
        self._pending: set[tuple[Any, ...]] = set()
        #: ``background(fn, done)`` runs ``fn()`` off the GUI thread and calls ``done(value)`` back on it; None:
        #: curves are computed at once. A prediction with its fit check costs milliseconds (it walks the tensor
        #: table), so a 20-point curve is worth moving off the GUI thread.
        self.background: Callable[[Callable[[], Any], Callable[[Any], None]], None] | None = None

    # --- inputs ---------------------------------------------------------------------------------
    def set_facts(self, path: str, facts: ModelFacts) -> None:
        self.facts[path] = facts
        self.fact_errors.pop(path, None)
        self._changed()

    def set_fact_error(self, path: str, message: str) -> None:
        self.fact_errors[path] = message
        self._changed()

    def set_profile(self, profile: HardwareProfile | None) -> None:
        self.profile = profile
        self._changed()

    def set_machine(self, machine_cpu: HardwareProfile | None, known: list[HardwareProfile]) -> None:
        """The hardware measurements can have run on: this CPU, and the profiles rows may name."""
        self.machine_cpu = machine_cpu
        self.known = {p.name: p for p in known}
        self._changed()

    def set_expectations(self, expectations: Expectations) -> None:
        """The fits expected figures come from (after the machine scan, and after a calibration)."""
        self.expectations = expectations
        self._changed()

    def hardware_of(self, rows: Sequence[ResultRow]) -> HardwareProfile | None:
        """The hardware measured rows ran on: their own ``hw_profile`` (with the figures they were predicted
        with), else this machine's CPU for rows with no layer offloaded; None when the rows do not say."""
        for r in rows:
            name = r.hw_profile or ""
            if name in self.known:
                return self.known[name]
            bw, tflops = _f(r.pred_bandwidth_gbps), _f(r.pred_tflops)
            if name and bw and tflops and (name.startswith("CPU") or r.n_gpu_layers_effective == 0):
                if r.cpu_info and r.cpu_info == self.expectations.cpu_model and self.machine_cpu:
                    return self.machine_cpu  # measured here: one profile for this CPU, the latest probe's
                ram = self.machine_cpu.vram_bytes if self.machine_cpu is not None else 64 * GIB
                return cpu_profile(name, bw, tflops * 1000.0, ram)
        if any(r.n_gpu_layers_effective == 0 for r in rows):
            return self.machine_cpu
        return None

    def _changed(self) -> None:
        self._cache.clear()
        self._curves.clear()
        self.version += 1

    def cached_curve(self, key: tuple[Any, ...], compute: Callable[[], Any]) -> Any:
        """``compute()``'s value for ``key``: at once without a background runner, else None until it is ready
        (``curves_version`` moves when it is)."""
        if key in self._curves:
            return self._curves[key]
        if self.background is None:
            self._curves[key] = compute()
            return self._curves[key]
        if key not in self._pending:
            self._pending.add(key)

            def done(value: Any, key: tuple[Any, ...] = key) -> None:
                self._pending.discard(key)
                self._curves[key] = value
                self.curves_version += 1

            self.background(compute, done)
        return None

    @property
    def busy(self) -> bool:
        return bool(self._pending)

    def mem_bytes(self, test: TestSpec | RemoteTest) -> float | None:
        """Weights + KV cache + compute buffer llama.cpp allocates for a test (cheap: no fit search); its settings
        go to the one decoder of settings tables as its table of column names."""
        facts = self.facts.get(test.model_path)
        res = curves.kv_curve(facts, [test.n_ctx], test.to_dict()) if facts is not None else None
        return float(res[1][0]) if res is not None else None

    @property
    def ready(self) -> bool:
        return self.profile is not None

    # --- one prediction -------------------------------------------------------------------------
    def predict_settings(self, path: str, settings: PredictSettings, profile: HardwareProfile | None = None, *,
                         measured: bool = False) -> Answer | None:
        """The answer for a model path on ``profile`` (default: the chosen one) on this machine, cached; None when
        facts or a profile are missing or it fails. ``measured``: may the answer be this file's own measurement
        here (the inspector's, as ``predict`` and the chooser give it); plots, tables and the scenario's prediction
        show what the sources say, beside the measurements they draw themselves."""
        facts = self.facts.get(path)
        profile = profile or self.profile
        if facts is None or profile is None:
            return None
        key = ("p", path, settings, profile, measured)
        if key in self._cache:
            return self._cache[key]
        try:
            got: Answer | None = answer(facts, profile, settings, self.expectations.machine, measured=measured)
        except Exception:  # noqa: BLE001 - a prediction that cannot be made is shown as "—"
            got = None
        self._cache[key] = got
        return got

    def verdict(self, path: str, question: Question, profile: HardwareProfile | None = None
                ) -> FitVerdict | str | None:
        """The fit verdict every surface prints for a file and a question on ``profile`` (default: the chosen one),
        cached: its placement, and what runs out; None while facts or a profile are missing; the reason where it
        cannot be made."""
        facts = self.facts.get(path)
        profile = profile or self.profile
        if facts is None or profile is None:
            return None
        key = ("v", path, question, profile)
        if key not in self._cache:
            try:
                self._cache[key] = fit_verdict(facts, profile, question, self.expectations.machine)
            except Exception as e:  # noqa: BLE001 - the reason is shown, never a bare "—"
                self._cache[key] = f"no verdict: {e}"
        return self._cache[key]

    def asker(self, path: str, profile: HardwareProfile | None = None) -> Callable[[PredictSettings], Answer | None]:
        """What a view asks through: :meth:`predict_settings` for ``path`` on ``profile`` (default: the chosen one)."""
        return lambda s: self.predict_settings(path, s, profile)

    def for_test(self, test: Mapping[str, Any] | ResultRow, profile: HardwareProfile | None = None
                 ) -> TestPrediction | None:
        """Ceilings for the settings of a curve's point (a table keyed by the field table's column names), or for a
        row (read as the test it ran: the same columns), on ``profile`` (default: the chosen one)."""
        table = test.to_mapping() if isinstance(test, ResultRow) else test
        return curves.row_prediction(self.asker(str(table.get("model_path", "")), profile), table)

    # --- curves for the plots (app.views.curves decides each point's question) -----------------------------------
    def ttft_curve(self, path: str, xs: Sequence[float], depth: int = 0, profile: HardwareProfile | None = None,
                   **settings: Any) -> np.ndarray | None:
        """Predicted TTFT (ms) for prompt lengths ``xs`` at ``depth`` on ``profile`` (default: the chosen one)."""
        return curves.ttft_curve(self.asker(path, profile), path, xs, depth, settings)

    def decode_curve(self, path: str, positions: Sequence[float], profile: HardwareProfile | None = None,
                     **settings: Any) -> np.ndarray | None:
        """Decode ceiling (tok/s) for a token at each context position on ``profile`` (default: the chosen one)."""
        return curves.decode_curve(self.asker(path, profile), positions, settings)

    def expected_curve(self, path: str, xs: Sequence[float], phase: str, depth: int = 0,
                       profile: HardwareProfile | None = None, **settings: Any) -> np.ndarray | None:
        """Expected figures along ``xs`` on ``profile`` (:func:`app.views.curves.expected_curve`)."""
        return curves.expected_curve(self.asker(path, profile), path, xs, phase, depth, settings)

    def decode_figure_curve(self, path: str, positions: Sequence[float], profile: HardwareProfile | None = None,
                            **settings: Any) -> tuple[str, np.ndarray] | None:
        """The answer's decode figure at each position on ``profile`` (:func:`app.views.curves.decode_figure_curve`)."""
        return curves.decode_figure_curve(self.asker(path, profile), positions, settings)

    def kv_curve(self, path: str, ctxs: Sequence[float], **settings: Any) -> tuple[np.ndarray, np.ndarray] | None:
        """(KV-cache bytes, weights + KV + compute bytes) llama.cpp allocates at each context size."""
        facts = self.facts.get(path)
        return curves.kv_curve(facts, ctxs, settings) if facts is not None else None
