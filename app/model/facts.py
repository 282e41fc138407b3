"""ModelFacts: what a GGUF file says about its model, as plain Python values (no reader objects)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from app.model.kv_cache import REPORTED_CACHE_TYPES, kv_bytes_at_context, kv_bytes_per_token


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
    #: weights llama.cpp repacks, and into how many bytes, follows from them (app.predict.repack_memory).
    tensor_shapes: dict[str, tuple[str, tuple[int, ...]]] = field(default_factory=dict, repr=False)

    @property
    def bits_per_weight(self) -> float:
        return 8.0 * self.weight_bytes / self.n_params if self.n_params else 0.0

    @property
    def gqa_ratio(self) -> float:
        return self.n_head / self.n_head_kv if self.n_head_kv else 0.0

    def kv_bytes_per_token(self, type_k: str = "f16", type_v: str | None = None) -> float:
        """KV bytes per token with every layer counted (sliding-window layers included)."""
        return kv_bytes_per_token(self.n_layer, self.n_head_kv, self.head_dim_k, self.head_dim_v, type_k, type_v)

    def kv_bytes(self, n_ctx: int, type_k: str = "f16", type_v: str | None = None, swa_full: bool = False) -> float:
        """KV bytes at ``n_ctx`` tokens; sliding-window layers capped at their window unless ``swa_full``."""
        swa = 0 if swa_full else len(self.swa_layers)
        return kv_bytes_at_context(
            n_ctx, self.n_layer, self.n_head_kv, self.head_dim_k, self.head_dim_v, type_k, type_v,
            swa_layers=swa, swa_window=self.swa_window,
        )

    def to_json_dict(self) -> dict[str, object]:
        """The ``inspect --json`` document."""
        d = asdict(self)
        d.pop("tensor_bytes", None)
        d.pop("tensor_shapes", None)
        d["tensor_types"] = {k: asdict(v) for k, v in self.tensor_types.items()}
        d["swa_layers"] = list(self.swa_layers)
        d["bits_per_weight"] = round(self.bits_per_weight, 4)
        d["gqa_ratio"] = self.gqa_ratio
        d["kv_bytes_per_token"] = {t: self.kv_bytes_per_token(t) for t in REPORTED_CACHE_TYPES}
        return d
