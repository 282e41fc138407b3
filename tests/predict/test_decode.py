"""Decode ceilings against hand-computed numbers: weights and KV read per token over bandwidth."""

from __future__ import annotations

import pytest

from app.predict.ceilings.decode import (
    decode_ceiling_at_depth_tps,
    decode_ceiling_offload_tps,
    decode_ceiling_split_tps,
    decode_ceiling_tps,
    kv_bytes_read_at_depth,
    kv_read_per_layer,
)
from app.predict.ceilings.offload import split_weights
from tests.predict.samples import TENSORS, make_facts, swa_facts


def test_decode_reference_figures() -> None:
    assert decode_ceiling_tps(400, 8e9) == pytest.approx(50.0)  # 8 GB of weights at 400 GB/s
    assert decode_ceiling_tps(2000, 14e9) == pytest.approx(142.857, rel=1e-4)  # 7B fp16 on 2 TB/s: ~140
    assert decode_ceiling_tps(2000, 4e9) == pytest.approx(500.0)  # 7B at 4-bit: ~500
    assert decode_ceiling_tps(400, 8e9, kv_bytes_read=2e9) == pytest.approx(40.0)


def test_decode_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        decode_ceiling_tps(0, 1e9)
    with pytest.raises(ValueError):
        decode_ceiling_tps(100, 0)


def test_kv_read_at_depth_dense_and_sliding_window() -> None:
    assert kv_bytes_read_at_depth(make_facts(), 1000) == 1000 * 131072
    facts = swa_facts()
    assert kv_bytes_read_at_depth(facts, 512) == 4096 * 4 * 512  # inside the window: all layers read all
    assert kv_bytes_read_at_depth(facts, 4096) == 4096 * (2 * 4096 + 2 * 1024)  # windowed layers capped
    assert kv_bytes_read_at_depth(facts, -5) == 0


def test_decode_ceiling_at_depth() -> None:
    facts = make_facts()
    expected = 1000e9 / (4e9 + 8192 * 131072)
    assert decode_ceiling_at_depth_tps(facts, 1000, 8192) == pytest.approx(expected)
    assert decode_ceiling_at_depth_tps(facts, 1000, 0) == pytest.approx(250.0)


def test_partial_offload_split_decode() -> None:
    # 6 GB on a 300 GB/s GPU (20 ms) + 2 GB on 50 GB/s system RAM (40 ms) = 60 ms per token
    assert decode_ceiling_split_tps(6e9, 300, 2e9, 50) == pytest.approx(1 / 0.06)
    assert decode_ceiling_split_tps(8e9, 400, 0, None) == pytest.approx(50.0)
    assert decode_ceiling_split_tps(0, 400, 4e9, 50) == pytest.approx(12.5)
    with pytest.raises(ValueError):
        decode_ceiling_split_tps(6e9, 300, 2e9, None)
    with pytest.raises(ValueError):
        decode_ceiling_split_tps(0, 300, 0, 50)


def test_kv_read_per_layer_caps_windowed_layers() -> None:
    assert kv_read_per_layer(swa_facts(), 2000, "f16", None) == [4096 * 1024] * 2 + [4096 * 2000] * 2


def test_decode_with_layers_and_their_kv_split_between_gpu_and_cpu() -> None:
    facts = make_facts(n_layer=4)  # 8 KV heads × 128 dims: 4096 f16 bytes per token per layer
    split = split_weights(facts, 3, TENSORS)  # output + the last 2 layers on the GPU: 242 bytes, 201 on the CPU
    gpu, cpu = 242 + 2 * 4096 * 100, 201 + 2 * 4096 * 100
    tps = decode_ceiling_offload_tps(facts, split, 100, "f16", None, 300, 50)
    assert tps == pytest.approx(1 / (gpu / 300e9 + cpu / 50e9))
    host = decode_ceiling_offload_tps(facts, split, 100, "f16", None, 80, None, host_only=True)
    assert host == pytest.approx(80e9 / (gpu + cpu))
