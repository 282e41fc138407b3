"""KV-cache byte formulas against hand-computed numbers."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from app.model.kv_cache import (
    CACHE_TYPES,
    REPORTED_CACHE_TYPES,
    cache_type,
    kv_bytes_at_context,
    kv_bytes_per_token,
    kv_bytes_per_token_per_layer,
)

# 32 layers x 8 KV heads x 128 dims (Llama-3-8B shape); K and V each store 32*8*128 = 32768 values per token,
# so 65536 values per token in all, times bytes per value.
LLAMA3_8B = {"n_layer": 32, "n_head_kv": 8, "head_dim_k": 128}
LLAMA3_8B_BYTES_PER_TOKEN: dict[str, float] = {
    "f32": 65536 * 4,  # 262144
    "f16": 65536 * 2,  # 131072
    "bf16": 65536 * 2,  # 131072
    "q8_0": 65536 * 34 / 32,  # 69632: 32 int8 + fp16 scale per block of 32
    "q4_0": 65536 * 18 / 32,  # 36864: 16 bytes of nibbles + fp16 scale
    "q4_1": 65536 * 20 / 32,  # 40960: nibbles + fp16 scale + fp16 min
    "q5_0": 65536 * 22 / 32,  # 45056: nibbles + 4 bytes of high bits + fp16 scale
    "q5_1": 65536 * 24 / 32,  # 49152: as q5_0 + fp16 min
}


def test_every_cache_type_has_a_hand_computed_figure() -> None:
    assert set(LLAMA3_8B_BYTES_PER_TOKEN) == set(CACHE_TYPES)
    assert set(REPORTED_CACHE_TYPES) <= set(CACHE_TYPES)


@pytest.mark.parametrize("name", sorted(CACHE_TYPES))
def test_bytes_per_token_every_cache_type(name: str) -> None:
    assert kv_bytes_per_token(**LLAMA3_8B, type_k=name) == LLAMA3_8B_BYTES_PER_TOKEN[name]


def test_hand_numbers_written_out() -> None:
    assert kv_bytes_per_token(32, 8, 128, 128, "f16") == 131072
    assert kv_bytes_per_token(32, 8, 128, 128, "q8_0") == 32 * 8 * 128 * 2 * 34 / 32 == 69632
    assert kv_bytes_per_token(32, 8, 128, 128, "q4_0") == 36864
    assert kv_bytes_per_token(32, 8, 128, 128, "f32") == 262144


@pytest.mark.parametrize(
    ("name", "block_values", "block_bytes"),
    [("f32", 1, 4), ("f16", 1, 2), ("bf16", 1, 2), ("q8_0", 32, 34), ("q4_0", 32, 18), ("q4_1", 32, 20),
     ("q5_0", 32, 22), ("q5_1", 32, 24)],
)
def test_block_layouts(name: str, block_values: int, block_bytes: int) -> None:
    t = cache_type(name)
    assert (t.block_values, t.block_bytes) == (block_values, block_bytes)
    assert t.bytes_per_value == block_bytes / block_values


def test_cache_type_is_case_insensitive() -> None:
    assert cache_type("Q8_0") is CACHE_TYPES["q8_0"]
    assert kv_bytes_per_token(32, 8, 128, type_k="F16") == 131072


def test_type_v_defaults_to_type_k() -> None:
    assert kv_bytes_per_token(32, 8, 128, type_k="q8_0") == kv_bytes_per_token(32, 8, 128, type_k="q8_0", type_v="q8_0")


def test_head_dim_v_defaults_to_head_dim_k() -> None:
    assert kv_bytes_per_token(32, 8, 128) == kv_bytes_per_token(32, 8, 128, 128)


def test_k_and_v_of_different_types() -> None:
    # per layer: 8 heads x (128 K values x 34/32 + 128 V values x 2) = 8 x (136 + 256) = 3136 bytes
    assert kv_bytes_per_token_per_layer(8, 128, 128, "q8_0", "f16") == 3136
    assert kv_bytes_per_token(32, 8, 128, 128, "q8_0", "f16") == 32 * 3136 == 100352
    # q4_0 K (18/32) with q8_0 V (34/32): 8 x (72 + 136) = 1664 per layer
    assert kv_bytes_per_token(32, 8, 128, 128, "q4_0", "q8_0") == 32 * 1664 == 53248


def test_k_and_v_of_different_head_dims() -> None:
    # DeepSeek-style K 192 / V 128, 16 KV heads, 2 layers, f16: 2 x 16 x (192 x 2 + 128 x 2) = 20480
    assert kv_bytes_per_token(2, 16, 192, 128, "f16") == 20480
    # Gemma-style K = V = 256, 4 KV heads, 1 layer, q8_0: 4 x 2 x 256 x 34/32 = 2176
    assert kv_bytes_per_token(1, 4, 256, 256, "q8_0") == 2176
    # different dims and different types together: 16 x (192 x 34/32 + 128 x 2) = 16 x 460 = 7360 per layer
    assert kv_bytes_per_token(2, 16, 192, 128, "q8_0", "f16") == 2 * 7360


def test_bytes_at_context_without_sliding_window() -> None:
    assert kv_bytes_at_context(8192, 32, 8, 128) == 8192 * 131072 == 1 << 30  # 1 GiB at f16
    assert kv_bytes_at_context(4096, 32, 8, 128, type_k="q8_0") == 4096 * 69632


def test_bytes_at_context_with_sliding_window_layers_capped() -> None:
    # 6 layers, 4 KV heads x 256 dims, f16: 4 x (256 x 2 + 256 x 2) = 4096 bytes per token per layer.
    # 5 sliding-window layers keep 1024 tokens, 1 full layer keeps all 8192.
    got = kv_bytes_at_context(8192, 6, 4, 256, 256, "f16", swa_layers=5, swa_window=1024)
    assert got == 1 * 8192 * 4096 + 5 * 1024 * 4096 == 54525952
    # the full-attention-only figure for comparison
    assert kv_bytes_at_context(8192, 6, 4, 256) == 6 * 8192 * 4096


def test_sliding_window_wider_than_context_changes_nothing() -> None:
    got = kv_bytes_at_context(512, 6, 4, 256, swa_layers=5, swa_window=1024)
    assert got == 6 * 512 * 4096 == kv_bytes_at_context(512, 6, 4, 256)


def test_window_without_sliding_layers_changes_nothing() -> None:
    assert kv_bytes_at_context(8192, 6, 4, 256, swa_layers=0, swa_window=1024) == 6 * 8192 * 4096


def test_sliding_window_with_quantized_k_and_v() -> None:
    # per layer per token: 4 x (256 x 34/32 + 256 x 18/32) = 4 x (272 + 144) = 1664
    got = kv_bytes_at_context(4096, 6, 4, 256, 256, "q8_0", "q4_0", swa_layers=5, swa_window=1024)
    assert got == 1664 * (1 * 4096 + 5 * 1024)


def test_unknown_cache_type_names_the_valid_ones() -> None:
    with pytest.raises(ValueError) as info:
        cache_type("q3_k")
    message = str(info.value)
    assert "q3_k" in message
    for name in CACHE_TYPES:
        assert name in message


@pytest.mark.parametrize("call", [
    lambda: kv_bytes_per_token(32, 8, 128, type_k="int4"),
    lambda: kv_bytes_per_token(32, 8, 128, type_k="f16", type_v="fp8"),
    lambda: kv_bytes_at_context(1024, 32, 8, 128, type_k="nope"),
])
def test_formulas_reject_unknown_types(call: Callable[[], float]) -> None:
    with pytest.raises(ValueError, match="valid: "):
        call()

