"""Calibration: the synthetic ladder, the fit of this machine saved per machine and build, and its use by predict."""

from __future__ import annotations

import argparse
import dataclasses
import json
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from app.calibrate.ladder import (
    LADDER_TYPES,
    CalibrateOptions,
    Calibration,
    CalibrationCancelled,
    disturbed_labels,
    faster,
    ladder_models,
    ladder_tests,
    pooled,
    residual_table,
    store_samples,
)
from app.calibrate.synth_models import SynthShape, write_synth_model
from app.cli.calibrate_cmd import add_calibrate_parser, options_from_args
from app.cli.errors import UserError
from app.model.gguf_facts import read_model_facts
from app.predict.machine_fit.calibration_fit import MachineFit, Sample, fit_machine, workload_of
from app.predict.machine_fit.calibration_store import fit_path, llama_build, load_fit, save_fit
from app.predict.machine_fit.fitted_model import FitError, PhaseFit
from app.predict.settings import PredictSettings
from app.results.row_types import ResultRow
from app.results.store import ResultStore
from app.telemetry.host import usable_cpu_threads
from app.telemetry.machine import scan_machine
from tests.cli_helpers import gguf_bench

#: The smallest ladder that still determines every coefficient: one type, three shapes.
TINY = dataclasses.replace(CalibrateOptions.quick(), types=("F16",), use_store=False)


def test_synthetic_models_have_the_shape_and_types_asked(tmp_path: Path) -> None:
    llama = read_model_facts(write_synth_model(tmp_path / "a.gguf", SynthShape(256, 3, "Q4_K")))
    gemma = read_model_facts(write_synth_model(tmp_path / "b.gguf", SynthShape(256, 2, "Q8_0", arch="gemma")))
    assert (llama.architecture, llama.n_layer, llama.n_embd, llama.n_head, llama.n_head_kv) == ("llama", 3, 256, 4, 1)
    assert set(llama.tensor_types) == {"Q4_K", "F32"} and "output.weight" in llama.tensor_bytes
    assert gemma.architecture == "gemma" and "output.weight" not in gemma.tensor_bytes
    s = PredictSettings(n_ctx=512, n_prompt=64, n_gen=16)
    # untied: the embedding table is looked up, not read; tied (gemma): it is the output matrix, read every token
    embd_llama = llama.tensor_bytes["token_embd.weight"]
    assert sum(workload_of(llama, s).class_bytes.values()) == pytest.approx(llama.weight_bytes - embd_llama)
    assert sum(workload_of(gemma, s).class_bytes.values()) == pytest.approx(gemma.weight_bytes)
    with pytest.raises(ValueError, match="multiples"):
        write_synth_model(tmp_path / "c.gguf", SynthShape(320, 2, "Q4_K"))


def test_save_keeps_the_previous_fit_and_a_damaged_file_is_no_fit() -> None:
    fit = MachineFit("cpu X", "", llama_build(), "2026-11-30",
                     {"CPU": {"decode": PhaseFit("decode", {"fixed": 0.01}, 0.05)}}, 9)
    path = save_fit(fit)
    assert path == fit_path("cpu X", "", llama_build()) and load_fit("cpu X", "") == fit
    save_fit(dataclasses.replace(fit, n_points=10))
    assert json.loads(path.with_name(path.name + ".prev").read_text())["n_points"] == 9
    assert load_fit("cpu X", "").n_points == 10
    assert load_fit("cpu Y", "") is None and load_fit("cpu X", "", build="another build") is None
    path.write_text("{not json")
    assert load_fit("cpu X", "") is None


def test_no_points_is_a_clear_error() -> None:
    with pytest.raises(FitError, match="no measured points"):
        fit_machine([], cpu_info="c", gpu_info="", build="b", created="d")


def test_stored_rows_of_this_machine_become_samples(tmp_path: Path) -> None:
    model = write_synth_model(tmp_path / "m.gguf", SynthShape(256, 2, "F16"))
    base = {"status": "ok", "model_path": str(model), "model_filename": model.name, "cpu_info": "cpu X",
            "gpu_info": "", "llama_cpp_python_version": "0.3.36", "n_prompt": 64, "n_gen": 16, "n_depth": 0,
            "decode_tps": 100.0, "prefill_tps": 900.0, "n_gpu_layers_effective": 0, "test_index": 0}
    rows = [base, dict(base, cpu_info="cpu Y"), dict(base, status="failed"), dict(base, n_parallel=4),
            dict(base, llama_cpp_python_version="0.3.1"), dict(base, model_path=str(tmp_path / "gone.gguf")),
            dict(base, n_threads=usable_cpu_threads() + 1)]
    with ResultStore(tmp_path / "s.sqlite3") as store:
        store.begin_run("r1")
        for i, r in enumerate(rows):
            store.add_result("r1", ResultRow.from_mapping(dict(r, test_index=i)))
        samples = store_samples(store, "cpu X", "", "0.3.36")
    assert len(samples) == 1 and isinstance(samples[0], Sample)
    assert (samples[0].backend, samples[0].decode_tps, samples[0].prefill_tps) == ("CPU", 100.0, 900.0)


@pytest.mark.heavy  # a worker
def test_cancel_keeps_nothing(isolated_data_dir: Path) -> None:
    calibration = Calibration(TINY)

    def progress(msg: str) -> None:
        if msg.startswith("test "):
            calibration.cancel()

    calibration.progress = progress
    with pytest.raises(CalibrationCancelled):
        calibration.run()
    scan = scan_machine()
    assert load_fit(scan.cpu_model, scan.gpu_info()) is None
    assert list((isolated_data_dir / "calibration").iterdir()) == []  # the ladder's folder is gone too


@pytest.mark.slow
def test_calibrate_then_predict_a_model_it_never_saw(tmp_path: Path) -> None:
    """The CLI end to end: a tiny ladder, the residual table, then predict --json with bands and the fit's source."""
    cal = gguf_bench("calibrate", "--quick", "--types", "F16", "--no-store-runs")
    assert cal.returncode == 0, cal.stderr
    assert "CPU decode:" in cal.stdout and "median error" in cal.stdout and "saved to" in cal.stdout
    assert "calibrate: test 1/" in cal.stderr
    unseen = write_synth_model(tmp_path / "unseen.gguf", SynthShape(384, 3, "F16", arch="gemma"))
    out = gguf_bench("predict", "-m", str(unseen), "-p", "64", "-n", "16", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    source = doc["decode"]["source"]
    for phase in ("decode", "prefill"):
        fig = doc[phase]
        assert fig["kind"] == "fit"
        capped = any(f"expected {phase}" in n and "above its ceiling" in n for n in doc["notes"])
        if capped:  # the fit said more than the ceiling: shown as the ceiling, its band the fit's
            assert fig["low"] <= fig["value"] == doc[f"{phase}_ceiling_tps"] <= fig["high"]
        else:
            assert fig["low"] < fig["value"] < fig["high"]
    assert source.startswith("fit of this machine, ") and "points, median error" in source
    assert doc["ceiling_source"].startswith("ceilings: ")
    text = out_text = gguf_bench("predict", "-m", str(unseen), "-p", "64", "-n", "16").stdout
    assert "decode" in text and " fit at depth " in text and "(fit of this machine" in out_text
    assert "(ceilings: " in text


def test_residual_table_marks_every_point() -> None:
    fit = MachineFit("c", "", "b", "2026-11-30", {"CPU": {"decode": PhaseFit.from_json_dict(
        {"phase": "decode", "coefficients": {"fixed": 0.01}, "band_frac": 0.1,
         "points": [["m1 p64 d0", 100.0, 110.0, True], ["m2 p64 d0", 50.0, 100.0, False]]})}}, 2)
    table = residual_table(fit)
    assert "median error 10.0%" in table and "+10.0%" in table and "+100.0%" in table
    assert "set aside" in table


def test_the_ladder_crosses_shapes_and_depths_on_the_anchor_only() -> None:
    o = CalibrateOptions()
    models = ladder_models(o)
    anchor = [m for m in models if m.shape.weight_type == "Q8_0"]
    others = [m for m in models if m.shape.weight_type != "Q8_0"]
    assert {m.shape.weight_type for m in others} == set(LADDER_TYPES) - {"Q8_0"}
    assert {"Q4_1", "Q5_0"} <= set(LADDER_TYPES)
    assert all({d for _, d, _ in m.tests} == {0} for m in others)
    for t in LADDER_TYPES[:-1]:  # every other type at two widths, so its cost per FLOP is told from its width term
        if t != "Q8_0":
            assert {m.shape.n_embd for m in others if m.shape.weight_type == t} == {o.type_shape[0], 512}
    for m in anchor[:len(o.shapes)]:  # the long prompt from an empty cache at every anchor width
        assert (o.prompts[1], 0, True) in m.tests
    assert len({(m.shape.n_embd, m.shape.n_layer) for m in anchor}) == len(o.shapes) + 2  # the deep test, the MoE
    moe = [m for m in anchor if m.shape.n_expert]
    assert len(moe) == 1 and moe[0].shape.n_used < moe[0].shape.n_expert and moe[0].shape.embd_type == "F16"
    assert (512, 4096, True) in [t for m in anchor for t in m.tests]  # the deep point
    assert any(not fa for m in anchor for _, _, fa in m.tests)
    assert max(m.shape.n_layer for m in anchor) >= 24  # as many layers as real small models, for per-layer costs
    assert sum(len(m.tests) for m in models) <= 38  # the time: about 1.5 minutes a pass on 2 cores (180 s for two)
    tests = ladder_tests({Path(m.shape.name): m for m in models}, o)
    assert sum(t.flash_attn == 0 for t in tests) == 1


def test_disturbed_tests_are_found_and_the_faster_measurement_kept() -> None:
    points = [["m p32 d0", 100.0, 101.0, True], ["m p256 d0", 100.0, 98.0, True], ["m p32 d512", 100.0, 103.0, True],
              ["slow p32 d0", 20.0, 100.0, True], ["aside p32 d0", 50.0, 100.0, False]]
    fit = MachineFit("c", "", "b", "d", {"CPU": {"decode": PhaseFit.from_json_dict(
        {"phase": "decode", "coefficients": {"fixed": 0.01}, "band_frac": 0.1, "points": points})}}, 5)
    assert disturbed_labels(fit) == {"slow p32 d0", "aside p32 d0"}
    first = ResultRow(status="ok", decode_tps=20.0, decode_tps_median=20.0, prefill_tps=900.0, prefill_tps_median=900.0)
    again = first.replace(decode_tps=99.0, decode_tps_median=100.0, prefill_tps=700.0, prefill_tps_median=700.0)
    best = faster(first, again)
    assert (best.decode_tps_median, best.prefill_tps_median) == (100.0, 900.0)
    assert faster(first, ResultRow(status="failed")).decode_tps_median == 20.0


def test_two_passes_pool_their_repetitions_into_one_median() -> None:
    one = ResultRow(status="ok", decode_samples_tps=[100.0, 90.0, 110.0], decode_tps_median=100.0,
                    prefill_samples_tps=[500.0, 520.0, 480.0], prefill_tps_median=500.0)
    two = one.replace(decode_samples_tps=[60.0, 62.0, 64.0], decode_tps_median=62.0,
                      prefill_samples_tps=[540.0, 560.0, 550.0], prefill_tps_median=550.0)
    both = pooled(one, two)
    assert both.decode_samples_tps == [100.0, 90.0, 110.0, 60.0, 62.0, 64.0]
    assert both.decode_tps_median == 77.0 and both.prefill_tps_median == 530.0  # not the faster pass's
    assert both.decode_tps == pytest.approx(81.0)
    assert pooled(one, ResultRow(status="failed")).decode_tps_median == 100.0
    assert pooled(ResultRow(status="failed"), two).decode_tps_median == 62.0


@pytest.mark.heavy  # a worker
def test_a_second_pass_measures_every_test_again(isolated_data_dir: Path) -> None:
    calibration = Calibration(dataclasses.replace(TINY, passes=2))
    said: list[str] = []
    calibration.progress = said.append
    result = calibration.run()
    assert "pass 2 of 2 over the ladder" in said
    first_tests = [m for m in said if m.startswith("test 1/")]
    assert len(first_tests) >= 2  # each pass starts the ladder over
    assert result.n_ladder_points == sum(len(m.tests) for m in ladder_models(TINY))
    assert {"decode", "prefill"} <= set(result.fit.fits["CPU"])


def test_passes_flag_is_checked() -> None:
    parser = argparse.ArgumentParser()
    add_calibrate_parser(parser.add_subparsers())
    assert options_from_args(parser.parse_args(["calibrate"])).passes == 2
    assert options_from_args(parser.parse_args(["calibrate", "--quick"])).passes == 1
    assert options_from_args(parser.parse_args(["calibrate", "--passes", "3"])).passes == 3
    with pytest.raises(UserError, match="--passes"):
        options_from_args(parser.parse_args(["calibrate", "--passes", "0"]))


def _small_disk() -> None:
    """The child's files may not pass 120 KB (RLIMIT_FSIZE): writes past it fail with EFBIG as on a full disk
    (SIGXFSZ ignored, so the write returns the error instead of killing the process)."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (120_000, 120_000))


@pytest.mark.heavy  # a subprocess
def test_a_full_disk_stops_calibration_with_one_line(isolated_data_dir: Path) -> None:
    """Issue #29 "Also": a full disk during calibration gave a traceback out of numpy's tofile ("139264 requested
    and 107744 written"). Now one line names the model file and the cause, the ladder is removed, no fit saved."""
    proc = subprocess.run([sys.executable, "-m", "app.cli.main", "calibrate", "--quick", "-q"], capture_output=True,
                          text=True, timeout=300, preexec_fn=_small_disk)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert "calibration stopped: " in line and "cannot write a ladder model" in line, line
    assert "the previous fit is unchanged" in line
    calibration = isolated_data_dir / "calibration"
    assert not list(calibration.glob("ladder-*")) and not list(calibration.glob("fit-*.json"))
