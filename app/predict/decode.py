"""Decode ceilings: decode is memory-bound.

Each generated token reads every weight it uses once plus the KV cache up to the current depth, so
``decode_tps ≤ bandwidth / (weight bytes read + KV bytes read)``. Pure functions; bytes are bytes, bandwidths GB/s
(1e9 B/s). With a partial offload each side reads its share at its own bandwidth, one after the other.
"""

from __future__ import annotations

from app.model.facts import ModelFacts
from app.model.kv_cache import kv_bytes_per_token_per_layer
from app.predict.offload import WeightSplit

GB = 1e9
#: Used for the CPU side of a partial offload when no measured figure is given (dual-channel DDR5-4000 peak).
DEFAULT_CPU_BANDWIDTH_GBPS = 64.0


def decode_ceiling_tps(bandwidth_gbps: float, weight_bytes: float, kv_bytes_read: float = 0.0) -> float:
    """Tokens/s if every decoded token reads ``weight_bytes`` plus ``kv_bytes_read`` at ``bandwidth_gbps``."""
    total = weight_bytes + kv_bytes_read
    if bandwidth_gbps <= 0 or total <= 0:
        raise ValueError("decode_ceiling_tps: bandwidth and bytes must be positive")
    return bandwidth_gbps * GB / total


def kv_bytes_read_at_depth(
    facts: ModelFacts, depth_tokens: int, type_k: str = "f16", type_v: str | None = None
) -> float:
    """KV bytes one decoded token reads at ``depth_tokens``: per-token KV × depth, sliding-window layers at most their
    window (the attention of those layers needs only the window, whatever the cache holds)."""
    return facts.kv_bytes(max(depth_tokens, 0), type_k, type_v, swa_full=False)


def decode_ceiling_at_depth_tps(
    facts: ModelFacts, bandwidth_gbps: float, depth_tokens: int, type_k: str = "f16", type_v: str | None = None
) -> float:
    """Decode ceiling on one device holding all weights, at ``depth_tokens`` already in the cache."""
    kv_read = kv_bytes_read_at_depth(facts, depth_tokens, type_k, type_v)
    return decode_ceiling_tps(bandwidth_gbps, facts.weight_bytes, kv_read)


def decode_ceiling_split_tps(
    gpu_bytes: float, gpu_bandwidth_gbps: float, cpu_bytes: float, cpu_bandwidth_gbps: float | None
) -> float:
    """Partial offload: time per token = gpu_bytes / gpu_bw + cpu_bytes / cpu_bw (the parts run one after the other)."""
    seconds = 0.0
    if gpu_bytes > 0:
        if gpu_bandwidth_gbps <= 0:
            raise ValueError("decode_ceiling_split_tps: GPU bandwidth must be positive")
        seconds += gpu_bytes / (gpu_bandwidth_gbps * GB)
    if cpu_bytes > 0:
        if not cpu_bandwidth_gbps or cpu_bandwidth_gbps <= 0:
            raise ValueError("decode_ceiling_split_tps: CPU bandwidth must be positive when bytes are read on the CPU")
        seconds += cpu_bytes / (cpu_bandwidth_gbps * GB)
    if seconds <= 0:
        raise ValueError("decode_ceiling_split_tps: no bytes to read")
    return 1.0 / seconds


def kv_read_per_layer(facts: ModelFacts, depth: float, type_k: str, type_v: str | None) -> list[float]:
    """KV bytes each layer's attention reads for one token at ``depth`` (windowed layers: at most the window)."""
    per_token = kv_bytes_per_token_per_layer(facts.n_head_kv, facts.head_dim_k, facts.head_dim_v, type_k, type_v)
    swa_set = set(facts.swa_layers) if facts.swa_window else set()
    return [per_token * (min(depth, facts.swa_window) if i in swa_set else depth) for i in range(facts.n_layer)]


def decode_ceiling_offload_tps(
    facts: ModelFacts, split: WeightSplit, depth_tokens: float, type_k: str, type_v: str | None,
    device_bandwidth_gbps: float, cpu_bandwidth_gbps: float | None, *, host_only: bool = False,
) -> float:
    """Decode ceiling with the weights placed as ``split`` and each layer's KV cache on its layer's device.

    The GPU side reads its weights and KV at ``device_bandwidth_gbps``, the CPU side at ``cpu_bandwidth_gbps``
    (``decode_ceiling_split_tps``). ``host_only``: the device is the host itself, everything read at
    ``device_bandwidth_gbps``.
    """
    kv = kv_read_per_layer(facts, depth_tokens, type_k, type_v)
    first = split.first_gpu_layer
    gpu_bytes = split.gpu_read_bytes + sum(kv[first:])
    cpu_bytes = split.cpu_read_bytes + sum(kv[:first])
    if host_only:
        return decode_ceiling_tps(device_bandwidth_gbps, gpu_bytes + cpu_bytes)
    return decode_ceiling_split_tps(gpu_bytes, device_bandwidth_gbps, cpu_bytes, cpu_bandwidth_gbps)
