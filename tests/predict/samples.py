"""Model facts for the prediction tests: a Llama-2-7B shape, SmolLM2-135M as its header says, a sliding-window toy."""

from __future__ import annotations

from app.model.facts import ModelFacts

MIB = 1024**2
#: A 4-layer model's tensors (bytes): untied output, a token embedding that stays on the CPU, one odd tensor.
TENSORS = {
    "token_embd.weight": 50,
    **{f"blk.{i}.attn_q.weight": 60 for i in range(4)},
    **{f"blk.{i}.ffn_up.weight": 40 for i in range(4)},
    "output_norm.weight": 2,
    "output.weight": 40,
    "rope_freqs.weight": 1,
}


def make_facts(**overrides: object) -> ModelFacts:
    """A Llama-2-7B-shaped model at ~4.4 bits per weight (untied embeddings)."""
    base: dict[str, object] = dict(
        path="/models/test.gguf", file_bytes=4_000_000_000, architecture="llama", name="test-7b", file_type="Q4_K_M",
        n_params=7_241_465_856, weight_bytes=4_000_000_000, tensor_types={}, n_layer=32, n_head=32, n_head_kv=8,
        head_dim_k=128, head_dim_v=128, n_embd=4096, n_ff=14336, n_vocab=32000, n_ctx_train=32768,
    )
    base.update(overrides)
    return ModelFacts(**base)  # type: ignore[arg-type]


def smollm2_facts() -> ModelFacts:
    """SmolLM2-135M-Instruct Q4_1 as its GGUF header says (tied embeddings, token_embd in Q8_0)."""
    return make_facts(
        name="smollm2-135m", n_params=134_515_008, weight_bytes=96_576_768, n_layer=30, n_head=9, n_head_kv=3,
        head_dim_k=64, head_dim_v=64, n_embd=576, n_ff=1536, n_vocab=49152, n_ctx_train=8192,
    )


def swa_facts() -> ModelFacts:
    """4 layers, 2 of them sliding-window (1024 tokens); 8 KV heads × 128 dims: 4096 f16 bytes per token per layer."""
    return make_facts(n_layer=4, swa_layers=(0, 1), swa_window=1024)
