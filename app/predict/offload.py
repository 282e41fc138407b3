"""Where the weights sit for a given ``n_gpu_layers``, and what one decoded token reads on each side.

Pure functions of the model facts; bytes are bytes.

llama.cpp fact mirrored here (checked against the llama.cpp vendored by llama-cpp-python 0.3.36):

* ``n_gpu_layers`` (``-ngl``): ``src/llama-model.cpp`` puts layer ``il`` on the GPU when
  ``il >= max(n_layer + 1 - ngl, 0)``, where ``il == n_layer`` is the output layer (output norm + LM head).
  So ``-ngl 1`` offloads only the output layer, ``-ngl k`` the output layer plus the LAST ``k - 1`` repeating layers,
  and ``-ngl n_layer + 1`` (or any negative value, or 999) everything. Token embeddings always stay on the CPU
  ("very little benefit to offloading the input layer"). Older llama.cpp used ``max(n_layer - ngl, 0)``: the last
  ``ngl`` repeating layers, output layer only when ``ngl > n_layer``.
  A model with tied embeddings (no ``output.weight``) gets a copy of ``token_embd`` on the output layer's device.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from app.model.facts import ModelFacts

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
