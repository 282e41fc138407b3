"""Memory llama.cpp allocates besides the weights: the KV cache (cells per layer) and the compute buffer.

Pure functions; bytes are bytes.

llama.cpp facts mirrored here (checked against the llama.cpp vendored by llama-cpp-python 0.3.36):

* The KV cache of a layer lives on that layer's device (``offload_kqv`` true, the default). Its size in cells is
  ``n_ctx`` rounded up to 256; a sliding-window layer keeps ``min(n_ctx, n_swa + n_ubatch)`` cells rounded up to 256
  unless ``swa_full``.
* ``swa_full`` defaults differ: ``llama_context_default_params()`` (include/llama.h, src/llama-context.cpp) sets
  ``swa_full = true``, and llama-cpp-python's ``Llama(swa_full=None)`` leaves that default, so it allocates the FULL
  cache for sliding-window layers. The llama.cpp CLI and server (``common_params.swa_full = false``, flag
  ``--swa-full``) and llama-bench (``cparams.swa_full = false``) use the small window cache. Our engine should pass
  ``swa_full=False`` explicitly, mirroring llama-bench, so our memory figures and llama-bench's agree; every function
  that sizes the cache takes ``swa_full`` and defaults to False.
* ``offload_kqv`` false (``-nkvo 1``, llama-bench's ``no_kv_offload``): every layer's cache is a CPU buffer
  (src/llama-kv-cache.cpp, the constructor's ``if (offload) { dev = model.dev_layer(il) ... }``, else "CPU").
* ``n_batch`` is clamped to ``n_ctx`` and ``n_ubatch`` to ``n_batch`` (llama.cpp and llama-cpp-python both);
  llama-cpp-python's ``Llama(flash_attn=False)`` disables flash attention, the CLI default is "auto".
* Each layer's cache holds what its architecture keeps (app.model.arch_memory: K and V widths per layer, none on a
  recurrent or MLP layer, K only with MLA). Without flash attention the V cache is stored transposed and every
  layer's V row is padded to the widest (src/llama-kv-cache.cpp, ``[TAG_V_CACHE_VARIABLE]``).
* A recurrent layer (Mamba, RWKV, a hybrid's) keeps its state, f32, for each of ``max(1, n_seq_max)`` sequences,
  whatever the context (src/llama-memory-recurrent.cpp), on the layer's device like the KV cache. "KV" below, per
  layer and in total, is the context's whole memory: KV cache plus recurrent state (``llama_memory``).
"""

from __future__ import annotations

from app.model.facts import ModelFacts
from app.model.kv_cache import cache_type
from app.predict.ceilings.offload import effective_n_gpu_layers
from app.predict.memo import by_identity

MIB = 1024**2
KV_CELL_PAD = 256  # llama.cpp pads n_ctx and the SWA cache size to a multiple of this
DEFAULT_N_UBATCH = 512


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


def kv_cache_alloc_per_layer(
    facts: ModelFacts, n_ctx: int, type_k: str = "f16", type_v: str | None = None,
    n_ubatch: int = DEFAULT_N_UBATCH, swa_full: bool = False, flash_attn: bool = True,
) -> list[float]:
    """KV-cache bytes llama.cpp allocates for each layer at ``n_ctx`` (cells padded to 256; windowed layers smaller;
    0 on a layer without a KV cache), the recurrent state not included."""
    return list(_kv_cache_alloc_per_layer(facts, n_ctx, type_k, type_v, n_ubatch, swa_full, flash_attn))


@by_identity(1)
def _kv_cache_alloc_per_layer(facts: ModelFacts, n_ctx: int, type_k: str, type_v: str | None, n_ubatch: int,
                              swa_full: bool, flash_attn: bool) -> tuple[float, ...]:
    k_bytes, v_bytes = cache_type(type_k).bytes_per_value, cache_type(type_v or type_k).bytes_per_value
    widths = facts.kv_widths()
    v_max = max((v for _, v in widths), default=0)
    full, swa = kv_cache_cells(n_ctx, facts.swa_window, n_ubatch, swa_full)
    swa_set = set(facts.swa_layers) if facts.swa_window else set()
    out: list[float] = []
    for i, (k, v) in enumerate(widths):
        if not (k or v):
            out.append(0.0)
            continue
        v = v if flash_attn or not v else v_max  # transposed V: padded to the widest layer's
        out.append((k * k_bytes + v * v_bytes) * (swa if i in swa_set else full))
    return tuple(out)


def recurrent_state_per_layer(facts: ModelFacts, n_seq: int = 1) -> list[float]:
    """Recurrent-state bytes of each layer (0 on a layer without one) for ``n_seq`` sequences."""
    recurrent = set(facts.recurrent_layers)
    per = float(facts.state_bytes_per_layer * max(n_seq, 1))
    return [per if i in recurrent else 0.0 for i in range(facts.n_layer)]


def kv_alloc_bytes_per_layer(
    facts: ModelFacts, n_ctx: int, type_k: str = "f16", type_v: str | None = None,
    n_ubatch: int = DEFAULT_N_UBATCH, swa_full: bool = False, flash_attn: bool = True,
) -> list[float]:
    """Context memory llama.cpp allocates for each layer at ``n_ctx``: its KV cache and its recurrent state."""
    return list(_kv_alloc_per_layer(facts, n_ctx, type_k, type_v, n_ubatch, swa_full, flash_attn))


@by_identity(1)
def _kv_alloc_per_layer(facts: ModelFacts, n_ctx: int, type_k: str, type_v: str | None, n_ubatch: int,
                        swa_full: bool, flash_attn: bool) -> tuple[float, ...]:
    kv = _kv_cache_alloc_per_layer(facts, n_ctx, type_k, type_v, n_ubatch, swa_full, flash_attn)
    return tuple(a + b for a, b in zip(kv, recurrent_state_per_layer(facts), strict=True))


def kv_alloc_bytes(
    facts: ModelFacts, n_ctx: int, type_k: str = "f16", type_v: str | None = None,
    n_ubatch: int = DEFAULT_N_UBATCH, swa_full: bool = False, flash_attn: bool = True,
) -> float:
    """Total context memory at ``n_ctx``: KV cache and recurrent state (``facts.kv_bytes`` gives the unpadded KV
    bytes for n_ctx stored tokens)."""
    return sum(_kv_alloc_per_layer(facts, n_ctx, type_k, type_v, n_ubatch, swa_full, flash_attn))


def kv_alloc_bytes_split(
    facts: ModelFacts, n_gpu_layers: int, n_ctx: int, type_k: str = "f16", type_v: str | None = None,
    n_ubatch: int = DEFAULT_N_UBATCH, swa_full: bool = False, offload_kqv: bool = True, flash_attn: bool = True,
) -> tuple[float, float]:
    """(GPU, CPU) KV-cache bytes: each layer's cache sits on that layer's device (``offload_kqv``, the default),
    or all of it in host memory without ``offload_kqv`` (``-nkvo 1``).

    The GPU holds the last ``n_gpu_layers - 1`` repeating layers (the output layer has no cache; see offload.py).
    """
    per_layer = kv_alloc_bytes_per_layer(facts, n_ctx, type_k, type_v, n_ubatch, swa_full, flash_attn)
    if not offload_kqv:
        return 0.0, sum(per_layer)
    n_gpu_repeating = max(effective_n_gpu_layers(n_gpu_layers, facts.n_layer) - 1, 0)
    first_gpu = facts.n_layer - n_gpu_repeating
    return sum(per_layer[first_gpu:]), sum(per_layer[:first_gpu])


# --------------------------------------------------------------------------------------------- compute buffer


def compute_buffer_bytes(
    n_ubatch: int, n_ctx: int, n_vocab: int, n_embd: int, n_head: int, n_ff: int,
    flash_attn: bool = False, n_batch: int | None = None, n_outputs: int | None = None,
    moe_ff_per_token: int = 0, n_expert_used: int = 0, attention: bool = True,
) -> float:
    """Estimate of llama.cpp's compute buffer ("<dev> compute buffer size = X MiB" in its load log).

    llama.cpp sizes it for the worst-case prompt ubatch of ``u = min(n_ubatch, n_batch, n_ctx)`` tokens with ``u``
    outputs; ggml-alloc reuses memory, so the buffer is the largest of the graph's stages, not their sum
    (f32 = 4 bytes, ``n_kv`` = n_ctx rounded up to 256)::

        logits      4 × (n_vocab × n_outputs + 3 × n_embd × u)           LM head output + norm/residual
        attention   4 × ((n_head + 1) × n_kv × u + 6 × n_embd × u)         KQ scores (soft_max in place) + f32 mask
                    2 × n_kv × u + 4 × 6 × n_embd × u     with flash attn  f16 mask; scores never materialised
        ffn         4 × (3 × n_ff × u + 2 × n_embd × u) + (2|4) × n_kv × u  gate, up, product; the KQ mask
        MoE ffn     4 × u × (3 × F × E + 4 × n_embd + 2 × E) + (2|4) × n_kv × u
                    F = n_ff_expert, E = n_expert_used: the used experts' gate, up and product, router weights and
                    ids, and the KQ mask (f16 with flash attention) still live

    The KQ mask is a graph input: ggml-alloc places inputs first and frees one after its last consumer
    (ggml/src/ggml-alloc.c, ``ggml_gallocr_alloc_graph_impl``), so it lives beside every layer's feed-forward up to
    the last layer's attention. A model without attention layers (Mamba, RWKV: ``attention`` False) has neither the
    attention stage nor the mask. Checked against llama.cpp's dry run (``no_alloc``) of 19 architectures' real
    shapes at 8k and 32k (tests/predict/test_arch_memory.py): within 10 % with flash attention, 3 % without, except
    where ggml-alloc's placement leaves a hole the logits do not fit in (a few contexts of a few models read up to
    ~15 % low): there llama.cpp's dry run is the figure (``gguf-bench predict --dry-run``).

    Calibrated against llama.cpp's CPU backend (llama-cpp-python 0.3.36) on SmolLM2-135M: within 1.2 % on the
    logits- and attention-bound cases, within 3.1 % where allocator fragmentation adds a few MiB (19 settings of
    n_ctx 300–16384, n_ubatch 32–2048, flash attention on/off, f16/q8_0/q4_0 caches; see tests/predict/test_memory.py).
    A CUDA build reports a similar device buffer plus a small host one; CUDA's memory pool (dequantized weights for
    cuBLAS, flash-attention K/V conversions) is not part of it and is left to the overhead allowance.
    """
    return max(compute_stages(n_ubatch, n_ctx, n_vocab, n_embd, n_head, n_ff, flash_attn, n_batch, n_outputs,
                              moe_ff_per_token, n_expert_used, attention=attention))


def compute_stages(
    n_ubatch: int, n_ctx: int, n_vocab: int, n_embd: int, n_head: int, n_ff: int,
    flash_attn: bool = False, n_batch: int | None = None, n_outputs: int | None = None,
    moe_ff_per_token: int = 0, n_expert_used: int = 0, moe_mask: bool = True, attention: bool = True,
) -> tuple[float, float, float]:
    """The graph's (logits, attention, ffn) stages in bytes; see :func:`compute_buffer_bytes`. ``moe_mask`` false:
    the MoE ffn stage without the KQ mask (a GPU device's buffer, whose inputs sit in the host's: fitted on lavapipe
    with the synthetic MoE of tests/gpu_vulkan, within 3 %)."""
    u = min(n_ubatch, n_batch or n_ubatch, max(n_ctx, 1))
    outputs = u if n_outputs is None else min(n_outputs, u)
    n_kv = _pad(max(n_ctx, 1))
    logits = 4.0 * (n_vocab * outputs + 3 * n_embd * u)
    mask = (2.0 if flash_attn else 4.0) * n_kv * u if moe_mask and attention else 0.0
    if not attention:
        attn = 0.0
    elif flash_attn:
        attn = 2.0 * n_kv * u + 4.0 * 6 * n_embd * u
    else:
        attn = 4.0 * ((n_head + 1) * n_kv * u + 6 * n_embd * u)
    if moe_ff_per_token > 0:
        ffn = 4.0 * u * (3 * moe_ff_per_token + 4 * n_embd + 2 * n_expert_used) + mask
    else:
        ffn = 4.0 * (3 * n_ff * u + 2 * n_embd * u) + mask
    return logits, attn, ffn


def moe_ff_per_token(facts: ModelFacts) -> int:
    """F × E, the feed-forward width a token runs through in a MoE layer (0 for a dense model); F is the header's
    expert width, else n_ff (llama-family MoE files give the expert width as feed_forward_length); the shared
    experts' width added (``expert_shared_feed_forward_length``, else ``expert_shared_count`` × F), as every token
    runs them too."""
    if not facts.n_expert or not facts.n_expert_used:
        return 0
    ff = facts.extra.get("n_ff_expert")
    width = ff if isinstance(ff, int) and ff > 0 else facts.n_ff
    shexp, n_shared = facts.extra.get("n_ff_shexp"), facts.extra.get("n_expert_shared")
    shared = (shexp if isinstance(shexp, int) and shexp > 0 else
              n_shared * width if isinstance(n_shared, int) and n_shared > 0 else 0)
    return facts.n_expert_used * width + shared


def graph_inputs_bytes(n_ubatch: int, n_ctx: int, n_embd: int, flash_attn: bool = False,
                       n_batch: int | None = None) -> float:
    """Host compute buffer when a GPU runs the graph: the input embeddings (twice) and the KQ mask (f16 with flash
    attention), for the worst-case ubatch ``u``: ``2 × 4 × n_embd × u + (2|4) × n_kv × u``.

    Calibrated on llama.cpp's Vulkan backend (lavapipe, llama-cpp-python 0.3.36) with SmolLM2-135M: 1.25 MiB
    predicted, "Vulkan_Host compute buffer size = 1.26 MiB" logged (n_ctx 256, flash attention on).
    """
    u = min(n_ubatch, n_batch or n_ubatch, max(n_ctx, 1))
    return 8.0 * n_embd * u + (2.0 if flash_attn else 4.0) * _pad(max(n_ctx, 1)) * u


def compute_buffer_bytes_for(
    facts: ModelFacts, n_ctx: int, n_ubatch: int = DEFAULT_N_UBATCH, flash_attn: bool = False,
    n_batch: int | None = None,
) -> float:
    """``compute_buffer_bytes`` with the model's dimensions."""
    return _compute_buffer_bytes_for(facts, n_ctx, n_ubatch, flash_attn, n_batch)


@by_identity(1)
def _compute_buffer_bytes_for(facts: ModelFacts, n_ctx: int, n_ubatch: int, flash_attn: bool,
                              n_batch: int | None) -> float:
    return compute_buffer_bytes(
        n_ubatch, n_ctx, facts.n_vocab, facts.n_embd, facts.n_head, facts.n_ff, flash_attn, n_batch,
        moe_ff_per_token=moe_ff_per_token(facts), n_expert_used=facts.n_expert_used, attention=facts.kv_layers > 0,
    )
