"""Issue #25: a fit of a GPU backend predicts that backend's rows. Small synthetic models measured for real on
llama.cpp's Vulkan backend (lavapipe where there is no GPU) at -ngl 99 are fitted as calibration fits them; the fit
is keyed by the rows' backend (``Vulkan,CPU``), and a fully offloaded row of a model it never saw gets its expected
figures from it, through the one answer (app.predict.answer)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from app.calibrate.ladder import host_ffn_override
from app.calibrate.synth_models import SynthShape, write_synth_model
from app.model.facts_cache import cached_facts
from app.predict.answer import Machine, answer
from app.predict.ceilings.decode import transfer_seconds_per_token
from app.predict.hardware_context import HardwareContext
from app.predict.machine_fit.calibration_fit import fit_machine, samples_from_rows
from app.predict.profiles import cpu_profile, find_profile, load_profiles
from app.predict.row_predictions import RowPredictor
from app.predict.settings import PredictSettings
from app.results.row_types import ResultRow
from tests.cli_helpers import gguf_bench
from tests.gguf_synth import write_synthetic_moe_gguf

pytestmark = pytest.mark.vulkan
SHAPES = (SynthShape(256, 2, "F16", gqa=1), SynthShape(256, 6, "F16", gqa=4), SynthShape(512, 3, "F16", gqa=4),
          SynthShape(512, 6, "F16", gqa=2))
HELD_OUT = SynthShape(384, 4, "F16", arch="gemma")


def _measure(models: list[Path]) -> list[dict[str, Any]]:
    args = [a for m in models for a in ("-m", str(m))]
    proc = gguf_bench("run", *args, "-p", "8,32", "-n", "4", "-d", "0,64", "-r", "1", "-t", "1", "-ngl", "99",
                      "--no-store", "--no-predict", "-o", "json", timeout=1200)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_a_vulkan_fit_predicts_a_vulkan_row_of_a_model_it_never_saw(tmp_path: Path) -> None:
    ladder = [write_synth_model(tmp_path / f"{s.name}.gguf", s) for s in SHAPES]
    rows = _measure(ladder)
    backends = {r["backends"] for r in rows}
    assert backends == {"Vulkan,CPU"}, backends
    typed = [ResultRow.from_mapping(r) for r in rows]  # the CLI's JSON rows
    samples = samples_from_rows(typed, lambda p: cached_facts(p))
    fit = fit_machine(samples, cpu_info="cpu", gpu_info="lavapipe",
                      build="test", created="2026-12-01")
    assert "Vulkan,CPU" in fit.fits and "CPU" not in fit.fits
    held_out = write_synth_model(tmp_path / f"{HELD_OUT.name}.gguf", HELD_OUT)
    (row,) = [r for r in _measure([held_out]) if r["n_prompt"] == 32 and r["n_depth"] == 0]
    gpu = find_profile("RTX 4060 Laptop", load_profiles())  # the figure comes from the fit, not the profile
    hw = HardwareContext(cpu=cpu_profile("CPU", 20.0, 100.0, 2**34), gpu=gpu)
    cols = RowPredictor(hw, Machine(cpu=hw.cpu, gpu=gpu, cpu_model="cpu", fit=fit))(ResultRow.from_mapping(row))
    assert cols["calibrated_from"].startswith("fit of this machine"), cols["calibrated_from"]
    for phase in ("decode", "prefill"):
        expected, measured = cols[f"expected_{phase}_tps"], row[f"{phase}_tps"]
        print(f"{phase}: expected {expected:.1f} tok/s, measured {measured:.1f} tok/s on {row['backends']}")
        assert measured / 3 < expected < measured * 3, (phase, expected, measured)


def test_a_split_between_the_vulkan_device_and_the_cpu_is_predicted_from_the_two_fits(tmp_path: Path) -> None:
    """Issue #27 point 2: a partial offload runs on two devices; its expected decode composes the Vulkan fit (every
    layer on the device) with the CPU fit (none) by the bytes each side reads, and the measured split decode of a
    model neither fit saw falls within a factor of 2 of it. A MoE with half its layers' experts on the host
    (-ncmoe) adds device crossings, at the cost learned from split tests as calibrate measures them (-ot): within
    1.5x of the measurement; the figures, the band and the assumed cost's figure are printed for the note."""
    ladder = [write_synth_model(tmp_path / f"{s.name}.gguf", s) for s in SHAPES]
    args = [a for m in ladder for a in ("-m", str(m))]
    proc = gguf_bench("run", *args, "-p", "8,32", "-n", "8", "-d", "0,64", "-r", "1", "-ngl", "0,99",
                      "--no-store", "--no-predict", "-o", "json", timeout=1500)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    # what calibrate measures on a GPU build for the crossings: half the layers' feed-forward kept on the host
    crossing_rows = []
    for shape, model in list(zip(SHAPES, ladder, strict=True))[:2]:
        proc = gguf_bench("run", "-m", str(model), "-p", "8", "-n", "16", "-r", "3", "-ngl", "99", "-ot",
                          host_ffn_override(shape.n_layer), "--no-store", "--no-predict", "-o", "json", timeout=600)
        assert proc.returncode == 0, proc.stderr
        crossing_rows += json.loads(proc.stdout)
    typed = [ResultRow.from_mapping(r) for r in rows + crossing_rows]  # the CLI's JSON rows
    fit = fit_machine(samples_from_rows(typed, lambda p: cached_facts(p)), cpu_info="cpu",
                      gpu_info="lavapipe", build="test", created="2026-12-02")
    assert {"Vulkan,CPU", "CPU"} <= set(fit.fits), fit.fits.keys()
    assumed_fit = fit  # each crossing assumed: 10 µs and the hidden state over PCIe
    fit = fit.with_crossings(typed[len(rows):], lambda p: cached_facts(p))
    crossing = fit.crossings["Vulkan,CPU"]
    assumed_s = transfer_seconds_per_token(cached_facts(str(ladder[0])).n_embd, 1)
    print(f"crossing cost learned: {crossing.describe()} (points {[round(c * 1e3, 2) for _, c in crossing.points]} "
          f"ms); assumed {assumed_s * 1e6:.1f} µs")
    assert crossing.seconds > 30 * assumed_s  # lavapipe: a submit and a fence wait, milliseconds
    held_out = write_synth_model(tmp_path / f"{HELD_OUT.name}.gguf", HELD_OUT)
    half = cached_facts(str(held_out)).n_layer // 2
    proc = gguf_bench("run", "-m", str(held_out), "-p", "32", "-n", "16", "-r", "2", "-ngl", str(half),
                      "--no-store", "--no-predict", "-o", "json", timeout=600)
    assert proc.returncode == 0, proc.stderr
    (row,) = json.loads(proc.stdout)
    assert 0 < row["n_gpu_layers_effective"] < cached_facts(str(held_out)).n_layer + 1
    gpu = find_profile("RTX 4060 Laptop", load_profiles())
    hw = HardwareContext(cpu=cpu_profile("CPU", 20.0, 100.0, 2**34), gpu=gpu)
    here = Machine(cpu=hw.cpu, gpu=gpu, cpu_model="cpu", fit=fit)
    cols = RowPredictor(hw, here)(ResultRow.from_mapping(row))
    expected, measured = cols["expected_decode_tps"], row["decode_tps"]
    assert expected is not None, cols  # the CPU fit is at the default thread count, as this row is
    print(f"split -ngl {half}: expected decode {expected:.1f} tok/s ({cols['calibrated_from']}), "
          f"measured {measured:.1f} tok/s")
    assert "split by the bytes each side reads" in cols["calibrated_from"]
    assert measured / 2 < expected < measured * 2, (expected, measured)
    # a mixture of experts with the experts of half its layers in host memory (-ncmoe), every layer offloaded
    # (an 8-token prompt: a 32-token one crashes llama.cpp's MoE kernels on lavapipe, SIGSEGV in the worker)
    moe = write_synthetic_moe_gguf(tmp_path / "synth-moe.gguf", n_layer=4)
    proc = gguf_bench("run", "-m", str(moe), "-p", "8", "-n", "16", "-r", "2", "-ngl", "99", "-ncmoe", "2",
                      "--no-store", "--no-predict", "-o", "json", timeout=600)
    assert proc.returncode == 0, proc.stderr
    (moe_row,) = json.loads(proc.stdout)
    moe_cols = RowPredictor(hw, here)(ResultRow.from_mapping(moe_row))
    moe_expected, moe_measured = moe_cols["expected_decode_tps"], moe_row["decode_tps"]
    assert moe_expected is not None, moe_cols
    assert "split by the bytes each side reads" in moe_cols["calibrated_from"]
    assert "as this machine's calibration measured" in moe_cols["calibrated_from"]
    with_assumed = RowPredictor(hw, replace(here, fit=assumed_fit))(ResultRow.from_mapping(moe_row))
    with_assumed = with_assumed["expected_decode_tps"]
    moe_facts = cached_facts(str(moe))
    got = answer(moe_facts, gpu, PredictSettings.from_row(ResultRow.from_mapping(moe_row),
                                                          n_gpu_layers=moe_row["n_gpu_layers_effective"]),
                 here, measured=False)
    assert got.decode.kind == "split" and got.decode.value == pytest.approx(moe_expected)
    band = (got.decode.low, got.decode.high)
    inside = band[0] <= moe_measured <= band[1]
    print(f"MoE -ncmoe 2: measured {moe_measured:.1f} tok/s; expected {moe_expected:.1f} ({band[0]:.1f}-{band[1]:.1f}, "
          f"{'inside' if inside else 'outside'} the band) with the crossings learned, {with_assumed:.1f} with them "
          "assumed")
    # Issue #27's Vulkan split, with the crossings learned (each a fence wait here, not the assumed 10 µs): within
    # 1.5x, as lavapipe's op dispatch, not the bytes, sets the rest (benchmarks/split_decode_floor.py: the same
    # placement varies 10-50 % between rounds). Which of the two lands nearer in one run is that noise (the device
    # fit alone moved 20 % between CI runs); the band is judged over three runs in test_vulkan_calibrate.py.
    assert moe_measured / 1.5 < moe_expected < moe_measured * 1.5, (moe_expected, moe_measured)
    settings = PredictSettings.from_row(ResultRow.from_mapping(moe_row))
    sides = [fit.expected(cached_facts(str(moe)), replace(settings, n_gpu_layers=n, n_cpu_moe=0), backend)["decode"]
             for n, backend in ((999, "Vulkan,CPU"), (0, "CPU"))]
    assert all(side is not None for side in sides)
    low, high = sorted(side.value for side in sides if side is not None)
    assert low <= with_assumed <= high  # the bytes alone run between the two sides' speeds; the crossings slow it
    assert moe_expected < with_assumed
    print(f"  (device alone {sides[0].value:.1f}, CPU alone {sides[1].value:.1f})")
