"""Expected GPU figures fitted to published llama-bench results, per GPU architecture, with leave-one-GPU-out error.

The per-token form is the fitted model's (app/predict/fitted_model.py), with the bytes and FLOPs put in units of
the GPU's spec rates so that GPUs of one architecture share coefficients:

    decode  s/token = Σ_class c_class × bytes_class / bandwidth  + n_layer × t_layer + t_fixed
    prefill s/token = Σ_class c_class × FLOPs_class / compute    + n_layer × t_layer + t_fixed

``c_class = 1 / η`` (η_bw for decode, η_c for prefill) per kernel class (``kernel_class``); ``bytes / bandwidth`` is
``1 / decode ceiling`` and ``FLOPs / compute`` is ``1 / prefill ceiling`` (app/predict/decode.py, prefill.py: weights
read plus the KV cache at the generation's average depth; 2 × matmul parameters plus attention), so a prediction
needs only the ceilings it already has. Coefficients are fitted by non-negative least squares on relative time;
t_layer and t_fixed are dropped when the data do not support them.

Prefill compute is the spec tensor rate capped by board power, ``min(TFLOPS, κ × W)``, with κ (TFLOPS per watt)
chosen per architecture from ``KAPPA_GRID`` (``None``: no cap): tensor-core GEMMs run into the power limit, and
big-die workstation cards at 250–350 W sustain far less than their boost-clock figure (on the public Ada rows the
held-out prefill error falls from a median of 24 % to about 8 % with the cap). Pure functions (numpy), except
``load_public_model``, which reads the shipped table once.
"""

from __future__ import annotations

import functools
import itertools
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from app.model.facts import ModelFacts
from app.paths import HARDWARE_PROFILES_DIR
from app.predict.decode import decode_ceiling_tps
from app.predict.fitted_model import PHASES, Expected, Phase, kernel_class
from app.predict.prefill import prefill_ceiling_tps
from app.predict.profiles import HardwareProfile, load_profiles
from app.predict.public_data import ReferenceResult, load_reference

#: Kernel classes with no public rows borrow the coefficients of these (quantized types: the K-quant kernels).
FLOAT_CLASSES = frozenset({"f16", "bf16", "f32"})
QUANT_STAND_IN, FLOAT_STAND_IN = "k_quant", "f16"
OVERHEADS = ("layer", "fixed")
BAND_FLOOR = 0.05
BAND_PERCENTILE = 90.0
#: Candidate prefill power caps in TFLOPS per watt of board power; None leaves the spec rate uncapped.
#: Tried in this order (uncapped, then ever tighter caps); a later one must fit better by RELATIVE_GAIN to win.
KAPPA_GRID: tuple[float | None, ...] = (None, *(round(0.2 * 10 ** (i / 20), 4) for i in range(20, -1, -1)))
RELATIVE_GAIN = 1e-9


class PublicFitError(ValueError):
    """The rows cannot determine the coefficients (no rows, or no non-negative solution)."""


@dataclass(frozen=True)
class Demand:
    """What one phase of one test asks of a GPU per token: ideal seconds at the spec rate per kernel class."""

    ideal_s: Mapping[str, float]  # kernel class -> bytes / bandwidth (decode) or FLOPs / compute (prefill)
    n_layer: int

    def features(self) -> dict[str, float]:
        feats = {f"class:{k}": float(v) for k, v in self.ideal_s.items() if v}
        feats.update(layer=float(self.n_layer), fixed=1.0)
        return feats


def demand_from_ceiling(ceiling_tps: float, ggml_type: str, n_layer: int) -> Demand:
    """The demand of a phase whose ceiling is ``ceiling_tps`` for a model whose weights are mostly ``ggml_type``."""
    return Demand({kernel_class(ggml_type): 1.0 / ceiling_tps}, n_layer)


def board_power_w(profile: HardwareProfile) -> float | None:
    """Fixed board power, else the top of the power range (laptops); None when the profile has neither."""
    return profile.tdp_w or (profile.power_limit_w[1] if profile.power_limit_w else None)


def compute_scale(profile: HardwareProfile, tflops_per_w: float | None) -> float:
    """Spec TFLOPS ÷ the power-capped TFLOPS (≥ 1): how much longer prefill takes than the spec rate says."""
    power = board_power_w(profile)
    if tflops_per_w is None or not power:
        return 1.0
    return profile.fp16_tensor_tflops / min(profile.fp16_tensor_tflops, tflops_per_w * power)


def reference_demand(
    r: ReferenceResult, profile: HardwareProfile, phase: Phase, tflops_per_w: float | None = None,
) -> Demand:
    """A published row's demand on its GPU, from the same ceiling functions the predictions use.

    Decode reads the weights less the untied embedding table (only the looked-up rows) plus the f16 KV cache at
    ``n_gen / 2`` (llama-bench's tg starts from an empty cache); prefill is 2 × matmul parameters plus attention
    over an ``n_prompt``-token prompt.
    """
    m = r.model
    embd_params = 0.0 if m.tied_embeddings else m.n_vocab * m.n_embd
    if phase == "decode":
        weights_read = r.file_bytes * (1.0 - embd_params / r.n_params)
        kv_read = 2 * m.n_layer * m.n_head_kv * m.head_dim * 2 * (r.n_gen / 2.0)
        ceiling = decode_ceiling_tps(profile.peak_bandwidth_gbps, weights_read, kv_read)
    else:
        ceiling = prefill_ceiling_tps(profile.fp16_tensor_tflops, r.n_params - embd_params, r.n_prompt,
                                      m.n_layer, m.n_head * m.head_dim) / compute_scale(profile, tflops_per_w)
    return demand_from_ceiling(ceiling, r.ggml_type, m.n_layer)


def measured_tps(r: ReferenceResult, phase: Phase) -> float:
    return r.tg_tps if phase == "decode" else r.pp_tps


def used(r: ReferenceResult, phase: Phase) -> bool:
    """Whether the fit uses this row's figure for ``phase`` (not marked excluded in the table)."""
    return not (r.exclude_tg if phase == "decode" else r.exclude_pp)


@dataclass(frozen=True)
class ArchFit:
    """One architecture's coefficients for one phase (seconds per feature unit) and the rows behind them."""

    architecture: str
    phase: str
    coefficients: dict[str, float]
    rows: tuple[ReferenceResult, ...]
    tflops_per_w: float | None = None  # prefill power cap κ; None: uncapped

    @property
    def gpus(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(r.gpu for r in self.rows))

    def stand_in(self, cls: str) -> str | None:
        """The fitted class that predicts ``cls``: itself, else the float or quantized stand-in, else None."""
        if f"class:{cls}" in self.coefficients:
            return cls
        other = FLOAT_STAND_IN if cls in FLOAT_CLASSES else QUANT_STAND_IN
        return other if f"class:{other}" in self.coefficients else None

    def seconds(self, demand: Demand) -> float | None:
        """Fitted seconds per token; None when a class has neither its own nor a stand-in coefficient."""
        total = 0.0
        for name, value in demand.features().items():
            if name.startswith("class:"):
                cls = self.stand_in(name.removeprefix("class:"))
                if cls is None:
                    return None
                name = f"class:{cls}"
            total += self.coefficients.get(name, 0.0) * value
        return total if total > 0 else None

    def tps(self, demand: Demand) -> float | None:
        s = self.seconds(demand)
        return 1.0 / s if s else None


def _solve(design: np.ndarray, names: Sequence[str]) -> tuple[float, dict[str, float]] | None:
    """Non-negative least squares of ``design · c ≈ 1`` over the subsets that keep every class column.

    The class columns always stay (an efficiency must exist); each overhead column is kept only if the data give it
    a non-negative value. Returns (sum of squared relative residuals, coefficients) of the best feasible subset.
    """
    class_idx = [i for i, n in enumerate(names) if n.startswith("class:")]
    extra = [i for i, n in enumerate(names) if not n.startswith("class:")]
    best: tuple[float, dict[str, float]] | None = None
    for k in range(len(extra) + 1):
        for chosen in itertools.combinations(extra, k):
            cols = class_idx + list(chosen)
            if len(cols) > design.shape[0]:
                continue
            sub = design[:, cols]
            coef, *_ = np.linalg.lstsq(sub, np.ones(design.shape[0]), rcond=None)
            if np.any(coef[: len(class_idx)] <= 0) or np.any(coef < 0):
                continue
            sse = float(np.sum((sub @ coef - 1.0) ** 2))
            if best is None or sse < best[0] * (1.0 - RELATIVE_GAIN):
                best = (sse, {names[c]: float(v) for c, v in zip(cols, coef, strict=True)})
    return best


def _fit_once(
    phase: Phase, rows: Sequence[ReferenceResult], profiles: Mapping[str, HardwareProfile],
    tflops_per_w: float | None,
) -> tuple[float, dict[str, float]] | None:
    feats = [reference_demand(r, profiles[r.gpu], phase, tflops_per_w).features() for r in rows]
    names = sorted({k for f in feats for k in f}, key=lambda n: (not n.startswith("class:"), n))
    seconds = np.array([1.0 / measured_tps(r, phase) for r in rows])
    design = np.array([[f.get(n, 0.0) for n in names] for f in feats]) / seconds[:, None]
    scale = np.abs(design).max(axis=0)
    solved = _solve(design / scale, names)
    if solved is None:
        return None
    return solved[0], {n: v / float(scale[names.index(n)]) for n, v in solved[1].items()}


def fit_phase_rows(
    phase: Phase, rows: Sequence[ReferenceResult], profiles: Mapping[str, HardwareProfile], architecture: str = "",
) -> ArchFit:
    """Fit one phase's coefficients to ``rows`` (each row's GPU looked up in ``profiles`` by name); prefill also
    picks the power cap κ from ``KAPPA_GRID`` with the smallest residual."""
    rows = tuple(r for r in rows if used(r, phase))
    if not rows:
        raise PublicFitError(f"{architecture or 'rows'}: no {phase} rows to fit")
    best: tuple[float, dict[str, float], float | None] | None = None
    for kappa in KAPPA_GRID if phase == "prefill" else (None,):
        solved = _fit_once(phase, rows, profiles, kappa)
        if solved is not None and (best is None or solved[0] < best[0] * (1.0 - RELATIVE_GAIN)):
            best = (solved[0], solved[1], kappa)
    if best is None:
        raise PublicFitError(f"{architecture or 'rows'}: no non-negative {phase} fit")
    return ArchFit(architecture, phase, best[1], rows, best[2])


def architecture_of(gpu: str, profiles: Mapping[str, HardwareProfile]) -> str:
    return profiles[gpu].architecture or "unknown"


def fit_architectures(
    rows: Iterable[ReferenceResult], profiles: Mapping[str, HardwareProfile],
) -> dict[tuple[str, str], ArchFit]:
    """(architecture, phase) -> fit, for every architecture the rows cover."""
    by_arch: dict[str, list[ReferenceResult]] = {}
    for r in rows:
        by_arch.setdefault(architecture_of(r.gpu, profiles), []).append(r)
    fits = {}
    for arch, arch_rows in sorted(by_arch.items()):
        for phase in PHASES:
            try:
                fits[(arch, phase)] = fit_phase_rows(phase, arch_rows, profiles, arch)
            except PublicFitError:
                continue
    return fits


@dataclass(frozen=True)
class HeldOut:
    """One row predicted by a fit that never saw its GPU."""

    architecture: str
    phase: str
    row: ReferenceResult
    predicted_tps: float | None

    @property
    def rel_error(self) -> float:
        """predicted ÷ measured − 1; NaN when the fit without this GPU could not predict it."""
        if self.predicted_tps is None:
            return math.nan
        return self.predicted_tps / measured_tps(self.row, self.phase) - 1.0  # type: ignore[arg-type]


def leave_one_gpu_out(
    rows: Sequence[ReferenceResult], profiles: Mapping[str, HardwareProfile],
) -> list[HeldOut]:
    """For each GPU of an architecture with at least two GPUs: fit the architecture without it, predict its rows."""
    out: list[HeldOut] = []
    by_arch: dict[str, list[ReferenceResult]] = {}
    for r in rows:
        by_arch.setdefault(architecture_of(r.gpu, profiles), []).append(r)
    for arch, arch_rows in sorted(by_arch.items()):
        gpus = list(dict.fromkeys(r.gpu for r in arch_rows))
        if len(gpus) < 2:
            continue
        for phase, gpu in itertools.product(PHASES, gpus):
            train = [r for r in arch_rows if r.gpu != gpu]
            try:
                fit: ArchFit | None = fit_phase_rows(phase, train, profiles, arch)
            except PublicFitError:
                fit = None
            for r in (r for r in arch_rows if r.gpu == gpu and used(r, phase)):
                tps = fit.tps(reference_demand(r, profiles[gpu], phase, fit.tflops_per_w)) if fit else None
                out.append(HeldOut(arch, phase, r, tps))
    return out


@dataclass(frozen=True)
class ErrorSummary:
    """Median and worst absolute held-out error of a set of rows, and how many could not be predicted."""

    n: int
    median: float
    worst: float
    unpredicted: int


def summarize(held: Iterable[HeldOut]) -> ErrorSummary:
    held = list(held)
    errs = [abs(h.rel_error) for h in held if not math.isnan(h.rel_error)]
    return ErrorSummary(len(errs), statistics.median(errs) if errs else math.nan, max(errs, default=math.nan),
                        len(held) - len(errs))


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
                 n_layer: int) -> tuple[Expected | None, str]:
        """The expected figure of ``phase`` on ``profile`` for a model with that ceiling there, or (None, why)."""
        arch = profile.architecture or "unknown"
        fit = self.fits.get((arch, phase))
        if fit is None:
            return None, f"no expected figure: no public data for {arch}"
        cls = kernel_class(ggml_type)
        stand_in = fit.stand_in(cls)
        ideal_tps = ceiling_tps / compute_scale(profile, fit.tflops_per_w)
        tps = fit.tps(demand_from_ceiling(ideal_tps, ggml_type, n_layer)) if ceiling_tps > 0 else None
        if stand_in is None or tps is None:
            return None, f"no expected figure: no public {arch} data for {ggml_type} kernels"
        band, how = self.band(arch, phase)
        kernels = "" if stand_in == cls else f"; {ggml_type} ({cls}) taken as {stand_in}: no public rows for it"
        models = " and ".join(dict.fromkeys(r.model.name for r in fit.rows))
        source = (f"public llama-bench results, {arch} fit, {len(fit.rows)} rows of {len(fit.gpus)} GPUs "
                  f"({models}), {how}{kernels}, sources: {_sources(fit.rows)}")
        return Expected(float(tps), float(tps * (1.0 - band)), float(tps * (1.0 + band)), source), ""

    def expect(self, profile: HardwareProfile, decode_ceiling_tps: float, prefill_ceiling_tps: float,
               ggml_type: str, n_layer: int) -> PublicExpectation:
        """Both phases' expected figures for a model fully offloaded to ``profile``."""
        decode, why_d = self.expected(profile, "decode", decode_ceiling_tps, ggml_type, n_layer)
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
    got = model.expect(profile, decode_ceiling_tps, prefill_ceiling_tps, main_weight_type(facts), facts.n_layer)
    return {"decode": got.decode, "prefill": got.prefill}, got.note


@functools.lru_cache(maxsize=1)
def load_public_model() -> PublicGpuModel:
    """The shipped reference table fitted against the shipped hardware profiles (read once per process)."""
    return PublicGpuModel(load_reference(), load_profiles([HARDWARE_PROFILES_DIR]))
