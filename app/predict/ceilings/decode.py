"""Decode ceilings: decode is memory-bound.

Each generated token reads every weight it uses once (a MoE's active experts only) plus the KV cache up to the
current depth (the layers that keep one; K only with MLA; a sliding-window layer at most its window) and reads and
writes every recurrent layer's state, so ``decode_tps ≤ bandwidth / (weight bytes read + KV and state bytes)``.
Pure functions; bytes are bytes, bandwidths GB/s (1e9 B/s). With a partial offload each side reads its share at
its own bandwidth, one after the other:

    s/token = Σ_devices bytes_read_on_device / bandwidth_device + extra_crossings × (4 × n_embd / PCIe + latency)

A decoded token (a batch of one) runs each op where its weights are: ggml_backend_sched assigns an op to the
backend of its weight's buffer (ggml/src/ggml-backend.cpp, ``ggml_backend_sched_split_graph`` pass 1), and offloads
a host weight's op to the GPU only for batches of at least the backend's minimum (32 rows in the CUDA and Vulkan
backends' ``offload_op``), so not in decode. Wherever consecutive ops sit on different devices the scheduler
copies the split's inputs, the f32 hidden state (4 × n_embd bytes), to the other device
(``ggml_backend_sched_compute_splits``, ``ggml_backend_tensor_copy``). The input's one crossing to the GPU (the
token embedding is looked up on the host) happens in every offload, full or partial, and sits in the fitted
overheads; each further crossing (``-ncmoe``: into and out of each host-held layer's experts; ``-ot``: the same for
a layer's feed-forward or experts it keeps on the other device than the layer's attention; ``-nkvo``: into and
out of each layer's attention, run on the CPU, src/llama-graph.cpp ``build_attn`` "all nodes between the KV store
and the attention output are run on the CPU") costs its bytes at PCIe bandwidth plus a copy's latency, both
assumed (:data:`DEFAULT_PCIE_GBPS`, :data:`PCIE_COPY_LATENCY_S`).
"""

from __future__ import annotations

from dataclasses import dataclass

from app.model.facts import ModelFacts
from app.predict.ceilings.offload import WeightSplit, active_weight_bytes
from app.predict.memo import by_identity

GB = 1e9
#: Used for the CPU side of a partial offload when no measured figure is given (dual-channel DDR5-4000 peak).
DEFAULT_CPU_BANDWIDTH_GBPS = 64.0
#: PCIe bandwidth of a crossing when none is known: PCIe 4.0 x8 (a laptop GPU's link), 15.75 GB/s. Assumed.
DEFAULT_PCIE_GBPS = 16.0
#: What a synchronised copy between devices costs besides its bytes (a launch and a wait). Assumed, not measured.
PCIE_COPY_LATENCY_S = 10e-6


def decode_ceiling_tps(bandwidth_gbps: float, weight_bytes: float, kv_bytes_read: float = 0.0) -> float:
    """Tokens/s if every decoded token reads ``weight_bytes`` plus ``kv_bytes_read`` at ``bandwidth_gbps``."""
    total = weight_bytes + kv_bytes_read
    if bandwidth_gbps <= 0 or total <= 0:
        raise ValueError("decode_ceiling_tps: bandwidth and bytes must be positive")
    return bandwidth_gbps * GB / total


def kv_bytes_read_at_depth(
    facts: ModelFacts, depth_tokens: float, type_k: str = "f16", type_v: str | None = None
) -> float:
    """Context-memory bytes one decoded token moves at ``depth_tokens``: per-token KV × depth on the layers that keep
    a KV cache (K only with MLA), sliding-window layers at most their window (the attention of those layers needs
    only the window, whatever the cache holds), and the recurrent state read and written back by every recurrent
    layer (:func:`kv_read_per_layer`)."""
    return sum(kv_read_per_layer(facts, max(depth_tokens, 0), type_k, type_v))


def decode_ceiling_at_depth_tps(
    facts: ModelFacts, bandwidth_gbps: float, depth_tokens: int, type_k: str = "f16", type_v: str | None = None
) -> float:
    """Decode ceiling on one device holding all weights, at ``depth_tokens`` already in the cache (MoE: the active
    experts' bytes, :func:`app.predict.ceilings.offload.active_weight_bytes`, from the tensor table where the facts
    have it)."""
    kv_read = kv_bytes_read_at_depth(facts, depth_tokens, type_k, type_v)
    return decode_ceiling_tps(bandwidth_gbps, active_weight_bytes(facts, facts.tensor_bytes or None), kv_read)


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
    """Context-memory bytes each layer moves for one token at ``depth``: its KV cache up to the depth (windowed layers:
    at most the window; an MLA layer its compressed K, which holds its V too; none on a recurrent or MLP layer),
    and a recurrent layer's state, read and written back once a token (src/llama-memory-recurrent.cpp: the state is
    f32, ``ggml_ssm_scan`` / ``rwkv_wkv`` read it and the graph copies the new one into the cache)."""
    return list(_kv_read_per_layer(facts, depth, type_k, type_v))


@by_identity(1)
def _kv_read_per_layer(facts: ModelFacts, depth: float, type_k: str, type_v: str | None) -> tuple[float, ...]:
    per_token = facts.kv_bytes_per_token_per_layer(type_k, type_v)
    swa_set = set(facts.swa_layers) if facts.swa_window else set()
    recurrent = set(facts.recurrent_layers)
    state = 2.0 * facts.state_bytes_per_layer
    return tuple(per_token[i] * (min(depth, facts.swa_window) if i in swa_set else depth)
                 + (state if i in recurrent else 0.0) for i in range(facts.n_layer))


def device_crossings(split: WeightSplit, offload_kqv: bool = True) -> int:
    """Times one decoded token's hidden state changes device: input layer (host), then per repeating layer its
    attention's device (the host in between without ``offload_kqv``), its dense feed-forward's and its routed
    experts' devices (where ``-ot`` put them: a MoE's shared experts and routed ones read the same input, so both
    on the host cross once) and back to the attention's device for the residual, then the output layer's."""
    return _device_crossings(split, offload_kqv)


@by_identity(1)
def _device_crossings(split: WeightSplit, offload_kqv: bool) -> int:
    sides: list[bool] = [False]  # token_embd's rows are looked up on the host
    for i in range(split.n_layer):
        attn = split.layer_attn_on_gpu[i] if split.layer_attn_on_gpu else i >= split.first_gpu_layer
        sides.append(attn)
        if not offload_kqv:
            sides += [False, attn]
        parts = [on for on in (split.layer_ffn_on_gpu[i] if split.layer_ffn_on_gpu else None,
                               split.layer_experts_on_gpu[i] if split.layer_experts_on_gpu else None)
                 if on is not None]
        if parts:
            sides += [*parts, attn]
    sides.append(split.output_on_gpu)
    return sum(a != b for a, b in zip(sides, sides[1:], strict=False))


def transfer_seconds_per_token(n_embd: int, extra_crossings: int, pcie_gbps: float = DEFAULT_PCIE_GBPS) -> float:
    """The crossings beyond the input's first: each moves the f32 hidden state, 4 × n_embd bytes, at ``pcie_gbps``
    plus :data:`PCIE_COPY_LATENCY_S` (see the module docstring)."""
    if extra_crossings <= 0:
        return 0.0
    return extra_crossings * (4.0 * n_embd / (pcie_gbps * GB) + PCIE_COPY_LATENCY_S)


def extra_crossings(split: WeightSplit, offload_kqv: bool = True) -> int:
    """Crossings per decoded token beyond the input's one to the GPU (0 with nothing on the GPU)."""
    n = device_crossings(split, offload_kqv)
    return n - min(n, 1)


@dataclass(frozen=True)
class DecodeBytes:
    """What one decoded token reads on each side at a depth, and the crossings between them."""

    gpu_bytes: float  # weights and KV read from the GPU device's memory
    host_bytes: float  # weights and KV read from host memory
    extra_crossings: int


def decode_bytes(facts: ModelFacts, split: WeightSplit, depth_tokens: float, type_k: str, type_v: str | None,
                 offload_kqv: bool = True) -> DecodeBytes:
    """Bytes one token reads per side: the split's weight reads, each layer's KV at depth on its layer's device
    (all in host memory without ``offload_kqv``)."""
    kv = _kv_read_per_layer(facts, depth_tokens, type_k, type_v)
    first = split.first_gpu_layer if offload_kqv else facts.n_layer
    return DecodeBytes(split.gpu_read_bytes + sum(kv[first:]), split.cpu_read_bytes + sum(kv[:first]),
                       extra_crossings(split, offload_kqv))


def decode_ceiling_offload_tps(
    facts: ModelFacts, split: WeightSplit, depth_tokens: float, type_k: str, type_v: str | None,
    device_bandwidth_gbps: float, cpu_bandwidth_gbps: float | None, *, host_only: bool = False,
    offload_kqv: bool = True, pcie_gbps: float = DEFAULT_PCIE_GBPS,
) -> float:
    """Decode ceiling with the weights placed as ``split`` and each layer's KV cache on its layer's device (host
    memory without ``offload_kqv``).

    The GPU side reads its bytes at ``device_bandwidth_gbps``, the host side at ``cpu_bandwidth_gbps``
    (``decode_ceiling_split_tps``), plus the extra crossings' transfer (module docstring). ``host_only``: the device
    is the host itself, everything read at ``device_bandwidth_gbps``, nothing crosses.
    """
    b = decode_bytes(facts, split, depth_tokens, type_k, type_v, offload_kqv)
    if host_only:
        return decode_ceiling_tps(device_bandwidth_gbps, b.gpu_bytes + b.host_bytes)
    read_s = 1.0 / decode_ceiling_split_tps(b.gpu_bytes, device_bandwidth_gbps, b.host_bytes, cpu_bandwidth_gbps)
    return 1.0 / (read_s + transfer_seconds_per_token(facts.n_embd, b.extra_crossings, pcie_gbps))
