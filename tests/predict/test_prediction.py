"""predict(): ceilings, memory, fit and scenario put together; PredictSettings from a row, a test or CLI arguments."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace

import pytest

from app.predict.answer import answer
from app.predict.ceilings.decode import DEFAULT_CPU_BANDWIDTH_GBPS
from app.predict.ceilings.offload import split_weights
from app.predict.machine_fit.store_efficiency import Efficiency
from app.predict.prediction import predict
from app.predict.profiles import GIB, HardwareProfile, cpu_profile, find_profile
from app.predict.settings import PredictSettings, flash_attn_enabled
from app.results.row_types import ResultRow
from tests.predict.samples import make_facts, smollm2_facts

# ------------------------------------------------------------------------------------------ predict


def test_predict_full_offload(profiles: list[HardwareProfile]) -> None:
    facts = make_facts()
    gpu = find_profile("RTX 4090", profiles)
    p = predict(facts, gpu, PredictSettings(n_ctx=4096, n_prompt=512, n_gen=128))
    split = split_weights(facts, 999)
    assert p.n_gpu_layers == 33 and p.fit.status == "fits"
    assert p.decode_ceiling_tps == pytest.approx(1008e9 / (split.gpu_read_bytes + 576 * 131072))
    assert p.decode_ceiling_empty_tps == pytest.approx(1008e9 / (split.gpu_read_bytes + 64 * 131072))  # tg128
    flops = 2 * (facts.n_params - 32000 * 4096) + 4 * 4096 * 32 * 256
    assert p.prefill_ceiling_tps == pytest.approx(330.3e12 / flops)
    assert p.ttft_ms == pytest.approx(512 / p.prefill_ceiling_tps * 1000)
    assert p.kv_bytes == 4096 * 131072 and p.compute_buffer_bytes == p.fit.compute_buffer_bytes
    d = p.to_json_dict()
    for key in ("decode_ceiling_tps", "prefill_ceiling_tps", "kv_bytes", "weight_bytes", "compute_buffer_bytes",
                "fits", "fit_status", "max_ngl", "max_ctx", "ttft_ms", "total_s", "decode_share", "chars_per_s"):
        assert key in d, key
    assert d["fits"] is True and d["fit_status"] == "fits" and "expected_decode_tps" not in d  # physics only
    json.dumps(d)


def test_answer_with_stored_rows_efficiency(profiles: list[HardwareProfile]) -> None:
    from tests.predict.answer_helpers import StandInEfficiency, machine_of

    gpu = find_profile("RTX 4090", profiles)
    got = answer(make_facts(), gpu, PredictSettings(4096), machine_of(gpu, efficiency=StandInEfficiency(
        Efficiency(prefill=0.5, decode=0.8))))
    p = got.prediction
    assert got.decode.kind == "efficiency" and got.decode.value == pytest.approx(0.8 * p.decode_ceiling_tps)
    assert got.prefill is not None and got.prefill.value == pytest.approx(0.5 * p.prefill_ceiling_tps)
    assert got.scenario().total_s > p.scenario.total_s
    assert got.ttft_ms is not None and got.ttft_ms.value == pytest.approx(2 * p.ttft_ms)
    assert got.to_json_dict()["decode"]["kind"] == "efficiency"
    with pytest.raises(ValueError):
        Efficiency(decode=0)


def test_predict_partial_offload(profiles: list[HardwareProfile]) -> None:
    facts = make_facts()
    laptop = find_profile("RTX 4060 Laptop", profiles)
    p = predict(facts, laptop, PredictSettings(4096, n_gpu_layers=20, n_prompt=0, n_gen=1), cpu_bandwidth_gbps=50.0)
    split = split_weights(facts, 20)
    kv_gpu, kv_cpu = 19 * 4096 * 0.5, 13 * 4096 * 0.5  # depth 0.5 (average over one generated token)
    expected = 1 / ((split.gpu_read_bytes + kv_gpu) / 256e9 + (split.cpu_read_bytes + kv_cpu) / 50e9)
    assert p.decode_ceiling_tps == pytest.approx(expected)
    assert p.gpu_weight_bytes == split.gpu_bytes and p.cpu_weight_bytes == split.cpu_bytes
    default_bw = predict(facts, laptop, PredictSettings(4096, n_gpu_layers=20))
    assert default_bw.cpu_bandwidth_gbps == DEFAULT_CPU_BANDWIDTH_GBPS
    assert any("CPU bandwidth not given" in n for n in default_bw.notes)
    assert default_bw.decode_ceiling_tps < predict(facts, laptop, PredictSettings(4096)).decode_ceiling_tps


def test_predict_cpu_and_unified(profiles: list[HardwareProfile]) -> None:
    facts = make_facts()
    cpu = cpu_profile("test cpu", bandwidth_gbps=80.0, gflops=1000.0, ram_bytes=32 * GIB)
    p = predict(facts, cpu, PredictSettings(4096, n_prompt=0, n_gen=2))
    split = split_weights(facts, 0)
    assert p.n_gpu_layers == 0 and p.gpu_weight_bytes == 0 and p.cpu_weight_bytes == facts.weight_bytes
    assert p.decode_ceiling_tps == pytest.approx(80e9 / (split.cpu_read_bytes + 1 * 131072))
    assert p.fit.status == "fits" and p.fit.budget_bytes == 32 * GIB
    mac = predict(facts, find_profile("M2 Max", profiles), PredictSettings(8192))
    assert mac.fit.status == "fits" and mac.cpu_bandwidth_gbps == 400.0


def test_predict_sliding_window_model(profiles: list[HardwareProfile]) -> None:
    facts = make_facts(swa_layers=tuple(range(0, 32, 2)), swa_window=1024)
    long_prompt = PredictSettings(32768, n_prompt=16000)
    dense = predict(make_facts(), find_profile("RTX 3090", profiles), long_prompt)
    swa = predict(facts, find_profile("RTX 3090", profiles), long_prompt)
    assert swa.kv_bytes < dense.kv_bytes
    assert swa.decode_ceiling_tps > dense.decode_ceiling_tps
    assert swa.prefill_ceiling_tps > dense.prefill_ceiling_tps


# ------------------------------------------------------------------------------------------ settings

SAMPLE_ROW = {"model_path": "/models/test.gguf", "n_prompt": 256, "n_gen": 64, "n_depth": 1000, "type_k": "q8_0",
              "type_v": None, "n_ubatch": 256, "flash_attn": 1, "n_gpu_layers": 20, "decode_tps": 50.0}


def test_settings_from_row_predict_like_the_explicit_settings(profiles: list[HardwareProfile]) -> None:
    explicit = PredictSettings(n_ctx=1000 + 256 + 64 + 1, n_gpu_layers=20, type_k="q8_0", type_v="q8_0", n_prompt=256,
                               n_gen=64, depth=1000, n_ubatch=256, flash_attn=True, repack=1)
    from_row = PredictSettings.from_row(ResultRow.from_mapping(SAMPLE_ROW))  # a row without a repack column ran with
    assert from_row == explicit == PredictSettings.from_test(SAMPLE_ROW)  # llama.cpp's default; a test table alike
    facts, laptop = make_facts(), find_profile("RTX 4060 Laptop", profiles)
    p = predict(facts, laptop, from_row, cpu_bandwidth_gbps=50.0)
    assert p == predict(facts, laptop, explicit, cpu_bandwidth_gbps=50.0)
    assert (p.n_ctx, p.n_gpu_layers, p.type_v, p.n_prompt, p.n_gen) == (1321, 20, "q8_0", 256, 64)
    assert p != predict(facts, laptop, PredictSettings(1321), cpu_bandwidth_gbps=50.0)  # the row's settings count
    assert PredictSettings.from_test({**SAMPLE_ROW, "n_ctx": 4096}).n_ctx == 4096
    assert PredictSettings.from_test(SAMPLE_ROW, n_ctx=2048, n_gpu_layers=0) == replace(explicit, n_ctx=2048,
                                                                                      n_gpu_layers=0)


def test_settings_from_an_empty_test_take_the_defaults() -> None:
    defaults = PredictSettings(n_ctx=512 + 128 + 1, repack=1)
    assert PredictSettings.from_test({}) == PredictSettings.from_row(ResultRow()) == defaults
    assert PredictSettings(4096).repack == -1 and PredictSettings(4096).resolved(0).repack == 0  # auto: no I/O
    assert PredictSettings(4096, type_k="q4_0").type_v == "q4_0"
    assert PredictSettings.from_test({"n_prompt": 0, "n_gen": 16}).n_prompt == 1  # a prompt of at least one token


@pytest.mark.parametrize(
    ("fields", "on"),
    [
        ({"flash_attn": -1}, True),  # auto: llama.cpp turns it on where it can
        ({"flash_attn": 0}, False),
        ({"flash_attn": 1}, True),
        ({"flash_attn": True}, True),
        ({"flash_attn": "0"}, False),
        ({}, False),
        ({"flash_attn": -1, "flash_attn_effective": 0}, False),  # what llama.cpp used wins over the request
        ({"flash_attn": 0, "flash_attn_effective": 1}, True),
        ({"flash_attn": -1, "flash_attn_effective": None}, True),  # unknown: the request decides
        ({"flash_attn": 1, "flash_attn_effective": ""}, True),
    ],
)
def test_flash_attn_from_row(fields: dict[str, object], on: bool) -> None:
    assert PredictSettings.from_test({**SAMPLE_ROW, "flash_attn": 0, **fields}).flash_attn is on


def test_flash_attn_sizes_the_compute_buffer(profiles: list[HardwareProfile]) -> None:
    gpu = find_profile("RTX 4090", profiles)
    on = predict(smollm2_facts(), gpu, PredictSettings.from_test({**SAMPLE_ROW, "flash_attn": -1, "n_ctx": 8192}))
    off = predict(smollm2_facts(), gpu, PredictSettings.from_test({**SAMPLE_ROW, "flash_attn": 0, "n_ctx": 8192}))
    assert on.compute_buffer_bytes < off.compute_buffer_bytes


def test_flash_attn_enabled_values() -> None:
    assert [flash_attn_enabled(v) for v in (-1, 0, 1, None, "auto", "off", False)] == [
        True, False, True, False, True, False, False]


def test_settings_from_cli_arguments() -> None:
    args = argparse.Namespace(ctx=8192, n_gpu_layers=10, type_k="q8_0", type_v="f16", flash_attn=-1, n_prompt=100,
                              n_gen=20, n_depth=300)
    assert PredictSettings.from_args(args) == PredictSettings(8192, n_gpu_layers=10, type_k="q8_0", type_v="f16",
                                                              n_prompt=100, n_gen=20, depth=300, flash_attn=True)
