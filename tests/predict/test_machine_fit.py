"""A machine's fit in use: answer() and the run rows' expected_* columns come from it, with band and source."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from app.calibrate.ladder import pass_spreads
from app.calibrate.synth_models import SynthShape, write_synth_model
from app.model.gguf_facts import read_model_facts
from app.predict.answer import Machine, answer
from app.predict.hardware_context import HardwareContext
from app.predict.machine_fit.calibration_fit import MachineContext, MachineFit, Sample, fit_machine, workload_of
from app.predict.machine_fit.calibration_store import fit_path, llama_build, load_fit, save_fit, saved_fit_problem
from app.predict.machine_fit.fitted_model import PhaseFit
from app.predict.machine_fit.store_efficiency import StoreCalibration
from app.predict.profiles import cpu_profile
from app.predict.row_predictions import RowPredictor
from app.predict.settings import PredictSettings
from app.results.row_types import ResultRow
from app.results.store import ResultStore
from engines.base import resolve_n_threads

DECODE = {"bytes:f16": 1 / 10e9, "kv:fa": 1 / 5e9, "attn:fa": 1 / 40e9, "attn_view:fa": 1 / 80e9, "split:fa": 20e-6,
          "layer": 50e-6, "fixed": 200e-6}
PREFILL = {"flops:f16": 1 / 50e9, "attn:fa": 1 / 20e9, "layer": 20e-6, "layer_ubatch": 1e-3, "width:f16": 4e-9}


def _tps(coefs: dict[str, float], feats: dict[str, float]) -> float:
    return 1.0 / sum(coefs[k] * v for k, v in feats.items())


def _known_samples(tmp_path: Path, backend: str = "CPU") -> list[Sample]:
    """F16 synthetic models on ``backend`` whose speeds follow DECODE and PREFILL exactly."""
    samples = []
    for e, n, g in ((256, 2, 1), (256, 6, 4), (512, 3, 4)):
        facts = read_model_facts(write_synth_model(tmp_path / f"l{e}x{n}.gguf", SynthShape(e, n, "F16", gqa=g)))
        for p, d in ((16, 0), (64, 256), (128, 512)):
            w = workload_of(facts, PredictSettings(n_ctx=2048, n_prompt=p, n_gen=16, depth=d, flash_attn=True),
                            backend=backend)
            samples.append(Sample(backend, w, f"{e}x{n} p{p} d{d}", _tps(DECODE, w.features("decode")),
                                  _tps(PREFILL, w.features("prefill"))))
    return samples


@pytest.fixture
def machine_fit(tmp_path: Path) -> MachineFit:
    """A fit of F16 synthetic models whose speeds follow known coefficients exactly."""
    samples = _known_samples(tmp_path)
    fit = fit_machine(samples, cpu_info="cpu X", gpu_info="", build=llama_build(), created="2026-11-30")
    save_fit(fit)
    return fit


def test_predict_and_rows_use_the_fit(machine_fit: MachineFit, tmp_path: Path) -> None:
    model = write_synth_model(tmp_path / "unseen.gguf", SynthShape(384, 4, "F16", arch="gemma"))
    facts = read_model_facts(model)
    settings = PredictSettings(n_ctx=1024, n_prompt=96, n_gen=32, depth=128, flash_attn=True)
    truth = workload_of(facts, settings)
    with ResultStore(tmp_path / "s.sqlite3") as store:
        calib = StoreCalibration(store, "cpu X", "")
    assert calib.machine_fit == machine_fit and calib.fitted("CUDA,CPU") is None
    cpu = cpu_profile("CPU: X", 20.0, 100.0, 2**34)
    machine = Machine(cpu=cpu, cpu_model="cpu X", fit=calib.machine_fit, efficiency=calib)
    got = answer(facts, cpu, settings, machine)
    assert got.decode.kind == got.prefill.kind == "fit"  # type: ignore[union-attr]
    assert got.decode.value == pytest.approx(_tps(DECODE, truth.features("decode")), rel=1e-3)
    assert got.prefill.value == pytest.approx(_tps(PREFILL, truth.features("prefill")), rel=1e-3)  # type: ignore
    doc = got.to_json_dict()["decode"]
    assert doc["low"] < doc["value"] < doc["high"] and doc["kind"] == "fit" and doc["depth"] == 96 + 16 + 128
    assert doc["source_detail"]["detail"].startswith("fit of this machine, 2026-11-30, 9 points, median error 0.0%")
    assert got.scenario().total_s > got.prediction.scenario.total_s
    row = ResultRow(model_path=str(model), model_filename=model.name, n_prompt=96, n_gen=32, n_depth=128,
                    flash_attn_effective=1, backends="CPU", n_gpu_layers_effective=0, decode_tps=1.0, repack=1)
    cols = RowPredictor(HardwareContext(cpu=cpu), machine)(row)
    assert cols["expected_decode_tps"] == pytest.approx(got.decode.value, rel=1e-6)
    assert cols["calibrated_from"] == got.decode.source.detail
    sources = machine
    # on the CPU the threads run the layers: a row at another thread count than calibrate's takes no fit
    other = resolve_n_threads(0) + 1
    at_other = RowPredictor(HardwareContext(cpu=cpu), sources)(row.replace(n_threads=other,
                                                                                n_threads_effective=other))
    assert not str(at_other.get("calibrated_from") or "").startswith("fit of this machine")


def test_without_a_fit_nothing_changes(tmp_path: Path) -> None:
    facts = read_model_facts(write_synth_model(tmp_path / "m.gguf", SynthShape(256, 2, "F16")))
    with ResultStore(tmp_path / "s.sqlite3") as store:
        calib = StoreCalibration(store, "cpu X", "")
    assert calib.machine_fit is None and calib.fitted() is None
    cpu = cpu_profile("CPU: X", 20.0, 100.0, 2**34)
    got = answer(facts, cpu, PredictSettings(n_ctx=512), Machine(cpu=cpu, cpu_model="cpu X", efficiency=calib))
    assert got.decode.kind == "ceiling" and got.decode.low is None and got.expected_decode is None
    assert got.no_expected_decode  # a ceiling says why there is no expected figure


def test_the_cpu_context_classifies_and_round_trips(tmp_path: Path) -> None:
    """A CPU fit reduces models with its kernel-class table and L2 size; GPUs keep the generic classes; the context
    is saved with the fit (a document without it is of an older form: refused)."""
    facts = read_model_facts(write_synth_model(tmp_path / "m.gguf", SynthShape(256, 2, "Q4_K")))
    settings = PredictSettings(n_ctx=8192, n_prompt=512, n_gen=16, depth=4096, flash_attn=True)
    ctx = MachineContext({"Q4_K": "q4_k", "F32": "f16"}, 512 * 1024)
    cpu = workload_of(facts, settings, ctx, "CPU")
    assert set(cpu.class_bytes) == {"q4_k"} and cpu.attn_spill_work > 0
    assert cpu.width_work == facts.n_layer * (facts.n_embd + facts.n_ff)  # prefill's width term
    gpu = workload_of(facts, settings, ctx, "CUDA,CPU")
    assert set(gpu.class_bytes) == {"k_quant"} and gpu.attn_spill_work == 0
    fit = MachineFit("cpu X", "", "b", "2026-11-30", {"CPU": {"decode": PhaseFit("decode", {"fixed": 0.01}, 0.05)}},
                     3, (), ctx)
    doc = fit.to_json_dict()
    assert MachineFit.from_json_dict(doc) == fit
    old = {k: v for k, v in doc.items() if k not in ("cpu_classes", "l2_cache_bytes")}
    with pytest.raises(KeyError):
        MachineFit.from_json_dict(old)


def test_a_fit_of_an_older_form_is_refused_with_one_line(tmp_path: Path) -> None:
    """Issue #25: fits of older forms were read through fold-and-default paths while the version stayed 1. Now a
    document of another version is not read, and one line says what to do."""
    fit = MachineFit("cpu X", "", llama_build(), "2026-12-01",
                     {"CPU": {"decode": PhaseFit("decode", {"fixed": 0.01}, 0.05)}}, 3, (), MachineContext())
    assert saved_fit_problem("cpu X", "") is None  # none saved: nothing to say
    path = save_fit(fit)
    assert load_fit("cpu X", "") == fit and saved_fit_problem("cpu X", "") is None
    doc = json.loads(path.read_text())
    path.write_text(json.dumps({**doc, "version": 1}))
    assert load_fit("cpu X", "") is None
    line = saved_fit_problem("cpu X", "")
    assert line is not None and "\n" not in line and str(fit_path("cpu X", "", llama_build())) in line
    assert "older form (version 1" in line and "gguf-bench calibrate" in line
    from app.telemetry.machine import MachineScan

    loaded = Machine.load(MachineScan(facts={"cpu_model": "cpu X"}), public=False, read_store=False)
    assert loaded.notes == (line,) and loaded.fit_problem == line
    path.write_text(json.dumps({**doc, "repack": 7}))
    assert "damaged" in (saved_fit_problem("cpu X", "") or "")


@pytest.mark.heavy
def test_rows_the_window_predict_and_the_chooser_give_one_expected_figure(tmp_path: Path) -> None:
    """Issue #25 point 2: one policy picks where an expected figure comes from, so the same test on the same
    hardware gets the same figure from a sweep row, the window's prediction service, ``gguf-bench predict`` and the
    chooser (here from this machine's saved fit: the fixture's coefficients, saved under this machine's CPU)."""
    from app.choose.chooser import ChooseRequest, run_choose
    from app.gui.expectations import Expectations
    from app.gui.predictions import PredictionService
    from app.telemetry.machine import ProbeMode, scan_machine
    from tests.cli_helpers import gguf_bench

    machine = scan_machine(ProbeMode.NONE).run_facts()
    cpu_model, gpu_info = str(machine.get("cpu_model") or ""), str(machine.get("gpu_info") or "")
    samples = _known_samples(tmp_path)
    save_fit(fit_machine(samples, cpu_info=cpu_model, gpu_info=gpu_info, build=llama_build(), created="2026-12-01"))
    model = write_synth_model(tmp_path / "unseen.gguf", SynthShape(384, 4, "F16", arch="gemma"))
    facts = read_model_facts(model)
    row = ResultRow(model_path=str(model), model_filename=model.name, n_prompt=96, n_gen=32, n_depth=0, n_ctx=1024,
                    flash_attn_effective=1, backends="CPU", n_gpu_layers_effective=0,
                    repack=PredictSettings(n_ctx=1).repack)  # as measured here: this machine's repacking
    truth = _tps(DECODE, workload_of(facts, PredictSettings.from_row(row)).features("decode"))
    cpu = cpu_profile(f"CPU: {cpu_model}", 20.0, 100.0, 2**34)
    here = Machine(cpu=cpu, cpu_model=cpu_model, gpu_info=gpu_info, fit=load_fit(cpu_model, gpu_info))
    from_row = RowPredictor(HardwareContext(cpu=cpu), here)(row)["expected_decode_tps"]
    service = PredictionService()
    service.facts[str(model)] = facts
    service.set_machine(cpu, [])
    service.set_profile(cpu)
    service.set_expectations(Expectations(machine=here))
    from_window = service.predict_settings(str(model), PredictSettings.from_row(row)).decode.value  # type: ignore
    proc = gguf_bench("predict", "-m", str(model), "--ctx", "1024", "-p", "96", "-n", "32", "-fa", "1", "--json")
    assert proc.returncode == 0, proc.stderr
    from_predict = json.loads(proc.stdout)["decode"]
    assert from_predict["kind"] == "fit"
    report = run_choose(ChooseRequest(sources=(str(model),), n_ctx=1024, n_prompt=96, n_gen=32,
                                      store_path=str(tmp_path / "s.sqlite3")))
    from_chooser = report.choices[0].decode_tps.value
    assert report.choices[0].decode_tps.kind == "fit"
    for figure in (from_row, from_window, from_predict["value"], from_chooser):
        assert figure == pytest.approx(truth, rel=1e-6), (from_row, from_window, from_predict, from_chooser)


def test_a_gpu_backend_fit_predicts_fully_offloaded_gpu_rows_only(tmp_path: Path) -> None:
    """Issue #25: calibration fits every backend (the ladder runs at -ngl 99); a fit of a GPU backend is what then
    predicts that backend's rows with every layer offloaded. A partial offload runs on two devices: no fit of one
    applies, and the public GPU fit (or the ceilings) speaks instead."""
    from app.predict.profiles import find_profile, load_profiles

    samples = _known_samples(tmp_path, "Vulkan,CPU")
    fit = fit_machine(samples, cpu_info="cpu X", gpu_info="gpu Y", build=llama_build(), created="2026-12-01")
    model = write_synth_model(tmp_path / "unseen.gguf", SynthShape(384, 4, "F16", arch="gemma"))
    facts = read_model_facts(model)
    gpu = find_profile("RTX 4060 Laptop", load_profiles())
    hw = HardwareContext(cpu=cpu_profile("CPU: X", 20.0, 100.0, 2**34), gpu=gpu)
    sources = Machine(cpu=hw.cpu, gpu=gpu, cpu_model="X", fit=fit)
    row = ResultRow(model_path=str(model), model_filename=model.name, n_prompt=96, n_gen=32, n_depth=0, n_ctx=1024,
                    flash_attn_effective=1, backends="Vulkan,CPU", n_gpu_layers=99,
                    n_gpu_layers_effective=facts.n_layer + 1)
    expected = fit.expected(facts, PredictSettings.from_row(row, n_gpu_layers=facts.n_layer + 1), "Vulkan,CPU")
    cols = RowPredictor(hw, sources)(row)
    assert cols["expected_decode_tps"] == pytest.approx(expected["decode"].value, rel=1e-6)
    assert cols["calibrated_from"].startswith("fit of this machine")
    partial = RowPredictor(hw, sources)(row.replace(n_gpu_layers=2, n_gpu_layers_effective=2))
    assert not str(partial.get("calibrated_from") or "").startswith("fit of this machine")
    # the rows the Vulkan ladder measures run at -t 1: a full offload's figures do not depend on the CPU threads
    one_thread = RowPredictor(hw, sources)(row.replace(n_threads=1, n_threads_effective=1))
    assert one_thread["expected_decode_tps"] == pytest.approx(expected["decode"].value, rel=1e-6)


def test_a_phase_band_is_at_least_the_spread_between_calibration_passes(machine_fit: MachineFit,
                                                                         tmp_path: Path) -> None:
    exact = machine_fit.fits["CPU"]["decode"].band_frac  # points that follow the form exactly: the floor
    model = write_synth_model(tmp_path / "p.gguf", SynthShape(256, 2, "F16"))

    def row(decode: float, **extra: object) -> ResultRow:
        return ResultRow(status="ok", model_path=str(model), n_gpu_layers_effective=0, backends="CPU",
                         decode_tps_median=decode, prefill_tps_median=100.0, **extra)

    first = [row(100.0), row(100.0), row(100.0), row(100.0), row(100.0, unstable=1)]
    second = [row(130.0), row(110.0), row(120.0), row(125.0), row(50.0)]
    spreads = pass_spreads(first, second)
    assert spreads[("CPU", "decode")] == pytest.approx([0.3 / 1.3, 0.1 / 1.1, 0.2 / 1.2, 0.25 / 1.25])
    assert spreads[("CPU", "prefill")] == [0.0] * 4  # the unstable test is not counted
    noisy = machine_fit.with_pass_noise(spreads)
    band = noisy.fits["CPU"]["decode"].band_frac
    assert exact < band == pytest.approx(float(np.percentile(spreads[("CPU", "decode")], 90)))
    assert noisy.fits["CPU"]["prefill"] == machine_fit.fits["CPU"]["prefill"]  # as steady as its residuals
    assert any("spread between calibration passes" in n for n in noisy.notes)
    assert machine_fit.with_pass_noise({("CPU", "decode"): [0.5, 0.5]}) == machine_fit  # too few tests to say
    doc = json.loads(json.dumps(noisy.to_json_dict()))
    assert MachineFit.from_json_dict(doc).fits["CPU"]["decode"].band_frac == pytest.approx(band)
