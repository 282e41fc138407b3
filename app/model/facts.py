"""ModelFacts: what a GGUF file says about its model, as plain Python values (no reader objects)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from app.model.kv_cache import REPORTED_CACHE_TYPES, cache_type

#: bytes of one recurrent-state value: llama.cpp keeps the state in f32 (src/llama-model.cpp create_memory)
STATE_VALUE_BYTES = 4


@dataclass(frozen=True)
class TensorTypeStat:
    """How many tensors of one ggml type the file holds, and their bytes and elements."""

    n_tensors: int
    n_bytes: int
    n_elements: int


@dataclass(frozen=True)
class ModelFacts:
    """Facts read from a GGUF header and tensor table, without loading the weights."""

    path: str
    file_bytes: int
    architecture: str
    name: str
    file_type: str  # llama.cpp file type name, e.g. "Q4_1", or "unknown"
    n_params: int
    weight_bytes: int
    tensor_types: dict[str, TensorTypeStat]
    n_layer: int
    n_head: int
    n_head_kv: int
    head_dim_k: int
    head_dim_v: int
    n_embd: int
    n_ff: int
    n_vocab: int
    n_ctx_train: int
    swa_window: int = 0  # tokens; 0 when the architecture has no sliding-window attention
    swa_layers: tuple[int, ...] = ()  # indices of the layers that use the sliding window
    n_expert: int = 0
    n_expert_used: int = 0
    extra: dict[str, object] = field(default_factory=dict)
    tensor_bytes: dict[str, int] = field(default_factory=dict, repr=False)  # tensor name -> bytes (not in JSON)
    #: tensor name -> (ggml type name, dims as GGUF lists them: ne0, the row length, first); not in JSON. Which
    #: weights llama.cpp repacks, and into how many bytes, follows from them (app.predict.memory.repack).
    tensor_shapes: dict[str, tuple[str, tuple[int, ...]]] = field(default_factory=dict, repr=False)
    #: per layer, the K and V values one token adds to that layer's cache (0: the layer keeps no KV cache: a
    #: recurrent or MLP layer, an MTP head, an MLA layer's V); empty: every layer ``n_head_kv`` × the head dims
    #: (app.model.arch_memory reads them from the header, by the architecture's rule)
    kv_k_per_layer: tuple[int, ...] = ()
    kv_v_per_layer: tuple[int, ...] = ()
    #: the layers that keep a recurrent state (Mamba, RWKV, the hybrids' recurrent layers), and its f32 values per
    #: layer and sequence: ``state_r`` (convolution / token shift) and ``state_s`` (the state itself)
    recurrent_layers: tuple[int, ...] = ()
    state_r: int = 0
    state_s: int = 0

    @property
    def bits_per_weight(self) -> float:
        return 8.0 * self.weight_bytes / self.n_params if self.n_params else 0.0

    @property
    def gqa_ratio(self) -> float:
        return self.n_head / self.n_head_kv if self.n_head_kv else 0.0

    def kv_widths(self) -> list[tuple[int, int]]:
        """(K values, V values) one token adds to each layer's cache; (0, 0) for a layer without a KV cache."""
        if len(self.kv_k_per_layer) == self.n_layer and len(self.kv_v_per_layer) == self.n_layer:
            return list(zip(self.kv_k_per_layer, self.kv_v_per_layer, strict=True))
        return [(self.n_head_kv * self.head_dim_k, self.n_head_kv * self.head_dim_v)] * self.n_layer

    def kv_bytes_per_token_per_layer(self, type_k: str = "f16", type_v: str | None = None) -> list[float]:
        """KV bytes one token adds to each layer's cache."""
        tk, tv = cache_type(type_k), cache_type(type_v or type_k)
        return [k * tk.bytes_per_value + v * tv.bytes_per_value for k, v in self.kv_widths()]

    @property
    def kv_layers(self) -> int:
        """Layers that keep a KV cache."""
        return sum(1 for k, v in self.kv_widths() if k or v)

    @property
    def state_bytes_per_layer(self) -> int:
        """Recurrent state bytes of one recurrent layer for one sequence (0 without recurrent layers)."""
        return (self.state_r + self.state_s) * STATE_VALUE_BYTES if self.recurrent_layers else 0

    @property
    def state_bytes(self) -> int:
        """Recurrent state bytes of the whole model for one sequence, whatever the context: read and written by
        every decoded token."""
        return self.state_bytes_per_layer * len(self.recurrent_layers)

    def kv_bytes_per_token(self, type_k: str = "f16", type_v: str | None = None) -> float:
        """KV bytes per token with every layer counted (sliding-window layers included)."""
        return sum(self.kv_bytes_per_token_per_layer(type_k, type_v))

    def kv_bytes(self, n_ctx: int, type_k: str = "f16", type_v: str | None = None, swa_full: bool = False) -> float:
        """KV bytes at ``n_ctx`` tokens; sliding-window layers capped at their window unless ``swa_full``."""
        swa = set() if swa_full or not self.swa_window else set(self.swa_layers)
        return sum(b * (min(n_ctx, self.swa_window) if i in swa else n_ctx)
                   for i, b in enumerate(self.kv_bytes_per_token_per_layer(type_k, type_v)))

    def to_json_dict(self) -> dict[str, object]:
        """The ``inspect --json`` document."""
        d = asdict(self)
        d.pop("tensor_bytes", None)
        d.pop("tensor_shapes", None)
        d["tensor_types"] = {k: asdict(v) for k, v in self.tensor_types.items()}
        for key in ("swa_layers", "kv_k_per_layer", "kv_v_per_layer", "recurrent_layers"):
            d[key] = list(getattr(self, key))
        d["state_bytes"] = self.state_bytes
        d["bits_per_weight"] = round(self.bits_per_weight, 4)
        d["gqa_ratio"] = self.gqa_ratio
        d["kv_bytes_per_token"] = {t: self.kv_bytes_per_token(t) for t in REPORTED_CACHE_TYPES}
        return d
