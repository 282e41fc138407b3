"""Calibration: measure a ladder of small synthetic models, add this machine's stored runs, fit, and save the fit.

The ladder measures one weight type per CPU kernel path (Q4_0, Q4_1, Q5_0, Q4_K, Q5_K, Q6_K, Q8_0, F16). The anchor
type (Q8_0) runs shapes of different widths and depths, each at a short and a longer prompt from an empty cache and
the longer one at some depth (and, for one shape, half that depth and flash attention off), plus one long prompt
deep in the cache: these fix the terms every type shares (bytes vs layers vs fixed costs, prompt length, depth, the
cache spill). Every other type runs one wide shape at a short and a longer prompt and a narrow one at the longer,
enough for its own bytes, FLOPs and width coefficients; the default two passes take about three minutes on 2
cores. On a GPU build (every layer offloaded by default) the ladder runs twice, the second time with no layer
offloaded (the host side of a split placement), and the anchor shapes run with half their layers' feed-forward on
the host: what a device crossing costs here (:mod:`app.predict.machine_fit.crossing_fit`).

Only stable tests taken on a quiet machine are fitted, of the ladder and of the stored runs alike
(:func:`app.predict.machine_fit.store_efficiency.untrustworthy`, the rule every expected figure follows): a ladder
test that is not is measured once more; those left out are counted in the progress and the fit's notes, and with
fewer than half of the ladder left the fit is refused. The models live in a temporary folder of the data dir that
is removed afterwards; the fit is written only at the end (whole, the previous one kept as ``.prev``), so a cancel
or Ctrl+C leaves nothing half-written.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import date
from pathlib import Path
from typing import Any

from app.calibrate.synth_models import SynthShape, write_synth_model
from app.model.facts import ModelFacts
from app.model.facts_cache import cached_facts
from app.paths import data_dir, remove_leftovers
from app.predict.cpu_kernels import cpu_class_table, fallback_type
from app.predict.machine_fit.calibration_fit import (
    MachineContext,
    MachineFit,
    Sample,
    fit_machine,
    row_backend,
    row_label,
    samples_from_rows,
)
from app.predict.machine_fit.calibration_store import engine_version, fit_path, llama_build, read_fit, save_fit
from app.predict.machine_fit.fitted_model import REACH_Z, FitError
from app.predict.machine_fit.store_efficiency import untrustworthy
from app.predict.settings import PredictSettings
from app.results.fields import BUSY_OTHER_CPU_PCT, RowStatus
from app.results.phases import row_rate, spread
from app.results.row_types import ResultRow
from app.results.store import ResultStore
from app.run.events import Event, TestStarted
from app.run.plan import TestSpec
from app.run.session import SweepSession
from app.telemetry.cpu_cache import l2_cache_bytes, llc_bytes
from app.telemetry.host import usable_cpu_threads
from app.telemetry.llama_build import installed_gpu_backends
from app.telemetry.machine import scan_machine
from app.telemetry.repack_guard import ensure_verdict

#: The folder the ladder's models are written to while a calibration runs: ``ladder-<pid>-<random>`` in the data dir's
#: calibration folder, removed when it ends; one whose process is gone (killed) is removed by the next calibration.
#: Older versions named it without the pid: removed once a day old.
LADDER_PREFIX = "ladder-"
LADDER_NAME = re.compile(rf"^{LADDER_PREFIX}(\d+)-")
OLD_LADDER_NAME = re.compile(rf"^{LADDER_PREFIX}(?!\d+-)")
#: One type per CPU kernel path the common files use (app.predict.cpu_kernels): on x86 with AVX2, Q4_0 and Q4_K run
#: the repacked GEMM kernels, Q4_1, Q5_0, Q8_0, Q5_K and Q6_K the plain vec_dot ones, F16 the float path.
LADDER_TYPES: tuple[str, ...] = ("Q4_0", "Q4_1", "Q5_0", "Q4_K", "Q5_K", "Q6_K", "Q8_0", "F16")
#: The anchor types measured over every shape and depth: they fix the terms all types share (per layer, fixed, KV
#: bytes, attention with flash attention on and off, the cache spill); the other types need only their own bytes and
#: FLOPs coefficients.
ANCHOR_TYPES: tuple[str, ...] = ("Q8_0",)
#: (n_embd, n_layer, GQA ratio, depth of the deep test): narrow and deep without GQA (attention weighs most), wide
#: and shallow, the largest (about 80M parameters, whose cache is filled less deep: the untimed fill of every
#: repetition is the slow part), and the shallow one's width with four times its layers: real models have 22-80
#: layers, and with at most 16 here the fit found no per-layer prefill cost and predicted a 30-layer model of width
#: 576 (SmolLM2's shape, synthetic or real) 10-20 % fast. The GQA ratios differ so the fit can tell KV bytes from
#: attention work.
FULL_SHAPES: tuple[tuple[int, int, int, int], ...] = ((256, 16, 1, 2048), (512, 6, 4, 2048), (1024, 8, 4, 512),
                                                      (512, 24, 4, 1024))
#: The shape every other type runs (wide: the weights dominate), a short and a long prompt from an empty cache.
TYPE_SHAPE: tuple[int, int, int] = (1024, 8, 4)
#: ... and a narrow, deep one (an anchor shape), the long prompt only: with the wide shape alone a type's cost per
#: FLOP came from width 1024, and SmolLM2 (576 wide, 30 layers) ran 20 % slower per FLOP than that in Q4_1 and Q8_0
#: alike (llama-bench, p256 and p512), so its prefill was predicted 13-25 % fast. Two widths per type bound the
#: reach to the widths of real small models.
NARROW_SHAPE: tuple[int, int, int] = (512, 24, 4)
#: A long prompt deep in the cache on SmolLM2's head layout (9 heads of 64, 3 KV heads): the one point whose KV span
#: per head is well beyond a core's L2 (n_embd, n_layer, GQA, depth, prompt).
DEEP_TEST: tuple[int, int, int, int, int] = (576, 8, 3, 4096, 512)
#: A mixture of experts on the anchor type (n_embd, n_layer, n_expert, n_expert_used), experts of 256 rows, a
#: short and a long prompt from an empty cache: a token's routed experts are small matmuls of their own, scattered
#: over the tensor, and on 1 thread here MoEs of 8-128 experts decoded 2-21 % slower than a dense model reading the
#: same bytes; without one on the ladder a held-out MoE was predicted 25-40 % fast (issue #41 item 7).
MOE_TEST: tuple[int, int, int, int] = (768, 8, 16, 4)
MOE_FF = 256
QUICK_SHAPES: tuple[tuple[int, int, int, int], ...] = ((256, 2, 1, 256), (256, 5, 4, 256), (512, 2, 4, 256))
QUICK_TYPES: tuple[str, ...] = ("Q8_0", "F16")
#: Anchor shapes a GPU build also measures with half their layers' feed-forward on the host (their crossings), at
#: twice the ladder's repetitions: a crossing's cost is one figure from few tests, and only stable ones teach it.
CROSSING_SHAPES = 4
#: Times the crossing tests are measured again while none of them is stable and quiet.
CROSSING_RETRIES = 3
#: The share of the ladder's ok tests that must be stable and quiet
#: (app.predict.machine_fit.store_efficiency.untrustworthy) for a fit: below it whole weight types and shapes lose
#: their points, and what is left speaks for a busy machine.
MIN_TRUSTED_SHARE = 0.5


class CalibrationCancelled(Exception):
    """The calibration was cancelled; nothing was saved."""


@dataclass(frozen=True)
class CalibrateOptions:
    """What to measure: the ladder's weight types (anchors over every shape, the rest on ``type_shape`` and
    ``narrow_shape``, None: none), the shapes, the deep test (None: none), tokens per test, repetitions and passes
    over the whole ladder (each test's repetitions pooled: on a shared machine one pass read points 10-25 % apart
    from the next)."""

    types: tuple[str, ...] = LADDER_TYPES
    shapes: tuple[tuple[int, int, int, int], ...] = FULL_SHAPES
    n_gen: int = 32
    prompts: tuple[int, int] = (32, 256)
    repetitions: int = 3
    n_threads: int = 0
    use_store: bool = True
    anchors: tuple[str, ...] = ANCHOR_TYPES
    type_shape: tuple[int, int, int] = TYPE_SHAPE
    narrow_shape: tuple[int, int, int] | None = NARROW_SHAPE
    deep: tuple[int, int, int, int, int] | None = DEEP_TEST
    passes: int = 2
    moe: tuple[int, int, int, int] | None = MOE_TEST

    @classmethod
    def quick(cls) -> CalibrateOptions:
        """A tiny ladder (seconds): two types, three small shapes, few tokens; for tests."""
        return cls(types=QUICK_TYPES, shapes=QUICK_SHAPES, n_gen=8, prompts=(16, 64), repetitions=1,
                   type_shape=(512, 2, 4), narrow_shape=None, deep=None, passes=1, moe=None)

    @property
    def anchor_types(self) -> tuple[str, ...]:
        """The anchors among ``types`` (the first type when none is)."""
        return tuple(t for t in self.types if t in self.anchors) or self.types[:1]


@dataclass(frozen=True)
class CalibrationResult:
    fit: MachineFit
    path: Path
    n_ladder_points: int
    n_store_points: int
    wall_s: float = 0.0
    n_ladder_left_out: int = 0  # ok ladder tests left out: unstable or taken while the machine was busy
    n_store_left_out: int = 0  # ok stored runs left out for the same reason


@dataclass(frozen=True)
class TrustedRows:
    """The ok rows a fit may learn from (neither unstable nor taken on a busy machine, by
    :func:`app.predict.machine_fit.store_efficiency.untrustworthy`) and how many ok rows were left out."""

    rows: list[ResultRow]
    n_left_out: int

    @property
    def n_ok(self) -> int:
        return len(self.rows) + self.n_left_out

    def left_out(self, what: str) -> str:
        """"3 of 24 ladder tests left out: unstable, or taken while the machine was busy", or "" when none was."""
        if not self.n_left_out:
            return ""
        return f"{self.n_left_out} of {self.n_ok} {what} left out: unstable, or taken while the machine was busy"


def trusted_rows(rows: list[ResultRow]) -> TrustedRows:
    """The ok rows of ``rows`` that are stable and quiet, and the count of ok rows that are not (failed rows are
    neither: they never reach a fit)."""
    ok = [r for r in rows if r.status == RowStatus.OK]
    kept = [r for r in ok if not untrustworthy(r)]
    return TrustedRows(kept, len(ok) - len(kept))


def check_enough_trusted(ladder: TrustedRows) -> None:
    """Raises FitError (one line) when fewer than :data:`MIN_TRUSTED_SHARE` of the ladder's ok tests are stable
    and quiet."""
    if ladder.n_ok and len(ladder.rows) < MIN_TRUSTED_SHARE * ladder.n_ok:
        raise FitError(f"only {len(ladder.rows)} of {ladder.n_ok} ladder tests were stable and quiet; the other "
                       f"{ladder.n_left_out} were unstable (spread ≥ 10 % of the mean) or taken while other processes "
                       f"used over {BUSY_OTHER_CPU_PCT:.0f} % of a CPU: too few to fit; calibrate again when the "
                       f"machine is quieter")


@dataclass(frozen=True)
class LadderModel:
    """One model of the ladder and its tests: (n_prompt, depth, flash attention) each."""

    shape: SynthShape
    tests: tuple[tuple[int, int, bool], ...]


def ladder_models(o: CalibrateOptions) -> list[LadderModel]:
    """The anchors over every shape: a short and a longer prompt from empty and the longer one at the shape's depth
    (the longer prompt from empty at several widths tells the width term from attention); on the first
    shape (narrow, where attention weighs most) also half that depth, and flash attention off; and the deep test.
    Every other type on ``type_shape``: a short and a longer prompt from an empty cache; and on ``narrow_shape``
    the longer one."""
    short, long = o.prompts
    out = []
    for t in o.anchor_types:
        for i, (e, n, g, d) in enumerate(o.shapes):
            tests = [(short, 0, True), (long, 0, True), (long, d, True)]
            if i == 0:
                tests += [(short, d // 2, True), (long, d, False)]
            out.append(LadderModel(SynthShape(e, n, t, gqa=g), tuple(tests)))
        if o.deep is not None:
            e, n, g, d, p = o.deep
            out.append(LadderModel(SynthShape(e, n, t, gqa=g), ((p, d, True),)))
        if o.moe is not None:
            out.append(LadderModel(moe_shape(o.moe, t), ((short, 0, True), (long, 0, True))))
    others = [t for t in o.types if t not in o.anchor_types]
    e, n, g = o.type_shape
    out += [LadderModel(SynthShape(e, n, t, gqa=g), ((short, 0, True), (long, 0, True))) for t in others]
    if o.narrow_shape is not None:
        e, n, g = o.narrow_shape
        out += [LadderModel(SynthShape(e, n, t, gqa=g), ((long, 0, True),)) for t in others]
    return out


def moe_shape(moe: tuple[int, int, int, int], weight_type: str) -> SynthShape:
    """The ladder's mixture of experts: experts of :data:`MOE_FF` rows, a float token embedding (so the random
    router sends each token to its own experts)."""
    e, n, x, u = moe
    return SynthShape(e, n, weight_type, ff_ratio=MOE_FF / e, n_expert=x, n_expert_used=u, embd_type="F16")


def host_ffn_override(n_layer: int) -> str:
    """An ``-ot`` keeping the feed-forward of the first half of ``n_layer`` layers in host memory."""
    layers = "|".join(str(i) for i in range(max(n_layer // 2, 1)))
    return rf"blk\.({layers})\.ffn_(gate|up|down)\.weight=CPU"


def ladder_tests(models: Mapping[Path, LadderModel], o: CalibrateOptions, gpu_build: bool = False
                 ) -> list[TestSpec]:
    """The tests of every written model, ``o``'s tokens and repetitions. On a GPU build (every layer offloaded by
    default) each test also runs with none (-ngl 0: the host side of a split placement), and the anchor type's
    first :data:`CROSSING_SHAPES` shapes run with the feed-forward of half their layers kept on the host (-ot),
    the short prompt from an empty cache: their crossings' cost (app.predict.machine_fit.crossing_fit)."""
    common = TestSpec("", n_gen=o.n_gen, n_threads=o.n_threads, repetitions=o.repetitions)
    out = [replace(common, model_path=str(path), n_prompt=p, n_depth=d,
                   flash_attn=common.flash_attn if fa else 0)
           for path, m in models.items() for p, d, fa in m.tests]
    if not gpu_build:
        return out
    crossing = [replace(common, model_path=str(path), n_prompt=o.prompts[0], repetitions=2 * o.repetitions,
                        tensor_buft_overrides=host_ffn_override(m.shape.n_layer))
                for path, m in [(p, m) for p, m in models.items() if m.shape.weight_type in o.anchor_types][
                    :CROSSING_SHAPES]]
    return out + [replace(t, n_gpu_layers=0) for t in out] + crossing


def held_out_stand_ins(types: tuple[str, ...], flags: tuple[str, ...]) -> dict[str, str]:
    """Each measured type -> the measured type that would stand in for it had the ladder left it out (its stand-in
    error is judged on these: app.predict.machine_fit.calibration_fit.stand_in_error)."""
    out = {}
    for t in types:
        s = fallback_type(t, [m for m in types if m != t], flags)
        if s is not None:
            out[t.upper()] = s
    return out


def _facts_or_none(path: str) -> ModelFacts | None:
    if not path or not os.path.isfile(path):
        return None
    try:
        return cached_facts(path)
    except (OSError, ValueError):
        return None


def repacked_types(rows: list[ResultRow]) -> tuple[str, ...]:
    """The weight types whose ok rows had weights in an extra buffer (CPU_REPACK, AMX): their kernels differ with
    repacking off."""
    found = {facts.file_type for r in rows if r.status == RowStatus.OK and r.extra_buffers
             and (facts := _facts_or_none(r.model_path or "")) is not None}
    return tuple(sorted(found))


def store_rows(store: ResultStore, cpu_info: str, gpu_info: str, version: str, limit: int = 2000,
               repack: int = 1) -> TrustedRows:
    """This machine's ok rows in ``store`` run with this llama-cpp-python version, the default thread count and
    ``repack`` (the ladder's: the fit holds for them), split by trust (:func:`trusted_rows`). Rows from before the
    repack column ran with repacking on."""
    threads = (0, usable_cpu_threads())
    rows = [r for r in store.recent_rows(limit) if r.cpu_info == cpu_info
            and (r.gpu_info or "") == gpu_info and (r.llama_cpp_python_version or "") == version
            and (r.n_threads or 0) in threads and PredictSettings.from_row(r).repack == repack]
    return trusted_rows(rows)


def store_samples(store: ResultStore, cpu_info: str, gpu_info: str, version: str, limit: int = 2000,
                  ctx: MachineContext | None = None, repack: int = 1) -> list[Sample]:
    """Samples of :func:`store_rows`' stable, quiet rows whose model file is still there, reduced with ``ctx``."""
    return samples_from_rows(store_rows(store, cpu_info, gpu_info, version, limit, repack).rows, _facts_or_none, ctx)


@dataclass(frozen=True)
class LadderFit:
    """A fit of the ladder's rows and the stored runs, with the points it used and the ladder tests it left out."""

    fit: MachineFit
    n_ladder_points: int
    n_store_points: int
    n_ladder_left_out: int


def fit_ladder(rows: list[ResultRow], stored: TrustedRows, *, ctx: MachineContext, cpu_info: str,
               gpu_info: str, build: str, repack: int, progress: Callable[[str], None] = lambda _m: None) -> LadderFit:
    """Fit the ladder's stable, quiet ``rows`` and the stable, quiet stored runs (``stored``: :func:`store_rows`);
    what was left out of each goes into the progress line, the fit's notes and a FitError's message.

    Raises FitError when fewer than :data:`MIN_TRUSTED_SHARE` of the ladder's tests are stable and quiet, or when
    what is left cannot be fitted."""
    trusted = trusted_rows(rows)
    check_enough_trusted(trusted)
    ladder = samples_from_rows(trusted.rows, _facts_or_none, ctx)
    from_store = samples_from_rows(stored.rows, _facts_or_none, ctx)
    left_out = tuple(t for t in (trusted.left_out("ladder tests"), stored.left_out("stored runs")) if t)
    said = "".join(f"; {t}" for t in left_out)
    progress(f"fitting {len(ladder)} ladder points and {len(from_store)} stored runs{said}")
    try:
        fit = fit_machine(ladder + from_store, cpu_info=cpu_info, gpu_info=gpu_info, build=build,
                          created=date.today().isoformat(), context=ctx, repack=repack,
                          repacked_types=repacked_types(rows))
    except FitError as e:
        raise FitError(f"{e}{said}") from None
    fit = fit.with_crossings(trusted.rows + stored.rows, _facts_or_none)
    return LadderFit(replace(fit, notes=fit.notes + left_out), len(ladder), len(from_store), trusted.n_left_out)


class Calibration:
    """One calibration run; ``cancel`` is safe from any thread (the GUI's Cancel, a signal handler)."""

    def __init__(self, options: CalibrateOptions | None = None, *, store: ResultStore | None = None,
                 progress: Callable[[str], None] | None = None) -> None:
        self.options = options or CalibrateOptions()
        self.store = store
        self.progress = progress or (lambda _msg: None)
        self._cancel = threading.Event()
        self._session: SweepSession | None = None
        #: (backend, phase) -> how far each test's second pass landed from its first (:func:`pass_spreads`)
        self.pass_spreads: dict[tuple[str, str], list[float]] = {}

    def cancel(self) -> None:
        self._cancel.set()
        session = self._session
        if session is not None:
            session.cancel(grace_s=0.0)

    def _check(self) -> None:
        if self._cancel.is_set():
            raise CalibrationCancelled("calibration cancelled; the previous fit is unchanged")

    def _write_ladder(self, folder: Path) -> dict[Path, LadderModel]:
        ladder = ladder_models(self.options)
        models = {}
        for i, m in enumerate(ladder, 1):
            self._check()
            self.progress(f"writing model {i}/{len(ladder)}: {m.shape.name}")
            models[write_synth_model(folder / f"{m.shape.name}.gguf", m.shape)] = m
        return models

    def _measure(self, tests: list[TestSpec], machine: dict[str, Any]) -> list[ResultRow]:
        def on_event(ev: Event) -> None:
            if isinstance(ev, TestStarted) and isinstance(ev.test, TestSpec):
                t = ev.test
                where = (" on the CPU" if t.n_gpu_layers == 0 else
                         " FFN half on the CPU" if t.tensor_buft_overrides != "none" else "")
                self.progress(f"test {ev.test_index + 1}/{len(tests)}: {Path(t.model_path).stem} "
                              f"p{t.n_prompt} d{t.n_depth}{' fa off' if t.flash_attn == 0 else ''}{where}")

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

    def _measure_ladder(self, folder: Path, machine: dict[str, Any], fit_rows: Callable[[list[ResultRow]],
                        MachineFit]) -> tuple[list[ResultRow], MachineFit]:
        """Write and measure the ladder (``passes`` times, each test's repetitions pooled over the passes) and fit
        it (``fit_rows``); tests the fit finds disturbed, and those unstable or taken on a busy machine (left out
        of the fit), are measured once more, and fitted again: a disturbed test keeps the faster figures (another
        process only ever slows a test), a left-out one takes the new measurement where that one is stable and
        quiet. A new measurement that is not stays unused."""
        tests = ladder_tests(self._write_ladder(folder), self.options, gpu_build=bool(installed_gpu_backends()))
        rows = previous = self._measure(tests, machine)
        for n in range(2, self.options.passes + 1):
            self.progress(f"pass {n} of {self.options.passes} over the ladder")
            again = self._measure(tests, machine)
            for key, xs in pass_spreads(previous, again).items():
                self.pass_spreads.setdefault(key, []).extend(xs)
            rows = [pooled(a, b) for a, b in zip(rows, again, strict=True)]
            previous = again
        rows = self._crossings_again(tests, rows, machine)
        fit = fit_rows(rows)
        disturbed = disturbed_labels(fit)
        left_out = {i for i, r in enumerate(rows) if r.status == RowStatus.OK and untrustworthy(r)}
        redo = [i for i, r in enumerate(rows) if row_label(r) in disturbed or i in left_out]
        if not redo or len(redo) > len(rows) // 2:  # none, or the whole machine is busy: measuring again won't help
            return rows, fit
        self.progress(f"measuring {len(redo)} disturbed tests again"
                      + (f" ({len(left_out)} of them unstable or busy)" if left_out else ""))
        for i, row in zip(redo, self._measure([tests[i] for i in redo], machine), strict=True):
            if row.status != RowStatus.OK or untrustworthy(row):
                continue
            rows[i] = row if i in left_out else faster(rows[i], row)
        return rows, fit_rows(rows)

    def _crossings_again(self, tests: list[TestSpec], rows: list[ResultRow], machine: dict[str, Any]
                         ) -> list[ResultRow]:
        """``rows`` with the crossing tests measured again, up to :data:`CROSSING_RETRIES` times, while none of them
        is stable and quiet: the only tests a crossing's cost is learned from, few, and on a noisy machine easily
        all left out (then every split would be predicted with the assumed cost)."""
        idx = [i for i, t in enumerate(tests) if t.tensor_buft_overrides != "none"]
        rows = list(rows)
        for n in range(CROSSING_RETRIES):
            if not idx or any(rows[i].status == RowStatus.OK and not untrustworthy(rows[i]) for i in idx):
                break
            self.progress(f"no crossing test was stable and quiet: measuring them again ({n + 1} of "
                          f"{CROSSING_RETRIES})")
            for i, row in zip(idx, self._measure([tests[i] for i in idx], machine), strict=True):
                rows[i] = row
        return rows

    def run(self) -> CalibrationResult:
        """Write and measure the ladder, add the store's rows, fit and save; only stable rows taken on a quiet
        machine are fitted, the others counted in the fit's notes. Raises FitError (also when too few ladder tests
        are stable and quiet), CalibrationCancelled."""
        start = time.perf_counter()
        scan = scan_machine()
        flags = scan.cpu_features.flags if scan.cpu_features is not None else ()
        ctx = MachineContext(cpu_class_table(self.options.types, flags), l2_cache_bytes(), llc_bytes(),
                             held_out_stand_ins(self.options.types, flags))
        cpu_info, gpu_info, build = scan.cpu_model, scan.gpu_info(), llama_build()
        repack = ensure_verdict()[0].default_repack  # the ladder runs with the machine's default (--repack auto)
        use_store = self.store is not None and self.options.use_store
        stored_rows = (store_rows(self.store, cpu_info, gpu_info, engine_version(), repack=repack)
                       if use_store and self.store is not None else TrustedRows([], 0))
        fitted: list[LadderFit] = []

        def fit_rows(rows: list[ResultRow]) -> MachineFit:
            got = fit_ladder(rows, stored_rows, ctx=ctx, cpu_info=cpu_info, gpu_info=gpu_info, build=build,
                             repack=repack, progress=self.progress)
            fitted.append(replace(got, fit=got.fit.with_pass_noise(self.pass_spreads)))
            return fitted[-1].fit

        root = data_dir() / "calibration"
        root.mkdir(parents=True, exist_ok=True)
        left = remove_leftovers(root, LADDER_NAME, unowned=OLD_LADDER_NAME)  # a killed calibration's: SIGKILL cleans
        if left:  # nothing up
            self.progress(f"removed {len(left)} ladder folder(s) a killed calibration left behind")
        folder = Path(tempfile.mkdtemp(prefix=f"{LADDER_PREFIX}{os.getpid()}-", dir=root))  # whose: its process id
        try:
            _rows, fit = self._measure_ladder(folder, scan.run_facts(), fit_rows)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        self._check()
        wall_s = time.perf_counter() - start
        self.progress(f"done in {wall_s:.0f} s")
        last = fitted[-1]
        return CalibrationResult(fit, save_fit(fit), last.n_ladder_points, last.n_store_points, wall_s,
                                 last.n_ladder_left_out, stored_rows.n_left_out)


def saved_calibration() -> tuple[MachineFit | None, Path, str | None]:
    """This machine's saved fit for the installed build (None: not calibrated, or the file is not read), where it
    is stored, and one line saying why a saved file is not used (None: it is, or there is none)."""
    scan = scan_machine()
    cpu_info, gpu_info, build = scan.cpu_model, scan.gpu_info(), llama_build()
    fit, problem = read_fit(cpu_info, gpu_info, build)
    return fit, fit_path(cpu_info, gpu_info, build), problem


def disturbed_labels(fit: MachineFit) -> set[str]:
    """Points a fit set aside, or misses by more than OUTLIER_FACTOR × its median error (and OUTLIER_MIN): the
    tests worth measuring again."""
    return {label for phases in fit.fits.values() for pf in phases.values() for label in pf.disturbed()}


def pass_spreads(first: list[ResultRow], second: list[ResultRow]) -> dict[tuple[str, str], list[float]]:
    """(fit backend, phase) -> |first ÷ second − 1| of each test's median in two passes, for the tests both passes
    measured stable and quiet: how far a run of a test lands from the last one on this machine."""
    out: dict[tuple[str, str], list[float]] = {}
    for a, b in zip(first, second, strict=True):
        if any(r.status != RowStatus.OK or untrustworthy(r) for r in (a, b)):
            continue
        facts = _facts_or_none(a.model_path or "")
        backend = row_backend(a, facts.n_layer) if facts is not None else None
        if backend is None:
            continue
        for phase in ("decode", "prefill"):
            x, y = (row_rate(r, f"{phase}_tps") for r in (a, b))
            if x is not None and y is not None:
                out.setdefault((backend, phase), []).append(abs(x / y - 1.0))
    return out


def pooled(a: ResultRow, b: ResultRow) -> ResultRow:
    """Two passes over one test as one measurement: each phase's median (mean, stddev) over the repetitions of
    both, the statistic the prediction benchmark judges, over twice the samples. (Keeping the faster pass's median
    instead made the fit faster than held-out medians: 21 of 24 held-out prefill errors positive in three runs.)
    The pooled test is as trustworthy as its worse pass: unstable where a pass was, and taken with the larger share
    of CPU that other processes used (so a busy pass leaves it out of the fit)."""
    oks = [r for r in (a, b) if r.status == RowStatus.OK]
    if len(oks) < 2:
        return oks[0] if oks else b
    changes: dict[str, Any] = {}
    for phase in ("decode", "prefill"):
        xs = [float(x) for r in oks for x in getattr(r, f"{phase}_samples_tps") or ()]
        if xs:
            changes.update({f"{phase}_samples_tps": xs, **spread(f"{phase}_tps", xs)})
    unstable_metrics = ",".join(dict.fromkeys(m for r in oks for m in (r.unstable_metrics or "").split(",") if m))
    busy = [float(p) for r in oks if (p := r.host_other_cpu_pct) is not None and math.isfinite(p)]
    return b.replace(**changes, unstable=int(any(r.unstable for r in oks)), unstable_metrics=unstable_metrics,
                     host_other_cpu_pct=max(busy) if busy else None)


def faster(a: ResultRow, b: ResultRow) -> ResultRow:
    """Two measurements of one test merged phase by phase: the faster median (and its figures) of each."""
    out = b if b.status == RowStatus.OK else a
    for phase in ("decode_tps", "prefill_tps"):
        best = max((r for r in (a, b) if r.status == RowStatus.OK),
                   key=lambda r: row_rate(r, phase) or 0.0, default=out)
        out = out.replace(**{k: getattr(best, k) for k in (phase, f"{phase}_median", f"{phase}_stddev")})
    return out


def residual_table(fit: MachineFit) -> str:
    """Per backend and phase: each point measured vs fitted, then the median and worst error."""
    lines = []
    for backend, phases in fit.fits.items():
        for phase, pf in phases.items():
            lines.append(f"{backend} {phase}: {len(pf.points)} points, median error {pf.median_error * 100:.1f}%, "
                         f"worst {pf.worst_error * 100:.1f}%, band ±{pf.band_frac * 100:.0f}%")
            if pf.refits or pf.stand_in_error:
                lines.append(f"  beyond the ladder, the band widens by {REACH_Z:g} × a figure's spread over "
                             f"{len(pf.refits)} refits with one model left out, and by ±{pf.stand_in_error:.0%} "
                             f"(leave one type out) on the share of weights read through a stand-in's kernel")
            lines.append(f"  {'point':<44} {'measured':>10} {'fitted':>10} {'error':>8}")
            for p in pf.points:
                lines.append(f"  {p.label[:44]:<44} {p.measured_tps:>10.1f} {p.fitted_tps:>10.1f} "
                             f"{p.rel_error * 100:>+7.1f}%{'' if p.used else '  (set aside: an outlier)'}")
    for backend, cost in fit.crossings.items():
        least, most = cost.range_s
        lines.append(f"{backend} device crossing of a split placement: {cost.seconds * 1e3:.2f} ms "
                     f"({least * 1e3:.2f}-{most * 1e3:.2f} over {len(cost.points)} split tests)")
    lines.extend(f"note: {n}" for n in fit.notes)
    return "\n".join(lines)
