"""Expected GPU figures from published llama-bench results: the per-architecture fit (app/predict/public_arch_fit.py)
of the shipped reference table, with each architecture's leave-one-GPU-out error as the band of its figures.

Pure functions, except ``load_public_model``, which reads the shipped table once.
"""

from __future__ import annotations

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
    HeldOut,
    PublicFitError,
    alu_seconds,
    compute_scale,
    demand_from_ceiling,
    fit_architectures,
    leave_one_gpu_out,
)
from app.predict.public_data import ReferenceResult, load_reference
from app.predict.workload import Phase, kernel_class

BAND_FLOOR = 0.05
BAND_PERCENTILE = 90.0


def band_fraction(held: Iterable[HeldOut]) -> float:
    """The band half-width: the 90th percentile of the held-out absolute errors, at least BAND_FLOOR."""
    errs = [abs(h.rel_error) for h in held if not math.isnan(h.rel_error)]
    return max(BAND_FLOOR, float(np.percentile(errs, BAND_PERCENTILE))) if errs else math.nan


@dataclass(frozen=True)
class PublicExpectation:
    """Expected decode and prefill figures for a GPU profile from the public fit, or why there are none."""

    decode: Expected | None
    prefill: Expected | None
    note: str = ""  # why a figure is missing ("no public data for Blackwell"); "" when both are there


def _sources(rows: Iterable[ReferenceResult]) -> str:
    """The distinct publications behind ``rows``: GitHub repositories as owner/name, other URLs by host."""
    seen: dict[str, None] = {}
    for r in rows:
        parts = r.source_url.split("/")  # https: '' host owner name ...
        host = parts[2] if len(parts) > 2 else ""
        key = "/".join(parts[2:5]) if host == "github.com" and len(parts) > 4 else host
        seen[key or r.source_url] = None
    return ", ".join(seen)


class PublicGpuModel:
    """The public llama-bench rows fitted per architecture, with each fit's leave-one-GPU-out error as its band."""

    def __init__(self, rows: Sequence[ReferenceResult], profiles: Iterable[HardwareProfile]) -> None:
        self.profiles = {p.name: p for p in profiles}
        unknown = sorted({r.gpu for r in rows} - set(self.profiles))
        if unknown:
            raise PublicFitError(f"reference rows name GPUs with no hardware profile: {', '.join(unknown)}")
        self.rows = tuple(rows)
        self.fits = fit_architectures(self.rows, self.profiles)
        self.held_out = leave_one_gpu_out(self.rows, self.profiles)

    def band(self, architecture: str, phase: Phase) -> tuple[float, str]:
        """(band half-width, how it was found): the architecture's held-out errors, else every architecture's."""
        own = [h for h in self.held_out if h.architecture == architecture and h.phase == phase]
        if own and not math.isnan(band_fraction(own)):
            return band_fraction(own), f"band ±{band_fraction(own):.0%} from leave-one-GPU-out"
        pooled = band_fraction(h for h in self.held_out if h.phase == phase)
        return pooled, f"band ±{pooled:.0%} from all architectures' leave-one-GPU-out (one {architecture} GPU)"

    def expected(self, profile: HardwareProfile, phase: Phase, ceiling_tps: float, ggml_type: str,
                 n_layer: int, n_matmul_params: float = 0.0) -> tuple[Expected | None, str]:
        """The expected figure of ``phase`` on ``profile`` for a model with that ceiling there, or (None, why).
        ``n_matmul_params`` sizes decode's ALU side (0: none)."""
        arch = profile.architecture or "unknown"
        fit = self.fits.get((arch, phase))
        if fit is None:
            return None, f"no expected figure: no public data for {arch}"
        cls = kernel_class(ggml_type)
        stand_in = fit.stand_in(cls)
        ideal_tps = ceiling_tps / compute_scale(profile, fit.tflops_per_w)
        alu_s = alu_seconds(n_matmul_params, profile) if phase == "decode" else 0.0
        tps = fit.tps(demand_from_ceiling(ideal_tps, ggml_type, n_layer, alu_s)) if ceiling_tps > 0 else None
        if stand_in is None or tps is None:
            return None, f"no expected figure: no public {arch} data for {ggml_type} kernels"
        band, how = self.band(arch, phase)
        kernels = "" if stand_in == cls else f"; {ggml_type} ({cls}) taken as {stand_in}: no public rows for it"
        models = " and ".join(dict.fromkeys(r.model.name for r in fit.rows))
        alu = f"; quantized weights also bounded by ALU work, {fit.alu_ops:.0f} ops per weight" if fit.alu_ops else ""
        source = (f"public llama-bench results, {arch} fit, {len(fit.rows)} rows of {len(fit.gpus)} GPUs "
                  f"({models}), {how}{kernels}{alu}, sources: {_sources(fit.rows)}")
        return Expected(float(tps), float(tps * (1.0 - band)), float(tps * (1.0 + band)), source), ""

    def expect(self, profile: HardwareProfile, decode_ceiling_tps: float, prefill_ceiling_tps: float,
               ggml_type: str, n_layer: int, n_matmul_params: float = 0.0) -> PublicExpectation:
        """Both phases' expected figures for a model fully offloaded to ``profile``."""
        decode, why_d = self.expected(profile, "decode", decode_ceiling_tps, ggml_type, n_layer, n_matmul_params)
        prefill, why_p = self.expected(profile, "prefill", prefill_ceiling_tps, ggml_type, n_layer)
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
    """The shipped reference table fitted against the shipped hardware profiles (read once per process)."""
    return PublicGpuModel(load_reference(), load_profiles([HARDWARE_PROFILES_DIR]))
