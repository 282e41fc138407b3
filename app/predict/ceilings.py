"""Predicted ceilings: what the hardware allows for prefill and decode, memory fit, and scenario totals.

Pure functions of (model facts, hardware facts, settings); no I/O. Bytes are bytes, bandwidths GB/s (1e9 B/s),
compute TFLOPS (1e12 FLOP/s).

Decode is memory-bound: each generated token reads every weight it uses once plus the KV cache up to the current
depth, so ``decode_tps ≤ bandwidth / (weight bytes read + KV bytes read)``. Prefill is compute-bound:
``prefill_tps ≤ FLOPS / FLOPs per prompt token``.

llama.cpp facts mirrored here (checked against the llama.cpp vendored by llama-cpp-python 0.3.36):

* ``n_gpu_layers`` (``-ngl``): ``src/llama-model.cpp`` puts layer ``il`` on the GPU when
  ``il >= max(n_layer + 1 - ngl, 0)``, where ``il == n_layer`` is the output layer (output norm + LM head).
  So ``-ngl 1`` offloads only the output layer, ``-ngl k`` the output layer plus the LAST ``k - 1`` repeating layers,
  and ``-ngl n_layer + 1`` (or any negative value, or 999) everything. Token embeddings always stay on the CPU
  ("very little benefit to offloading the input layer"). Older llama.cpp used ``max(n_layer - ngl, 0)``: the last
  ``ngl`` repeating layers, output layer only when ``ngl > n_layer``.
  A model with tied embeddings (no ``output.weight``) gets a copy of ``token_embd`` on the output layer's device.
* The KV cache of a layer lives on that layer's device (``offload_kqv`` true, the default). Its size in cells is
  ``n_ctx`` rounded up to 256; a sliding-window layer keeps ``min(n_ctx, n_swa + n_ubatch)`` cells rounded up to 256
  unless ``swa_full``.
* ``swa_full`` defaults differ: ``llama_context_default_params()`` (include/llama.h, src/llama-context.cpp) sets
  ``swa_full = true``, and llama-cpp-python's ``Llama(swa_full=None)`` leaves that default, so it allocates the FULL
  cache for sliding-window layers. The llama.cpp CLI and server (``common_params.swa_full = false``, flag
  ``--swa-full``) and llama-bench (``cparams.swa_full = false``) use the small window cache. Our engine should pass
  ``swa_full=False`` explicitly, mirroring llama-bench, so our memory figures and llama-bench's agree; every function
  here takes ``swa_full`` and defaults to False.
* ``n_batch`` is clamped to ``n_ctx`` and ``n_ubatch`` to ``n_batch`` (llama.cpp and llama-cpp-python both);
  llama-cpp-python's ``Llama(flash_attn=False)`` disables flash attention, the CLI default is "auto".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field

from app.model.facts import ModelFacts
from app.model.kv_cache import kv_bytes_per_token_per_layer
from app.predict.profiles import HardwareProfile

GB = 1e9
MIB = 1024**2
KV_CELL_PAD = 256  # llama.cpp pads n_ctx and the SWA cache size to a multiple of this
DEFAULT_N_UBATCH = 512
#: CUDA context, cuBLAS workspace and memory pools on a discrete GPU: a rough allowance, not measured here.
DEFAULT_GPU_OVERHEAD_BYTES = 512 * MIB
#: Share of unified memory the GPU may wire by default on macOS (recommendedMaxWorkingSetSize is ~65–75 %).
UNIFIED_USABLE_FRACTION = 0.75
#: Used for the CPU side of a partial offload when no measured figure is given (dual-channel DDR5-4000 peak).
DEFAULT_CPU_BANDWIDTH_GBPS = 64.0
FIT_STATUSES: tuple[str, ...] = ("fits", "partial", "does_not_fit")


# --------------------------------------------------------------------------------------------- decode


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


# --------------------------------------------------------------------------------------------- weight split

_BLOCK_RE = re.compile(r"^blk\.(\d+)\.")


@dataclass(frozen=True)
class WeightSplit:
    """Where the weights of a model sit for a given ``n_gpu_layers``, and what one decoded token reads on each side.

    ``*_bytes`` are stored bytes (a tied embedding offloaded with the output layer counts on both sides, as llama.cpp
    keeps two copies); ``*_read_bytes`` are bytes read per decoded token (the token embedding contributes one row,
    counted as 0; MoE expert tensors count ``n_expert_used / n_expert`` of their bytes).
    """

    n_gpu_layers: int  # effective value, 0 .. n_layer + 1
    n_gpu_repeating: int  # repeating layers on the GPU: the last ones
    output_on_gpu: bool
    gpu_bytes: int
    cpu_bytes: int
    gpu_read_bytes: int
    cpu_read_bytes: int
    tied_embeddings: bool
    exact: bool  # True when computed from a per-tensor byte map, False when estimated from totals
    n_layer: int

    @property
    def first_gpu_layer(self) -> int:
        """Index of the first repeating layer on the GPU (== n_layer when none is)."""
        return self.n_layer - self.n_gpu_repeating


def effective_n_gpu_layers(n_gpu_layers: int, n_layer: int) -> int:
    """llama.cpp's clamp: negative means all; at most n_layer + 1 (the repeating layers plus the output layer)."""
    return n_layer + 1 if n_gpu_layers < 0 else min(n_gpu_layers, n_layer + 1)


def _dense_layer_params(facts: ModelFacts) -> float:
    """Parameters of one dense transformer block: Q, K, V, O projections and a gated (3-matrix) FFN."""
    q = facts.n_head * facts.head_dim_k
    kv = facts.n_head_kv * (facts.head_dim_k + facts.head_dim_v)
    o = facts.n_head * facts.head_dim_v
    return facts.n_embd * (q + kv + o) + 3 * facts.n_embd * facts.n_ff


def guess_tied_embeddings(facts: ModelFacts) -> bool:
    """Whether the output layer reuses the token embedding, guessed from the parameter count (dense models only).

    Compares n_params with n_layer × block params + 1 or 2 × (n_vocab × n_embd); MoE models are assumed untied.
    """
    if facts.n_expert or not facts.n_params:
        return False
    blocks = facts.n_layer * _dense_layer_params(facts)
    head = facts.n_vocab * facts.n_embd
    return abs(facts.n_params - (blocks + head)) < abs(facts.n_params - (blocks + 2 * head))


@dataclass(frozen=True)
class _Parts:
    layer_bytes: list[float]
    layer_read: list[float]
    embd_bytes: float  # token_embd* tensors (input layer, always on the CPU)
    output_bytes: float  # the output layer's own tensors (output norm; output.weight unless tied)
    embd_matrix_bytes: float  # token_embd.weight, which a tied output layer reads and copies to its device
    other_bytes: float
    tied: bool
    exact: bool

    @property
    def output_read(self) -> float:
        return self.output_bytes + (self.embd_matrix_bytes if self.tied else 0.0)


def _parts_from_map(facts: ModelFacts, tensor_bytes: Mapping[str, int]) -> _Parts:
    layer_bytes = [0.0] * facts.n_layer
    layer_read = [0.0] * facts.n_layer
    embd = output = other = 0.0
    expert_share = facts.n_expert_used / facts.n_expert if facts.n_expert else 1.0
    for name, n in tensor_bytes.items():
        m = _BLOCK_RE.match(name)
        if m and int(m.group(1)) < facts.n_layer:
            i = int(m.group(1))
            layer_bytes[i] += n
            layer_read[i] += n * (expert_share if "_exps" in name else 1.0)
        elif name.startswith("token_embd"):
            embd += n
        elif name.startswith("output"):
            output += n
        else:
            other += n  # rope_freqs and friends (small); nextn/MTP blocks beyond n_layer land here too
    tied = "output.weight" not in tensor_bytes
    embd_matrix = tensor_bytes.get("token_embd.weight", 0)
    return _Parts(layer_bytes, layer_read, embd, output, embd_matrix, other, tied, exact=True)


def _parts_estimated(facts: ModelFacts) -> _Parts:
    bytes_per_param = facts.weight_bytes / facts.n_params if facts.n_params else 0.0
    head = facts.n_vocab * facts.n_embd * bytes_per_param
    tied = guess_tied_embeddings(facts)
    blocks = max(facts.weight_bytes - head * (1 if tied else 2), 0.0)
    per_layer = blocks / facts.n_layer if facts.n_layer else 0.0
    layers = [per_layer] * facts.n_layer
    return _Parts(layers, list(layers), head, 0.0 if tied else head, head, 0.0, tied, exact=False)


def split_weights(
    facts: ModelFacts, n_gpu_layers: int, tensor_bytes: Mapping[str, int] | None = None
) -> WeightSplit:
    """Split the weights between GPU and CPU for ``n_gpu_layers`` with llama.cpp's rule (see the module docstring).

    With ``tensor_bytes`` (GGUF tensor name → bytes) the split is exact. Without it, the token embedding and the output
    layer are each estimated as n_vocab × n_embd × the file's average bytes per parameter (tied embeddings guessed
    from the parameter count) and the rest is shared equally by the repeating layers; MoE expert sparsity is then
    ignored (all experts counted as read), which makes MoE decode ceilings pessimistic.
    """
    parts = _parts_from_map(facts, tensor_bytes) if tensor_bytes else _parts_estimated(facts)
    ngl = effective_n_gpu_layers(n_gpu_layers, facts.n_layer)
    output_on_gpu = ngl >= 1
    n_rep = max(ngl - 1, 0)
    first = facts.n_layer - n_rep
    gpu = sum(parts.layer_bytes[first:])
    cpu = sum(parts.layer_bytes[:first]) + parts.embd_bytes + parts.other_bytes
    gpu_read = sum(parts.layer_read[first:])
    cpu_read = sum(parts.layer_read[:first]) + parts.other_bytes
    if output_on_gpu:
        gpu += parts.output_read  # own tensors, plus a second copy of token_embd when tied
        gpu_read += parts.output_read
    else:
        cpu += parts.output_bytes  # tied: the output layer uses the CPU's token_embd, counted above
        cpu_read += parts.output_read
    return WeightSplit(
        n_gpu_layers=ngl, n_gpu_repeating=n_rep, output_on_gpu=output_on_gpu,
        gpu_bytes=round(gpu), cpu_bytes=round(cpu), gpu_read_bytes=round(gpu_read), cpu_read_bytes=round(cpu_read),
        tied_embeddings=parts.tied, exact=parts.exact, n_layer=facts.n_layer,
    )


# --------------------------------------------------------------------------------------------- KV memory


def _pad(n: int, to: int = KV_CELL_PAD) -> int:
    return -(-n // to) * to


def kv_cache_cells(
    n_ctx: int, swa_window: int = 0, n_ubatch: int = DEFAULT_N_UBATCH, swa_full: bool = False
) -> tuple[int, int]:
    """Cells llama.cpp allocates: (full-attention layers, sliding-window layers)."""
    full = _pad(max(n_ctx, 1))
    if not swa_window or swa_full:
        return full, full
    return full, _pad(min(full, swa_window + n_ubatch))


def kv_alloc_bytes_per_layer(
    facts: ModelFacts, n_ctx: int, type_k: str = "f16", type_v: str | None = None,
    n_ubatch: int = DEFAULT_N_UBATCH, swa_full: bool = False,
) -> list[float]:
    """KV bytes llama.cpp allocates for each layer at ``n_ctx`` (cells padded to 256; windowed layers smaller)."""
    per_token = kv_bytes_per_token_per_layer(facts.n_head_kv, facts.head_dim_k, facts.head_dim_v, type_k, type_v)
    full, swa = kv_cache_cells(n_ctx, facts.swa_window, n_ubatch, swa_full)
    swa_set = set(facts.swa_layers) if facts.swa_window else set()
    return [per_token * (swa if i in swa_set else full) for i in range(facts.n_layer)]


def kv_alloc_bytes(
    facts: ModelFacts, n_ctx: int, type_k: str = "f16", type_v: str | None = None,
    n_ubatch: int = DEFAULT_N_UBATCH, swa_full: bool = False,
) -> float:
    """Total KV-cache allocation at ``n_ctx``; ``facts.kv_bytes`` gives the unpadded bytes for n_ctx stored tokens."""
    return sum(kv_alloc_bytes_per_layer(facts, n_ctx, type_k, type_v, n_ubatch, swa_full))


# --------------------------------------------------------------------------------------------- compute buffer


def compute_buffer_bytes(
    n_ubatch: int, n_ctx: int, n_vocab: int, n_embd: int, n_head: int, n_ff: int,
    flash_attn: bool = False, n_batch: int | None = None, n_outputs: int | None = None,
) -> float:
    """Estimate of llama.cpp's compute buffer ("<dev> compute buffer size = X MiB" in its load log).

    llama.cpp sizes it for the worst-case prompt ubatch of ``u = min(n_ubatch, n_batch, n_ctx)`` tokens with ``u``
    outputs; ggml-alloc reuses memory, so the buffer is the largest of the graph's stages, not their sum
    (f32 = 4 bytes, ``n_kv`` = n_ctx rounded up to 256)::

        logits      4 × (n_vocab × n_outputs + 3 × n_embd × u)           LM head output + norm/residual
        attention   4 × ((n_head + 1) × n_kv × u + 6 × n_embd × u)         KQ scores (soft_max in place) + f32 mask
                    2 × n_kv × u + 4 × 6 × n_embd × u     with flash attn  f16 mask; scores never materialised
        ffn         4 × (3 × n_ff × u + 2 × n_embd × u)                    gate, up, product

    Calibrated against llama.cpp's CPU backend (llama-cpp-python 0.3.36) on SmolLM2-135M: within 1.2 % on the
    logits- and attention-bound cases, within 3.1 % where allocator fragmentation adds a few MiB (19 settings of
    n_ctx 300–16384, n_ubatch 32–2048, flash attention on/off, f16/q8_0/q4_0 caches; see tests/test_ceilings.py).
    A CUDA build reports a similar device buffer plus a small host one; CUDA's memory pool (dequantized weights for
    cuBLAS, flash-attention K/V conversions) is not part of it and is left to the overhead allowance.
    """
    u = min(n_ubatch, n_batch or n_ubatch, max(n_ctx, 1))
    outputs = u if n_outputs is None else min(n_outputs, u)
    n_kv = _pad(max(n_ctx, 1))
    logits = 4.0 * (n_vocab * outputs + 3 * n_embd * u)
    if flash_attn:
        attention = 2.0 * n_kv * u + 4.0 * 6 * n_embd * u
    else:
        attention = 4.0 * ((n_head + 1) * n_kv * u + 6 * n_embd * u)
    ffn = 4.0 * (3 * n_ff * u + 2 * n_embd * u)
    return max(logits, attention, ffn)


def compute_buffer_bytes_for(
    facts: ModelFacts, n_ctx: int, n_ubatch: int = DEFAULT_N_UBATCH, flash_attn: bool = False,
    n_batch: int | None = None,
) -> float:
    """``compute_buffer_bytes`` with the model's dimensions."""
    return compute_buffer_bytes(
        n_ubatch, n_ctx, facts.n_vocab, facts.n_embd, facts.n_head, facts.n_ff, flash_attn, n_batch
    )


# --------------------------------------------------------------------------------------------- prefill


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


# --------------------------------------------------------------------------------------------- fit check


@dataclass(frozen=True)
class FitResult:
    """Whether a configuration fits in device memory.

    status: "fits" (everything on the GPU), "partial" (the request fits with layers on the CPU, or does not fit as
    asked but ``max_ngl`` ≥ 1 layers would), "does_not_fit" (not even one layer, or for unified memory/CPU the total
    exceeds the usable memory, or the CPU side exceeds ``host_ram_bytes``).
    """

    status: str
    fits: bool  # the request fits as asked
    n_gpu_layers: int  # effective requested value
    max_ngl: int  # most layers that fit at this n_ctx (n_layer + 1 = all)
    max_ctx: int  # largest n_ctx (multiple of 256, up to max(n_ctx_train, n_ctx)) that fits at the requested ngl
    budget_bytes: int  # usable device memory
    needed_bytes: int  # device memory the request needs
    weight_bytes: int  # weights on the device
    kv_bytes: int  # KV cache on the device
    compute_buffer_bytes: int
    overhead_bytes: int
    cpu_weight_bytes: int
    cpu_kv_bytes: int
    cpu_needed_bytes: int

    def to_json_dict(self) -> dict[str, object]:
        return asdict(self)



@dataclass(frozen=True)
class _Need:
    weights: int
    kv: int
    compute: int
    overhead: int
    cpu_weights: int
    cpu_kv: int
    cpu_compute: int

    @property
    def device(self) -> int:
        return self.weights + self.kv + self.compute + self.overhead

    @property
    def cpu(self) -> int:
        return self.cpu_weights + self.cpu_kv + self.cpu_compute


def _need(
    facts: ModelFacts, ngl: int, n_ctx: int, type_k: str, type_v: str | None, n_ubatch: int, flash_attn: bool,
    swa_full: bool, overhead_bytes: int, unified: bool, tensor_bytes: Mapping[str, int] | None,
) -> _Need:
    """Memory one configuration needs on the device and on the host."""
    kv_layers = kv_alloc_bytes_per_layer(facts, n_ctx, type_k, type_v, n_ubatch, swa_full)
    compute = round(compute_buffer_bytes_for(facts, n_ctx, n_ubatch, flash_attn))
    if unified:  # one pool holds everything; a tied embedding is mapped from the file once
        return _Need(facts.weight_bytes, round(sum(kv_layers)), compute, overhead_bytes, 0, 0, 0)
    split = split_weights(facts, ngl, tensor_bytes)
    first = split.first_gpu_layer
    on_gpu = split.n_gpu_layers > 0
    all_on_gpu = split.n_gpu_layers == facts.n_layer + 1
    return _Need(
        weights=split.gpu_bytes, kv=round(sum(kv_layers[first:])),
        compute=compute if on_gpu else 0, overhead=overhead_bytes if on_gpu else 0,
        cpu_weights=split.cpu_bytes, cpu_kv=round(sum(kv_layers[:first])), cpu_compute=0 if all_on_gpu else compute,
    )


def _largest(lo: int, hi: int, ok: Callable[[int], bool]) -> int:
    """Largest x in [lo, hi] with ok(x), for ok monotone decreasing; lo - 1 when none."""
    if hi < lo or not ok(lo):
        return lo - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def fit_check(
    facts: ModelFacts, profile_vram_bytes: int, n_ctx: int, type_k: str = "f16", type_v: str | None = None,
    n_gpu_layers: int = 999, *, n_ubatch: int = DEFAULT_N_UBATCH, flash_attn: bool = False, swa_full: bool = False,
    overhead_bytes: int | None = None, unified: bool = False, usable_fraction: float | None = None,
    host_ram_bytes: int | None = None, tensor_bytes: Mapping[str, int] | None = None,
) -> FitResult:
    """Does (model, n_ctx, cache types, n_gpu_layers) fit in ``profile_vram_bytes``?

    Device need = offloaded weights + their layers' KV cache + compute buffer + ``overhead_bytes`` (default
    DEFAULT_GPU_OVERHEAD_BYTES on a discrete GPU, 0 on unified memory). Unified memory (Apple silicon, or the CPU
    itself) is one pool: everything counts, against ``usable_fraction`` of it (default UNIFIED_USABLE_FRACTION for
    unified, 1.0 otherwise), and offloading fewer layers does not help.
    """
    n_all = facts.n_layer + 1
    ngl = effective_n_gpu_layers(n_gpu_layers, facts.n_layer)
    if overhead_bytes is None:
        overhead_bytes = 0 if unified else DEFAULT_GPU_OVERHEAD_BYTES
    fraction = usable_fraction if usable_fraction is not None else (UNIFIED_USABLE_FRACTION if unified else 1.0)
    budget = int(profile_vram_bytes * fraction)

    def need(layers: int, ctx: int) -> _Need:
        return _need(facts, layers, ctx, type_k, type_v, n_ubatch, flash_attn, swa_full, overhead_bytes, unified,
                     tensor_bytes)

    def ram_ok(n: _Need) -> bool:
        return host_ram_bytes is None or n.cpu <= host_ram_bytes

    req = need(ngl, n_ctx)
    fits = req.device <= budget and ram_ok(req)
    if unified:
        max_ngl = n_all if req.device <= budget else 0
    else:
        max_ngl = _largest(0, n_all, lambda k: need(k, n_ctx).device <= budget)
    ctx_cap = max(facts.n_ctx_train, n_ctx, KV_CELL_PAD)
    max_ctx = KV_CELL_PAD * _largest(
        1, ctx_cap // KV_CELL_PAD, lambda k: need(ngl, k * KV_CELL_PAD).device <= budget
    )
    max_ctx = max(max_ctx, 0)

    if unified:
        status = "fits" if fits else "does_not_fit"
    elif fits:
        status = "fits" if ngl == n_all else "partial"
    elif max_ngl >= 1 and ram_ok(need(max_ngl, n_ctx)):
        status = "partial"
    else:
        status = "does_not_fit"
    return FitResult(
        status=status, fits=fits, n_gpu_layers=ngl, max_ngl=max_ngl, max_ctx=max_ctx, budget_bytes=budget,
        needed_bytes=req.device, weight_bytes=req.weights, kv_bytes=req.kv, compute_buffer_bytes=req.compute,
        overhead_bytes=req.overhead, cpu_weight_bytes=req.cpu_weights, cpu_kv_bytes=req.cpu_kv,
        cpu_needed_bytes=req.cpu,
    )


# --------------------------------------------------------------------------------------------- scenarios


@dataclass(frozen=True)
class Scenario:
    """Wall time of one request: prefill of the prompt (time to first token), then decode of the output."""

    prompt_tokens: int
    output_tokens: int
    ttft_s: float
    decode_s: float
    total_s: float
    ttft_share: float  # of total_s
    decode_share: float
    chars_per_s: float  # output characters per second while streaming (decode_tps × chars_per_token)
    effective_chars_per_s: float  # output characters over the whole request, prompt time included

    def to_json_dict(self) -> dict[str, object]:
        return asdict(self)


def scenario_time(
    prompt_tokens: int, output_tokens: int, prefill_tps: float, decode_tps: float, chars_per_token: float = 4.0
) -> Scenario:
    """ttft = prompt / prefill_tps; decode = output / decode_tps; shares of the total; characters per second."""
    if prefill_tps <= 0 or decode_tps <= 0:
        raise ValueError("scenario_time: speeds must be positive")
    ttft = prompt_tokens / prefill_tps
    decode = output_tokens / decode_tps
    total = ttft + decode
    chars = output_tokens * chars_per_token
    return Scenario(
        prompt_tokens=prompt_tokens, output_tokens=output_tokens, ttft_s=ttft, decode_s=decode, total_s=total,
        ttft_share=ttft / total if total else 0.0, decode_share=decode / total if total else 0.0,
        chars_per_s=decode_tps * chars_per_token, effective_chars_per_s=chars / total if total else 0.0,
    )


# --------------------------------------------------------------------------------------------- prediction


@dataclass(frozen=True)
class Efficiency:
    """Achieved ÷ ceiling per phase, learned from measurements; multiplies the ceilings into "expected" figures."""

    prefill: float = 1.0
    decode: float = 1.0

    def __post_init__(self) -> None:
        if self.prefill <= 0 or self.decode <= 0:
            raise ValueError("Efficiency factors must be positive")


@dataclass(frozen=True)
class Prediction:
    """Ceilings, memory and fit for one (model, hardware, settings), with scenario totals at the ceilings."""

    profile: str
    model: str
    kind: str
    n_ctx: int
    n_gpu_layers: int
    type_k: str
    type_v: str
    n_prompt: int
    n_gen: int
    weight_bytes: int
    gpu_weight_bytes: int
    cpu_weight_bytes: int
    kv_bytes: int  # allocated at n_ctx
    kv_bytes_per_token: float
    compute_buffer_bytes: int
    decode_ceiling_tps: float  # at the average depth of the generation (n_prompt + n_gen / 2)
    decode_ceiling_empty_tps: float  # at depth 0
    prefill_ceiling_tps: float  # for an n_prompt-token prompt from an empty cache
    gpu_bandwidth_gbps: float
    cpu_bandwidth_gbps: float | None
    tflops: float
    fit: FitResult
    scenario: Scenario
    efficiency: Efficiency | None = None
    expected_prefill_tps: float | None = None
    expected_decode_tps: float | None = None
    expected_scenario: Scenario | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def ttft_ms(self) -> float:
        return self.scenario.ttft_s * 1000.0

    def to_json_dict(self) -> dict[str, object]:
        """Flat headline keys plus the nested fit and scenario documents."""
        exp = self.expected_scenario
        return {
            "profile": self.profile, "model": self.model, "kind": self.kind, "n_ctx": self.n_ctx,
            "n_gpu_layers": self.n_gpu_layers, "type_k": self.type_k, "type_v": self.type_v,
            "n_prompt": self.n_prompt, "n_gen": self.n_gen,
            "weight_bytes": self.weight_bytes, "gpu_weight_bytes": self.gpu_weight_bytes,
            "cpu_weight_bytes": self.cpu_weight_bytes, "kv_bytes": self.kv_bytes,
            "kv_bytes_per_token": self.kv_bytes_per_token, "compute_buffer_bytes": self.compute_buffer_bytes,
            "decode_ceiling_tps": self.decode_ceiling_tps, "decode_ceiling_empty_tps": self.decode_ceiling_empty_tps,
            "prefill_ceiling_tps": self.prefill_ceiling_tps, "gpu_bandwidth_gbps": self.gpu_bandwidth_gbps,
            "cpu_bandwidth_gbps": self.cpu_bandwidth_gbps, "tflops": self.tflops,
            "fits": self.fit.fits, "fit_status": self.fit.status, "max_ngl": self.fit.max_ngl,
            "max_ctx": self.fit.max_ctx, "needed_bytes": self.fit.needed_bytes, "budget_bytes": self.fit.budget_bytes,
            "ttft_ms": self.ttft_ms, "decode_s": self.scenario.decode_s, "total_s": self.scenario.total_s,
            "ttft_share": self.scenario.ttft_share, "decode_share": self.scenario.decode_share,
            "chars_per_s": self.scenario.chars_per_s,
            "efficiency_prefill": self.efficiency.prefill if self.efficiency else None,
            "efficiency_decode": self.efficiency.decode if self.efficiency else None,
            "expected_prefill_tps": self.expected_prefill_tps, "expected_decode_tps": self.expected_decode_tps,
            "expected_ttft_ms": exp.ttft_s * 1000.0 if exp else None, "expected_total_s": exp.total_s if exp else None,
            "fit": self.fit.to_json_dict(), "scenario": self.scenario.to_json_dict(),
            "expected_scenario": exp.to_json_dict() if exp else None, "notes": list(self.notes),
        }


def _kv_read_per_layer(facts: ModelFacts, depth: float, type_k: str, type_v: str | None) -> list[float]:
    """KV bytes each layer's attention reads for one token at ``depth`` (windowed layers: at most the window)."""
    per_token = kv_bytes_per_token_per_layer(facts.n_head_kv, facts.head_dim_k, facts.head_dim_v, type_k, type_v)
    swa_set = set(facts.swa_layers) if facts.swa_window else set()
    return [per_token * (min(depth, facts.swa_window) if i in swa_set else depth) for i in range(facts.n_layer)]


def predict(
    facts: ModelFacts, profile: HardwareProfile, n_ctx: int, n_gpu_layers: int = 999, type_k: str = "f16",
    type_v: str | None = None, n_prompt: int = 512, n_gen: int = 128, cpu_bandwidth_gbps: float | None = None,
    efficiency: Efficiency | None = None, *, n_ubatch: int = DEFAULT_N_UBATCH, flash_attn: bool = False,
    swa_full: bool = False, tensor_bytes: Mapping[str, int] | None = None, chars_per_token: float = 4.0,
    depth: int = 0,
) -> Prediction:
    """Ceilings, memory, fit and an (n_prompt, n_gen) request's times for ``facts`` on ``profile``.

    Decode: weights read per token (split GPU/CPU by ``n_gpu_layers``) plus KV read at the generation's average depth,
    each side at its bandwidth (``decode_ceiling_split_tps``). The CPU side uses ``cpu_bandwidth_gbps``: for unified
    memory the profile's bandwidth when not given, for a discrete GPU DEFAULT_CPU_BANDWIDTH_GBPS with a note.
    Prefill: the profile's TFLOPS over ``prefill_flops_per_token`` with the matmul parameters; with a partial offload
    llama.cpp still runs large-batch matmuls on the GPU, copying CPU-held weights over PCIe, which is not counted.
    A profile of kind "cpu" runs everything on the host (n_gpu_layers is ignored).
    ``depth`` tokens already in the KV cache (llama-bench ``-d``) add to the KV read and the attention work.
    """
    type_v = type_v or type_k
    notes: list[str] = []
    is_cpu = profile.kind == "cpu"
    unified = profile.is_unified
    ngl = 0 if is_cpu else effective_n_gpu_layers(n_gpu_layers, facts.n_layer)
    split = split_weights(facts, ngl, tensor_bytes)
    if not split.exact:
        notes.append("weights split estimated from totals (no per-tensor byte map)")
        if facts.n_expert:
            notes.append("MoE: all experts counted as read per token; decode ceiling is pessimistic")

    # Decode
    depth_avg = depth + n_prompt + n_gen / 2.0
    cpu_bw = cpu_bandwidth_gbps
    if is_cpu:
        cpu_bw = profile.peak_bandwidth_gbps
    elif cpu_bw is None and unified:
        cpu_bw = profile.peak_bandwidth_gbps
    elif cpu_bw is None and split.cpu_read_bytes > 0:
        cpu_bw = DEFAULT_CPU_BANDWIDTH_GBPS
        notes.append(f"CPU bandwidth not given; assumed {DEFAULT_CPU_BANDWIDTH_GBPS:g} GB/s for the CPU-side layers")
    first = split.first_gpu_layer

    def decode_at(depth: float) -> float:
        kv = _kv_read_per_layer(facts, depth, type_k, type_v)
        gpu_bytes = split.gpu_read_bytes + sum(kv[first:])
        cpu_bytes = split.cpu_read_bytes + sum(kv[:first])
        if is_cpu:
            return decode_ceiling_tps(profile.peak_bandwidth_gbps, gpu_bytes + cpu_bytes)
        return decode_ceiling_split_tps(gpu_bytes, profile.peak_bandwidth_gbps, cpu_bytes, cpu_bw)

    decode_tps = decode_at(depth_avg)
    decode_empty_tps = decode_at(0.0)

    # Prefill
    n_embd_attn = facts.n_head * (facts.head_dim_k + facts.head_dim_v) // 2
    n_swa = len(facts.swa_layers) if facts.swa_window else 0
    prefill_tps = prefill_ceiling_tps(
        profile.fp16_tensor_tflops, matmul_params(facts, split, tensor_bytes), n_prompt, facts.n_layer, n_embd_attn,
        depth, n_swa, facts.swa_window,
    )
    if not is_cpu and 0 < split.n_gpu_layers < facts.n_layer + 1:
        notes.append("partial offload: prefill ceiling ignores copying CPU-held weights to the GPU")

    # Memory and fit
    fit = fit_check(
        facts, profile.vram_bytes, n_ctx, type_k, type_v, ngl, n_ubatch=n_ubatch, flash_attn=flash_attn,
        swa_full=swa_full, unified=unified, usable_fraction=1.0 if is_cpu else None, tensor_bytes=tensor_bytes,
    )
    kv_total = round(kv_alloc_bytes(facts, n_ctx, type_k, type_v, n_ubatch, swa_full))
    compute = round(compute_buffer_bytes_for(facts, n_ctx, n_ubatch, flash_attn))

    scenario = scenario_time(n_prompt, n_gen, prefill_tps, decode_tps, chars_per_token)
    exp_prefill = exp_decode = None
    exp_scenario = None
    if efficiency is not None:
        exp_prefill = prefill_tps * efficiency.prefill
        exp_decode = decode_tps * efficiency.decode
        exp_scenario = scenario_time(n_prompt, n_gen, exp_prefill, exp_decode, chars_per_token)

    return Prediction(
        profile=profile.name, model=facts.name, kind=profile.kind, n_ctx=n_ctx, n_gpu_layers=ngl, type_k=type_k,
        type_v=type_v, n_prompt=n_prompt, n_gen=n_gen, weight_bytes=facts.weight_bytes,
        gpu_weight_bytes=0 if is_cpu else split.gpu_bytes,
        cpu_weight_bytes=facts.weight_bytes if is_cpu else split.cpu_bytes, kv_bytes=kv_total,
        kv_bytes_per_token=facts.kv_bytes_per_token(type_k, type_v), compute_buffer_bytes=compute,
        decode_ceiling_tps=decode_tps, decode_ceiling_empty_tps=decode_empty_tps, prefill_ceiling_tps=prefill_tps,
        gpu_bandwidth_gbps=0.0 if is_cpu else profile.peak_bandwidth_gbps, cpu_bandwidth_gbps=cpu_bw,
        tflops=profile.fp16_tensor_tflops, fit=fit, scenario=scenario, efficiency=efficiency,
        expected_prefill_tps=exp_prefill, expected_decode_tps=exp_decode, expected_scenario=exp_scenario,
        notes=tuple(notes),
    )
