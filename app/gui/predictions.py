"""Predictions for the window: a cache in front of :func:`app.predict.answer.answer`. No Qt, no figures of its own.

Every figure comes from ``answer`` on this machine (``Expectations.machine``); this module only chooses what to ask
(which depth, which context) for a table row or a plotted curve, as ``PredictSettings``, and remembers the answers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from app.gui.expectations import Expectations
from app.model.facts import ModelFacts
from app.predict.answer import Answer, Figure, answer, memory_by_context, same_hardware
from app.predict.placement import FitVerdict, fit_verdict
from app.predict.profiles import HardwareProfile, cpu_profile
from app.predict.questions import Question
from app.predict.settings import PredictSettings
from app.results.row_types import ResultRow
from app.run.plan import RemoteTest, TestSpec

GIB = 1024**3
__all__ = ["PredictionService", "TestPrediction", "expected_of", "n_ctx_for", "same_hardware"]


@dataclass(frozen=True)
class TestPrediction:
    """What the selected hardware allows for one test's settings."""

    __test__ = False

    ttft_ms: float | None
    prefill_tps: float | None
    decode_tps: float | None  # at the generation's average position in the context
    kv_bytes: float | None
    needed_bytes: float | None
    fit_status: str


def _f(x: Any) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) and v > 0 else None


def _int(d: Mapping[str, Any], key: str, default: int) -> int:
    try:
        return int(d.get(key, default) if d.get(key) is not None else default)
    except (TypeError, ValueError):
        return default


def n_ctx_for(test: Mapping[str, Any] | ResultRow) -> int:
    """The context size the runner gives a test (TestSpec.n_ctx): depth + prompt + generated (+1), per sequence."""
    if isinstance(test, ResultRow):
        test = test.to_mapping()  # read as the test it ran: the same columns
    per_seq = _int(test, "n_depth", 0) + _int(test, "n_prompt", 0) + _int(test, "n_gen", 0) + 1
    return -(-per_seq * max(_int(test, "n_parallel", 1), 1) // 256) * 256


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
        go to the one decoder of settings tables (PredictSettings.from_test) as its table of column names."""
        res = self._kv_curve(test.model_path, [test.n_ctx], PredictSettings.from_test(test.to_dict()))
        return float(res[1][0]) if res is not None else None

    @property
    def ready(self) -> bool:
        return self.profile is not None

    # --- one prediction -------------------------------------------------------------------------
    def predict(self, path: str, *, n_ctx: int, n_gpu_layers: int = 999, type_k: str = "f16",
                type_v: str | None = None, n_prompt: int = 512, n_gen: int = 128, n_depth: int = 0,
                flash_attn: bool = False, n_ubatch: int = 512) -> Answer | None:
        """``predict_settings`` with the settings given one by one."""
        return self.predict_settings(path, PredictSettings(
            n_ctx=max(n_ctx, 1), n_gpu_layers=n_gpu_layers, type_k=type_k, type_v=type_v or type_k,
            n_prompt=max(n_prompt, 1), n_gen=max(n_gen, 0), depth=n_depth, n_ubatch=n_ubatch, flash_attn=flash_attn,
        ))

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

    def for_test(self, test: Mapping[str, Any] | ResultRow, profile: HardwareProfile | None = None
                 ) -> TestPrediction | None:
        """Ceilings for the settings of a curve's point (a table keyed by the field table's column names), or for a
        row (read as the test it ran: the same columns), on ``profile`` (default: the chosen one). Decode is read at
        the generation's average position."""
        table = test.to_mapping() if isinstance(test, ResultRow) else test  # what PredictSettings.from_test decodes
        n_prompt, n_gen = _int(table, "n_prompt", 512), _int(table, "n_gen", 128)
        got = self.predict_settings(str(table.get("model_path", "")),
                                    PredictSettings.from_test(table, n_ctx=n_ctx_for(table)), profile)
        if got is None:
            return None
        pred = got.prediction
        prefill = _f(pred.prefill_ceiling_tps) if n_prompt > 0 else None
        return TestPrediction(
            ttft_ms=n_prompt / prefill * 1000.0 if prefill else None,
            prefill_tps=prefill,
            decode_tps=_f(pred.decode_ceiling_tps) if n_gen > 0 else None,
            kv_bytes=_f(pred.kv_bytes),
            needed_bytes=_f(pred.weight_bytes + pred.kv_bytes + pred.compute_buffer_bytes),
            fit_status=str(pred.fit.status),
        )

    # --- curves for the plots -------------------------------------------------------------------
    def ttft_curve(self, path: str, xs: Sequence[float], depth: int = 0, profile: HardwareProfile | None = None,
                   **settings: Any) -> np.ndarray | None:
        """Predicted TTFT (ms) for prompt lengths ``xs`` at ``depth`` on ``profile`` (default: the chosen one)."""
        ys = []
        for x in xs:
            t = dict(settings, model_path=path, n_prompt=int(x), n_gen=0, n_depth=depth)
            p = self.for_test(t, profile)
            if p is None:
                return None
            ys.append(p.ttft_ms if p.ttft_ms is not None else np.nan)
        return np.asarray(ys, dtype=float)

    def decode_curve(self, path: str, positions: Sequence[float], profile: HardwareProfile | None = None,
                     **settings: Any) -> np.ndarray | None:
        """Decode ceiling (tok/s) for a token at each context position on ``profile`` (default: the chosen one)."""
        base = PredictSettings.from_test(settings)
        ys = []
        for x in positions:
            p = self.predict_settings(path, base.decode_at(float(x)), profile)
            if p is None:
                return None
            ys.append(_f(p.prediction.decode_ceiling_tps) or np.nan)
        return np.asarray(ys, dtype=float)

    def expected_curve(self, path: str, xs: Sequence[float], phase: str, depth: int = 0,
                       profile: HardwareProfile | None = None, **settings: Any) -> np.ndarray | None:
        """Expected figures along ``xs`` on ``profile`` as rows (value, low, high): TTFT (ms) against prompt length
        for ``phase="prefill"``, decode tok/s against position for ``"decode"``; None where no fit gives one."""
        base = PredictSettings.from_test(dict(settings, model_path=path))
        out = []
        for x in xs:
            if phase == "prefill":
                at_x = replace(base, n_ctx=n_ctx_for({"n_prompt": int(x), "n_depth": depth}), n_prompt=max(int(x), 1),
                               n_gen=0, depth=depth)
            else:
                at_x = base.decode_at(float(x))
            got = self.predict_settings(path, at_x, profile)
            e = expected_of(got, phase) if got is not None else None
            if e is None or e.low is None or e.high is None:
                return None
            if phase == "prefill":  # a faster prefill is a shorter TTFT: the band flips
                n = max(int(x), 1)
                out.append((n / e.value * 1000.0, n / e.high * 1000.0, n / e.low * 1000.0))
            else:
                out.append((e.value, e.low, e.high))
        return np.asarray(out, dtype=float).T

    def decode_figure_curve(self, path: str, positions: Sequence[float], profile: HardwareProfile | None = None,
                            **settings: Any) -> tuple[str, np.ndarray] | None:
        """The answer's decode figure at each position on ``profile``, as the inspector gives it for a context
        (expected with its band where a source gives one, else the ceiling): (its kind, rows value, low, high; the
        band's ends are the value where there is no band). The kind is "ceiling" where any position has only a
        ceiling, else the first position's (``fit``, ``public``…)."""
        base = PredictSettings.from_test(settings)
        rows, kinds = [], []
        for x in positions:
            got = self.predict_settings(path, base.decode_at(float(x)), profile)
            if got is None:
                return None
            fig = got.decode
            value = _f(fig.value) or np.nan
            rows.append((value, _f(fig.low) or value, _f(fig.high) or value))
            kinds.append(str(fig.kind))
        if not rows:
            return None
        kind = "ceiling" if "ceiling" in kinds else kinds[0]
        return kind, np.asarray(rows, dtype=float).T

    def kv_curve(self, path: str, ctxs: Sequence[float], **settings: Any) -> tuple[np.ndarray, np.ndarray] | None:
        """(KV-cache bytes, weights + KV + compute bytes) llama.cpp allocates at each context size."""
        return self._kv_curve(path, ctxs, PredictSettings.from_test(settings))

    def _kv_curve(self, path: str, ctxs: Sequence[float],
                  s: PredictSettings) -> tuple[np.ndarray, np.ndarray] | None:
        facts = self.facts.get(path)
        if facts is None:
            return None
        try:
            kv, total = memory_by_context(facts, s, ctxs)
        except Exception:  # noqa: BLE001
            return None
        return np.asarray(kv, dtype=float), np.asarray(total, dtype=float)


def expected_of(got: Answer, phase: str) -> Figure | None:
    """An answer's expected figure for ``phase`` (with its band where its source gives one), None where the answer
    is a ceiling (or measured: a plot's expected line is what the sources say)."""
    fig = got.expected_prefill if phase == "prefill" else got.expected_decode
    return fig if fig is not None and fig.value > 0 else None
