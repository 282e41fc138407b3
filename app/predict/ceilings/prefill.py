"""Prefill ceilings: prefill is compute-bound, ``prefill_tps ≤ FLOPS / FLOPs per prompt token``.

Pure functions; compute in TFLOPS (1e12 FLOP/s). On a CPU the compute figure depends on the kernel the weights
run through (:data:`FLOAT_WEIGHT_TYPES`, :func:`prefill_compute`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

from app.model.facts import ModelFacts
from app.predict.ceilings.offload import WeightSplit, guess_tied_embeddings, is_expert_tensor
from app.predict.profiles import HardwareProfile
from app.telemetry.cpu_peaks import MEASURED_ROOFLINE, ComputeFigure
from app.telemetry.repack_guard import AMX_WEIGHT_TYPES

#: Weight types ggml's CPU backend multiplies with float FMAs (``vec_dot_type`` F32 / F16 / BF16 in ggml-cpu.c's
#: ``type_traits_cpu``). Every other type (Q4_0 … Q8_0, Q2_K … Q6_K and their _S/_M/_L mixes, IQ*, TQ*, MXFP4)
#: is dotted against activations quantized to Q8_0 / Q8_1 / Q8_K: int8 dot products, on x86 (SSSE3 and later)
#: and arm64 (NEON) alike. An unknown type takes the int8 figure, the larger, so the ceiling stays a bound.
FLOAT_WEIGHT_TYPES = frozenset({"F32", "F16", "BF16"})


def weights_use_int8_dot(file_type: str) -> bool:
    """True when ``file_type`` (llama.cpp's name: "Q4_1", "Q4_K_M", "F16" …) runs int8 dot products on a CPU."""
    return file_type.strip().upper() not in FLOAT_WEIGHT_TYPES


def has_amx_kernels(file_type: str) -> bool:
    """Whether ``file_type``'s weights ("Q4_K_M": Q4_K) have kernels in ggml's AMX buffer (amx/common.h)."""
    name = file_type.strip().upper()
    k_mix = re.fullmatch(r"(Q\d_K)_[SML]", name)  # a K-quant mix is named after its main type
    return (k_mix.group(1) if k_mix else name) in AMX_WEIGHT_TYPES


def prefill_compute(profile: HardwareProfile, file_type: str, repack: int = 1) -> ComputeFigure | None:
    """The CPU compute figure a prefill of ``file_type`` weights runs at (int8 dot peak, FMA peak, or a measured
    roofline), for a profile that carries them (:class:`app.predict.hardware_context.CpuProfile`); None for the others.

    AMX tiles count only with ``repack`` on, for a type with AMX kernels, on a profile whose build has a working
    AMX buffer (``CpuProfile.amx``): weights as they are in the file run the AVX-512/AVX2 dot products."""
    int8: ComputeFigure | None = getattr(profile, "int8", None)
    fma: ComputeFigure | None = getattr(profile, "fma", None)
    if int8 is None or fma is None:
        return None
    amx: ComputeFigure | None = getattr(profile, "amx", None)
    if amx is not None and repack and has_amx_kernels(file_type):
        return amx
    return int8 if weights_use_int8_dot(file_type) else fma


def prefill_tflops(profile: HardwareProfile, file_type: str, repack: int = 1) -> float:
    """TFLOPS a prefill ceiling divides by: the figure for the weight type, else the profile's own."""
    figure = prefill_compute(profile, file_type, repack)
    return figure.tflops if figure is not None else profile.fp16_tensor_tflops


def prefill_compute_note(profile: HardwareProfile, file_type: str, repack: int = 1) -> str | None:
    """One line naming the prefill compute figure and its source; None for a profile without per-kernel figures."""
    figure = prefill_compute(profile, file_type, repack)
    if figure is None:
        return None
    what = "a ceiling" if figure.is_ceiling else "not a ceiling: measurements may exceed it"
    return f"prefill compute for {file_type} weights: {figure.kind}, {figure.tflops * 1e3:.0f} G/s ({what}; " \
           f"{figure.source})"


def attention_flops_per_token(
    n_layer: int, n_embd_attn: int, ctx_avg_tokens: float, n_swa_layers: int = 0, swa_window: int = 0
) -> float:
    """QKᵀ plus AV for one token attending ``ctx_avg_tokens`` keys: 2 × 2 × n_embd_attn FLOPs per key per layer.

    ``n_embd_attn`` is n_head × head_dim; sliding-window layers attend at most ``swa_window`` keys.
    """
    swa = min(n_swa_layers, n_layer) if swa_window else 0
    keys = (n_layer - swa) * ctx_avg_tokens + swa * min(ctx_avg_tokens, swa_window)
    return 4.0 * n_embd_attn * keys


def prefill_flops_per_token(
    n_params: float, n_prompt: int = 0, n_layer: int = 0, n_embd_attn: int = 0, depth: int = 0,
    n_swa_layers: int = 0, swa_window: int = 0,
) -> float:
    """2 × params (one multiply-add per weight) + causal attention at the prompt's average length.

    A prompt of ``n_prompt`` tokens after ``depth`` cached ones has token i attend depth + i keys, on average
    ``depth + n_prompt / 2``. This counts only the causal half; llama.cpp without flash attention computes the
    masked scores too, so its attention work in a ubatch is larger (a reason measured prefill falls short).
    """
    ctx_avg = depth + n_prompt / 2.0
    return 2.0 * n_params + attention_flops_per_token(n_layer, n_embd_attn, ctx_avg, n_swa_layers, swa_window)


def prefill_ceiling_tps(
    tflops: float, n_params: float, n_prompt: int = 0, n_layer: int = 0, n_embd_attn: int = 0, depth: int = 0,
    n_swa_layers: int = 0, swa_window: int = 0,
) -> float:
    """Prompt tokens/s at ``tflops``: FLOPS / ``prefill_flops_per_token``."""
    flops = prefill_flops_per_token(n_params, n_prompt, n_layer, n_embd_attn, depth, n_swa_layers, swa_window)
    if tflops <= 0 or flops <= 0:
        raise ValueError("prefill_ceiling_tps: TFLOPS and FLOPs per token must be positive")
    return tflops * 1e12 / flops


def expert_params(facts: ModelFacts, tensor_bytes: Mapping[str, int] | None = None) -> float:
    """Parameters of every routed expert (``ffn_*_exps``): counted from the tensor shapes where the facts have them,
    else the experts' share of the bytes (``tensor_bytes``) of n_params (an estimate: a MXFP4 expert beside Q8_0
    attention holds fewer bytes per parameter than the rest); 0 for a dense model or without either table."""
    if not facts.n_expert:
        return 0.0
    shapes = facts.tensor_shapes
    if shapes and any(is_expert_tensor(k) for k in shapes):
        return float(sum(math.prod(dims) for k, (_, dims) in shapes.items() if is_expert_tensor(k)))
    if tensor_bytes:
        share = sum(n for k, n in tensor_bytes.items() if is_expert_tensor(k)) / max(sum(tensor_bytes.values()), 1)
        return share * facts.n_params
    return 0.0


def matmul_params(
    facts: ModelFacts, split: WeightSplit | None = None, tensor_bytes: Mapping[str, int] | None = None
) -> float:
    """Parameters a token multiplies through: n_params less the (untied) embedding table, and for a MoE the routed
    experts a token is not sent to (``1 − n_expert_used / n_expert`` of :func:`expert_params`): the work of every
    bound, prefill's FLOPs and decode's ALU side alike."""
    tied = split.tied_embeddings if split else guess_tied_embeddings(facts)
    params = float(facts.n_params - (0 if tied else facts.n_vocab * facts.n_embd))
    if facts.n_expert:
        params -= expert_params(facts, tensor_bytes or facts.tensor_bytes or None) * (
            1.0 - facts.n_expert_used / facts.n_expert)
    return max(params, 0.0)


def prefill_compute_doc(profile: HardwareProfile, file_type: str, repack: int = 1) -> dict[str, str]:
    """``prefill_ceiling_kind`` (int8 dot peak / FMA peak / measured roofline / spec FP16 tensor peak) and
    ``prefill_ceiling_source`` for a prediction's JSON."""
    figure = prefill_compute(profile, file_type, repack)
    if figure is not None:
        return {"prefill_ceiling_kind": figure.kind, "prefill_ceiling_source": figure.source}
    kind = MEASURED_ROOFLINE if profile.kind == "cpu" else "spec FP16 tensor peak"
    return {"prefill_ceiling_kind": kind, "prefill_ceiling_source": profile.source}
