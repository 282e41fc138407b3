"""Expected GPU figures from published llama-bench results: the per-architecture fit (app/predict/public_arch_fit.py)
of the shipped reference table, for a backend and a llama.cpp build, with bands from held-out residuals.

A prediction is for (GPU, backend, build era, weight type): the fit of the GPU's architecture for that backend and
era where the table has such a cell, else the architecture's fit (said so); an architecture without rows borrows
the nearest one's (spec-scaled: the ceilings are the GPU's own), labelled "borrowed from <arch>". A weight family
without rows takes the K-quant efficiency, said so; a float type (F16, BF16, F32) takes only its own rows, and those
of the GPU's vendor: with none it has no expected figure, since each float type runs its own matmul path in each
vendor's own library. The band is the 10–90 %
quantiles of held-out relative errors: the architecture's leave-one-GPU-out errors (pooled over architectures
when it has under MIN_RESIDUALS); where anything was substituted (another backend, another era, a borrowed
architecture, a stood-in weight family) also the errors of that kind of substitution: leave-one-build-era-out for
an era, else leave-one-architecture-out (the error of a fit that never saw the group), so the band widens to cover
both.

The shipped fit learns from the training tables (app/predict/public_data.py ``TRAINING_TABLE_PATHS``: the May 2024
table and the table of later builds); a training row whose GPU has no hardware profile yet is kept aside
(``PublicGpuModel.unprofiled``) until one is added. Held-out rows (app/predict/public_held_out.py) are refused by
construction: ``PublicGpuModel`` raises on them.
Pure functions, except ``load_public_model``, which reads the shipped tables once (and keeps the fit on disk).
"""

from __future__ import annotations

import copy
import functools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from app.model.facts import ModelFacts
from app.paths import HARDWARE_PROFILES_DIR
from app.predict.fitted_model import Expected
from app.predict.prefill import matmul_params
from app.predict.profiles import HardwareProfile, load_profiles
from app.predict.public_arch_fit import (
    CURRENT_ERA,
    FLOAT_CLASSES,
    ArchFit,
    HeldOut,
    PublicFitError,
    alu_seconds,
    canonical_backend,
    compute_scale,
    demand_from_ceiling,
    era_of,
    fit_architectures,
    fit_cells,
    gpus_by_architecture,
    leave_one_architecture_out,
    leave_one_era_out,
    leave_one_gpu_out,
    leave_one_source_out,
    nearest_architecture,
    row_era,
    weight_family,
)
from app.predict.public_data import TRAINING_TABLE_PATHS, ReferenceResult, load_training
from app.predict.public_fit_cache import cached
from app.predict.workload import Phase

BAND_FLOOR = 0.05
BAND_QUANTILES = (10.0, 90.0)
#: Fewer held-out errors than this in a group: its band is taken from the pooled errors of every group.
MIN_RESIDUALS = 5
#: The backend a prediction is for when none is given and this machine has none for the GPU's vendor.
USUAL_BACKEND = {"nvidia": "CUDA", "apple": "Metal", "amd": "ROCm", "intel": "SYCL"}


def residual_band(errors: Iterable[float]) -> tuple[float, float] | None:
    """(low, high) quantiles (BAND_QUANTILES) of relative errors (predicted ÷ measured − 1), at least ±BAND_FLOOR
    wide; None without errors. The measured figure lies in [value / (1 + high), value / (1 + low)]."""
    errs = [e for e in errors if not math.isnan(e)]
    if not errs:
        return None
    lo, hi = (float(np.percentile(errs, q)) for q in BAND_QUANTILES)
    return min(lo, -BAND_FLOOR), max(hi, BAND_FLOOR)


def band_fraction(held: Iterable[HeldOut]) -> float:
    """The larger side of the residual band of ``held``, as a fraction (NaN without errors)."""
    band = residual_band(h.rel_error for h in held)
    return max(-band[0], band[1]) if band else math.nan


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


class PublicGpuModel:
    """The public llama-bench rows fitted per architecture (and per backend and build era where the table has the
    rows), with held-out errors for the bands. ``backend`` and ``build``: what predictions are for when the call
    does not say (:meth:`for_setting`). ``skip_unprofiled``: rows whose GPU has no profile are kept in
    ``unprofiled`` instead of refused."""

    def __init__(self, rows: Sequence[ReferenceResult], profiles: Iterable[HardwareProfile], *,
                 skip_unprofiled: bool = False) -> None:
        held = [r.label for r in rows if r.held_out]
        if held:
            raise PublicFitError(f"the public fit never learns from held-out rows ({len(held)}, e.g. {held[0]})")
        self.profiles = {p.name: p for p in profiles}
        unknown = sorted({r.gpu for r in rows} - set(self.profiles))
        if unknown and not skip_unprofiled:
            raise PublicFitError(f"reference rows name GPUs with no hardware profile: {', '.join(unknown)}")
        self.unprofiled = tuple(r for r in rows if r.gpu not in self.profiles)
        self.rows = tuple(r for r in rows if r.gpu in self.profiles)
        self.fits = fit_architectures(self.rows, self.profiles)
        self.cells = fit_cells(self.rows, self.profiles)
        self.held_out = leave_one_gpu_out(self.rows, self.profiles)
        self.source_out = leave_one_source_out(self.rows, self.profiles)
        self.arch_out = leave_one_architecture_out(self.rows, self.profiles, self.fits)
        self.era_out = leave_one_era_out(self.rows, self.profiles)
        self.gpus_by_arch = gpus_by_architecture(self.rows, self.profiles)
        self.backend: str | None = None
        self.build: int | None = None
        self.build_label = ""

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

    def band(self, architecture: str, phase: Phase) -> tuple[tuple[float, float], str]:
        """((low, high) relative error band, how it was found) of the architecture's leave-one-GPU-out and
        leave-one-source-out errors together (another GPU of the family; another person's run of a GPU the table
        has), else every architecture's."""
        held = (*self.held_out, *self.source_out)
        own = [h.rel_error for h in held if h.architecture == architecture and h.phase == phase]
        own = [e for e in own if not math.isnan(e)]
        if len(own) >= MIN_RESIDUALS:
            return residual_band(own), "leave-one-GPU-out and leave-one-source-out"  # type: ignore[return-value]
        pooled = residual_band(h.rel_error for h in held if h.phase == phase) or (-BAND_FLOOR, BAND_FLOOR)
        return pooled, (f"all architectures' leave-one-GPU-out and leave-one-source-out (too few for "
                        f"{architecture})")

    def substitute_band(self, phase: Phase, kind: str) -> tuple[tuple[float, float] | None, str]:
        """The errors of a substitution of ``kind`` ("era" or another): leave-one-build-era-out for an era when the
        table has MIN_RESIDUALS of them, else leave-one-architecture-out."""
        if kind == "era":
            era = [h.rel_error for h in self.era_out if h.phase == phase and not math.isnan(h.rel_error)]
            if len(era) >= MIN_RESIDUALS:
                return residual_band(era), "leave-one-build-era-out"
        return (residual_band(h.rel_error for h in self.arch_out if h.phase == phase),
                "leave-one-architecture-out")

    def expected(self, profile: HardwareProfile, phase: Phase, ceiling_tps: float, ggml_type: str,
                 n_layer: int, n_matmul_params: float = 0.0, *, backend: str | None = None,
                 build: int | None = None, date: str = "") -> tuple[Expected | None, str]:
        """The expected figure of ``phase`` on ``profile`` for a model with that ceiling there, or (None, why), for
        ``backend`` (default: the model's, else the vendor's usual) and llama.cpp ``build`` (or the ``date`` of
        one; default: the model's, else the newest era). ``n_matmul_params`` sizes decode's ALU side (0: none)."""
        backend = canonical_backend(backend or self.backend or default_backend(profile))
        build = build if build is not None else (self.build if not date else None)
        era = era_of(build, date) or CURRENT_ERA
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
        alu_s = alu_seconds(n_matmul_params, profile) if phase == "decode" else 0.0
        tps = fit.tps(demand_from_ceiling(ideal_tps, ggml_type, n_layer, alu_s)) if ceiling_tps > 0 else None
        lender = choice.borrowed_from or arch
        if stand_in is None or tps is None:
            return None, f"no expected figure: no public {lender} data for {ggml_type} kernels"
        (lo, hi), how = self.band(lender, phase)
        subs: list[str] = []
        kinds: list[str] = []
        if choice.family_borrowed:
            subs.append(f"borrowed from {lender}: no public {arch} rows of {fam} or a stand-in family, {lender}'s "
                        "efficiency at this GPU's spec ceilings")
            kinds.append("architecture")
        elif choice.borrowed_from:
            subs.append(f"borrowed from {lender}: no public {arch} rows, {lender}'s efficiency at this GPU's spec "
                        "ceilings")
            kinds.append("architecture")
        fit_backends = "/".join(dict.fromkeys(canonical_backend(r.backend) for r in fit.rows))
        if not choice.backend_matched:
            subs.append(f"no public {backend} rows for {lender}: its {fit_backends} fit used")
            kinds.append("backend")
        fit_eras = ", ".join(dict.fromkeys(row_era(r) or "unknown" for r in fit.rows))
        if not choice.era_matched:
            subs.append(f"no public rows of builds {era}: the {_builds(fit.rows)} fit used")
            kinds.append("era")
        if stand_in != fam:
            subs.append(f"{ggml_type} ({fam}) taken as {stand_in}: no public rows for it")
            kinds.append("weight family")
        hows = [how]
        for kind in dict.fromkeys("era" if k == "era" else "other" for k in kinds):
            extra, extra_how = self.substitute_band(phase, kind)
            if extra is not None:
                lo, hi = min(lo, extra[0]), max(hi, extra[1])
                hows.append(extra_how)
        band = (f"band {1 / (1 + hi) - 1:+.0%} to {1 / (1 + lo) - 1:+.0%} from "
                f"{' and '.join(dict.fromkeys(hows))} errors (10–90 %)")
        build_text = (f"b{build}" if build is not None else
                      (f"{self.build_label}, build number unknown" if self.build_label else "build not given"))
        asked = f"for {backend}, {build_text} (era {era})"
        models = " and ".join(dict.fromkeys(r.model.name for r in fit.rows))
        alu = f"; quantized weights also bounded by ALU work, {fit.alu_ops:.0f} ops per weight" if fit.alu_ops else ""
        head = (f"public llama-bench results, {arch} fit" if not choice.borrowed_from
                else f"public llama-bench results, borrowed from {lender} for {arch}")
        source = (f"{head}, {asked}; {'; '.join(subs) + '; ' if subs else ''}{len(fit.rows)} rows of "
                  f"{len(fit.gpus)} GPUs ({models}; {fit_backends}, {_builds(fit.rows)}, era {fit_eras}), {band}"
                  f"{alu}, sources: {_sources(fit.rows)}")
        return Expected(float(tps), float(tps / (1.0 + hi)), float(tps / (1.0 + lo)), source), ""

    def expect(self, profile: HardwareProfile, decode_ceiling_tps: float, prefill_ceiling_tps: float,
               ggml_type: str, n_layer: int, n_matmul_params: float = 0.0, *, backend: str | None = None,
               build: int | None = None) -> PublicExpectation:
        """Both phases' expected figures for a model fully offloaded to ``profile``."""
        decode, why_d = self.expected(profile, "decode", decode_ceiling_tps, ggml_type, n_layer, n_matmul_params,
                                      backend=backend, build=build)
        prefill, why_p = self.expected(profile, "prefill", prefill_ceiling_tps, ggml_type, n_layer,
                                       backend=backend, build=build)
        return PublicExpectation(decode, prefill, why_d or why_p)


def main_weight_type(facts: ModelFacts) -> str:
    """The ggml type holding most of the weight bytes ("Q4_K" for a Q4_K_M file); the file type if unknown."""
    if not facts.tensor_types:
        return facts.file_type
    return max(facts.tensor_types, key=lambda t: facts.tensor_types[t].n_bytes)


def public_expected(
    model: PublicGpuModel, profile: HardwareProfile, facts: ModelFacts, n_gpu_layers: int,
    decode_ceiling_tps: float, prefill_ceiling_tps: float,
) -> tuple[dict[str, Expected | None], str]:
    """(phase -> Expected, why a figure is missing) for ``facts`` on a GPU ``profile`` at the given ceilings.

    The public rows are full offloads: a model with layers left on the CPU gets no public figure.
    """
    if n_gpu_layers < facts.n_layer + 1:
        return {}, "no expected figure from public data: they are full offloads, this is a partial one"
    got = model.expect(profile, decode_ceiling_tps, prefill_ceiling_tps, main_weight_type(facts), facts.n_layer,
                       matmul_params(facts))
    return {"decode": got.decode, "prefill": got.prefill}, got.note


@functools.lru_cache(maxsize=1)
def load_public_model() -> PublicGpuModel:
    """The shipped training tables fitted against the shipped hardware profiles (once per process, and kept on disk
    by app/predict/public_fit_cache.py until a table, a profile or the code changes); rows of GPUs without a profile
    wait in ``unprofiled``."""
    inputs = [*TRAINING_TABLE_PATHS, *HARDWARE_PROFILES_DIR.glob("*.toml")]
    return cached("public-gpu-fit", inputs, lambda: PublicGpuModel(
        load_training(), load_profiles([HARDWARE_PROFILES_DIR]), skip_unprofiled=True), PublicGpuModel)
