"""Metadata sanity of a GGUF model, checked before llama.cpp ever sees the file.

llama.cpp trusts these numbers: a block_count of 0 or 100000, a head count of 0 or one that does not divide,
or a zero dimension makes it assert (SIGABRT) or divide by zero inside the worker. Each check here gives the
one-line cause that :mod:`app.model.gguf_facts` turns into a GGUFFileError naming the file.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from app.model.facts import ModelFacts

#: More layers than any model has; also keeps per-layer work (sliding-window layer lists) bounded.
MAX_LAYERS = 4096
_BLOCK = re.compile(r"blk\.(\d+)\.")
_ATTN_TENSOR = re.compile(r"blk\.\d+\.attn_(q|k|v|qkv)\.weight$")


def layer_count_problem(n_layer: int, arch: str, tensor_names: Iterable[str]) -> str | None:
    """Why ``{arch}.block_count`` cannot be right for the tensors present, or None."""
    key = f"{arch}.block_count"
    if n_layer == 0:
        return f"{key} is 0: a model needs at least one layer"
    blocks = {int(m.group(1)) for name in tensor_names if (m := _BLOCK.match(name))}
    if blocks and n_layer != max(blocks) + 1:
        return f"{key} is {n_layer:,} but the file has tensors for {max(blocks) + 1:,} layers"
    if n_layer > MAX_LAYERS:
        return f"{key} is {n_layer:,}: more than {MAX_LAYERS:,} layers"
    return None


def _per_layer(facts: ModelFacts, key: str, scalar: int) -> list[int]:
    values = facts.extra.get(key)
    return [int(v) for v in values] if isinstance(values, list) else [scalar] * facts.n_layer


def shape_problem(facts: ModelFacts) -> str | None:
    """Why the attention or embedding shape cannot be loaded (a zero dimension, heads that do not divide), or None."""
    arch = facts.architecture
    if facts.n_embd == 0:
        return f"{arch}.embedding_length is 0"
    heads = _per_layer(facts, "n_head_per_layer", facts.n_head)
    kv_heads = _per_layer(facts, "n_head_kv_per_layer", facts.n_head_kv)
    for key, values in ((f"{arch}.attention.head_count", heads), (f"{arch}.attention.head_count_kv", kv_heads)):
        if len(values) != facts.n_layer:
            return f"{key} has {len(values)} values for {facts.n_layer} layers"
    has_attention = any(_ATTN_TENSOR.match(name) for name in facts.tensor_bytes)
    if has_attention and max(heads, default=0) == 0:
        return f"{arch}.attention.head_count is 0 but the file has attention tensors"
    hybrid = bool(facts.recurrent_layers)  # 0 KV heads marks a layer without attention (recurrent, MLP)
    for i, (n_head, n_kv) in enumerate(zip(heads, kv_heads, strict=True)):
        if n_kv == 0 and hybrid:
            continue
        if n_head and (n_kv == 0 or n_kv > n_head or n_head % n_kv):
            return (f"layer {i} has {n_head} attention heads and {n_kv} KV heads: the KV heads must divide "
                    f"the heads")
    if max(heads, default=0) and (facts.head_dim_k == 0 or facts.head_dim_v == 0):
        return (f"attention head size is 0 (key {facts.head_dim_k}, value {facts.head_dim_v}; "
                f"embedding {facts.n_embd} for {facts.n_head} heads)")
    return None
