"""Predictions for every placement (-ngl, -ncmoe, -nkvo, -ot) on the synthetic MoE model, by hand and against
llama.cpp's own per-device figures on this machine's CPU build.

The model (tests/gguf_synth.py write_synthetic_moe_gguf, 4 layers, F16): per layer 26,112 dense bytes (attention
24,576, two norms 512, router 1,024) and three expert tensors of 131,072 (8 experts, 2 used); token_embd 32,768
(host), output 32,768 + its norm 256; f16 KV of 2 heads × 16 dims: 128 bytes per token per layer.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.model.facts import ModelFacts
from app.model.gguf_facts import read_model_facts
from app.predict.ceilings.decode import (
    DEFAULT_PCIE_GBPS,
    GB,
    PCIE_COPY_LATENCY_S,
    decode_ceiling_offload_tps,
    device_crossings,
)
from app.predict.ceilings.offload import (
    EXPERT_TENSORS_REGEX,
    Placement,
    active_weight_bytes,
    expert_block_pattern,
    split_weights,
)
from app.predict.device_split import SplitSettings, device_split, host_only_split
from app.predict.prediction import predict
from app.predict.profiles import HardwareProfile
from app.predict.settings import PredictSettings
from app.results.row_types import ResultRow
from engines import llama_cpp_placement
from tests.cli_helpers import gguf_bench
from tests.gguf_synth import write_synthetic_gguf, write_synthetic_moe_gguf

DENSE_LAYER = 26_112
EXPERT = 131_072
ACTIVE_EXPERTS = 3 * EXPERT * 2 // 8  # 98,304 read per token per layer
OUTPUT = 32_768 + 256
EMBD = 32_768
#: llama.cpp logs buffers in MiB with two decimals
ROUNDING_BYTES = 0.006 * 2**20


@pytest.fixture(scope="module")
def moe_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_synthetic_moe_gguf(tmp_path_factory.mktemp("moe") / "synth-moe.gguf", n_layer=4)


@pytest.fixture(scope="module")
def moe(moe_path: Path) -> ModelFacts:
    return read_model_facts(moe_path)


def test_the_expert_pattern_is_llama_cpps() -> None:
    assert EXPERT_TENSORS_REGEX == llama_cpp_placement.EXPERT_TENSORS_REGEX
    assert expert_block_pattern(3) == llama_cpp_placement.expert_block_pattern(3)


def test_moe_decode_reads_the_active_experts_only(moe: ModelFacts) -> None:
    split = split_weights(moe, 99, moe.tensor_bytes)
    per_token = 4 * (DENSE_LAYER + ACTIVE_EXPERTS) + OUTPUT  # token_embd: one row, counted 0
    assert (split.gpu_read_bytes, split.cpu_read_bytes) == (per_token, 0)
    assert split.gpu_bytes == 4 * (DENSE_LAYER + 3 * EXPERT) + OUTPUT
    ceiling = decode_ceiling_offload_tps(moe, split, 0, "f16", None, 100.0, None, host_only=True)
    assert ceiling == pytest.approx(100e9 / per_token)
    assert active_weight_bytes(moe, moe.tensor_bytes) == moe.weight_bytes - 4 * 3 * EXPERT * 6 // 8


def test_moe_without_a_tensor_table_counts_active_experts_too(moe: ModelFacts) -> None:
    estimated = split_weights(moe, 99)
    assert not estimated.exact
    exact = split_weights(moe, 99, moe.tensor_bytes)
    assert estimated.gpu_read_bytes == pytest.approx(exact.gpu_read_bytes, rel=0.05)
    assert estimated.gpu_read_bytes < 0.4 * estimated.gpu_bytes


def test_ncmoe_moves_the_first_layers_experts_and_their_reads_to_the_host(moe: ModelFacts) -> None:
    for n, moved in ((0, 0), (2, 786_432), (4, 1_572_864)):
        split = split_weights(moe, 99, moe.tensor_bytes, Placement(n_cpu_moe=n))
        assert split.cpu_bytes == EMBD + moved
        assert split.cpu_read_bytes == n * ACTIVE_EXPERTS
        assert split.n_tensors_overridden == 3 * n
        assert device_crossings(split) == 1 + 2 * n  # into and out of each host-held layer's experts


def test_ot_first_match_wins_and_a_gpu_buffer_keeps_the_tensor_there(moe: ModelFacts) -> None:
    placement = Placement.from_text(0, 4, r"blk\.0\.ffn_up_exps=Vulkan0;ffn_.*_exps=CPU")
    split = split_weights(moe, 99, moe.tensor_bytes, placement)
    assert split.cpu_bytes == EMBD + 11 * EXPERT  # every expert tensor but layer 0's up
    assert Placement.from_text(-1, 4).n_cpu_moe == 4 and Placement.from_text(-2, 4).n_cpu_moe == 2


def test_decode_time_is_the_sum_over_devices_plus_the_extra_crossings(moe: ModelFacts) -> None:
    split = split_weights(moe, 99, moe.tensor_bytes, Placement(n_cpu_moe=2))
    depth = 1000  # 128 bytes per token per layer
    kv = 4 * 128 * depth
    gpu_bw, cpu_bw = 272.0, 50.0
    gpu_bytes = 4 * DENSE_LAYER + 2 * ACTIVE_EXPERTS + OUTPUT + kv
    host_bytes = 2 * ACTIVE_EXPERTS
    transfer = 4 * (4 * 64 / (DEFAULT_PCIE_GBPS * GB) + PCIE_COPY_LATENCY_S)
    seconds = gpu_bytes / (gpu_bw * GB) + host_bytes / (cpu_bw * GB) + transfer
    got = decode_ceiling_offload_tps(moe, split, depth, "f16", None, gpu_bw, cpu_bw)
    assert got == pytest.approx(1 / seconds)
    # -nkvo: the KV bytes stream from host memory, attention crosses twice per layer
    no_kvo = decode_ceiling_offload_tps(moe, split, depth, "f16", None, gpu_bw, cpu_bw, offload_kqv=False)
    transfer_nkvo = 12 * (4 * 64 / (DEFAULT_PCIE_GBPS * GB) + PCIE_COPY_LATENCY_S)
    assert no_kvo == pytest.approx(1 / ((gpu_bytes - kv) / (gpu_bw * GB) + (host_bytes + kv) / (cpu_bw * GB)
                                        + transfer_nkvo))


def test_ot_of_a_dense_layers_ffn_counts_its_crossings(tmp_path: Path) -> None:
    """A dense model's feed-forward kept in host memory by -ot while its attention is offloaded: the hidden state
    goes to the host and back for each such layer (as for a host-held layer's experts); a MoE's shared experts and
    routed ones on the host together cross once."""
    dense = read_model_facts(write_synthetic_gguf(tmp_path / "dense.gguf", n_layer=4))
    for pattern, crossings in ((None, 1), (r"blk\.0\.ffn_(gate|up|down)\.weight=CPU", 3),
                               (r"blk\.[0-2]\.ffn_(gate|up|down)\.weight=CPU", 7), (r"ffn_down=CPU", 9),
                               (r"ffn_gate\.=CPU", 9)):  # one matrix on the host: there and back, in any order
        placement = Placement.from_text(0, 4, pattern) if pattern else Placement()
        split = split_weights(dense, 99, dense.tensor_bytes, placement)
        assert device_crossings(split) == crossings, pattern
        assert split.layer_experts_on_gpu == (None,) * 4
    assert split_weights(dense, 99).layer_ffn_on_gpu == (None,) * 4  # no tensor table: not known, not counted
    assert device_crossings(split_weights(dense, 3, dense.tensor_bytes)) == 1  # a layer split: FFN with attention


def test_partial_ngl_splits_layers_and_adds_no_crossing(moe: ModelFacts) -> None:
    split = split_weights(moe, 3, moe.tensor_bytes)  # output + layers 2, 3
    layer = DENSE_LAYER + 3 * EXPERT
    assert (split.gpu_bytes, split.cpu_bytes) == (2 * layer + OUTPUT, EMBD + 2 * layer)
    assert device_crossings(split) == 1
    s = device_split(moe, SplitSettings(256, 3, flash_attn=True), moe.tensor_bytes)
    assert (s.gpu_kv_bytes, s.cpu_kv_bytes) == (2 * 128 * 256, 2 * 128 * 256)


@pytest.mark.parametrize(("ncmoe", "nkvo"), [(0, False), (2, False), (-1, False), (0, True), (-2, True)])
def test_memory_per_device_by_hand(moe: ModelFacts, ncmoe: int, nkvo: bool) -> None:
    n = {-1: 4, -2: 2}.get(ncmoe, ncmoe)
    s = device_split(moe, SplitSettings(256, 99, flash_attn=True, n_cpu_moe=ncmoe, no_kv_offload=nkvo),
                     moe.tensor_bytes)
    assert s.gpu_weights_bytes == 4 * (DENSE_LAYER + 3 * EXPERT) + OUTPUT - 3 * n * EXPERT
    assert s.cpu_weights_bytes == EMBD + 3 * n * EXPERT
    # mmap: the host buffer spans the file from token_embd to the last host expert tensor
    assert s.cpu_mapped_weights_bytes == (EMBD + n * (DENSE_LAYER + 3 * EXPERT) if n else EMBD)
    kv = 4 * 128 * 256
    assert (s.gpu_kv_bytes, s.cpu_kv_bytes) == ((0, kv) if nkvo else (kv, 0))
    # the MoE ffn stage (memory/buffers.py) without the mask, plus one host expert tensor copied for op offload
    assert s.gpu_compute_bytes == 4 * 256 * (3 * 128 * 2 + 4 * 64 + 2 * 2) + (EXPERT if n else 0)


def test_predict_takes_the_placement_from_a_row(moe: ModelFacts) -> None:
    row = ResultRow(n_prompt=1, n_gen=1, n_ctx=256, n_cpu_moe=2, no_kv_offload=1, tensor_buft_overrides="none",
                    flash_attn=1)
    settings = PredictSettings.from_row(row)
    assert (settings.n_cpu_moe, settings.no_kv_offload, settings.tensor_buft_overrides) == (2, True, "none")
    gpu = HardwareProfile(name="test GPU", vendor="x", kind="laptop", vram_gib=8, memory_bus_bits=128,
                          memory_data_rate_gbps=17.0, peak_bandwidth_gbps=272.0, fp16_tensor_tflops=50.0, source="t")
    pred = predict(moe, gpu, settings, cpu_bandwidth_gbps=50.0, tensor_bytes=moe.tensor_bytes)
    mem = pred.memory_per_device()
    assert mem["gpu"]["kv_bytes"] == 0 and mem["host"]["kv_bytes"] == 4 * 128 * 256
    assert mem["host"]["weights_bytes"] == EMBD + 2 * (DENSE_LAYER + 3 * EXPERT)
    assert pred.fit.kv_bytes == 0 and pred.fit.cpu_kv_bytes == 4 * 128 * 256
    assert pred.decode_host_read_bytes > 2 * ACTIVE_EXPERTS  # the experts and the KV at depth
    assert not any("pessimistic" in n for n in pred.notes)


def _cpu_rows(model: Path) -> list[dict[str, Any]]:
    proc = gguf_bench("run", "-m", str(model), "-p", "1", "-n", "1", "-r", "1", "-t", "1", "-ngl", "99",
                      "--no-store", "-o", "json", "-ncmoe", "0,half,all", "-nkvo", "0,1")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.heavy  # the CLI in a subprocess
def test_cpu_build_everything_in_host_memory_as_llama_cpp_reports(moe_path: Path, moe: ModelFacts) -> None:
    rows = _cpu_rows(moe_path)
    assert len(rows) == 6 and all(r["status"] == "ok" for r in rows)
    if any(name != "CPU" for name in json.loads(rows[0]["device_buffers"])):
        pytest.skip("this llama.cpp build has a GPU device: see tests/gpu_vulkan")
    for row in rows:
        measured = json.loads(row["device_buffers"])["CPU"]
        settings = PredictSettings.from_row(ResultRow.from_mapping(row))  # a row of the CLI's JSON output
        predicted = host_only_split(moe, SplitSettings(settings.n_ctx, 0, flash_attn=settings.flash_attn),
                                    moe.tensor_bytes)
        for kind, value in (("weights", predicted.cpu_mapped_weights_bytes), ("kv", predicted.cpu_kv_bytes),
                            ("compute", predicted.cpu_compute_bytes)):
            got = float(measured[f"{kind}_bytes"])
            assert abs(value - got) <= max(0.05 * got, ROUNDING_BYTES), (row["n_cpu_moe"], kind, value, got)
