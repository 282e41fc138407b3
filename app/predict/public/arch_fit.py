"""Per-architecture fit of published llama-bench results, and its leave-one-GPU-out error.

The per-token form is the fitted model's (app/predict/machine_fit/fitted_model.py), with the bytes and FLOPs put in
units of the GPU's spec rates so that GPUs of one architecture share coefficients:

    decode  s/token = Σ_class c_class × bytes_class / bandwidth  + n_layer × t_layer + t_fixed
    prefill s/token = Σ_class c_class × FLOPs_class / compute    + n_layer × t_layer + t_fixed

``c_class = 1 / η`` (η_bw for decode, η_c for prefill) per weight-type family (``weight_family``); ``bytes /
bandwidth`` is ``1 / decode ceiling`` and ``FLOPs / compute`` is ``1 / prefill ceiling``
(app/predict/ceilings/decode.py,
prefill.py: weights read plus the KV cache at the generation's average depth; 2 × matmul parameters plus attention),
so a prediction needs only the ceilings it already has. Coefficients are fitted by non-negative least squares on
relative time; t_layer and t_fixed are dropped when the data do not support them. A ``Demand`` may carry further
fitted terms (``extra``) and seconds added unfitted (``known_s``): benchmarks/public_gpu_variants.py tries other
forms with them.

Prefill compute is the spec tensor rate capped by board power, ``min(TFLOPS, κ × W)``, with κ (TFLOPS per watt)
chosen per architecture from ``KAPPA_GRID`` (``None``: no cap): tensor-core GEMMs run into the power limit, and
big-die workstation cards at 250–350 W sustain far less than their boost-clock figure (on the public Ada rows the
held-out prefill error falls from a median of 24 % to about 8 % with the cap).

Decode of quantized weights is also bounded by the ALU work of unpacking them, ``a`` operations per weight at the
profile's compute rate (``alu_s`` = matmul parameters ÷ that rate): decode s/token = max(the class sum above,
a × alu_s) + overheads (a roofline). ``a`` (``ALU_KEY``) is chosen per architecture from ``ALU_OPS_GRID``; 0 leaves
it out. On the Apple rows it is 27–31 in every leave-one-GPU-out fit; it sets M1 Max apart, the GPU with the fewest
FLOPs per byte of them (26 against 34–36), whose K-quants reach 41–46 % of its bandwidth (the others: 57–80 %).
Groups: a fit is per architecture, and per (architecture, backend) and (architecture, backend, build era) where
such a cell has MIN_CELL_ROWS rows of its own (``fit_cells``); the weight-type family is a coefficient within a fit.
An architecture without rows borrows the one nearest in spec (``nearest_architecture``: same vendor first, then
the nearest FLOPs per byte), its ceilings from its own spec sheet. Held-out errors, for the benchmark's tables:
leave one GPU out (within an architecture), leave one architecture out (each predicted by its nearest other: the
error of a borrowed fit) and leave one build era out (within an architecture with rows of several eras); the bands
come from app/predict/public/fit.py's cross-validation by situation (app/predict/public/bands.py).
Pure functions (numpy).
"""

from __future__ import annotations

import functools
import itertools
import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

from app.predict.ceilings.decode import decode_ceiling_tps
from app.predict.ceilings.prefill import prefill_ceiling_tps, prefill_flops_per_token
from app.predict.machine_fit.fitted_model import scaled_nnls
from app.predict.machine_fit.workload import PHASES, Phase
from app.predict.profiles import HardwareProfile
from app.predict.public.data import ReferenceResult

#: ggml weight type -> the family whose kernels the public fit gives its own efficiency (the dequantization and
#: matmul paths differ between them): legacy block types, K-quants, i-quants, MXFP4 and the float types.
WEIGHT_FAMILY: dict[str, str] = {
    **{t: "legacy" for t in ("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q8_1")},
    **{t: "k_quant" for t in ("Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K", "TQ1_0", "TQ2_0")},
    **{t: "i_quant" for t in ("IQ1_S", "IQ1_M", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S", "IQ4_NL",
                              "IQ4_XS")},
    "MXFP4": "mxfp4", "F16": "f16", "BF16": "bf16", "F32": "f32",
}
#: llama.cpp backends as llama-bench prints them, by the lower-case name.
BACKENDS = {"cuda": "CUDA", "metal": "Metal", "vulkan": "Vulkan", "rocm": "ROCm", "hip": "ROCm", "sycl": "SYCL"}
#: Build eras: (name, first build, first date). The first boundaries were set when the only training table was
#: b2795-b2843 (May 2024): round build numbers around it and around the gap in the held-out table's builds (b4696,
#: then b6040 on); the dates are the first dates of each era's held-out rows with both. b8000 splits the newest era
#: at the gap of the training builds (b7361, then b8460 on) once the training tables held the same GPU, model and
#: quant on both sides of it: the Radeon 8060S's Qwen3 30B-A3B Q4_K_M at b6077 (lhl) and b8460-b9049 (hogeheer499)
#: prefills about 2x faster and decodes about 1.25x faster; its date lies between the publications of b7938
#: (2026-02-05) and b8577 (2026-03-30). benchmarks/public_gpu_fit.py prints the evidence.
ERAS: tuple[tuple[str, int, str], ...] = (("≤b2999", 0, ""), ("b3000–b5999", 3000, "2024-06-01"),
                                          ("b6000–b7999", 6000, "2025-08-01"), ("≥b8000", 8000, "2026-02-15"))
CURRENT_ERA = ERAS[-1][0]
#: A finer cell (backend, era) of an architecture is fitted on its own from this many rows.
MIN_CELL_ROWS = 8


def weight_family(ggml_type: str) -> str:
    """The family of a ggml type name ("Q4_K" -> "k_quant", "IQ4_XS" -> "i_quant"); unknown types are their own."""
    return WEIGHT_FAMILY.get(ggml_type.upper(), ggml_type.lower())


def canonical_backend(name: str) -> str:
    """"CUDA", "Metal", "Vulkan", "ROCm", "SYCL" for any spelling llama-bench or a user gives; else as given."""
    first = name.split(",")[0].strip()
    return BACKENDS.get(first.lower(), first)


def era_of(build_number: int | None, date: str = "") -> str:
    """The build era of a llama.cpp build number, else of a YYYY-MM-DD date; "" when neither is known."""
    if build_number is not None:
        return [name for name, first, _ in ERAS if build_number >= first][-1]
    if date:
        return [name for name, _, first in ERAS if date >= first][-1]
    return ""


def row_era(r: ReferenceResult) -> str:
    return era_of(r.build_number, r.date)

#: A quantized kernel class with no public rows borrows the coefficients of the first of these the fit has: the
#: K-quant kernels', else another quantized family's. A float type has no stand-in: F16, BF16 and F32 each run their
#: own matmul path in every backend, with hardware support that differs by generation (no BF16 tensor cores before
#: Ampere, no BF16 dot instructions on RDNA 2; Vulkan's BF16 shaders need VK_KHR_shader_bfloat16, else fall back),
#: so one float type's efficiency says nothing sure about another's.
FLOAT_CLASSES = frozenset({"f16", "bf16", "f32"})
QUANT_STAND_INS: tuple[str, ...] = ("k_quant", "legacy", "i_quant", "mxfp4")
OVERHEADS = ("layer", "fixed")
#: Candidate prefill power caps in TFLOPS per watt of board power; None leaves the spec rate uncapped.
#: Tried in this order (uncapped, then ever tighter caps); a later one must fit better by RELATIVE_GAIN to win.
KAPPA_GRID: tuple[float | None, ...] = (None, *(round(0.2 * 10 ** (i / 20), 4) for i in range(20, -1, -1)))
RELATIVE_GAIN = 1e-9
#: Candidate ALU operations per quantized weight for decode (0: no ALU side); the ALU term must cut the decode
#: residual by ALU_GAIN to be kept, so an architecture whose rows are all bandwidth-bound keeps the linear form.
ALU_OPS_GRID: tuple[float, ...] = tuple(float(a) for a in range(0, 61))
ALU_GAIN = 0.2
#: The ALU search tries every ALU_COARSE_STEP-th grid value, then the values around the best of them.
ALU_COARSE_STEP = 5
ALU_KEY = "alu:quant"


class PublicFitError(ValueError):
    """The rows cannot determine the coefficients (no rows, or no non-negative solution)."""


@dataclass(frozen=True)
class Demand:
    """What one phase of one test asks of a GPU per token: ideal seconds at the spec rate per kernel class."""

    ideal_s: Mapping[str, float]  # kernel class -> bytes / bandwidth (decode) or FLOPs / compute (prefill)
    n_layer: int
    extra: Mapping[str, float] = field(default_factory=dict)  # further terms, fitted like the overheads
    known_s: float = 0.0  # seconds per token taken as they are (not fitted)
    overheads: tuple[str, ...] = OVERHEADS  # which of "layer" and "fixed" the fit may use
    alu_s: float = 0.0  # decode of quantized weights: matmul parameters ÷ the compute rate (s per op per weight)

    @property
    def quantized(self) -> bool:
        return any(v and k not in FLOAT_CLASSES for k, v in self.ideal_s.items())

    def features(self) -> dict[str, float]:
        feats = {f"class:{k}": float(v) for k, v in self.ideal_s.items() if v}
        feats.update((k, v) for k, v in (("layer", float(self.n_layer)), ("fixed", 1.0)) if k in self.overheads)
        feats.update(self.extra)
        return feats


#: A row's demand on its GPU for a phase, given the prefill power cap κ (``reference_demand`` by default).
DemandFn = Callable[[ReferenceResult, HardwareProfile, Phase, float | None], Demand]
#: The extra terms a demand may carry, each fitted like the overheads (a non-negative cost) where the rows show it:
#: ``moe`` — per token, one unit per layer with routed experts (its router, top-k, gather and expert kernels, which
#: a dense layer does not launch: the small-batch cost that keeps a fast GPU far below its bandwidth on a MoE);
#: ``kv`` — decode's KV-cache and state reads in ideal seconds, a cost beyond reading them at the weights' rate
#: (attention kernels at depth); ``moe_flops`` — prefill's routed-expert matmuls in ideal seconds, a cost beyond the
#: dense matmul's (llama.cpp multiplies them expert by expert, each on its share of the micro-batch).
MOE_LAYER, KV_EXTRA, MOE_FLOPS = "moe", "kv", "moe_flops"


@dataclass(frozen=True)
class WorkShape:
    """What one test asks of a GPU beyond its ceiling: the layers, the active matmul parameters (decode's ALU side),
    the layers with routed experts, the share of decode's ideal time that reads the KV cache and recurrent state,
    and the share of prefill's ideal time in routed-expert matmuls."""

    n_layer: int
    n_matmul_params: float = 0.0
    moe_layers: int = 0
    kv_share: float = 0.0
    expert_share: float = 0.0


def demand_for(ceiling_tps: float, ggml_type: str, phase: Phase, shape: WorkShape,
               profile: HardwareProfile | None = None) -> Demand:
    """The demand of ``phase`` whose ceiling is ``ceiling_tps`` for a model whose weights are mostly ``ggml_type``, of
    ``shape``: the ideal seconds in the weight type's class, and the extra terms the shape has (``MOE_LAYER``,
    ``KV_EXTRA`` for decode; ``MOE_FLOPS`` for prefill); decode's ALU side at ``profile``'s compute rate."""
    ideal = 1.0 / ceiling_tps
    extra: dict[str, float] = {}
    if phase == "decode":
        if shape.moe_layers:
            extra[MOE_LAYER] = float(shape.moe_layers)
        if shape.kv_share > 0:
            extra[KV_EXTRA] = shape.kv_share * ideal
        alu = alu_seconds(shape.n_matmul_params, profile) if profile is not None else 0.0
        return Demand({weight_family(ggml_type): ideal}, shape.n_layer, extra, alu_s=alu)
    if shape.expert_share > 0:
        extra[MOE_FLOPS] = shape.expert_share * ideal
    return Demand({weight_family(ggml_type): ideal}, shape.n_layer, extra)


def demand_from_ceiling(ceiling_tps: float, ggml_type: str, n_layer: int, alu_s: float = 0.0) -> Demand:
    """The demand of a phase whose ceiling is ``ceiling_tps`` for a dense model whose weights are mostly
    ``ggml_type`` (``alu_s``: decode's matmul parameters ÷ the compute rate)."""
    return Demand({weight_family(ggml_type): 1.0 / ceiling_tps}, n_layer, alu_s=alu_s)


def alu_seconds(n_matmul_params: float, profile: HardwareProfile) -> float:
    """Seconds per token for one ALU operation on every matmul weight at the profile's compute rate."""
    return n_matmul_params / (profile.fp16_tensor_tflops * 1e12) if profile.fp16_tensor_tflops > 0 else 0.0


def board_power_w(profile: HardwareProfile) -> float | None:
    """Fixed board power, else the top of the power range (laptops); None when the profile has neither."""
    return profile.tdp_w or (profile.power_limit_w[1] if profile.power_limit_w else None)


def compute_scale(profile: HardwareProfile, tflops_per_w: float | None) -> float:
    """Spec TFLOPS ÷ the power-capped TFLOPS (≥ 1): how much longer prefill takes than the spec rate says."""
    power = board_power_w(profile)
    if tflops_per_w is None or not power:
        return 1.0
    return profile.fp16_tensor_tflops / min(profile.fp16_tensor_tflops, tflops_per_w * power)


def matmul_params(r: ReferenceResult) -> float:
    """Parameters a token multiplies through: all less an untied embedding table (only its looked-up rows are read)
    and a MoE model's experts the token is not routed through."""
    m = r.model
    return r.n_params - (0.0 if m.tied_embeddings else m.n_vocab * m.n_embd) - m.inactive_expert_params


def weights_read_bytes(r: ReferenceResult) -> float:
    """Weight bytes one decoded token reads: the matmul parameters (:func:`matmul_params`) at the file's bytes per
    parameter; where the routed experts have their own type (``expert_bits_per_weight``, MXFP4's 4.25 beside Q8_0
    attention), the active experts at theirs and the rest at what the file's other bytes give them."""
    m = r.model
    experts = m.expert_params
    if not (r.expert_bits_per_weight and experts):
        return r.file_bytes * matmul_params(r) / r.n_params
    expert_bytes = experts * r.expert_bits_per_weight / 8.0
    rest_params = r.n_params - experts
    rest_bytes_per_param = max(r.file_bytes - expert_bytes, 0.0) / rest_params
    embd = 0.0 if m.tied_embeddings else m.n_vocab * m.n_embd
    return expert_bytes * m.n_expert_used / m.n_expert + (rest_params - embd) * rest_bytes_per_param


def kv_read_bytes(r: ReferenceResult, depth: float) -> float:
    """f16 KV-cache bytes one decoded token reads at ``depth``: every layer's K and V up to the depth, a
    sliding-window layer's up to its window (app/predict/ceilings/decode.py ``kv_read_per_layer``)."""
    m = r.model
    per_token_layer = 2.0 * m.n_head_kv * m.head_dim * 2
    windowed = m.n_swa_layers if m.swa_window else 0
    return per_token_layer * ((m.n_layer - windowed) * depth + windowed * min(depth, float(m.swa_window)))


def row_shape(r: ReferenceResult, phase: Phase) -> WorkShape:
    """The :class:`WorkShape` of a published row's test: the KV share of decode's bytes at ``n_depth + n_gen / 2``
    for a test taken at a depth (``-d``; from an empty cache the KV term is left to the weights' rate, see
    :func:`row_demands`), and the active experts' share of the prefill work."""
    m = r.model
    moe_layers = m.n_layer if m.n_expert else 0
    if phase == "decode":
        weights, kv = weights_read_bytes(r), kv_read_bytes(r, r.n_depth + r.n_gen / 2.0)
        share = kv / (weights + kv) if kv > 0 and r.n_depth > 0 else 0.0
        return WorkShape(m.n_layer, matmul_params(r), moe_layers, share)
    flops = prefill_flops_per_token(matmul_params(r), r.n_prompt, m.n_layer, m.n_head * m.head_dim, r.n_depth,
                                    m.n_swa_layers, m.swa_window)
    active_experts = m.expert_params * m.n_expert_used / m.n_expert if m.n_expert else 0.0
    return WorkShape(m.n_layer, matmul_params(r), moe_layers, 0.0, 2.0 * active_experts / flops)


@functools.lru_cache(maxsize=1 << 16)
def reference_demand(
    r: ReferenceResult, profile: HardwareProfile, phase: Phase, tflops_per_w: float | None = None,
) -> Demand:
    """A published row's demand on its GPU, from the same ceiling functions the predictions use.

    Decode reads the weights less the untied embedding table (only the looked-up rows) and a MoE model's idle
    experts (:func:`weights_read_bytes`), plus the f16 KV cache at ``n_depth + n_gen / 2`` (llama-bench's tg starts
    from the ``-d`` depth; windowed layers up to their window); prefill is 2 × matmul parameters plus attention over
    an ``n_prompt``-token prompt after ``n_depth`` tokens. The extra terms are the row's :func:`row_shape`.
    """
    m = r.model
    shape = row_shape(r, phase)
    if phase == "decode":
        ceiling = decode_ceiling_tps(profile.peak_bandwidth_gbps, weights_read_bytes(r),
                                     kv_read_bytes(r, r.n_depth + r.n_gen / 2.0))
    else:
        ceiling = prefill_ceiling_tps(profile.fp16_tensor_tflops, matmul_params(r), r.n_prompt, m.n_layer,
                                      m.n_head * m.head_dim, r.n_depth, m.n_swa_layers,
                                      m.swa_window) / compute_scale(profile, tflops_per_w)
    return demand_for(ceiling, r.ggml_type, phase, shape, profile)


def measured_tps(r: ReferenceResult, phase: Phase) -> float:
    return r.tg_tps if phase == "decode" else r.pp_tps


def published(r: ReferenceResult, phase: Phase) -> bool:
    """Whether the row has a figure for ``phase`` (a pp-only or tg-only source has one phase)."""
    return measured_tps(r, phase) > 0


def used(r: ReferenceResult, phase: Phase) -> bool:
    """Whether the fit uses this row's figure for ``phase``: published and not marked excluded in the table."""
    return published(r, phase) and not (r.exclude_tg if phase == "decode" else r.exclude_pp)


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
        """The fitted class that predicts ``cls``: itself, else (for a quantized type) the first quantized stand-in
        the fit has (``QUANT_STAND_INS``), else None."""
        if f"class:{cls}" in self.coefficients:
            return cls
        if cls in FLOAT_CLASSES:
            return None
        return next((o for o in QUANT_STAND_INS if f"class:{o}" in self.coefficients), None)

    def streamed(self, demand: Demand) -> float | None:
        """Fitted seconds per token of the kernel classes' work (bytes or FLOPs at η); None when a class has neither
        its own nor a stand-in coefficient."""
        total = 0.0
        for cls, value in demand.ideal_s.items():
            if not value:
                continue
            fitted = self.stand_in(cls)
            if fitted is None:
                return None
            total += self.coefficients[f"class:{fitted}"] * value
        return total

    def seconds(self, demand: Demand) -> float | None:
        """Fitted seconds per token; None when a class has neither its own nor a stand-in coefficient."""
        streamed = self.streamed(demand)
        if streamed is None:
            return None
        total = demand.known_s + sum(self.coefficients.get(name, 0.0) * value
                                     for name, value in demand.features().items() if not name.startswith("class:"))
        total += max(streamed, self.alu_ops * demand.alu_s if demand.quantized else 0.0)
        return total if total > 0 else None

    @property
    def alu_ops(self) -> float:
        """ALU operations per quantized weight (decode's roofline side); 0 when the fit has no ALU side."""
        return self.coefficients.get(ALU_KEY, 0.0)

    def tps(self, demand: Demand) -> float | None:
        s = self.seconds(demand)
        return 1.0 / s if s else None


def _nnls_normal(design: np.ndarray, rhs: np.ndarray, tol: float = 1e-10) -> np.ndarray:
    """min ‖design·x − rhs‖ with x ≥ 0, Lawson and Hanson's active set as :func:`fitted_model.nnls` runs it, on the
    normal equations (Bro and De Jong's form): each step solves a system of the free columns' Gram matrix instead of
    a least squares of the whole design. The designs here are a few columns of scaled regressors and the fit solves
    thousands of them over the cross-validation's folds. Falls back to :func:`scaled_nnls` where a Gram block is
    singular."""
    import numpy as np

    gram, proj = design.T @ design, design.T @ rhs
    n = design.shape[1]
    free = np.zeros(n, dtype=bool)
    x = np.zeros(n)
    try:
        for _ in range(3 * n):
            grad = proj - gram @ x
            if free.all() or grad[~free].max() <= tol:
                break
            free[np.argmax(np.where(free, -np.inf, grad))] = True
            while True:
                z = np.zeros(n)
                z[free] = np.linalg.solve(gram[np.ix_(free, free)], proj[free])
                if (z[free] > tol).all():
                    break
                neg = free & (z <= tol)
                step = np.min(x[neg] / np.maximum(x[neg] - z[neg], 1e-300))
                x = x + step * (z - x)
                free &= x > tol
                x[~free] = 0.0
            x = z
    except np.linalg.LinAlgError:
        return scaled_nnls(design, rhs)
    return x


def _solve(
    design: np.ndarray, names: Sequence[str], rhs: np.ndarray | None = None,
) -> tuple[float, dict[str, float]] | None:
    """Non-negative least squares of ``design · c ≈ rhs`` (default 1) over the subsets that keep every class column.

    The class columns always stay with a positive value (an efficiency must exist); overhead columns are non-negative
    (the machine fit's solver, :func:`fitted_model.scaled_nnls`). Returns (sum of squared relative residuals,
    coefficients) of the best subset.
    """
    import numpy as np

    class_idx = [i for i, n in enumerate(names) if n.startswith("class:")]
    extra = [i for i, n in enumerate(names) if not n.startswith("class:")]
    best: tuple[float, dict[str, float]] | None = None
    target = np.ones(design.shape[0]) if rhs is None else rhs
    if len(class_idx) + len(extra) <= design.shape[0]:
        # Every subset is the full set with some coefficients held at 0, so the full set's non-negative solution
        # has the least residual of them all: where it keeps every class positive it is the answer (the overheads it
        # sets to 0 are left out, as the subset without them would), and the subsets need no search.
        coef = _nnls_normal(design, target)
        if np.all(coef[class_idx] > 0):
            sse = float(np.sum((design @ coef - target) ** 2))
            return sse, {names[i]: float(v) for i, v in enumerate(coef) if i in class_idx or v > 0}
    for k in range(len(extra) + 1):
        for chosen in itertools.combinations(extra, k):
            cols = class_idx + list(chosen)
            if len(cols) > design.shape[0]:
                continue
            sub = design[:, cols]
            coef = _nnls_normal(sub, target)
            if np.any(coef[: len(class_idx)] <= 0):
                continue
            sse = float(np.sum((sub @ coef - target) ** 2))
            if best is None or sse < best[0] * (1.0 - RELATIVE_GAIN):
                best = (sse, {names[c]: float(v) for c, v in zip(cols, coef, strict=True)})
    return best


def row_demands(
    phase: Phase, rows: Sequence[ReferenceResult], profiles: Mapping[str, HardwareProfile],
    tflops_per_w: float | None, demand: DemandFn = reference_demand,
) -> list[Demand]:
    """Each row's demand; the KV term (``KV_EXTRA``) only where a row was measured at a depth (``n_depth`` > 0): from
    an empty cache the KV cache is a few percent of the bytes, too little to tell its cost from the weights'."""
    demands = [demand(r, profiles[r.gpu], phase, tflops_per_w) for r in rows]
    if any(r.n_depth > 0 for r in rows):
        return demands
    return [replace(d, extra={k: v for k, v in d.extra.items() if k != KV_EXTRA}) if KV_EXTRA in d.extra else d
            for d in demands]


def _fit_once(
    phase: Phase, rows: Sequence[ReferenceResult], profiles: Mapping[str, HardwareProfile],
    tflops_per_w: float | None, demand: DemandFn,
) -> tuple[float, dict[str, float]] | None:
    return _fit_demands(phase, rows, row_demands(phase, rows, profiles, tflops_per_w, demand))


def _fit_demands(
    phase: Phase, rows: Sequence[ReferenceResult], demands: Sequence[Demand],
) -> tuple[float, dict[str, float]] | None:
    import numpy as np

    seconds = np.array([1.0 / measured_tps(r, phase) - d.known_s for r, d in zip(rows, demands, strict=True)])
    if np.any(seconds <= 0):
        return None  # the unfitted seconds alone exceed a measured time
    return _fit_scaled([d.features() for d in demands], seconds)


def _fit_scaled(
    feats: Sequence[Mapping[str, float]], seconds: np.ndarray, rhs: np.ndarray | None = None,
) -> tuple[float, dict[str, float]] | None:
    """Coefficients of ``feats`` with each row divided by its ``seconds`` (a fit on relative time) and every
    column scaled to 1 for the solve (``_solve``; ``rhs`` default 1); (residual, coefficients) or None."""
    import numpy as np

    names = sorted({k for f in feats for k in f}, key=lambda n: (not n.startswith("class:"), n))
    design = np.array([[f.get(n, 0.0) for n in names] for f in feats]) / seconds[:, None]
    scale = np.abs(design).max(axis=0)
    scale[scale == 0] = 1.0
    solved = _solve(design / scale, names, rhs)
    if solved is None:
        return None
    return solved[0], {n: v / float(scale[names.index(n)]) for n, v in solved[1].items()}


def _fit_roofline(
    rows: Sequence[ReferenceResult], demands: Sequence[Demand], alu_ops: float,
) -> tuple[float, dict[str, float]] | None:
    """Decode fitted with an ALU side of ``alu_ops`` per quantized weight: which rows sit on the ALU side of the max
    and the coefficients are found in turn (at most 8 rounds); an ALU-bound row's ALU seconds are taken as known.
    A class whose rows are all ALU-bound gets no coefficient of its own (it borrows its stand-in's, else the round
    ends the search). Returns (sum of squared relative residuals of the max form, coefficients) of the best round
    that leaves a row on the ALU side, else None."""
    import numpy as np

    measured_s = np.array([1.0 / measured_tps(r, "decode") for r in rows])
    alu_bound: frozenset[int] = frozenset()
    best: tuple[float, dict[str, float]] | None = None
    for _ in range(8):
        feats = [{k: v for k, v in d.features().items() if not (i in alu_bound and k.startswith("class:"))}
                 for i, d in enumerate(demands)]
        known = np.array([d.known_s + (alu_ops * d.alu_s if i in alu_bound else 0.0) for i, d in enumerate(demands)])
        solved = _fit_scaled(feats, measured_s, 1.0 - known / measured_s)
        if solved is None:
            return best
        fit = ArchFit("", "decode", {**solved[1], ALU_KEY: alu_ops}, tuple(rows))
        times = [fit.seconds(d) for d in demands]
        if any(t is None for t in times):
            return best
        sse = float(np.sum((np.array(times) / measured_s - 1.0) ** 2))
        now = frozenset(i for i, d in enumerate(demands) if d.quantized and alu_ops * d.alu_s > (fit.streamed(d) or 0))
        if now and (best is None or sse < best[0]):  # no row on the ALU side: the linear form, not this one
            best = (sse, fit.coefficients)
        if now == alu_bound:
            break
        alu_bound = now
    return best


def _best_roofline(
    rows: Sequence[ReferenceResult], demands: Sequence[Demand], grid: Sequence[float] | None = None,
) -> tuple[float, dict[str, float]] | None:
    """The roofline fit of the ``grid`` value (default: ALU_OPS_GRID's non-zero ones) with the smallest residual:
    every ALU_COARSE_STEP-th value first, then every value within a step of the best of those (the residual is smooth
    in the ops per weight, and the decode fit is the one search of the fit that runs 60 solves per architecture, GPU
    left out and cell)."""
    grid = ALU_OPS_GRID[1:] if grid is None else tuple(grid)
    if not grid:
        return None

    def solve(indices: Iterable[int]) -> list[tuple[float, int, dict[str, float]]]:
        return [(s[0], i, s[1]) for i in indices if (s := _fit_roofline(rows, demands, grid[i])) is not None]

    coarse = solve(range(0, len(grid), ALU_COARSE_STEP))
    if not coarse:
        return None
    centre = min(coarse, key=lambda t: (t[0], t[1]))[1]
    fine = solve(i for i in range(max(0, centre - ALU_COARSE_STEP + 1), min(len(grid), centre + ALU_COARSE_STEP))
                 if i % ALU_COARSE_STEP)
    sse, _, coefficients = min([*coarse, *fine], key=lambda t: (t[0], t[1]))
    return sse, coefficients


def fit_phase_rows(
    phase: Phase, rows: Sequence[ReferenceResult], profiles: Mapping[str, HardwareProfile], architecture: str = "",
    demand: DemandFn = reference_demand, alu_grid: Sequence[float] | None = None,
    kappa_grid: Sequence[float | None] | None = None,
) -> ArchFit:
    """Fit one phase's coefficients to ``rows`` (each row's GPU looked up in ``profiles`` by name); prefill also
    picks the power cap κ from ``kappa_grid`` (default KAPPA_GRID) with the smallest residual, decode the ALU
    operations per quantized weight from ``alu_grid`` (default ALU_OPS_GRID; empty: no ALU side)."""
    rows = tuple(r for r in rows if used(r, phase))
    if not rows:
        raise PublicFitError(f"{architecture or 'rows'}: no {phase} rows to fit")
    best: tuple[float, dict[str, float], float | None] | None = None
    for kappa in (KAPPA_GRID if kappa_grid is None else kappa_grid) if phase == "prefill" else (None,):
        solved = _fit_once(phase, rows, profiles, kappa, demand)
        if solved is not None and (best is None or solved[0] < best[0] * (1.0 - RELATIVE_GAIN)):
            best = (solved[0], solved[1], kappa)
    if phase == "decode" and best is not None:
        demands = row_demands(phase, rows, profiles, None, demand)
        linear_sse = best[0]
        if any(d.quantized and d.alu_s for d in demands):
            roofline = _best_roofline(rows, demands, alu_grid)
            if roofline is not None and roofline[0] < min(best[0], linear_sse * (1.0 - ALU_GAIN)):
                best = (roofline[0], roofline[1], None)
    if best is None:
        raise PublicFitError(f"{architecture or 'rows'}: no non-negative {phase} fit")
    fitted = [k for k, v in best[1].items() if k != ALU_KEY and v > 0]
    if len(rows) <= len(fitted):
        # no more rows than coefficients: the rows are reproduced whatever the costs really are (one row of one
        # model gives its efficiency to every size); no fit is made and the nearest architecture's is borrowed
        raise PublicFitError(f"{architecture or 'rows'}: {len(rows)} {phase} rows cannot check a fit of "
                             f"{len(fitted)} coefficients")
    if len({r.model.name for r in rows}) < 2 and len({r.gpu for r in rows}) < 2:
        # one model on one GPU: the per-byte cost cannot be told from the per-layer and fixed ones, so the fit
        # would carry that model's efficiency to every size
        raise PublicFitError(f"{architecture or 'rows'}: {phase} rows of one model on one GPU cannot tell the "
                             f"per-byte costs from the fixed ones")
    return ArchFit(architecture, phase, best[1], rows, best[2])


def architecture_of(gpu: str, profiles: Mapping[str, HardwareProfile]) -> str:
    return profiles[gpu].architecture or "unknown"


#: How a phase is fitted to rows of one architecture: ``fit_phase_rows``, or a stand-in that keeps its fits.
PhaseFitFn = Callable[[Phase, Sequence[ReferenceResult], Mapping[str, HardwareProfile], str], ArchFit]


def fit_architectures(
    rows: Iterable[ReferenceResult], profiles: Mapping[str, HardwareProfile], *, fit: PhaseFitFn = fit_phase_rows,
) -> dict[tuple[str, str], ArchFit]:
    """(architecture, phase) -> fit, for every architecture the rows cover (each fitted by ``fit``)."""
    by_arch: dict[str, list[ReferenceResult]] = {}
    for r in rows:
        by_arch.setdefault(architecture_of(r.gpu, profiles), []).append(r)
    fits: dict[tuple[str, str], ArchFit] = {}
    for arch, arch_rows in sorted(by_arch.items()):
        for phase in PHASES:
            try:
                fits[(arch, phase)] = fit(phase, arch_rows, profiles, arch)
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


def _leave_one_out(
    rows: Sequence[ReferenceResult], profiles: Mapping[str, HardwareProfile], unit: Callable[[ReferenceResult], str],
    demand: DemandFn, group: Callable[[str], str] | None,
) -> list[HeldOut]:
    """For each ``unit`` (a GPU, a source) of a group with at least two: fit the group without it, predict its rows.
    The group of a GPU is its architecture unless ``group`` (GPU name -> group name) says otherwise."""
    out: list[HeldOut] = []
    by_arch: dict[str, list[ReferenceResult]] = {}
    for r in rows:
        by_arch.setdefault(group(r.gpu) if group else architecture_of(r.gpu, profiles), []).append(r)
    for arch, arch_rows in sorted(by_arch.items()):
        units = list(dict.fromkeys(unit(r) for r in arch_rows))
        if len(units) < 2:
            continue
        for phase, left_out in itertools.product(PHASES, units):
            train = [r for r in arch_rows if unit(r) != left_out]
            try:
                fit: ArchFit | None = fit_phase_rows(phase, train, profiles, arch, demand)
            except PublicFitError:
                fit = None
            for r in (r for r in arch_rows if unit(r) == left_out and used(r, phase)):
                tps = fit.tps(demand(r, profiles[r.gpu], phase, fit.tflops_per_w)) if fit else None
                out.append(HeldOut(arch, phase, r, tps))
    return out


def leave_one_gpu_out(
    rows: Sequence[ReferenceResult], profiles: Mapping[str, HardwareProfile], demand: DemandFn = reference_demand,
    group: Callable[[str], str] | None = None,
) -> list[HeldOut]:
    """For each GPU of a group with at least two GPUs: fit the group without it, predict its rows. The group of a
    GPU is its architecture unless ``group`` (GPU name -> group name) says otherwise."""
    return _leave_one_out(rows, profiles, lambda r: r.gpu, demand, group)


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




def fit_cells(
    rows: Iterable[ReferenceResult], profiles: Mapping[str, HardwareProfile], *, fit: PhaseFitFn = fit_phase_rows,
) -> dict[tuple[str, str, str, str], ArchFit]:
    """(architecture, backend, era, phase) -> fit for the finer cells that have MIN_CELL_ROWS rows of their own and
    are not the whole architecture ("" era: every era of that backend; each fitted by ``fit``). The architecture's
    own fit is not here."""
    by_arch: dict[str, list[ReferenceResult]] = {}
    for r in rows:
        by_arch.setdefault(architecture_of(r.gpu, profiles), []).append(r)
    cells: dict[tuple[str, str, str, str], ArchFit] = {}
    for arch, arch_rows in sorted(by_arch.items()):
        keys = {(canonical_backend(r.backend), "") for r in arch_rows}
        keys |= {(canonical_backend(r.backend), row_era(r)) for r in arch_rows}
        for backend, era in sorted(keys):
            cell = [r for r in arch_rows if canonical_backend(r.backend) == backend and era in ("", row_era(r))]
            if len(cell) < MIN_CELL_ROWS or len(cell) == len(arch_rows):
                continue
            for phase in PHASES:
                try:
                    cells[(arch, backend, era, phase)] = fit(phase, cell, profiles, arch)
                except PublicFitError:
                    continue
    return cells


def flops_per_byte(profile: HardwareProfile) -> float:
    """Spec FP16 tensor FLOPs per byte of memory bandwidth: where a GPU sits between compute and memory."""
    return profile.fp16_tensor_tflops * 1e3 / profile.peak_bandwidth_gbps if profile.peak_bandwidth_gbps else 0.0


def nearest_architecture(target: HardwareProfile, candidates: Mapping[str, Sequence[HardwareProfile]]) -> str | None:
    """The architecture among ``candidates`` (architecture -> its GPUs with rows) that a GPU without rows borrows:
    one of the same vendor if any, then the one whose median FLOPs per byte is nearest the target's (log scale)."""
    pool = {a: g for a, g in candidates.items() if g and any(p.vendor == target.vendor for p in g)} or {
        a: g for a, g in candidates.items() if g}
    if not pool or not flops_per_byte(target):
        return None
    own = math.log(flops_per_byte(target))

    def distance(arch: str) -> tuple[float, str]:
        ratios = [flops_per_byte(p) for p in pool[arch] if flops_per_byte(p)]
        return (abs(math.log(statistics.median(ratios)) - own) if ratios else math.inf, arch)

    return min(pool, key=distance)


def gpus_by_architecture(rows: Iterable[ReferenceResult],
                         profiles: Mapping[str, HardwareProfile]) -> dict[str, list[HardwareProfile]]:
    out: dict[str, list[HardwareProfile]] = {}
    for gpu in dict.fromkeys(r.gpu for r in rows):
        out.setdefault(architecture_of(gpu, profiles), []).append(profiles[gpu])
    return out


def leave_one_architecture_out(
    rows: Sequence[ReferenceResult], profiles: Mapping[str, HardwareProfile],
    fits: Mapping[tuple[str, str], ArchFit],
) -> list[HeldOut]:
    """Each architecture's rows predicted by the fit its GPUs would borrow were it absent (``nearest_architecture``
    among the others, spec-scaled through each GPU's own ceilings): the error of a borrowed prediction. The
    ``architecture`` of each result is the one left out."""
    archs = gpus_by_architecture(rows, profiles)
    out: list[HeldOut] = []
    for phase in PHASES:
        for r in (r for r in rows if used(r, phase)):
            arch = architecture_of(r.gpu, profiles)
            others = {a: g for a, g in archs.items() if a != arch and (a, phase) in fits}
            lender = nearest_architecture(profiles[r.gpu], others)
            fit = fits[(lender, phase)] if lender else None
            tps = fit.tps(reference_demand(r, profiles[r.gpu], phase, fit.tflops_per_w)) if fit else None
            out.append(HeldOut(arch, phase, r, tps))
    return out


def leave_one_era_out(rows: Sequence[ReferenceResult], profiles: Mapping[str, HardwareProfile]) -> list[HeldOut]:
    """For each architecture with rows of at least two build eras: each era's rows predicted by the architecture's
    fit on the other eras (empty when no architecture spans two eras)."""
    out: list[HeldOut] = []
    by_arch: dict[str, list[ReferenceResult]] = {}
    for r in rows:
        by_arch.setdefault(architecture_of(r.gpu, profiles), []).append(r)
    for arch, arch_rows in sorted(by_arch.items()):
        eras = sorted({row_era(r) for r in arch_rows} - {""})
        if len(eras) < 2:
            continue
        for phase, era in itertools.product(PHASES, eras):
            try:
                fit: ArchFit | None = fit_phase_rows(phase, [r for r in arch_rows if row_era(r) != era], profiles, arch)
            except PublicFitError:
                fit = None
            for r in (r for r in arch_rows if row_era(r) == era and used(r, phase)):
                tps = fit.tps(reference_demand(r, profiles[r.gpu], phase, fit.tflops_per_w)) if fit else None
                out.append(HeldOut(arch, phase, r, tps))
    return out
