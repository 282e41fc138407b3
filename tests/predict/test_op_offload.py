"""A split placement's prefill (issue #53 item 3): llama.cpp's op offload moves the host-held weights to the GPU
once per micro-batch, over the profile's PCIe link (app/predict/ceilings/op_offload.py), and the expected prefill
composes the device's full-offload figure, those copies and the CPU's own share (split_prefill_expected)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from app.calibrate.synth_models import SynthShape, write_synth_model
from app.model.facts import ModelFacts
from app.model.gguf_facts import read_model_facts
from app.predict.answer import answer
from app.predict.ceilings.offload import Placement, split_weights
from app.predict.ceilings.op_offload import (
    OP_OFFLOAD_MIN_BATCH,
    OffloadTraffic,
    micro_batches,
    offload_traffic,
    pcie_link,
    transfer_seconds,
    used_expert_share,
)
from app.predict.machine_fit.fitted_model import Expected
from app.predict.machine_fit.split_expected import PrefillSplit, split_prefill_expected
from app.predict.prediction import predict
from app.predict.profiles import find_profile, load_profiles
from app.predict.settings import PredictSettings
from tests.predict.answer_helpers import StandInFit, fixed, machine_of

GB = 1e9


@pytest.fixture(scope="module")
def moe(tmp_path_factory: pytest.TempPathFactory) -> ModelFacts:
    """A small mixture of experts: 8 layers, 8 experts of which 2 are used."""
    path = tmp_path_factory.mktemp("moe") / "moe.gguf"
    return read_model_facts(write_synth_model(path, SynthShape(256, 8, "Q8_0", n_expert=8, n_expert_used=2)))


@pytest.fixture(scope="module")
def laptop():  # noqa: ANN201
    return find_profile("RTX 4060 Laptop", load_profiles())


def test_a_link_is_its_lanes_times_pci_sigs_rate_and_a_profile_without_one_is_assumed_and_says_so(laptop) -> None:
    link = pcie_link(laptop)
    assert (link.gen, link.lanes, link.assumed) == (4, 8, False)
    assert link.raw_gbps == pytest.approx(16 * 128 / 130 / 8 * 8)  # 16 GT/s, 128b/130b, 8 lanes: 15.75 GB/s
    fig, least, most = link.copy_gbps()
    assert least < fig == most < link.raw_gbps  # pinned, llama.cpp's host buffer; the slow edge pageable
    assert "gpu.json" in link.describe() and "PCIe 4.0 x8" in link.describe()
    bare = pcie_link(replace(laptop, pcie_gen=None, pcie_lanes=None, pcie_source=""))
    assert bare.assumed and (bare.gen, bare.lanes) == (4, 8) and "assumed" in bare.describe()
    desktop = find_profile("RTX 4090", load_profiles())
    assert (pcie_link(desktop).gen, pcie_link(desktop).lanes) == (4, 16)


def test_a_micro_batch_uses_the_experts_its_tokens_pick_and_a_prompt_runs_as_full_micro_batches_then_the_rest() -> None:
    assert used_expert_share(8, 2, 1) == pytest.approx(0.25)
    assert used_expert_share(8, 2, 2) == pytest.approx(1 - 0.75**2)  # 0.4375
    assert used_expert_share(128, 4, 512) > 0.999999  # gpt-oss-120b at llama.cpp's default -ub: every expert
    assert used_expert_share(0, 0, 512) == 0.0
    assert micro_batches(1100, 512) == [512, 512, 76] and micro_batches(512, 512) == [512]
    assert micro_batches(0, 512) == []
    traffic = OffloadTraffic(layer_bytes=2 * GB, expert_bytes=8 * GB, n_expert=8, n_expert_used=2,
                             kv_bytes_per_token=1000.0)
    # 1100 tokens at -ub 512 over 10 GB/s: two micro-batches move 2 GB + all 8 GB of experts + their KV; the third
    # (76 tokens, over the minimum of 32) also every expert (1 - 0.75^76 rounds to 1)
    seconds = transfer_seconds(traffic, 1100, 512, 0, 10.0)
    kv = 1000.0 * (512 + 1024 + 1100)
    assert seconds == pytest.approx((3 * 2 * GB + 8 * GB * (2 + used_expert_share(8, 2, 76)) + kv) / 10e9)
    assert transfer_seconds(traffic, 20, 512, 0, 10.0) == 0.0  # under the minimum: the CPU runs it, nothing moves
    assert OP_OFFLOAD_MIN_BATCH == 32
    with pytest.raises(ValueError):
        transfer_seconds(traffic, 512, 512, 0, 0.0)


def test_the_traffic_is_the_host_held_layer_weights_and_the_host_layers_kv(moe: ModelFacts) -> None:
    n = moe.n_layer
    split = split_weights(moe, n + 1, moe.tensor_bytes, Placement(n_cpu_moe=3))
    expert_bytes = sum(b for k, b in moe.tensor_bytes.items() if "_exps" in k and int(k.split(".")[1]) < 3)
    assert split.cpu_expert_bytes == expert_bytes > 0 and split.cpu_layer_bytes == 0
    traffic = offload_traffic(moe, split, "f16", "f16")
    assert traffic.expert_bytes == expert_bytes and traffic.kv_bytes_per_token == 0.0  # every layer's KV on the GPU
    partial = split_weights(moe, 5, moe.tensor_bytes, Placement())  # the first 4 repeating layers on the host
    host_layers = sum(b for k, b in moe.tensor_bytes.items() if k.startswith("blk.") and int(k.split(".")[1]) < 4)
    assert partial.cpu_layer_bytes + partial.cpu_expert_bytes == host_layers
    kv = offload_traffic(moe, partial, "f16", "f16")
    assert kv.kv_bytes_per_token == pytest.approx(sum(moe.kv_bytes_per_token_per_layer("f16")[:4]))
    assert offload_traffic(moe, partial, "f16", "f16", kv_on_gpu=False).kv_bytes_per_token == 0.0  # -nkvo


def test_the_prefill_ceiling_counts_the_copy_at_the_links_full_rate(moe: ModelFacts, laptop) -> None:
    s = PredictSettings(n_ctx=2048, n_prompt=1024, n_gen=16, n_cpu_moe=3)
    split = predict(moe, laptop, s, tensor_bytes=moe.tensor_bytes)
    whole = predict(moe, laptop, replace(s, n_cpu_moe=0), tensor_bytes=moe.tensor_bytes)
    traffic = offload_traffic(moe, split_weights(moe, moe.n_layer + 1, moe.tensor_bytes, Placement(n_cpu_moe=3)),
                              "f16", "f16")
    least = transfer_seconds(traffic, 1024, 512, 0, pcie_link(laptop).raw_gbps, least=True)  # k of n experts: a bound
    assert least < transfer_seconds(traffic, 1024, 512, 0, pcie_link(laptop).raw_gbps)
    assert split.prefill_ceiling_tps == pytest.approx(1024 / (1024 / whole.prefill_ceiling_tps + least))
    assert split.prefill_offload_bytes == pytest.approx(traffic.bytes_for(512, 512))
    assert any("moving" in n and "PCIe 4.0 x8" in n for n in split.notes)
    nopo = predict(moe, laptop, replace(s, no_op_offload=True), tensor_bytes=moe.tensor_bytes)
    assert nopo.prefill_ceiling_tps == pytest.approx(whole.prefill_ceiling_tps) and nopo.prefill_offload_bytes == 0
    assert nopo.to_json_dict()["no_op_offload"] == 1


def test_the_composition_adds_the_device_work_the_copies_and_the_cpus_share() -> None:
    device = Expected(1000.0, 800.0, 1200.0, "device fit")
    host = Expected(100.0, 80.0, 120.0, "cpu fit")
    parts = PrefillSplit(512, device_tokens=500.0, host_tokens=12.0, transfer_s=(0.5, 0.25, 1.0), words="op offload")
    got = split_prefill_expected(device, host, parts)
    assert got is not None
    assert got.value == pytest.approx(512 / (500 / 1000 + 12 / 100 + 0.5))
    assert got.low == pytest.approx(512 / (500 / 800 + 12 / 80 + 1.0))  # the slow edge takes the most transfer
    assert got.high == pytest.approx(512 / (500 / 1200 + 12 / 120 + 0.25))
    assert got.source.startswith("op offload — device part (98% of the prompt's work): device fit")
    assert split_prefill_expected(device, None, parts) is None  # the CPU works and has no figure
    only_device = split_prefill_expected(device, None, replace(parts, device_tokens=512.0, host_tokens=0.0))
    assert only_device is not None and only_device.value == pytest.approx(512 / (0.512 + 0.5))
    with pytest.raises(ValueError):
        PrefillSplit(0, 1.0, 0.0)


def test_a_splits_expected_prefill_is_kind_split_below_the_full_offload_and_its_ttft_follows(moe: ModelFacts,
                                                                                               laptop) -> None:
    """TEST DOUBLE of a saved fit (answer_helpers): the device's full-offload prefill is known, so the split's is
    that figure plus the copies; -nopo 1 puts the host's share on the CPU's fit; without one there is no figure."""
    fit = StandInFit({"CUDA,CPU": fixed(100.0, prefill=5000.0), "CPU": fixed(20.0, prefill=300.0)})
    here = machine_of(laptop, fit=fit)
    s = PredictSettings(n_ctx=4096, n_prompt=2048, n_gen=16, n_cpu_moe=4)
    got = answer(moe, laptop, s, here)
    assert got.prefill is not None and got.prefill.kind == "split" and got.prefill.is_expected
    traffic = offload_traffic(moe, split_weights(moe, moe.n_layer + 1, moe.tensor_bytes, Placement(n_cpu_moe=4)),
                              "f16", "f16")
    fig_gbps = pcie_link(laptop).copy_gbps()[0]
    want = 2048 / (2048 / 5000.0 + transfer_seconds(traffic, 2048, 512, 0, fig_gbps))
    assert got.prefill.value == pytest.approx(want)
    assert got.prefill.low < got.prefill.value < got.prefill.high <= got.prediction.prefill_ceiling_tps * 1.0001
    assert "op offload" in got.prefill.source.detail and "PCIe 4.0 x8" in got.prefill.source.detail
    assert got.ttft_ms is not None and got.ttft_ms.kind == "split"
    assert got.ttft_ms.value == pytest.approx(2048 / got.prefill.value * 1000)
    assert got.ttft_ms.low == pytest.approx(2048 / got.prefill.high * 1000)
    nopo = answer(moe, laptop, replace(s, no_op_offload=True), here)
    assert nopo.prefill is not None and nopo.prefill.kind == "split" and "-nopo 1" in nopo.prefill.source.detail
    assert 300.0 < nopo.prefill.value < 5000.0
    device_only = machine_of(laptop, fit=StandInFit({"CUDA,CPU": fixed(100.0, prefill=5000.0)}))
    bare = answer(moe, laptop, replace(s, no_op_offload=True), device_only)
    assert bare.prefill is not None and bare.prefill.kind == "ceiling"
    assert any("no expected prefill without an expected figure for the host CPU alone" in n for n in bare.notes)
