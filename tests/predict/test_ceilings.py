"""Ceilings, KV memory, compute buffer, fit check, scenarios and predict, against hand-computed numbers."""

from __future__ import annotations

import json

import pytest

from app.model.facts import ModelFacts
from app.paths import HARDWARE_PROFILES_DIR
from app.predict.ceilings import (
    DEFAULT_CPU_BANDWIDTH_GBPS,
    DEFAULT_GPU_OVERHEAD_BYTES,
    Efficiency,
    attention_flops_per_token,
    compute_buffer_bytes,
    compute_buffer_bytes_for,
    decode_ceiling_at_depth_tps,
    decode_ceiling_split_tps,
    decode_ceiling_tps,
    effective_n_gpu_layers,
    fit_check,
    guess_tied_embeddings,
    kv_alloc_bytes,
    kv_alloc_bytes_per_layer,
    kv_bytes_read_at_depth,
    kv_cache_cells,
    matmul_params,
    predict,
    prefill_ceiling_tps,
    prefill_flops_per_token,
    scenario_time,
    split_weights,
)
from app.predict.profiles import GIB, HardwareProfile, cpu_profile, find_profile, load_profiles

MIB = 1024**2


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


@pytest.fixture(scope="module")
def profiles() -> list[HardwareProfile]:
    return load_profiles([HARDWARE_PROFILES_DIR])


# ------------------------------------------------------------------------------------------ decode


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


def test_kv_reference_figures() -> None:
    facts = make_facts()  # 32 layers × 8 KV heads × 128 dims
    assert facts.kv_bytes_per_token("f16") == 131072  # 128 KiB per token
    assert facts.kv_bytes(20_000) == pytest.approx(2.62144e9)  # ~2.6 GB at 20k
    assert facts.kv_bytes(131_072) == pytest.approx(17.179869184e9)  # ~17 GB at 128k
    assert facts.kv_bytes(131_072, "q8_0") == pytest.approx(17.179869184e9 * 34 / 64)


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


# ------------------------------------------------------------------------------------------ weight split

TENSORS = {
    "token_embd.weight": 50,
    **{f"blk.{i}.attn_q.weight": 60 for i in range(4)},
    **{f"blk.{i}.ffn_up.weight": 40 for i in range(4)},
    "output_norm.weight": 2,
    "output.weight": 40,
    "rope_freqs.weight": 1,
}


def test_effective_n_gpu_layers_follows_llama_cpp() -> None:
    assert effective_n_gpu_layers(-1, 32) == 33
    assert effective_n_gpu_layers(999, 32) == 33
    assert effective_n_gpu_layers(33, 32) == 33
    assert effective_n_gpu_layers(10, 32) == 10


@pytest.mark.parametrize(
    ("ngl", "gpu", "cpu", "gpu_read", "cpu_read", "n_rep", "output_on_gpu"),
    [
        (0, 0, 493, 0, 443, 0, False),  # all on the CPU; the token embedding is looked up, not read
        (1, 42, 451, 42, 401, 0, True),  # -ngl 1: the output layer only
        (3, 242, 251, 242, 201, 2, True),  # output + the LAST two repeating layers
        (5, 442, 51, 442, 1, 4, True),  # everything; token_embd stays on the CPU
        (999, 442, 51, 442, 1, 4, True),
        (-1, 442, 51, 442, 1, 4, True),
    ],
)
def test_split_weights_with_tensor_map(
    ngl: int, gpu: int, cpu: int, gpu_read: int, cpu_read: int, n_rep: int, output_on_gpu: bool
) -> None:
    s = split_weights(make_facts(n_layer=4), ngl, TENSORS)
    assert (s.gpu_bytes, s.cpu_bytes, s.gpu_read_bytes, s.cpu_read_bytes) == (gpu, cpu, gpu_read, cpu_read)
    assert (s.n_gpu_repeating, s.output_on_gpu, s.exact, s.tied_embeddings) == (n_rep, output_on_gpu, True, False)
    assert s.first_gpu_layer == 4 - n_rep


def test_split_weights_tied_embeddings_copy_to_the_gpu() -> None:
    tied = {k: v for k, v in TENSORS.items() if k != "output.weight"}  # 453 bytes
    s = split_weights(make_facts(n_layer=4), 999, tied)
    assert s.tied_embeddings
    assert (s.gpu_bytes, s.cpu_bytes) == (400 + 2 + 50, 50 + 1)  # llama.cpp duplicates token_embd for the output
    s0 = split_weights(make_facts(n_layer=4), 0, tied)
    assert (s0.gpu_bytes, s0.cpu_bytes, s0.cpu_read_bytes) == (0, 453, 453)  # stored once; LM head reads it all


def test_split_weights_moe_reads_only_the_used_experts() -> None:
    facts = make_facts(n_layer=1, n_expert=8, n_expert_used=2)
    tensors = {"blk.0.ffn_up_exps.weight": 800, "blk.0.attn_q.weight": 100, "token_embd.weight": 10,
               "output.weight": 10}
    s = split_weights(facts, 999, tensors)
    assert s.gpu_bytes == 910
    assert s.gpu_read_bytes == 100 + 800 * 2 // 8 + 10


def test_tied_embedding_guess() -> None:
    assert guess_tied_embeddings(smollm2_facts())
    llama3_8b = make_facts(n_params=8_030_261_248, n_vocab=128256, weight_bytes=4_920_000_000)
    assert not guess_tied_embeddings(llama3_8b)
    assert not guess_tied_embeddings(make_facts(n_expert=8, n_expert_used=2))


def test_split_weights_estimated_without_a_map() -> None:
    facts = make_facts()  # untied: head = n_vocab × n_embd × average bytes per param
    head = 32000 * 4096 * facts.weight_bytes / facts.n_params
    s = split_weights(facts, 999)
    assert not s.exact and not s.tied_embeddings
    assert s.cpu_bytes == pytest.approx(head, abs=1)
    assert s.gpu_bytes + s.cpu_bytes == pytest.approx(facts.weight_bytes, abs=2)
    half = split_weights(facts, 17)  # output + 16 of 32 layers
    per_layer = (facts.weight_bytes - 2 * head) / 32
    assert half.gpu_bytes == pytest.approx(head + 16 * per_layer, abs=2)
    tied = split_weights(smollm2_facts(), 999)
    assert tied.tied_embeddings and tied.gpu_bytes == pytest.approx(96_576_768, abs=2)


# ------------------------------------------------------------------------------------------ KV allocation


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


# ------------------------------------------------------------------------------------------ compute buffer


def test_compute_buffer_formula_by_hand() -> None:
    dims = dict(n_vocab=1000, n_embd=100, n_head=4, n_ff=300)
    # attention stage: 4 × ((4 + 1) × 512 × 512 + 6 × 100 × 512) = 6,471,680 > logits 2,662,400 > ffn 2,252,800
    assert compute_buffer_bytes(512, 512, **dims) == 6_471_680
    # flash attention: 2 × 512 × 512 + 24 × 100 × 512 = 1,753,088, so the logits stage wins
    assert compute_buffer_bytes(512, 512, **dims, flash_attn=True) == 2_662_400
    # the ubatch is clamped to n_batch and n_ctx; the ffn stage can win with a tiny vocab
    assert compute_buffer_bytes(512, 300, 10, 100, 1, 3000) == 4 * (3 * 3000 * 300 + 2 * 100 * 300)
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


# ------------------------------------------------------------------------------------------ prefill


def test_prefill_ceiling() -> None:
    assert prefill_ceiling_tps(100, 7e9) == pytest.approx(1e14 / 1.4e10)  # 2 FLOPs per weight
    # 4096-token prompt: average 2048 keys × 32 layers × 4 × 4096 = 1,073,741,824 FLOPs per token more
    assert prefill_ceiling_tps(100, 7e9, n_prompt=4096, n_layer=32, n_embd_attn=4096) == pytest.approx(
        1e14 / (1.4e10 + 1_073_741_824)
    )
    assert prefill_flops_per_token(0, n_prompt=0, n_layer=1, n_embd_attn=1, depth=100) == 400
    with pytest.raises(ValueError):
        prefill_ceiling_tps(0, 7e9)


def test_attention_flops_sliding_window() -> None:
    assert attention_flops_per_token(32, 4096, 2048) == 4 * 4096 * 32 * 2048
    assert attention_flops_per_token(32, 4096, 2048, n_swa_layers=16, swa_window=512) == 4 * 4096 * (
        16 * 2048 + 16 * 512
    )


def test_matmul_params() -> None:
    facts = make_facts()
    assert matmul_params(facts) == facts.n_params - 32000 * 4096  # the embedding table is looked up
    assert matmul_params(smollm2_facts()) == 134_515_008  # tied: the LM head multiplies through it
    moe = make_facts(n_layer=1, n_expert=8, n_expert_used=2, n_params=1_000_000_000, n_vocab=1000, n_embd=100)
    tensors = {"blk.0.ffn_up_exps.weight": 800, "blk.0.attn_q.weight": 200, "output.weight": 0}
    split = split_weights(moe, 999, tensors)
    # experts are 80 % of the bytes and 2 of 8 are used: 1 - 0.8 × 0.75 = 40 % of the matmul params
    assert matmul_params(moe, split, tensors) == pytest.approx((1_000_000_000 - 100_000) * 0.4)
    assert matmul_params(moe) == 1_000_000_000 - 100_000  # no map: all experts counted


# ------------------------------------------------------------------------------------------ fit check


def test_fit_check_fits() -> None:
    facts = make_facts()
    fit = fit_check(facts, 8 * GIB, 4096)
    assert fit.status == "fits" and fit.fits
    assert fit.max_ngl == 33 and fit.n_gpu_layers == 33
    assert fit.kv_bytes == 4096 * 131072 and fit.cpu_kv_bytes == 0
    assert fit.overhead_bytes == DEFAULT_GPU_OVERHEAD_BYTES
    assert fit.needed_bytes == fit.weight_bytes + fit.kv_bytes + fit.compute_buffer_bytes + fit.overhead_bytes
    assert fit.compute_buffer_bytes == round(compute_buffer_bytes_for(facts, 4096))
    # max_ctx is the exact boundary (in 256-token steps)
    assert 4096 < fit.max_ctx < facts.n_ctx_train
    assert fit_check(facts, 8 * GIB, fit.max_ctx).fits
    assert not fit_check(facts, 8 * GIB, fit.max_ctx + 256).fits


def test_fit_check_partial_and_does_not_fit() -> None:
    facts = make_facts()
    fit = fit_check(facts, 4 * GIB, 4096)
    assert fit.status == "partial" and not fit.fits
    assert 1 <= fit.max_ngl < 33
    assert fit_check(facts, 4 * GIB, 4096, n_gpu_layers=fit.max_ngl).fits
    assert not fit_check(facts, 4 * GIB, 4096, n_gpu_layers=fit.max_ngl + 1).fits
    asked = fit_check(facts, 8 * GIB, 4096, n_gpu_layers=10)
    assert asked.status == "partial" and asked.fits and asked.cpu_kv_bytes == 23 * 4096 * 4096
    tiny = fit_check(facts, GIB // 2, 4096)  # compute buffer + overhead alone exceed it
    assert tiny.status == "does_not_fit" and tiny.max_ngl == 0 and tiny.max_ctx == 0
    cpu_only = fit_check(facts, 8 * GIB, 4096, n_gpu_layers=0)
    assert cpu_only.needed_bytes == 0 and cpu_only.status == "partial"
    assert fit_check(facts, 4 * GIB, 4096, host_ram_bytes=1).status == "does_not_fit"


def test_fit_check_unified_memory() -> None:
    facts = make_facts()
    fit = fit_check(facts, 16 * GIB, 4096, unified=True)
    assert fit.status == "fits" and fit.budget_bytes == 12 * GIB and fit.overhead_bytes == 0
    assert fit.weight_bytes == facts.weight_bytes
    small = fit_check(facts, 4 * GIB, 4096, unified=True)  # 3 GiB usable < 4 GB of weights
    assert small.status == "does_not_fit" and small.max_ngl == 0


def test_fit_check_quantized_cache_and_sliding_window_fit_longer() -> None:
    facts = make_facts()
    f16 = fit_check(facts, 8 * GIB, 4096)
    q8 = fit_check(facts, 8 * GIB, 4096, "q8_0", flash_attn=True)
    assert q8.max_ctx > f16.max_ctx
    swa = make_facts(swa_layers=tuple(range(0, 32, 2)), swa_window=4096)
    assert fit_check(swa, 8 * GIB, 4096).max_ctx > f16.max_ctx


# ------------------------------------------------------------------------------------------ scenarios


def test_scenario_chat() -> None:
    s = scenario_time(1000, 300, prefill_tps=2000, decode_tps=40)
    assert s.ttft_s == pytest.approx(0.5) and s.decode_s == pytest.approx(7.5)
    assert s.total_s == pytest.approx(8.0)
    assert s.decode_share == pytest.approx(0.9375) and round(s.decode_share * 100) == 94
    assert s.chars_per_s == pytest.approx(160.0) and s.effective_chars_per_s == pytest.approx(150.0)


def test_scenario_long_prompt() -> None:
    s = scenario_time(12_000, 500, prefill_tps=1500, decode_tps=40)
    assert s.total_s == pytest.approx(20.5)
    assert s.ttft_share == pytest.approx(8 / 20.5) and round(s.ttft_share * 100) == 39
    assert s.ttft_share + s.decode_share == pytest.approx(1.0)
    with pytest.raises(ValueError):
        scenario_time(1, 1, 0, 1)


# ------------------------------------------------------------------------------------------ predict


def test_predict_full_offload(profiles: list[HardwareProfile]) -> None:
    facts = make_facts()
    gpu = find_profile("RTX 4090", profiles)
    p = predict(facts, gpu, n_ctx=4096, n_prompt=512, n_gen=128)
    split = split_weights(facts, 999)
    assert p.n_gpu_layers == 33 and p.fit.status == "fits"
    assert p.decode_ceiling_tps == pytest.approx(1008e9 / (split.gpu_read_bytes + 576 * 131072))
    assert p.decode_ceiling_empty_tps == pytest.approx(1008e9 / split.gpu_read_bytes)
    flops = 2 * (facts.n_params - 32000 * 4096) + 4 * 4096 * 32 * 256
    assert p.prefill_ceiling_tps == pytest.approx(330.3e12 / flops)
    assert p.ttft_ms == pytest.approx(512 / p.prefill_ceiling_tps * 1000)
    assert p.kv_bytes == 4096 * 131072 and p.compute_buffer_bytes == p.fit.compute_buffer_bytes
    d = p.to_json_dict()
    for key in ("decode_ceiling_tps", "prefill_ceiling_tps", "kv_bytes", "weight_bytes", "compute_buffer_bytes",
                "fits", "fit_status", "max_ngl", "max_ctx", "ttft_ms", "total_s", "decode_share", "chars_per_s"):
        assert key in d, key
    assert d["fits"] is True and d["fit_status"] == "fits" and d["expected_decode_tps"] is None
    json.dumps(d)


def test_predict_with_efficiency(profiles: list[HardwareProfile]) -> None:
    p = predict(make_facts(), find_profile("RTX 4090", profiles), 4096, efficiency=Efficiency(prefill=0.5, decode=0.8))
    assert p.expected_decode_tps == pytest.approx(0.8 * p.decode_ceiling_tps)
    assert p.expected_prefill_tps == pytest.approx(0.5 * p.prefill_ceiling_tps)
    assert p.expected_scenario is not None and p.expected_scenario.total_s > p.scenario.total_s
    assert p.to_json_dict()["expected_ttft_ms"] == pytest.approx(2 * p.ttft_ms)
    with pytest.raises(ValueError):
        Efficiency(decode=0)


def test_predict_partial_offload(profiles: list[HardwareProfile]) -> None:
    facts = make_facts()
    laptop = find_profile("RTX 4060 Laptop", profiles)
    p = predict(facts, laptop, 4096, n_gpu_layers=20, cpu_bandwidth_gbps=50.0, n_prompt=0, n_gen=1)
    split = split_weights(facts, 20)
    kv_gpu, kv_cpu = 19 * 4096 * 0.5, 13 * 4096 * 0.5  # depth 0.5 (average over one generated token)
    expected = 1 / ((split.gpu_read_bytes + kv_gpu) / 256e9 + (split.cpu_read_bytes + kv_cpu) / 50e9)
    assert p.decode_ceiling_tps == pytest.approx(expected)
    assert p.gpu_weight_bytes == split.gpu_bytes and p.cpu_weight_bytes == split.cpu_bytes
    default_bw = predict(facts, laptop, 4096, n_gpu_layers=20)
    assert default_bw.cpu_bandwidth_gbps == DEFAULT_CPU_BANDWIDTH_GBPS
    assert any("CPU bandwidth not given" in n for n in default_bw.notes)
    assert default_bw.decode_ceiling_tps < predict(facts, laptop, 4096).decode_ceiling_tps


def test_predict_cpu_and_unified(profiles: list[HardwareProfile]) -> None:
    facts = make_facts()
    cpu = cpu_profile("test cpu", bandwidth_gbps=80.0, gflops=1000.0, ram_bytes=32 * GIB)
    p = predict(facts, cpu, 4096, n_prompt=0, n_gen=2)
    split = split_weights(facts, 0)
    assert p.n_gpu_layers == 0 and p.gpu_weight_bytes == 0 and p.cpu_weight_bytes == facts.weight_bytes
    assert p.decode_ceiling_tps == pytest.approx(80e9 / (split.cpu_read_bytes + 1 * 131072))
    assert p.fit.status == "fits" and p.fit.budget_bytes == 32 * GIB
    mac = predict(facts, find_profile("M2 Max", profiles), 8192)
    assert mac.fit.status == "fits" and mac.cpu_bandwidth_gbps == 400.0


def test_predict_sliding_window_model(profiles: list[HardwareProfile]) -> None:
    facts = make_facts(swa_layers=tuple(range(0, 32, 2)), swa_window=1024)
    dense = predict(make_facts(), find_profile("RTX 3090", profiles), 32768, n_prompt=16000)
    swa = predict(facts, find_profile("RTX 3090", profiles), 32768, n_prompt=16000)
    assert swa.kv_bytes < dense.kv_bytes
    assert swa.decode_ceiling_tps > dense.decode_ceiling_tps
    assert swa.prefill_ceiling_tps > dense.prefill_ceiling_tps
