"""KV-cache sizes: bytes per stored value for each llama.cpp cache type, and bytes per token.

A quantized cache type stores values in blocks: ``block_bytes`` hold ``block_values`` values
(q8_0: 34 bytes per 32 values: 32 int8 plus one fp16 scale).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CacheType:
    """One ggml type usable for the K or V cache."""

    name: str
    block_values: int
    block_bytes: int

    @property
    def bytes_per_value(self) -> float:
        return self.block_bytes / self.block_values


CACHE_TYPES: dict[str, CacheType] = {
    t.name: t
    for t in (
        CacheType("f32", 1, 4),
        CacheType("f16", 1, 2),
        CacheType("bf16", 1, 2),
        CacheType("q8_0", 32, 34),
        CacheType("q4_0", 32, 18),
        CacheType("q4_1", 32, 20),
        CacheType("q5_0", 32, 22),
        CacheType("q5_1", 32, 24),
    )
}

#: Cache types reported by ``inspect`` (f32 is accepted by llama.cpp but nobody benchmarks it).
REPORTED_CACHE_TYPES: tuple[str, ...] = ("f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1")


def cache_type(name: str) -> CacheType:
    """Look a cache type up by its llama.cpp name; a clear ValueError names the valid ones."""
    try:
        return CACHE_TYPES[name.lower()]
    except KeyError:
        valid = ", ".join(CACHE_TYPES)
        raise ValueError(f"unknown KV cache type {name!r} (valid: {valid})") from None


def kv_bytes_per_token_per_layer(
    n_head_kv: int, head_dim_k: int, head_dim_v: int, type_k: str = "f16", type_v: str | None = None
) -> float:
    """K plus V bytes one token adds to one attention layer's cache."""
    tk = cache_type(type_k)
    tv = cache_type(type_v or type_k)
    return n_head_kv * (head_dim_k * tk.bytes_per_value + head_dim_v * tv.bytes_per_value)


def kv_bytes_per_token(
    n_layer: int,
    n_head_kv: int,
    head_dim_k: int,
    head_dim_v: int | None = None,
    type_k: str = "f16",
    type_v: str | None = None,
) -> float:
    """2 × layers × kv_heads × head_dim × bytes_per_value (K and V sized separately)."""
    hd_v = head_dim_k if head_dim_v is None else head_dim_v
    return n_layer * kv_bytes_per_token_per_layer(n_head_kv, head_dim_k, hd_v, type_k, type_v)


def kv_bytes_at_context(
    n_ctx: int,
    n_layer: int,
    n_head_kv: int,
    head_dim_k: int,
    head_dim_v: int | None = None,
    type_k: str = "f16",
    type_v: str | None = None,
    swa_layers: int = 0,
    swa_window: int = 0,
) -> float:
    """KV bytes for ``n_ctx`` tokens; ``swa_layers`` of the layers hold at most ``swa_window`` tokens."""
    hd_v = head_dim_k if head_dim_v is None else head_dim_v
    per_layer = kv_bytes_per_token_per_layer(n_head_kv, head_dim_k, hd_v, type_k, type_v)
    full_layers = n_layer - swa_layers
    swa_tokens = min(n_ctx, swa_window) if swa_layers else 0
    return per_layer * (full_layers * n_ctx + swa_layers * swa_tokens)
