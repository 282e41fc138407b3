"""The CPU prefill ceiling takes the compute figure for the model's weight type, and holds on the real model.

The real-model test runs SmolLM2-135M Q4_1 and a Q8_0 requantization of it through the worker (-p 128, all
cores: a ceiling checked against a one-thread run would prove nothing) and asserts the measured prefill stays
below the ceiling each row was predicted with; before issue #9 it read 422 tok/s against a "ceiling" of 393.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from app.model.gguf_facts import read_model_facts
from app.predict.ceilings.prefill import (
    matmul_params,
    prefill_compute,
    prefill_compute_doc,
    prefill_flops_per_token,
    weights_use_int8_dot,
)
from app.predict.hardware_context import CpuProfile, cpu_profile_of
from app.predict.prediction import predict
from app.predict.profiles import cpu_profile, find_profile
from app.predict.settings import PredictSettings
from app.telemetry.cpu_features import CpuFeatures
from app.telemetry.cpu_peaks import FMA_PEAK, INT8_DOT_PEAK, ComputeFigure
from app.telemetry.cpu_probe import CpuProbe
from app.telemetry.machine import MachineScan
from tests.cli_helpers import gguf_bench

INT8 = ComputeFigure(0.768, INT8_DOT_PEAK, "2 cores x 3.00 GHz x 64 int8 MACs/cycle x 2 (AVX2)")
FMA = ComputeFigure(0.192, FMA_PEAK, "2 cores x 3.00 GHz x 32 FLOP/cycle (FMA3)")
BASE = cpu_profile("CPU: test", bandwidth_gbps=20.0, gflops=192.0, ram_bytes=16 * 2**30)
CPU = CpuProfile(**{k: getattr(BASE, k) for k in BASE.__dataclass_fields__}, int8=INT8, fma=FMA)


def test_which_weight_types_run_int8_dot_products() -> None:
    for t in ("Q4_0", "Q4_1", "Q8_0", "Q4_K_M", "Q6_K", "IQ4_XS", "IQ2_XXS", "TQ1_0", "MXFP4_MOE", "unknown"):
        assert weights_use_int8_dot(t), t
    for t in ("F32", "F16", "BF16", "f16"):
        assert not weights_use_int8_dot(t), t
    assert prefill_compute(CPU, "Q4_1") is INT8 and prefill_compute(CPU, "F16") is FMA
    assert prefill_compute(BASE, "Q4_1") is None  # a profile without per-kernel figures keeps its own


@pytest.mark.heavy  # the real model
def test_prefill_ceiling_by_weight_type_by_hand(smollm2_path: Path) -> None:
    facts = read_model_facts(smollm2_path)
    s = PredictSettings(n_ctx=512, n_prompt=128, n_gen=0)
    flops = prefill_flops_per_token(matmul_params(facts), 128, facts.n_layer, facts.n_head * facts.head_dim_k)
    q4 = predict(facts, CPU, s)
    assert q4.prefill_ceiling_tps == pytest.approx(0.768e12 / flops, rel=1e-3)
    assert q4.tflops == 0.768
    assert any(n.startswith("prefill compute for Q4_1 weights: int8 dot peak, 768 G/s (a ceiling") for n in q4.notes)
    f16 = predict(replace(facts, file_type="F16"), CPU, s)
    assert f16.prefill_ceiling_tps == pytest.approx(q4.prefill_ceiling_tps / 4, rel=1e-3)
    assert predict(facts, BASE, s).prefill_ceiling_tps == pytest.approx(0.192e12 / flops, rel=1e-3)


def test_json_names_the_ceiling_for_cpu_and_gpu(profiles) -> None:
    assert prefill_compute_doc(CPU, "Q8_0") == {"prefill_ceiling_kind": "int8 dot peak",
                                                "prefill_ceiling_source": INT8.source}
    assert prefill_compute_doc(BASE, "Q8_0")["prefill_ceiling_kind"] == "measured roofline"
    gpu = find_profile("RTX 4060 Laptop", profiles)
    assert prefill_compute_doc(gpu, "Q4_1") == {"prefill_ceiling_kind": "spec FP16 tensor peak",
                                                "prefill_ceiling_source": gpu.source}


def test_cpu_profile_of_a_scan_carries_both_peaks() -> None:
    probe = CpuProbe(bandwidth_gbps=30.0, gflops_f32=190.2, n_threads=2, measured_at="recorded")
    features = CpuFeatures("x86_64", ("avx", "avx2", "fma", "sse2", "ssse3"), 2, 2.445, "cpuinfo MHz")
    scan = MachineScan(facts={"cpu_model": "AMD EPYC", "ram_total_bytes": 16 * 2**30}, probe=probe,
                       cpu_features=features)
    cpu = cpu_profile_of(scan, "This CPU")
    assert isinstance(cpu, CpuProfile) and cpu.name == "This CPU: AMD EPYC"
    assert cpu.fp16_tensor_tflops == pytest.approx(0.1902)  # the FMA peak, raised to the matmul's clock
    assert cpu.int8.tflops == pytest.approx(4 * 0.1902) and cpu.peak_bandwidth_gbps == 30.0
    assert cpu.source == ("bandwidth probed recorded; compute: int8 dot peak (quantized weights), FMA peak (float)")
    busy = cpu_profile_of(replace(scan, probe=replace(probe, busy=True)))
    assert "taken while busy" in busy.source  # the window's hardware tooltip shows the source
    bare = cpu_profile_of(replace(scan, cpu_features=None))
    assert bare.int8 is None and bare.fp16_tensor_tflops == pytest.approx(0.1902)  # the probe, a roofline


AMX = ComputeFigure(6.144, INT8_DOT_PEAK, "2 cores x 3.00 GHz x 1024 int8 MACs/cycle x 2 (AMX-INT8 tiles)")


def test_amx_tiles_count_only_for_repacked_weights_of_amx_types() -> None:
    """Issue #24: AMX tiles run only weights llama.cpp repacked into its AMX buffer (ggml-cpu/amx/common.h's types),
    so the prefill ceiling takes them only with repacking on, for those types, where the build has the buffer."""
    amx_cpu = replace(CPU, amx=AMX)
    for t in ("Q4_0", "Q4_1", "Q8_0", "Q4_K_M", "Q4_K_S", "Q5_K_M", "Q6_K", "IQ4_XS"):
        assert prefill_compute(amx_cpu, t, repack=1) is AMX, t
        assert prefill_compute(amx_cpu, t, repack=0) is INT8, t  # weights as in the file: the AVX dot products
    for t in ("Q5_0", "Q3_K_M", "Q2_K", "IQ2_XXS"):
        assert prefill_compute(amx_cpu, t, repack=1) is INT8, t
    assert prefill_compute(amx_cpu, "F16", repack=1) is FMA
    assert prefill_compute(CPU, "Q4_1", repack=1) is INT8  # no AMX buffer on this profile's build


def test_derived_peaks_keep_amx_apart_from_the_int8_figure() -> None:
    from app.telemetry.cpu_peaks import derive_peaks

    flags = ("amx_int8", "amx_tile", "avx2", "avx512bw", "avx512f", "fma", "ssse3")
    peaks = derive_peaks(CpuFeatures("x86_64", flags, 2, 3.0, "cpufreq max"), 100.0)
    assert peaks.int8.tflops == pytest.approx(2 * 3.0 * 128 * 2 / 1e3)  # AVX-512, not the tiles
    assert peaks.amx is not None and peaks.amx.tflops == pytest.approx(2 * 3.0 * 1024 * 2 / 1e3)
    assert derive_peaks(CpuFeatures("x86_64", ("avx2", "fma", "ssse3"), 2, 3.0, "cpufreq max"), 100.0).amx is None


def test_a_profile_counts_amx_only_where_the_guard_found_the_amx_buffer_safe() -> None:
    from app.telemetry.repack_guard import RepackVerdict

    probe = CpuProbe(bandwidth_gbps=30.0, gflops_f32=190.2, n_threads=2, measured_at="recorded")
    flags = ("amx_int8", "avx2", "avx512bw", "avx512f", "fma", "ssse3")
    features = CpuFeatures("x86_64", flags, 2, 3.0, "cpufreq max")
    scan = MachineScan(facts={"cpu_model": "Xeon", "ram_total_bytes": 16 * 2**30}, probe=probe, cpu_features=features)
    for safe, buffers, counted in ((True, ("AMX", "CPU_REPACK"), True), (False, ("AMX", "CPU_REPACK"), False),
                                   (True, ("CPU_REPACK",), False)):
        verdict = RepackVerdict(key="k", safe=safe, default_repack=int(safe), extra_buffers=buffers)
        cpu = cpu_profile_of(replace(scan, repack=verdict))
        assert (cpu.amx is not None) is counted, (safe, buffers)
        # the weights its extra buffer types take are counted in its memory (app.predict.memory.repack)
        assert cpu.repack_buffers == buffers and cpu.cpu_flags == flags
    assert cpu_profile_of(scan).repack_buffers == ()  # never checked: nothing counted


@pytest.mark.heavy  # the real model
def test_a_fit_made_with_repacking_on_does_not_predict_repacked_types_with_it_off(smollm2_path: Path) -> None:
    from app.predict.machine_fit.calibration_fit import MachineFit

    facts = read_model_facts(smollm2_path)  # Q4_1
    on, off = PredictSettings(n_ctx=512, repack=1), PredictSettings(n_ctx=512, repack=0)
    fit = MachineFit("cpu", "", "b", "2026-12-01", {}, 0, repack=1, repacked_types=("Q4_0",))
    assert fit.applies_to(facts, on) and fit.applies_to(facts, off)  # Q4_1 was not repacked: the same kernels
    assert not fit.applies_to(replace(facts, file_type="Q4_0"), off)
    old = MachineFit("cpu", "", "b", "2026-12-01", {}, 0)  # saved before the setting: repacked, types unknown
    assert old.applies_to(facts, on) and not old.applies_to(facts, off)
    doc = MachineFit.from_json_dict({**fit.to_json_dict(), "fits": {}})
    assert (doc.repack, doc.repacked_types) == (1, ("Q4_0",))
    from app.results.row_types import ResultRow

    assert PredictSettings.from_row(ResultRow(repack=0)).repack == 0
    assert PredictSettings.from_row(ResultRow()).repack == 1


def _requantize(src: Path, dst: Path, ftype: str) -> Path:
    """``src`` re-quantized with llama.cpp's quantizer, in a child process (llama_cpp never loads in pytest's)."""
    code = ("import sys; from engines.llama_cpp_quantize import quantize_model; "
            "quantize_model(sys.argv[1], sys.argv[2], sys.argv[3], 2)")
    subprocess.run([sys.executable, "-c", code, str(src), str(dst), ftype], check=True, capture_output=True,
                   timeout=120)
    return dst


@pytest.mark.slow
def test_measured_prefill_stays_below_the_ceiling_on_the_real_model(smollm2_path: Path, tmp_path: Path) -> None:
    q8 = _requantize(smollm2_path, tmp_path / "smollm2.Q8_0.gguf", "Q8_0")
    proc = gguf_bench("run", "-m", str(smollm2_path), "-m", str(q8), "-p", "128", "-n", "1", "-r", "1",
                      "-o", "json", "-q")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert {r["model_ftype"] for r in rows} == {"Q4_1", "Q8_0"}
    for r in rows:
        assert r["status"] == "ok"
        ceiling = r["pred_prefill_ceiling_tps"]
        assert r["prefill_tps"] < ceiling, (r["model_ftype"], r["prefill_tps"], ceiling)
        assert 0 < r["prefill_achieved_frac"] < 1.0
