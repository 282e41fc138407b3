"""Prefill ceilings: prefill is compute-bound, ``prefill_tps ≤ FLOPS / FLOPs per prompt token``.

Pure functions; compute in TFLOPS (1e12 FLOP/s).
"""

from __future__ import annotations

from collections.abc import Mapping

from app.model.facts import ModelFacts
from app.predict.offload import WeightSplit, guess_tied_embeddings


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


def matmul_params(
    facts: ModelFacts, split: WeightSplit | None = None, tensor_bytes: Mapping[str, int] | None = None
) -> float:
    """Parameters a token multiplies through: n_params less the (untied) embedding table; MoE active experts only
    when a per-tensor byte map says which bytes are experts."""
    tied = split.tied_embeddings if split else guess_tied_embeddings(facts)
    params = facts.n_params - (0 if tied else facts.n_vocab * facts.n_embd)
    if facts.n_expert and tensor_bytes:
        expert_bytes = sum(n for k, n in tensor_bytes.items() if "_exps" in k)
        share = expert_bytes / max(sum(tensor_bytes.values()), 1)
        params *= 1.0 - share * (1.0 - facts.n_expert_used / facts.n_expert)
    return max(params, 0.0)
