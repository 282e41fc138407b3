"""Expected GPU figures from published llama-bench results: the per-architecture fit (app/predict/public/arch_fit.py)
of the shipped reference table, for a backend and a llama.cpp build, with a band from the errors of its situation.

A prediction is for (GPU, backend, build era, weight type): the fit of the GPU's architecture for that backend and
era where the table has such a cell, else the architecture's fit (said so); an architecture without rows borrows
the nearest one's (spec-scaled: the ceilings are the GPU's own), labelled "borrowed from <arch>". A weight family
without rows takes the K-quant efficiency, said so; a float type (F16, BF16, F32) takes only its own rows, and those
of the GPU's vendor: with none it has no expected figure, since each float type runs its own matmul path in each
vendor's own library.

The band comes from the situation the figure is made in (app/predict/public/bands.py): the fit has rows of the GPU
itself, or of its architecture only, or is borrowed; with or without a substitution (another backend, build era or
weight family). :meth:`PublicGpuModel.cross_validate` predicts every training figure the way :meth:`expected` does,
by the fit of the rows left when its publication is taken out (and, in turn, its GPU or its whole architecture with
it), and labels each error with the situation that fold put it in; a figure's band is the conformal 80 % interval
of the errors of its own situation. It is narrow where such figures landed close, wide where they did not.

The shipped fit learns from the training tables (app/predict/public/data.py ``TRAINING_TABLE_PATHS``: the May 2024
table and the table of later builds); a training row whose GPU has no hardware profile yet is kept aside
(``PublicGpuModel.unprofiled``) until one is added. Held-out rows (app/predict/public/held_out.py) are refused by
construction: ``PublicGpuModel`` raises on them.
Pure functions, except ``load_public_model``, which reads the shipped tables once (and keeps the fit on disk).
"""

from __future__ import annotations

import copy
import functools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from app.model.facts import ModelFacts
from app.paths import HARDWARE_PROFILES_DIR
from app.predict.ceilings.decode import kv_bytes_read_at_depth
from app.predict.ceilings.offload import active_weight_bytes, is_expert_tensor
from app.predict.ceilings.prefill import expert_params, matmul_params, prefill_flops_per_token
from app.predict.machine_fit.fitted_model import Expected
from app.predict.machine_fit.workload import PHASES, Phase
from app.predict.profiles import HardwareProfile, load_profiles
from app.predict.public.arch_fit import (
    CURRENT_ERA,
    FLOAT_CLASSES,
    ArchFit,
    HeldOut,
    PublicFitError,
    WorkShape,
    architecture_of,
    canonical_backend,
    compute_scale,
    demand_for,
    era_of,
    fit_architectures,
    fit_cells,
    fit_phase_rows,
    gpus_by_architecture,
    leave_one_gpu_out,
    measured_tps,
    nearest_architecture,
    reference_demand,
    row_era,
    row_shape,
    used,
    weight_family,
)
from app.predict.public.bands import (
    Basis,
    MachineSpread,
    Residual,
    Situation,
    SituationBand,
    band_for,
    machine_spread,
    memory_of,
)
from app.predict.public.data import (
    MACHINE_SPREAD_TABLE_PATH,
    TRAINING_TABLE_PATHS,
    ReferenceResult,
    SpreadFigure,
    load_machine_spread,
    load_training,
)
from app.predict.public.fit_cache import cached

#: The backend a prediction is for when none is given and this machine has none for the GPU's vendor.
USUAL_BACKEND = {"nvidia": "CUDA", "apple": "Metal", "amd": "ROCm", "intel": "SYCL"}


def default_backend(profile: HardwareProfile, installed: Sequence[str] | None = None) -> str:
    """The backend a prediction for ``profile`` is for: the one this machine's llama.cpp was built with that runs
    on the GPU's vendor (``installed``: app/telemetry/llama_build.installed_gpu_backends), else the vendor's usual
    one (CUDA for NVIDIA, Metal for Apple, ROCm for AMD, SYCL for Intel; Vulkan for any other)."""
    vendor = profile.vendor.lower()
    runs_on = {"CUDA": {"nvidia"}, "Metal": {"apple"}, "ROCm": {"amd"}, "SYCL": {"intel"},
               "Vulkan": {"nvidia", "amd", "intel"}}
    for b in installed or ():
        if vendor in runs_on.get(canonical_backend(b), set()):
            return canonical_backend(b)
    return USUAL_BACKEND.get(vendor, "Vulkan")


@dataclass(frozen=True)
class PublicExpectation:
    """Expected decode and prefill figures for a GPU profile from the public fit, or why there are none."""

    decode: Expected | None
    prefill: Expected | None
    note: str = ""  # why a figure is missing; "" when both are there


def _sources(rows: Iterable[ReferenceResult]) -> str:
    """The distinct publications behind ``rows``: GitHub repositories as owner/name, other URLs by host."""
    seen: dict[str, None] = {}
    for r in rows:
        parts = r.source_url.split("/")  # https: '' host owner name ...
        host = parts[2] if len(parts) > 2 else ""
        key = "/".join(parts[2:5]) if host == "github.com" and len(parts) > 4 else host
        seen[key or r.source_url] = None
    return ", ".join(seen)


def _builds(rows: Iterable[ReferenceResult]) -> str:
    numbers = sorted({n for r in rows if (n := r.build_number) is not None})
    return f"b{numbers[0]}–b{numbers[-1]}" if numbers else "unknown builds"


@dataclass(frozen=True)
class FitChoice:
    """Which fit predicts a (GPU, phase, backend, era), and what it stands in for."""

    fit: ArchFit
    architecture: str  # the GPU's own architecture
    borrowed_from: str  # "" when the architecture has rows of its own
    backend: str
    era: str
    backend_matched: bool
    era_matched: bool
    family_borrowed: bool = False  # the GPU's architecture has rows, but no fit of it predicts the weight family

    def situation(self, profile: HardwareProfile, family: str) -> Situation:
        """The situation a figure for ``profile`` of weight ``family`` is made in by this choice (the band's key)."""
        basis = (Basis.BORROWED if self.borrowed_from or self.family_borrowed
                 else Basis.GPU if profile.name in self.fit.gpus else Basis.ARCHITECTURE)
        return Situation(basis, not (self.backend_matched and self.era_matched
                                     and self.fit.stand_in(family) == family),
                         memory_of(profile.kind, profile.vendor, self.backend))


@dataclass(frozen=True)
class PublicPoint:
    """A figure of the public fit before its band: tokens/s and the choice of fit that made it."""

    tps: float
    choice: FitChoice
    family: str  # the weight family asked
    stand_in: str  # the family whose coefficient predicts it (``family`` itself where the fit has it)


class FitMemo:
    """``fit_phase_rows``, once per (phase, architecture, rows used): the folds of the cross-validation share most
    of their fits (a fold that leaves a cell's rows as they were fits it again for nothing). ``alu_ops`` and
    ``kappa``: per architecture, the ALU operations per quantized weight (0: none) and the prefill power cap its fit
    on all its rows chose; where set, a fit of that architecture refits its coefficients at that choice instead of
    searching ALU_OPS_GRID and KAPPA_GRID again."""

    def __init__(self) -> None:
        self._fits: dict[tuple[str, str, tuple[int, ...]], ArchFit | PublicFitError] = {}
        self.alu_ops: dict[str, float] = {}
        self.kappa: dict[str, float | None] = {}

    def __call__(self, phase: Phase, rows: Sequence[ReferenceResult], profiles: Mapping[str, HardwareProfile],
                 architecture: str = "") -> ArchFit:
        key = (phase, architecture, tuple(id(r) for r in rows if used(r, phase)))
        if key not in self._fits:
            chosen = self.alu_ops.get(architecture)
            grid = None if chosen is None else ((chosen,) if chosen else ())
            kappas = (self.kappa[architecture],) if architecture in self.kappa else None
            try:
                self._fits[key] = fit_phase_rows(phase, rows, profiles, architecture, alu_grid=grid,
                                                 kappa_grid=kappas)
            except PublicFitError as e:
                self._fits[key] = e
        got = self._fits[key]
        if isinstance(got, PublicFitError):
            raise got
        return got


def as_shape(shape: WorkShape | int, n_matmul_params: float = 0.0) -> WorkShape:
    """A :class:`WorkShape`, or a dense model's of ``shape`` layers and ``n_matmul_params`` matmul parameters."""
    return shape if isinstance(shape, WorkShape) else WorkShape(int(shape), n_matmul_params)


def row_ceiling_tps(row: ReferenceResult, profile: HardwareProfile, phase: Phase) -> float:
    """A published row's ceiling of ``phase`` on ``profile`` (uncapped spec rates), as ``predict`` computes it for
    that model: what :meth:`PublicGpuModel.expected` is given for the row."""
    return 1.0 / sum(reference_demand(row, profile, phase).ideal_s.values())


def inside_ceiling(value: float, low: float, high: float, ceiling_tps: float) -> tuple[float, float, float]:
    """(value, low, high) kept inside a spec-sheet ceiling: the value at most the ceiling, the band's top at most the
    ceiling, and where the value was cut, its low edge moved with it (the band's relative width below the figure
    kept); a ceiling of 0 or less bounds nothing."""
    if not ceiling_tps > 0:
        return value, low, high
    if value > ceiling_tps:
        low, value = low * ceiling_tps / value, ceiling_tps
    return value, min(low, value), min(high, ceiling_tps)


class PublicGpuModel:
    """The public llama-bench rows fitted per architecture (and per backend and build era where the table has the
    rows), with leave-one-GPU-out errors (``held_out``) and the cross-validated errors of every situation
    (``residuals``, :meth:`cross_validate`) that make the bands. ``backend`` and ``build``: what predictions are for
    when the call does not say (:meth:`for_setting`). ``skip_unprofiled``: rows whose GPU has no profile are kept in
    ``unprofiled`` instead of refused."""

    def __init__(self, rows: Sequence[ReferenceResult], profiles: Iterable[HardwareProfile], *,
                 skip_unprofiled: bool = False, spread: Sequence[SpreadFigure] = ()) -> None:
        held = [r.label for r in rows if r.held_out]
        if held:
            raise PublicFitError(f"the public fit never learns from held-out rows ({len(held)}, e.g. {held[0]})")
        self.profiles = {p.name: p for p in profiles}
        unknown = sorted({r.gpu for r in rows} - set(self.profiles))
        if unknown and not skip_unprofiled:
            raise PublicFitError(f"reference rows name GPUs with no hardware profile: {', '.join(unknown)}")
        self.unprofiled = tuple(r for r in rows if r.gpu not in self.profiles)
        self.rows = tuple(r for r in rows if r.gpu in self.profiles)
        memo = FitMemo()  # the rows' own fits, and the cross-validation's (ids of rows kept by self.rows)
        self.fits = fit_architectures(self.rows, self.profiles, fit=memo)
        self.cells = fit_cells(self.rows, self.profiles, fit=memo)
        # The folds refit each architecture's coefficients at the ALU side and the power cap its own rows chose
        # (hyperparameters chosen once, not in each fold): the searches over ALU_OPS_GRID and KAPPA_GRID are 60 and 22
        # solves a fit, over every fold nine tenths of the fit's time.
        memo.alu_ops = {arch: fit.alu_ops for (arch, phase), fit in self.fits.items() if phase == "decode"}
        memo.kappa = {arch: fit.tflops_per_w for (arch, phase), fit in self.fits.items() if phase == "prefill"}
        self.gpus_by_arch = gpus_by_architecture(self.rows, self.profiles)
        self.backend: str | None = None
        self.build: int | None = None
        self.build_label = ""
        #: What the cross-validation leaves out in turn: each publication, or each GPU where the rows are of one.
        self.cv_unit = "publication" if len({r.publication_key for r in self.rows}) > 1 else "GPU"
        self.residuals: tuple[Residual, ...] = tuple(self.cross_validate(memo))
        #: The spread between machines under every band, per phase: a phase without published repeats of its own
        #: takes the other's (a machine that differs in memory clock, power and build differs in both phases).
        found = {phase: machine_spread(spread, phase) for phase in PHASES}
        self.spread: dict[str, MachineSpread] = {}
        for phase in PHASES:
            own = found[phase]
            other = next((found[p] for p in PHASES if p != phase and found[p] is not None), None)
            if own is not None:
                self.spread[phase] = own
            elif other is not None:
                self.spread[phase] = replace(other, phase=phase, borrowed=other.phase)

    @functools.cached_property
    def held_out(self) -> list[HeldOut]:
        """Each GPU's rows predicted by its architecture's fit without that GPU, every hyperparameter searched again
        (the benchmark's table; computed when first asked, not by a prediction)."""
        return leave_one_gpu_out(self.rows, self.profiles)

    def for_setting(self, backend: str | None = None, build: int | None = None,
                    build_label: str = "") -> PublicGpuModel:
        """This model (sharing its fits) with predictions for ``backend`` and llama.cpp ``build`` by default;
        ``build_label`` names a build whose number is unknown ("installed llama-cpp-python 0.3.36")."""
        bound = copy.copy(self)
        bound.backend = canonical_backend(backend) if backend else None
        bound.build, bound.build_label = build, build_label
        return bound

    def choose(self, profile: HardwareProfile, phase: Phase, backend: str, era: str,
               family: str | None = None) -> FitChoice | None:
        """The fit for ``profile``'s architecture (else the nearest one with rows), backend and era, or None; with a
        weight ``family``, the first of those fits that predicts it (its own class or a stand-in), else the nearest
        other architecture's that does (``family_borrowed``)."""
        arch = profile.architecture or "unknown"

        def predicts(fit: ArchFit) -> bool:
            return family is None or fit.stand_in(family) is not None

        def pick(lender: str) -> ArchFit | None:
            fits = (self.cells.get((lender, backend, era, phase)), self.cells.get((lender, backend, "", phase)),
                    self.fits.get((lender, phase)))
            return next((f for f in fits if f is not None and predicts(f)), None)

        candidates = {a: g for a, g in self.gpus_by_arch.items() if (a, phase) in self.fits}
        lender = arch if (arch, phase) in self.fits else nearest_architecture(profile, candidates) or ""
        if not lender:
            return None
        fit = pick(lender)
        family_borrowed = False
        if fit is None:  # no fit of the lender predicts this weight family: the nearest architecture's that does
            able = {a: g for a, g in candidates.items() if a != lender and pick(a) is not None}
            if family in FLOAT_CLASSES:  # float matmuls run in each vendor's own library: never another vendor's
                able = {a: g for a, g in able.items() if any(p.vendor == profile.vendor for p in g)}
            other = nearest_architecture(profile, able)
            if other is None:
                return None
            lender, fit, family_borrowed = other, pick(other), lender == arch
        assert fit is not None
        return FitChoice(fit, arch, "" if lender == arch else lender, backend, era,
                         backend in {canonical_backend(r.backend) for r in fit.rows},
                         era in {row_era(r) for r in fit.rows}, family_borrowed)

    def point(self, profile: HardwareProfile, phase: Phase, ceiling_tps: float, ggml_type: str, shape: WorkShape,
              backend: str, era: str) -> tuple[PublicPoint | None, str]:
        """The figure of ``phase`` on ``profile`` for a model of ``shape`` with that ceiling there, for ``backend``
        and build ``era``, before its band; or (None, why)."""
        fam = weight_family(ggml_type)
        choice = self.choose(profile, phase, backend, era, fam)
        arch = profile.architecture or "unknown"
        if choice is None:
            if fam in FLOAT_CLASSES:
                return None, (f"no expected figure: no public rows of {ggml_type} (float) kernels on any "
                              f"{profile.vendor} GPU; each float type runs its own matmul path in each vendor's own "
                              f"library (cuBLAS, hipBLAS, Metal, SYCL, Vulkan shaders): neither another float "
                              f"type's rows nor another vendor's are used")
            return None, (f"no expected figure: no public data for {arch} nor any architecture to borrow from "
                          f"for {ggml_type} kernels")
        fit = choice.fit
        stand_in = fit.stand_in(fam)
        ideal_tps = ceiling_tps / compute_scale(profile, fit.tflops_per_w)
        tps = fit.tps(demand_for(ideal_tps, ggml_type, phase, shape, profile)) if ceiling_tps > 0 else None
        if stand_in is None or tps is None:
            return None, f"no expected figure: no public {choice.borrowed_from or arch} data for {ggml_type} kernels"
        return PublicPoint(float(tps), choice, fam, stand_in), ""

    def _without(self, hidden: frozenset[int], memo: FitMemo) -> PublicGpuModel:
        """This model fitted without the rows at the ``hidden`` indices: only the architectures they touch are
        fitted again."""
        touched = {architecture_of(self.rows[i].gpu, self.profiles) for i in hidden}
        fold = copy.copy(self)
        fold.rows = tuple(r for i, r in enumerate(self.rows) if i not in hidden)
        refit = [r for r in fold.rows if architecture_of(r.gpu, self.profiles) in touched]
        fold.fits = {k: f for k, f in self.fits.items() if k[0] not in touched}
        fold.fits.update(fit_architectures(refit, self.profiles, fit=memo))
        fold.cells = {k: f for k, f in self.cells.items() if k[0] not in touched}
        fold.cells.update(fit_cells(refit, self.profiles, fit=memo))
        fold.gpus_by_arch = gpus_by_architecture(fold.rows, self.profiles)
        return fold

    def cross_validate(self, memo: FitMemo | None = None) -> list[Residual]:
        """Every training figure predicted as :meth:`expected` predicts it (its own backend, build era, weight type
        and ceiling), by the fit of the rows left when its publication is taken out; then again with its GPU taken
        out too, and with its whole architecture: one error for each distinct fold, labelled with the situation
        that fold made the figure in (the GPU's own rows in the fit, its architecture's, or a borrowed fit; any
        substitution). These are the errors the bands are made of: a user's run is another publication, of a GPU
        the table has or not. Rows of a single publication take each GPU as their unit instead (``cv_unit``)."""
        source = [r.publication_key if self.cv_unit == "publication" else r.gpu for r in self.rows]
        arch = [architecture_of(r.gpu, self.profiles) for r in self.rows]
        folds: dict[frozenset[int], dict[int, str]] = {}
        for i, r in enumerate(self.rows):
            for kind, also in (("publication", ""), ("GPU", r.gpu), ("architecture", arch[i])):
                hidden = frozenset(j for j, o in enumerate(self.rows)
                                   if source[j] == source[i] or also in (o.gpu, arch[j]))
                folds.setdefault(hidden, {}).setdefault(i, kind)
        memo = memo or FitMemo()
        out: list[Residual] = []
        for hidden, targets in folds.items():
            fold = self._without(hidden, memo)
            for i, phase in ((i, p) for i in sorted(targets) for p in PHASES if used(self.rows[i], p)):
                r, profile = self.rows[i], self.profiles[self.rows[i].gpu]
                ceiling = row_ceiling_tps(r, profile, phase)
                got, _ = fold.point(profile, phase, ceiling, r.ggml_type, row_shape(r, phase),
                                    canonical_backend(r.backend), row_era(r) or CURRENT_ERA)
                if got is not None:
                    out.append(Residual(got.choice.situation(profile, got.family), phase, source[i],
                                        math.log(got.tps / measured_tps(r, phase)), i, targets[i], got.tps,
                                        ceiling))
        return out

    def expected_with_band(self, profile: HardwareProfile, phase: Phase, ceiling_tps: float, ggml_type: str,
                           shape: WorkShape | int, n_matmul_params: float = 0.0, *, backend: str | None = None,
                           build: int | None = None, date: str = "",
                           ) -> tuple[Expected | None, str, SituationBand | None]:
        """:meth:`expected`, with the band's situation and how it was made."""
        shape = as_shape(shape, n_matmul_params)
        backend = canonical_backend(backend or self.backend or default_backend(profile))
        build = build if build is not None else (self.build if not date else None)
        era = era_of(build, date) or CURRENT_ERA
        got, why = self.point(profile, phase, ceiling_tps, ggml_type, shape, backend, era)
        if got is None:
            return None, why, None
        choice, fit, fam, stand_in = got.choice, got.choice.fit, got.family, got.stand_in
        arch = profile.architecture or "unknown"
        lender = choice.borrowed_from or arch
        situation = choice.situation(profile, fam)
        band = band_for(self.residuals, situation, phase, unit=self.cv_unit, floor=self.spread.get(phase))
        subs: list[str] = []
        if choice.family_borrowed:
            subs.append(f"borrowed from {lender}: no public {arch} rows of {fam} or a stand-in family, {lender}'s "
                        "efficiency at this GPU's spec ceilings")
        elif choice.borrowed_from:
            subs.append(f"borrowed from {lender}: no public {arch} rows, {lender}'s efficiency at this GPU's spec "
                        "ceilings")
        fit_backends = "/".join(dict.fromkeys(canonical_backend(r.backend) for r in fit.rows))
        if not choice.backend_matched:
            subs.append(f"no public {backend} rows for {lender}: its {fit_backends} fit used")
        fit_eras = ", ".join(dict.fromkeys(row_era(r) or "unknown" for r in fit.rows))
        if not choice.era_matched:
            subs.append(f"no public rows of builds {era}: the {_builds(fit.rows)} fit used")
        if stand_in != fam:
            subs.append(f"{ggml_type} ({fam}) taken as {stand_in}: no public rows for it")
        build_text = (f"b{build}" if build is not None else
                      (f"{self.build_label}, build number unknown" if self.build_label else "build not given"))
        asked = f"for {backend}, {build_text} (era {era})"
        models = " and ".join(dict.fromkeys(r.model.name for r in fit.rows))
        alu = f"; quantized weights also bounded by ALU work, {fit.alu_ops:.0f} ops per weight" if fit.alu_ops else ""
        head = (f"public llama-bench results, {arch} fit" if not choice.borrowed_from
                else f"public llama-bench results, borrowed from {lender} for {arch}")
        source = (f"{head}, {asked}; {situation.basis}; {'; '.join(subs) + '; ' if subs else ''}{len(fit.rows)} "
                  f"rows of {len(fit.gpus)} GPUs ({models}; {fit_backends}, {_builds(fit.rows)}, era {fit_eras}), "
                  f"{band.text()}{alu}, sources: {_sources(fit.rows)}")
        value, low, high = inside_ceiling(got.tps, *band.edges(got.tps), ceiling_tps)
        if value < got.tps:
            source += f"; {got.tps:,.1f} tok/s was above the ceiling, {ceiling_tps:,.1f}: shown as the ceiling"
        elif high < band.edges(got.tps)[1]:
            source += f"; the band's top is the ceiling ({ceiling_tps:,.1f} tok/s: the spec sheet's bound)"
        return Expected(value, low, high, source), "", band

    def expected(self, profile: HardwareProfile, phase: Phase, ceiling_tps: float, ggml_type: str,
                 shape: WorkShape | int, n_matmul_params: float = 0.0, *, backend: str | None = None,
                 build: int | None = None, date: str = "") -> tuple[Expected | None, str]:
        """The expected figure of ``phase`` on ``profile`` for a model of ``shape`` (a :class:`WorkShape`, or its layer
        count with ``n_matmul_params`` sizing decode's ALU side) with that ceiling there, or (None, why), for
        ``backend`` (default: the model's, else the vendor's usual) and llama.cpp ``build`` (or the ``date`` of
        one; default: the model's, else the newest era). Its band is that of its situation
        (app/predict/public/bands.py), which its source names."""
        exp, why, _ = self.expected_with_band(profile, phase, ceiling_tps, ggml_type, shape, n_matmul_params,
                                              backend=backend, build=build, date=date)
        return exp, why

    def expect(self, profile: HardwareProfile, decode_ceiling_tps: float, prefill_ceiling_tps: float,
               ggml_type: str, shape: WorkShape | int, n_matmul_params: float = 0.0, *, backend: str | None = None,
               build: int | None = None) -> PublicExpectation:
        """Both phases' expected figures for a model of ``shape`` fully offloaded to ``profile``."""
        shape = as_shape(shape, n_matmul_params)
        decode, why_d = self.expected(profile, "decode", decode_ceiling_tps, ggml_type, shape,
                                      backend=backend, build=build)
        prefill, why_p = self.expected(profile, "prefill", prefill_ceiling_tps, ggml_type, shape,
                                       backend=backend, build=build)
        return PublicExpectation(decode, prefill, why_d or why_p)


def main_weight_type(facts: ModelFacts) -> str:
    """The ggml type holding most of the weight bytes ("Q4_K" for a Q4_K_M file); the file type if unknown."""
    if not facts.tensor_types:
        return facts.file_type
    return max(facts.tensor_types, key=lambda t: facts.tensor_types[t].n_bytes)


def work_shape(facts: ModelFacts, decode_depth: float = 64.0, type_k: str = "f16", type_v: str | None = None,
               n_prompt: int = 512, depth: int = 0) -> WorkShape:
    """The :class:`WorkShape` of ``facts`` for a decode at ``decode_depth`` tokens (its KV read with those cache
    types) and a prefill of ``n_prompt`` tokens after ``depth``: the active matmul parameters, the layers with routed
    experts, the KV share of decode's bytes and the routed experts' share of prefill's work."""
    tensors = facts.tensor_bytes or None
    moe_layers = 0
    if facts.n_expert:
        names = facts.tensor_shapes or facts.tensor_bytes
        layers = {k.split(".")[1] for k in names if is_expert_tensor(k) and k.startswith("blk.")}
        moe_layers = len(layers) or facts.n_layer
    weights = active_weight_bytes(facts, tensors)
    kv = kv_bytes_read_at_depth(facts, decode_depth, type_k, type_v)
    n_swa = len(facts.swa_layers) if facts.swa_window else 0
    params = matmul_params(facts, tensor_bytes=tensors)
    flops = prefill_flops_per_token(params, n_prompt, facts.kv_layers,
                                    facts.n_head * (facts.head_dim_k + facts.head_dim_v) // 2, depth, n_swa,
                                    facts.swa_window)
    active_experts = expert_params(facts, tensors) * facts.n_expert_used / facts.n_expert if facts.n_expert else 0.0
    return WorkShape(facts.n_layer, params, moe_layers, kv / (weights + kv) if kv > 0 else 0.0,
                     min(2.0 * active_experts / flops, 1.0) if flops > 0 else 0.0)


def public_expected(
    model: PublicGpuModel, profile: HardwareProfile, facts: ModelFacts, n_gpu_layers: int,
    decode_ceiling_tps: float, prefill_ceiling_tps: float, shape: WorkShape | None = None,
) -> tuple[dict[str, Expected | None], str]:
    """(phase -> Expected, why a figure is missing) for ``facts`` on a GPU ``profile`` at the given ceilings, for
    the test's ``shape`` (default: :func:`work_shape` from an empty cache and a 512-token prompt).

    The public rows are full offloads: a model with layers left on the CPU gets no public figure.
    """
    if n_gpu_layers < facts.n_layer + 1:
        return {}, "no expected figure from public data: they are full offloads, this is a partial one"
    got = model.expect(profile, decode_ceiling_tps, prefill_ceiling_tps, main_weight_type(facts),
                       shape or work_shape(facts))
    return {"decode": got.decode, "prefill": got.prefill}, got.note


@functools.lru_cache(maxsize=1)
def load_public_model() -> PublicGpuModel:
    """The shipped training tables fitted against the shipped hardware profiles (once per process, and kept on disk
    by app/predict/public/fit_cache.py until a table, a profile or the code changes); rows of GPUs without a profile
    wait in ``unprofiled``."""
    inputs = [*TRAINING_TABLE_PATHS, MACHINE_SPREAD_TABLE_PATH, *HARDWARE_PROFILES_DIR.glob("*.toml")]
    return cached("public-gpu-fit", inputs, lambda: PublicGpuModel(
        load_training(), load_profiles([HARDWARE_PROFILES_DIR]), skip_unprofiled=True,
        spread=load_machine_spread()), PublicGpuModel)
