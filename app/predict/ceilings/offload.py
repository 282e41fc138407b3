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
* Tensor buffer overrides (``-ot PATTERN=BUFT``, ``llama_model_params.tensor_buft_overrides``):
  ``src/llama-model-loader.cpp`` (``create_tensor``, "check overrides") searches each tensor's name with each
  pattern in order, and the FIRST match sets its buffer type, whatever its layer's device. llama-bench's ``-ncmoe N``
  (``tools/llama-bench/llama-bench.cpp`` ``to_llama_mparams``) appends, after the ``-ot`` entries, one pattern per
  layer 0..N-1, ``llm_ffn_block_regex(i, LLM_FFN_EXPS_REGEX)`` (common/common.h), on the CPU buffer type.
* Decode reads each weight once per token, except the MoE expert tensors: a token runs ``n_expert_used`` of the
  ``n_expert`` experts of each layer (``build_moe_ffn``, src/llama-graph.cpp: ``ggml_mul_mat_id`` over the selected
  experts), so ``n_expert_used / n_expert`` of their bytes; the router and shared experts count fully.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache, lru_cache

from app.model.facts import ModelFacts
from app.predict.memo import by_identity

_BLOCK_RE = re.compile(r"^blk\.(\d+)\.")
_DENSE_FFN_RE = re.compile(r"\.ffn_(gate|up|down)(_shexp)?\.")
#: common/common.h LLM_FFN_EXPS_REGEX: a layer's MoE expert tensors (the same text as engines/llama_cpp_placement.py)
EXPERT_TENSORS_REGEX = r"\.ffn_(up|down|gate|gate_up)_(ch|)exps"
_EMBD = "token_embd.weight"


def expert_block_pattern(layer: int) -> str:
    """common/common.h ``llm_ffn_block_regex(layer, LLM_FFN_EXPS_REGEX)``: layer ``layer``'s expert tensors."""
    return rf"blk\.{layer}{EXPERT_TENSORS_REGEX}"


def is_expert_tensor(name: str) -> bool:
    """A routed-expert tensor (``ffn_*_exps``, its biases and scales): read ``n_expert_used / n_expert`` per token."""
    return "_exps" in name


def is_dense_ffn_tensor(name: str) -> bool:
    """A dense feed-forward matrix (``ffn_gate``/``ffn_up``/``ffn_down``, a MoE's shared ``*_shexp``): not the
    routed experts, the router (``ffn_gate_inp``) or the norm."""
    return bool(_DENSE_FFN_RE.search(name)) and not is_expert_tensor(name)


def is_host_buffer(buft: str) -> bool:
    """Whether a buffer type name (``CPU``, ``CPU_REPACK``, ``Vulkan_Host``, ``Vulkan0``) is host memory."""
    name = buft.strip().upper()
    return name == "CPU" or name.startswith("CPU_") or name.endswith("_HOST")


def resolve_n_cpu_moe(n_cpu_moe: int, n_layer: int) -> int:
    """-ncmoe as a layer count: -1 (all) is every layer, -2 (half) the first ``n_layer // 2`` (app/worker/runner.py
    records them so), a count beyond the model's layers is its layer count."""
    if n_cpu_moe == -1:
        return n_layer
    if n_cpu_moe == -2:
        return n_layer // 2
    return max(0, min(n_cpu_moe, n_layer))


@dataclass(frozen=True)
class Placement:
    """Where tensors go besides the layer rule: ``-ot`` (pattern, buffer type) pairs, then ``-ncmoe``'s patterns."""

    n_cpu_moe: int = 0  # layers 0..N-1 keep their expert tensors in host memory (already resolved)
    overrides: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_text(cls, n_cpu_moe: int, n_layer: int, tensor_buft_overrides: str = "none") -> Placement:
        """From the settings' values: -ncmoe (a count, -1 all, -2 half) and -ot's canonical ``P=BUFT;P=BUFT`` text."""
        text = (tensor_buft_overrides or "none").strip()
        pairs = () if text == "none" else tuple(
            (p, b) for p, _, b in (e.partition("=") for e in text.split(";") if e.strip()) if p and b)
        return cls(resolve_n_cpu_moe(n_cpu_moe, n_layer), pairs)

    @property
    def is_default(self) -> bool:
        return not self.n_cpu_moe and not self.overrides

    def host_override(self, name: str) -> bool | None:
        """True: an override puts ``name`` in host memory; False: on a GPU device; None: no override matches."""
        for pattern, buft in self.overrides:
            if _compiled(pattern).search(name):
                return is_host_buffer(buft)
        # -ncmoe N: llama.cpp's patterns for layers 0..N-1 (expert_block_pattern), as one search of the layer number
        if self.n_cpu_moe and any(int(m.group(1)) < self.n_cpu_moe for m in _ANY_EXPERT_BLOCK_RE.finditer(name)):
            return True
        return None


#: expert_block_pattern of any layer, the layer number captured (host_override reads it once, not once per layer)
_ANY_EXPERT_BLOCK_RE = re.compile(rf"blk\.(\d+){EXPERT_TENSORS_REGEX}")


@cache
def _compiled(pattern: str) -> re.Pattern[str]:
    """An -ot pattern compiled once (a placement search matches each against every tensor, hundreds of times)."""
    return re.compile(pattern)


@dataclass(frozen=True)
class WeightSplit:
    """Where the weights of a model sit for a given ``n_gpu_layers``, and what one decoded token reads on each side.

    ``gpu_*`` is the GPU device, ``cpu_*`` host memory. ``*_bytes`` are stored bytes (a tied embedding offloaded with
    the output layer counts on both sides, as llama.cpp keeps two copies); ``*_read_bytes`` are bytes read per
    decoded token (the token embedding contributes one row, counted as 0; MoE expert tensors count
    ``n_expert_used / n_expert`` of their bytes).
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
    #: per repeating layer: its attention weights on the GPU; its routed experts on the GPU (None: no experts); its
    #: dense feed-forward matrices (a dense model's FFN, a MoE's shared experts) on the GPU (None: none, or a split
    #: estimated from totals)
    layer_attn_on_gpu: tuple[bool, ...] = ()
    layer_experts_on_gpu: tuple[bool | None, ...] = ()
    layer_ffn_on_gpu: tuple[bool | None, ...] = ()
    n_tensors_overridden: int = 0  # tensors an -ot or -ncmoe pattern placed
    #: the host's weight buffer as llama.cpp logs it with mmap (its default): the file's span from the first to the
    #: last host tensor, GPU tensors between them included (src/llama-model-loader.cpp ``get_mapping_range``)
    cpu_mapped_bytes: int = 0
    #: host-held tensors of the repeating layers (stored bytes): the routed experts, and the rest; what a prompt's
    #: micro-batch moves to the GPU with op offload (app/predict/ceilings/op_offload.py)
    cpu_layer_bytes: int = 0
    cpu_expert_bytes: int = 0

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


_Where = int | str  # a repeating layer's index, or "embd" (input layer), "output" or "other"


def _where(name: str, n_layer: int) -> _Where:
    m = _BLOCK_RE.match(name)
    if m and int(m.group(1)) < n_layer:
        return int(m.group(1))
    if name.startswith("token_embd"):
        return "embd"
    if name.startswith("output"):
        return "output"
    return "other"  # rope_freqs and friends (small); nextn/MTP blocks beyond n_layer land here too


@lru_cache(maxsize=1 << 16)
def _tensor_kind(name: str, n_layer: int) -> tuple[_Where, bool, bool, bool]:
    """(where a tensor sits, a routed expert, a dense feed-forward matrix, an attention tensor): what split_weights
    asks of each name, once per name (a placement search splits the same table thousands of times)."""
    return _where(name, n_layer), is_expert_tensor(name), is_dense_ffn_tensor(name), ".attn_" in name


def estimated_expert_bytes_per_layer(facts: ModelFacts, layer_bytes: float) -> float:
    """A MoE layer's routed-expert bytes without a tensor table: gate, up and down of ``n_expert`` experts,
    3 × n_embd × n_ff_expert × n_expert parameters at the file's average bytes per parameter (n_ff when the
    header has no expert width), at most 95 % of the layer."""
    if not facts.n_expert or not facts.n_params:
        return 0.0
    ff = facts.extra.get("n_ff_expert")
    n_ff = ff if isinstance(ff, int) and ff > 0 else facts.n_ff
    params = 3.0 * facts.n_embd * n_ff * facts.n_expert
    return min(params * facts.weight_bytes / facts.n_params, 0.95 * layer_bytes)


def _tensors_estimated(facts: ModelFacts) -> tuple[list[tuple[str, float]], bool]:
    """A stand-in tensor table from totals: the token embedding and the output layer each n_vocab × n_embd × the
    file's average bytes per parameter (tied embeddings guessed from the parameter count), the rest shared equally
    by the repeating layers, a MoE layer's share of it split into its dense part and its experts."""
    bytes_per_param = facts.weight_bytes / facts.n_params if facts.n_params else 0.0
    head = facts.n_vocab * facts.n_embd * bytes_per_param
    tied = guess_tied_embeddings(facts)
    blocks = max(facts.weight_bytes - head * (1 if tied else 2), 0.0)
    per_layer = blocks / facts.n_layer if facts.n_layer else 0.0
    experts = estimated_expert_bytes_per_layer(facts, per_layer)
    out: list[tuple[str, float]] = [(_EMBD, head)] + ([] if tied else [("output.weight", head)])
    for i in range(facts.n_layer):
        out.append((f"blk.{i}.dense", per_layer - experts))
        if experts:
            out += [(f"blk.{i}.ffn_{part}_exps.weight", experts / 3.0) for part in ("gate", "up", "down")]
    return out, tied


def active_weight_bytes(facts: ModelFacts, tensor_bytes: Mapping[str, int] | None = None) -> float:
    """The file's weight bytes with routed experts counted ``n_expert_used / n_expert`` (a dense model: all)."""
    if not facts.n_expert:
        return float(facts.weight_bytes)
    tensors = list(tensor_bytes.items()) if tensor_bytes else _tensors_estimated(facts)[0]
    share = facts.n_expert_used / facts.n_expert
    inactive = sum(n for name, n in tensors if is_expert_tensor(name)) * (1.0 - share)
    return facts.weight_bytes - inactive


def split_weights(
    facts: ModelFacts, n_gpu_layers: int, tensor_bytes: Mapping[str, int] | None = None,
    placement: Placement | None = None,
) -> WeightSplit:
    """Split the weights between GPU and host for ``n_gpu_layers`` and ``placement`` (``-ot``, ``-ncmoe``) with
    llama.cpp's rules (see the module docstring).

    With ``tensor_bytes`` (GGUF tensor name → bytes) the split is exact. Without it the tensor table is estimated
    from totals (:func:`_tensors_estimated`); ``-ot`` patterns then match only the stand-in names (``ffn_*_exps``).
    Worked out once per (facts, tensor table, layers, placement): a placement search asks again and again.
    """
    return _split_weights(facts, tensor_bytes, n_gpu_layers, placement or Placement())


@by_identity(2)
def _split_weights(facts: ModelFacts, tensor_bytes: Mapping[str, int] | None, n_gpu_layers: int,
                   placement: Placement) -> WeightSplit:
    exact = bool(tensor_bytes)
    if tensor_bytes:
        tensors: list[tuple[str, float]] = [(k, float(v)) for k, v in tensor_bytes.items()]
        tied = "output.weight" not in tensor_bytes
    else:
        tensors, tied = _tensors_estimated(facts)
    ngl = effective_n_gpu_layers(n_gpu_layers, facts.n_layer)
    output_on_gpu = ngl >= 1
    n_rep = max(ngl - 1, 0)
    first = facts.n_layer - n_rep
    share = facts.n_expert_used / facts.n_expert if facts.n_expert else 1.0
    stored = {True: 0.0, False: 0.0}  # on the GPU device -> bytes
    read = {True: 0.0, False: 0.0}
    attn_gpu: list[bool] = [i >= first for i in range(facts.n_layer)]
    experts_gpu: list[bool | None] = [None] * facts.n_layer
    ffn_gpu: list[bool | None] = [None] * facts.n_layer
    n_overridden = 0
    embd_matrix, embd_on_gpu = 0.0, False
    offset, host_first, host_last = 0.0, None, 0.0  # in file order (the tensor table's), alignment padding ignored
    host_layer = {True: 0.0, False: 0.0}  # a repeating layer's host-held tensors: routed experts -> bytes
    default = placement.is_default
    for name, n in tensors:
        where, expert, dense_ffn, attn = _tensor_kind(name, facts.n_layer)
        on_gpu = (where >= first) if isinstance(where, int) else (where == "output" and output_on_gpu)
        override = None if default else placement.host_override(name)
        if override is not None:
            n_overridden += 1
            on_gpu = not override
        if not on_gpu:
            host_first = offset if host_first is None else host_first
            host_last = offset + n
            if isinstance(where, int):
                host_layer[expert] += n
        offset += n
        stored[on_gpu] += n
        if where == "embd":  # one row per token: counted as 0 (a tied output layer reads it, below)
            if name == _EMBD:
                embd_matrix, embd_on_gpu = n, on_gpu
            continue
        read[on_gpu] += n * (share if expert else 1.0)
        if isinstance(where, int):
            if expert:  # a part with any matrix on the host crosses there (and back), whatever the order
                experts_gpu[where] = on_gpu and experts_gpu[where] is not False
            elif dense_ffn:
                ffn_gpu[where] = on_gpu and ffn_gpu[where] is not False
            elif attn:
                attn_gpu[where] = on_gpu
    if tied and output_on_gpu:  # llama.cpp duplicates token_embd on the output layer's device (TENSOR_DUPLICATED)
        override = placement.host_override(_EMBD)
        copy_on_gpu = True if override is None else not override
        stored[copy_on_gpu] += embd_matrix
        read[copy_on_gpu] += embd_matrix
    elif tied:
        read[embd_on_gpu] += embd_matrix
    return WeightSplit(
        n_gpu_layers=ngl, n_gpu_repeating=n_rep, output_on_gpu=output_on_gpu,
        gpu_bytes=round(stored[True]), cpu_bytes=round(stored[False]), gpu_read_bytes=round(read[True]),
        cpu_read_bytes=round(read[False]), tied_embeddings=tied, exact=exact, n_layer=facts.n_layer,
        layer_attn_on_gpu=tuple(attn_gpu), layer_experts_on_gpu=tuple(experts_gpu), layer_ffn_on_gpu=tuple(ffn_gpu),
        n_tensors_overridden=n_overridden,
        cpu_mapped_bytes=round(host_last - host_first) if exact and host_first is not None else round(stored[False]),
        cpu_layer_bytes=round(host_layer[False]), cpu_expert_bytes=round(host_layer[True]),
    )
