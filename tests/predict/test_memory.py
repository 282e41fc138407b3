"""KV-cache cells and bytes, and the compute buffer, against hand-computed numbers and llama.cpp's load log."""

from __future__ import annotations

import pytest

from app.predict.memory.buffers import (
    compute_buffer_bytes,
    compute_buffer_bytes_for,
    kv_alloc_bytes,
    kv_alloc_bytes_per_layer,
    kv_cache_cells,
)
from tests.predict.samples import MIB, make_facts, smollm2_facts, swa_facts


def test_kv_reference_figures() -> None:
    facts = make_facts()  # 32 layers × 8 KV heads × 128 dims
    assert facts.kv_bytes_per_token("f16") == 131072  # 128 KiB per token
    assert facts.kv_bytes(20_000) == pytest.approx(2.62144e9)  # ~2.6 GB at 20k
    assert facts.kv_bytes(131_072) == pytest.approx(17.179869184e9)  # ~17 GB at 128k
    assert facts.kv_bytes(131_072, "q8_0") == pytest.approx(17.179869184e9 * 34 / 64)


def test_kv_cache_cells_are_padded_like_llama_cpp() -> None:
    assert kv_cache_cells(300) == (512, 512)
    assert kv_cache_cells(4096) == (4096, 4096)
    assert kv_cache_cells(5000, swa_window=1024, n_ubatch=512) == (5120, 1536)  # window + ubatch, padded
    assert kv_cache_cells(5000, swa_window=1024, swa_full=True) == (5120, 5120)
    assert kv_cache_cells(1000, swa_window=4096) == (1024, 1024)


def test_kv_alloc_sliding_window() -> None:
    facts = swa_facts()
    assert kv_alloc_bytes_per_layer(facts, 5000) == [4096 * 1536] * 2 + [4096 * 5120] * 2
    assert kv_alloc_bytes(facts, 5000) == 4096 * (2 * 1536 + 2 * 5120)
    assert kv_alloc_bytes(facts, 5000, swa_full=True) == 4096 * 4 * 5120


def test_kv_alloc_matches_llama_cpp_log_for_smollm2() -> None:
    """'llama_kv_cache: CPU KV buffer size = X MiB' from llama-cpp-python 0.3.36 with SmolLM2-135M."""
    facts = smollm2_facts()
    assert kv_alloc_bytes(facts, 512) / MIB == pytest.approx(11.25)
    assert kv_alloc_bytes(facts, 300) / MIB == pytest.approx(11.25)  # padded to 512 cells
    assert kv_alloc_bytes(facts, 4096, "q8_0") / MIB == pytest.approx(47.8125)
    assert kv_alloc_bytes(facts, 4096, "q4_0") / MIB == pytest.approx(25.3125)
    assert kv_alloc_bytes(facts, 4096, "q8_0", "f16") / MIB == pytest.approx(68.90625)


def test_compute_buffer_formula_by_hand() -> None:
    dims = dict(n_vocab=1000, n_embd=100, n_head=4, n_ff=300)
    # attention stage: 4 × ((4 + 1) × 512 × 512 + 6 × 100 × 512) = 6,471,680 > logits 2,662,400 > ffn 2,252,800
    assert compute_buffer_bytes(512, 512, **dims) == 6_471_680
    # flash attention: 2 × 512 × 512 + 24 × 100 × 512 = 1,753,088; the ffn stage with the f16 KQ mask beside it,
    # 2,252,800 + 2 × 512 × 512 = 2,777,088, wins over the logits' 2,662,400
    assert compute_buffer_bytes(512, 512, **dims, flash_attn=True) == 2_777_088
    # a model without attention layers (Mamba, RWKV) has neither the attention stage nor the mask
    assert compute_buffer_bytes(512, 512, **dims, flash_attn=True, attention=False) == 2_662_400
    # the ubatch is clamped to n_batch and n_ctx; the ffn stage can win with a tiny vocab
    assert compute_buffer_bytes(512, 300, 10, 100, 1, 3000) == 4 * (3 * 3000 * 300 + 2 * 100 * 300) + 4 * 512 * 300
    assert compute_buffer_bytes(512, 4096, **dims, n_batch=128) == compute_buffer_bytes(128, 4096, **dims)


# (n_ctx, n_ubatch, flash_attn, type_k, type_v, compute MiB, KV MiB) read from llama.cpp's load log
# (llama-cpp-python 0.3.36, CPU backend, SmolLM2-135M-Instruct Q4_1: "CPU_Mapped model buffer size = 92.10 MiB").
SMOLLM2_MEASURED = [
    (512, 128, False, "f16", "f16", 24.56, 11.25),
    (512, 512, False, "f16", "f16", 98.25, 11.25),
    (2048, 128, False, "f16", "f16", 24.84, 45.0),
    (2048, 128, True, "f16", "f16", 25.63, 45.0),
    (2048, 512, False, "f16", "f16", 99.38, 45.0),
    (2048, 512, True, "f16", "f16", 102.51, 45.0),
    (8192, 128, False, "f16", "f16", 41.60, 180.0),
    (8192, 128, True, "f16", "f16", 24.56, 180.0),
    (8192, 512, False, "f16", "f16", 166.38, 180.0),
    (8192, 512, True, "f16", "f16", 98.25, 180.0),
    (4096, 512, True, "q8_0", "q8_0", 99.38, 47.81),
    (4096, 512, True, "q4_0", "q4_0", 99.38, 25.31),
    (4096, 512, False, "q8_0", "f16", 99.38, 68.91),
    (8192, 2048, False, "f16", "f16", 665.54, 180.0),
    (8192, 2048, True, "f16", "f16", 393.01, 180.0),
    (1024, 32, False, "f16", "f16", 6.14, 22.5),
    (16384, 512, False, "f16", "f16", 326.38, 360.0),
    (16384, 512, True, "f16", "f16", 98.25, 360.0),
    (300, 512, False, "f16", "f16", 57.57, 11.25),
]


@pytest.mark.parametrize(("n_ctx", "n_ubatch", "fa", "tk", "tv", "compute_mib", "kv_mib"), SMOLLM2_MEASURED)
def test_memory_estimate_calibrated_against_llama_cpp(
    n_ctx: int, n_ubatch: int, fa: bool, tk: str, tv: str, compute_mib: float, kv_mib: float
) -> None:
    facts = smollm2_facts()
    compute = compute_buffer_bytes_for(facts, n_ctx, n_ubatch, fa) / MIB
    kv = kv_alloc_bytes(facts, n_ctx, tk, tv, n_ubatch) / MIB
    assert compute == pytest.approx(compute_mib, rel=0.05)
    assert kv == pytest.approx(kv_mib, abs=0.01)
    measured_total = 92.10 + kv_mib + compute_mib
    assert facts.weight_bytes / MIB + kv + compute == pytest.approx(measured_total, rel=0.05)
