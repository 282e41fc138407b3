"""Calibration: measure a ladder of small synthetic models, add this machine's stored runs, fit, and save the fit.

The ladder crosses weight types (one per kernel class and more: Q4_0, Q4_K, Q5_K, Q6_K, Q8_0, F16) with shapes of
different widths and depths, each run at a short prompt from an empty cache and a longer one at some depth (and,
for one shape, with flash attention off), so the fit can separate bytes, layers, prompt length and depth. The
models live in a temporary folder of the data dir that is removed afterwards; the fit is written only at the end
(whole, the previous one kept as ``.prev``), so a cancel or Ctrl+C leaves nothing half-written.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from app.model.facts import ModelFacts
from app.model.facts_cache import cached_facts
from app.paths import data_dir
from app.predict.calibration_fit import MachineFit, Sample, fit_machine, samples_from_rows
from app.predict.calibration_store import engine_version, llama_build, save_fit
from app.results.store import ResultStore
from app.run.calibrate_models import SynthShape, write_synth_model
from app.run.events import Event, TestStarted
from app.run.plan import TestSpec
from app.run.session import SweepSession
from app.telemetry.host import usable_cpu_threads
from app.telemetry.machine import scan_machine

LADDER_TYPES: tuple[str, ...] = ("Q4_0", "Q4_K", "Q5_K", "Q6_K", "Q8_0", "F16")
#: (n_embd, n_layer, GQA ratio, depth of the deep test): narrow and deep without GQA (attention weighs most), wide
#: and shallow, and the largest (about 80M parameters, whose cache is filled less deep: the untimed fill of every
#: repetition is the slow part). The GQA ratios differ so the fit can tell KV bytes from attention work.
FULL_SHAPES: tuple[tuple[int, int, int, int], ...] = ((256, 16, 1, 2048), (512, 6, 4, 2048), (1024, 8, 4, 512))
QUICK_SHAPES: tuple[tuple[int, int, int, int], ...] = ((256, 2, 1, 256), (256, 5, 4, 256), (512, 2, 4, 256))
QUICK_TYPES: tuple[str, ...] = ("Q8_0", "F16")


class CalibrationCancelled(Exception):
    """The calibration was cancelled; nothing was saved."""


@dataclass(frozen=True)
class CalibrateOptions:
    """What to measure: the ladder's weight types and shapes, tokens per test and repetitions."""

    types: tuple[str, ...] = LADDER_TYPES
    shapes: tuple[tuple[int, int, int, int], ...] = FULL_SHAPES
    n_gen: int = 32
    prompts: tuple[int, int] = (32, 256)
    repetitions: int = 2
    n_threads: int = 0
    use_store: bool = True

    @classmethod
    def quick(cls) -> CalibrateOptions:
        """A tiny ladder (seconds): two types, three small shapes, few tokens; for tests."""
        return cls(types=QUICK_TYPES, shapes=QUICK_SHAPES, n_gen=8, prompts=(16, 64), repetitions=1)


@dataclass(frozen=True)
class CalibrationResult:
    fit: MachineFit
    path: Path
    n_ladder_points: int
    n_store_points: int


def ladder_shapes(o: CalibrateOptions) -> list[SynthShape]:
    """Every weight type crossed with every shape of ``o``."""
    return [SynthShape(e, n, t, gqa=g) for t in o.types for e, n, g, _ in o.shapes]


def ladder_tests(models: Mapping[Path, SynthShape], o: CalibrateOptions) -> list[TestSpec]:
    """Per model: a short prompt from empty and a longer one at its shape's depth; for the first shape (the narrow
    one, where attention weighs most) also half that depth, and flash attention off."""
    depth_of = {(e, n, g): d for e, n, g, d in o.shapes}
    first = o.shapes[0][:3]
    tests = []
    for path, shape in models.items():
        common = dict(n_gen=o.n_gen, n_threads=o.n_threads, repetitions=o.repetitions)
        key = (shape.n_embd, shape.n_layer, shape.gqa)
        depth = depth_of[key]
        tests.append(TestSpec(str(path), n_prompt=o.prompts[0], n_depth=0, **common))
        tests.append(TestSpec(str(path), n_prompt=o.prompts[1], n_depth=depth, **common))
        if key == first:
            tests.append(TestSpec(str(path), n_prompt=o.prompts[0], n_depth=depth // 2, **common))
            tests.append(TestSpec(str(path), n_prompt=o.prompts[1], n_depth=depth, flash_attn=0, **common))
    return tests


def _facts_or_none(path: str) -> ModelFacts | None:
    if not path or not os.path.isfile(path):
        return None
    try:
        return cached_facts(path)
    except (OSError, ValueError):
        return None


def store_samples(store: ResultStore, cpu_info: str, gpu_info: str, version: str, limit: int = 2000) -> list[Sample]:
    """Samples of this machine's ok rows in ``store`` run with this llama-cpp-python version and the default thread
    count (the ladder's: the fit holds for it), whose model file is still there."""
    threads = (0, usable_cpu_threads())
    rows = [r for r in store.recent_rows(limit) if r.get("cpu_info") == cpu_info
            and (r.get("gpu_info") or "") == gpu_info and str(r.get("llama_cpp_python_version") or "") == version
            and int(r.get("n_threads") or 0) in threads]
    return samples_from_rows(rows, _facts_or_none)


class Calibration:
    """One calibration run; ``cancel`` is safe from any thread (the GUI's Cancel, a signal handler)."""

    def __init__(self, options: CalibrateOptions | None = None, *, store: ResultStore | None = None,
                 progress: Callable[[str], None] | None = None) -> None:
        self.options = options or CalibrateOptions()
        self.store = store
        self.progress = progress or (lambda _msg: None)
        self._cancel = threading.Event()
        self._session: SweepSession | None = None

    def cancel(self) -> None:
        self._cancel.set()
        session = self._session
        if session is not None:
            session.cancel(grace_s=0.0)

    def _check(self) -> None:
        if self._cancel.is_set():
            raise CalibrationCancelled("calibration cancelled; the previous fit is unchanged")

    def _write_ladder(self, folder: Path) -> dict[Path, SynthShape]:
        shapes = ladder_shapes(self.options)
        models = {}
        for i, shape in enumerate(shapes, 1):
            self._check()
            self.progress(f"writing model {i}/{len(shapes)}: {shape.name}")
            models[write_synth_model(folder / f"{shape.name}.gguf", shape)] = shape
        return models

    def _measure(self, models: dict[Path, SynthShape], machine: dict[str, Any]) -> list[dict[str, Any]]:
        tests = ladder_tests(models, self.options)

        def on_event(ev: Event) -> None:
            if isinstance(ev, TestStarted):
                t = ev.test
                self.progress(f"test {ev.test_index + 1}/{len(tests)}: {Path(t['model_path']).stem} "
                              f"p{t['n_prompt']} d{t['n_depth']}{' fa off' if t.get('flash_attn') == 0 else ''}")

        self._check()
        self._session = SweepSession(tests, store=None, machine=machine, token_ticks=False)
        try:
            outcome = self._session.run(on_event)
        finally:
            self._session = None
        self._check()
        if outcome.status == "cancelled":
            raise CalibrationCancelled("calibration cancelled; the previous fit is unchanged")
        return outcome.rows

    def run(self) -> CalibrationResult:
        """Write and measure the ladder, add the store's rows, fit and save. Raises FitError, CalibrationCancelled."""
        scan = scan_machine()
        machine = scan.run_facts()
        cpu_info, gpu_info, build = scan.cpu_model, scan.gpu_info(), llama_build()
        root = data_dir() / "calibration"
        root.mkdir(parents=True, exist_ok=True)
        folder = Path(tempfile.mkdtemp(prefix="ladder-", dir=root))
        try:
            rows = self._measure(self._write_ladder(folder), machine)
            ladder = samples_from_rows(rows, _facts_or_none)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        use_store = self.store is not None and self.options.use_store
        stored = store_samples(self.store, cpu_info, gpu_info, engine_version()) if use_store else []
        self.progress(f"fitting {len(ladder)} ladder points and {len(stored)} stored runs")
        fit = fit_machine(ladder + stored, cpu_info=cpu_info, gpu_info=gpu_info, build=build,
                          created=date.today().isoformat())
        self._check()
        return CalibrationResult(fit, save_fit(fit), len(ladder), len(stored))


def residual_table(fit: MachineFit) -> str:
    """Per backend and phase: each point measured vs fitted, then the median and worst error."""
    lines = []
    for backend, phases in fit.fits.items():
        for phase, pf in phases.items():
            lines.append(f"{backend} {phase}: {len(pf.points)} points, median error {pf.median_error * 100:.1f}%, "
                         f"worst {pf.worst_error * 100:.1f}%, band ±{pf.band_frac * 100:.0f}%")
            lines.append(f"  {'point':<44} {'measured':>10} {'fitted':>10} {'error':>8}")
            for p in pf.points:
                lines.append(f"  {p.label[:44]:<44} {p.measured_tps:>10.1f} {p.fitted_tps:>10.1f} "
                             f"{p.rel_error * 100:>+7.1f}%{'' if p.used else '  (set aside: an outlier)'}")
    lines.extend(f"note: {n}" for n in fit.notes)
    return "\n".join(lines)
