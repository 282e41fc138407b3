"""What each architecture keeps in memory per token and per sequence, as llama.cpp reads it from the header.

llama.cpp's memory of a context (src/llama-model.cpp ``create_memory``) is a KV cache (src/llama-kv-cache.cpp), a
recurrent state (src/llama-memory-recurrent.cpp) or both (src/llama-memory-hybrid.cpp), and which layers get which
is the architecture's rule. Mirrored here, per layer, from the header keys (llama-cpp-python 0.3.36's llama.cpp):

* A KV layer stores ``n_embd_k_gqa(il) = n_head_kv(il) × n_embd_head_k(il)`` K values and as many V values per token
  (src/llama-hparams.cpp); sliding-window layers may have their own head sizes (``attention.key_length_swa``).
  MLA (``attention.key_length_mla`` and ``value_length_mla`` both present: DeepSeek V2/V3, Kimi K2 and their
  distills) caches the compressed latent and the rope part as K (``key_length`` = kv_lora_rank + rope dims, one KV
  head) and no V at all (``has_v = !is_mla``).
* Recurrent architectures (Mamba, Mamba-2, RWKV 6/7; ``llm_arch_is_recurrent``) keep, per layer and sequence,
  ``n_embd_r()`` conv/token-shift values and ``n_embd_s()`` state values, f32 (``GGML_TYPE_F32``), whatever the
  context: Mamba ``(d_conv − 1) × (d_inner + 2 × n_group × d_state)`` and ``d_state × d_inner``; RWKV
  ``token_shift_count × n_embd`` and ``n_embd × wkv_head_size``; LFM2's short convolutions ``n_embd × (l_cache − 1)``.
* Hybrids (``llm_arch_is_hybrid``) split the layers: Jamba, Granite 4 H, LFM2, PLaMo 2: a layer with 0 KV heads is
  recurrent; Falcon-H1: every layer both; Nemotron-H: recurrent where both the KV heads and the feed-forward are 0,
  attention where only the feed-forward is 0 (the rest are MLP layers, with neither); Qwen3-Next / Qwen3.5: the
  ``attention.recurrent_layers`` array, else every layer but each ``full_attention_interval``-th (default 4).
* Layers past ``block_count − nextn_predict_layers`` (the MTP heads) get no memory in the main context; Gemma 3n and
  Gemma 4 reuse the cache of earlier layers past ``n_layer_kv_from_start``.

An architecture this module has no rule for and llama.cpp would treat specially (the sparse-attention and
linear-attention families: Kimi Linear, MiniMax-01, Qwen4-Exp, DeepSeek V3.2/V4, GLM-DSA…) gets the plain attention
rule and ``rule`` says so: llama.cpp's dry run (``gguf-bench inspect --dry-run``) is the figure to trust there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

#: llm_arch_is_recurrent (src/llama-arch.cpp)
RECURRENT_ARCHS = frozenset({"mamba", "mamba2", "rwkv6", "rwkv6qwen2", "rwkv7", "arwkv7"})
#: hybrids whose recurrent layers are the ones with 0 KV heads (their load_arch_hparams)
_KV0_HYBRIDS = frozenset({"jamba", "granitehybrid", "lfm2", "lfm2moe", "plamo2"})
_INTERVAL_HYBRIDS = frozenset({"qwen3next", "qwen35", "qwen35moe"})
_BOTH_HYBRIDS = frozenset({"falcon-h1"})
_NEMOTRON_HYBRIDS = frozenset({"nemotron_h", "nemotron_h_moe"})
#: architectures whose memory llama.cpp builds with a rule not mirrored here (llm_arch_is_hybrid's remaining members
#: and the sparse-attention caches of create_memory)
UNMIRRORED_ARCHS = frozenset({"kimi-linear", "minimax-01", "bailingmoe3", "kimi-k3", "glm5-next", "qwen4exp",
                              "deepseek4", "deepseek32", "glm-dsa", "hy-v4", "dots3note", "minimax-m3"})
#: llama.cpp's fixed n_layer_kv_from_start (src/models/gemma3n.cpp)
_KV_FROM_START = {"gemma3n": 20}

Getter = Callable[[str], object]


@dataclass(frozen=True)
class MemoryLayout:
    """Per layer, the K and V values one token adds to its cache (0: no KV cache on that layer); the layers with a
    recurrent state and its size per sequence (f32 values: ``state_r`` conv/shift, ``state_s`` the state); the
    rule applied, in words."""

    kv_k: tuple[int, ...]
    kv_v: tuple[int, ...]
    recurrent_layers: tuple[int, ...] = ()
    state_r: int = 0
    state_s: int = 0
    rule: str = ""
    mla: bool = False
    known: bool = True  # a rule mirrored here (else the plain attention rule, with ``rule`` saying so)


def _count(get: Getter, key: str, default: int = 0) -> int:
    value = get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        return default
    return int(value)


def recurrent_state_values(get: Getter, arch: str, n_embd: int) -> tuple[int, int]:
    """(n_embd_r, n_embd_s): f32 values per recurrent layer and sequence (src/llama-hparams.cpp)."""
    p = f"{arch}."
    wkv = _count(get, p + "wkv.head_size")
    if wkv:
        return _count(get, p + "token_shift_count", 2) * n_embd, n_embd * wkv
    l_cache = _count(get, p + "shortconv.l_cache")
    d_inner, d_state = _count(get, p + "ssm.inner_size"), _count(get, p + "ssm.state_size")
    if l_cache:
        return n_embd * (l_cache - 1), d_state * d_inner
    d_conv, n_group = _count(get, p + "ssm.conv_kernel"), _count(get, p + "ssm.group_count")
    return (d_conv - 1 if d_conv > 0 else 0) * (d_inner + 2 * n_group * d_state), d_state * d_inner


def _recurrent_layers(get: Getter, arch: str, n_main: int, kv_heads: Sequence[int], ff: Sequence[int]
                      ) -> tuple[set[int], set[int], str]:
    """(recurrent layers, attention layers, rule) of a recurrent or hybrid architecture."""
    main = range(n_main)
    if arch in RECURRENT_ARCHS:
        return set(main), set(), f"{arch}: recurrent, every layer keeps a state and none a KV cache"
    if arch in _KV0_HYBRIDS:
        recr = {i for i in main if kv_heads[i] == 0}
        return recr, set(main) - recr, f"{arch}: hybrid, a layer with 0 KV heads is recurrent, the others attention"
    if arch in _BOTH_HYBRIDS:
        return set(main), set(main), f"{arch}: hybrid, every layer keeps both a state and a KV cache"
    if arch in _NEMOTRON_HYBRIDS:
        recr = {i for i in main if kv_heads[i] == 0 and ff[i] == 0}
        attn = {i for i in main if i not in recr and ff[i] == 0}
        return recr, attn, (f"{arch}: hybrid, recurrent where KV heads and feed-forward are 0, attention where only "
                            "the feed-forward is 0, MLP layers keep nothing")
    if arch in _INTERVAL_HYBRIDS:
        flags = get(f"{arch}.attention.recurrent_layers")
        if isinstance(flags, list):
            recr = {i for i in main if i < len(flags) and bool(flags[i])}
            rule = "the attention.recurrent_layers array"
        else:
            interval = _count(get, f"{arch}.full_attention_interval", 4) or 4
            recr = {i for i in main if (i + 1) % interval != 0}
            rule = f"every layer recurrent but each {interval}th (full_attention_interval)"
        return recr, set(main) - recr, f"{arch}: hybrid, {rule}"
    return set(), set(main), ""


def memory_layout(get: Getter, arch: str, n_layer: int, n_embd: int, kv_heads: Sequence[int], ff: Sequence[int],
                  head_k: int, head_v: int, swa_layers: Sequence[int]) -> MemoryLayout:
    """The memory rule of ``arch`` for a file of ``n_layer`` layers (``get`` reads a header key by its full name;
    ``kv_heads``/``ff`` per layer; ``head_k``/``head_v`` the full-attention head sizes)."""
    p = f"{arch}."
    n_main = max(n_layer - _count(get, p + "nextn_predict_layers"), 0)
    recr, attn, rule = _recurrent_layers(get, arch, n_main, kv_heads, ff)
    known = bool(rule) or arch not in UNMIRRORED_ARCHS
    if not rule:
        rule = (f"{arch}: attention, every layer keeps a KV cache" if known else
                f"{arch}: llama.cpp builds its memory with a rule not mirrored here; counted as plain attention "
                "(llama.cpp's dry run, inspect --dry-run, gives the truth)")
    mla = get(p + "attention.key_length_mla") is not None and get(p + "attention.value_length_mla") is not None
    swa = set(swa_layers)
    head_k_swa = _count(get, p + "attention.key_length_swa", head_k)
    head_v_swa = _count(get, p + "attention.value_length_swa", head_v)
    kv_from_start = _KV_FROM_START.get(arch, -1)
    if arch == "gemma4":
        kv_from_start = n_layer - _count(get, p + "attention.shared_kv_layers")
    kv_k: list[int] = []
    kv_v: list[int] = []
    for i in range(n_layer):
        has_kv = i in attn and (kv_from_start < 0 or i < kv_from_start)
        hk, hv = (head_k_swa, head_v_swa) if i in swa else (head_k, head_v)
        kv_k.append(kv_heads[i] * hk if has_kv else 0)
        kv_v.append(kv_heads[i] * hv if has_kv and not mla else 0)
    if mla:
        rule += "; MLA: the compressed latent and rope dims cached as K, no V cache"
    if n_main < n_layer:
        rule += f"; the last {n_layer - n_main} layer(s) (MTP/nextn heads) keep no memory in the main context"
    if 0 <= kv_from_start < n_layer:
        rule += f"; layers from {kv_from_start} on reuse earlier layers' KV cache"
    state_r, state_s = recurrent_state_values(get, arch, n_embd) if recr else (0, 0)
    return MemoryLayout(kv_k=tuple(kv_k), kv_v=tuple(kv_v), recurrent_layers=tuple(sorted(recr)), state_r=state_r,
                        state_s=state_s, rule=rule, mla=mla, known=known)
