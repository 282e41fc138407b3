"""Predicted columns beside measured rows, calibration from stored rows, and the predict/hw commands."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.model.gguf_facts import read_model_facts
from app.predict.hardware_context import HardwareContext
from app.predict.machine_fit.store_efficiency import StoreCalibration, efficiency_from_rows
from app.predict.profiles import cpu_profile, find_profile, load_profiles
from app.predict.row_predictions import RowPredictor, predicted_columns
from app.results.row_types import ResultRow
from app.results.store import ResultStore
from tests.cli_helpers import gguf_bench

CPU = cpu_profile("CPU: test", bandwidth_gbps=20.0, gflops=100.0, ram_bytes=16 * 2**30)


def _row(path: Path, **kw) -> ResultRow:
    row = {"model_path": str(path), "model_filename": path.name, "n_prompt": 64, "n_gen": 32, "n_depth": 0,
           "type_k": "f16", "type_v": "f16", "n_ctx": 256, "n_ubatch": 512, "flash_attn": 0,
           "n_gpu_layers_effective": 0, "decode_tps": 100.0, "prefill_tps": 300.0, "status": "ok",
           "backends": "CPU"}
    row.update(kw)
    return ResultRow.from_mapping(row)


@pytest.mark.heavy  # the real model
def test_decode_ceiling_and_achieved_fraction_by_hand(smollm2_path: Path) -> None:
    facts = read_model_facts(smollm2_path)
    cols = predicted_columns(_row(smollm2_path), facts, HardwareContext(cpu=CPU))
    kv_read = 23040 * (0 + 64 + 32 / 2)  # f16 KV per token × the generation's average depth
    ceiling = 20e9 / (facts.weight_bytes + kv_read)
    assert cols["pred_decode_ceiling_tps"] == pytest.approx(ceiling, rel=0.02)
    assert cols["decode_achieved_frac"] == pytest.approx(100.0 / cols["pred_decode_ceiling_tps"])
    assert cols["effective_bandwidth_gbps"] == pytest.approx(100.0 * (facts.weight_bytes + kv_read) / 1e9)
    assert cols["hw_profile"] == "CPU: test"
    assert cols["pred_mem_bytes"] == facts.weight_bytes + cols["pred_kv_bytes"] + cols["pred_compute_buffer_bytes"]


@pytest.mark.heavy  # the real model
def test_deeper_context_lowers_the_decode_ceiling(smollm2_path: Path) -> None:
    facts = read_model_facts(smollm2_path)
    shallow = predicted_columns(_row(smollm2_path), facts, HardwareContext(cpu=CPU))
    deep = predicted_columns(_row(smollm2_path, n_depth=4096, n_ctx=4608), facts, HardwareContext(cpu=CPU))
    assert deep["pred_decode_ceiling_tps"] < shallow["pred_decode_ceiling_tps"]


def test_gpu_profile_is_used_only_when_layers_really_ran_there() -> None:
    gpu = find_profile("RTX 4060 Laptop", load_profiles())
    hw = HardwareContext(cpu=CPU, gpu=gpu)
    assert hw.for_row(0) is CPU
    assert hw.for_row(31) is gpu


def test_row_predictor_skips_unreadable_models(tmp_path: Path) -> None:
    assert RowPredictor(HardwareContext(cpu=CPU))(_row(tmp_path / "missing.gguf")) == {}


def test_calibration_learns_from_other_models_only(tmp_path: Path) -> None:
    with ResultStore(tmp_path / "r.sqlite3") as store:
        store.begin_run("r1")
        for i, (name, dec, pre) in enumerate([("a.gguf", 0.5, 0.8), ("a.gguf", 0.7, 0.6), ("b.gguf", 0.1, 0.1)]):
            store.add_result("r1", ResultRow(test_index=i, status="ok", model_filename=name, cpu_info="X",
                                             gpu_info="", backends="CPU", decode_achieved_frac=dec,
                                             prefill_achieved_frac=pre))
        calib = StoreCalibration(store, "X", "")
        eff, source = calib("CPU", "b.gguf")
        assert eff is not None and eff.decode == pytest.approx(0.6) and eff.prefill == pytest.approx(0.7)
        assert "a.gguf" in source and "b.gguf" not in source
        assert StoreCalibration(store, "another CPU", "")("CPU", "b.gguf") == (None, "")
        # the same quantization type is preferred where it was measured
        store.add_result("r1", ResultRow(test_index=9, status="ok", model_filename="c.gguf", cpu_info="X",
                                         gpu_info="", backends="CPU", model_ftype="Q8_0",
                                         decode_achieved_frac=0.9, prefill_achieved_frac=0.95))
        eff, source = StoreCalibration(store, "X", "")("CPU", "b.gguf", "Q8_0")
        assert eff is not None and eff.decode == pytest.approx(0.9) and "same type Q8_0" in source
    assert efficiency_from_rows([]) is None


@pytest.mark.heavy  # the real model and the CLI in a subprocess
def test_predict_command_json_keys(smollm2_path: Path) -> None:
    proc = gguf_bench("predict", "-m", str(smollm2_path), "--hw", "RTX 4060 Laptop", "--ctx", "8192", "-ctk", "q8_0",
                      "--json")
    assert proc.returncode == 0, proc.stderr
    d = json.loads(proc.stdout)
    for key in ("decode_ceiling_tps", "prefill_ceiling_tps", "kv_bytes", "weight_bytes", "fits", "max_ngl",
                "max_ctx", "ttft_ms"):
        assert key in d
    assert d["fits"] is True and d["profile"] == "RTX 4060 Laptop"
    assert d["weight_bytes"] == 96576768
    assert d["kv_bytes"] >= 8192 * 30 * 3 * 64 * 2 * 34 / 32  # q8_0 KV at 8192 tokens


@pytest.mark.heavy  # the CLI in a subprocess
def test_predict_with_an_unknown_profile_is_one_line() -> None:
    proc = gguf_bench("predict", "--hw", "Voodoo 5 6000")
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and "Voodoo 5 6000" in proc.stderr


@pytest.mark.heavy  # the CLI in a subprocess
def test_hw_command_shows_the_cpu_side(tmp_path: Path) -> None:
    proc = gguf_bench("hw")
    assert proc.returncode == 0, proc.stderr
    assert "Bandwidth" in proc.stdout and "GB/s" in proc.stdout
    d = json.loads(gguf_bench("hw", "--json").stdout)
    assert d["cpu_probe"]["bandwidth_gbps"] > 0
    if not d["gpus"]:
        assert "no NVIDIA GPU" in proc.stdout
