"""A split placement's device crossings at the cost this machine measured (app/predict/machine_fit/crossing_fit.py):
learned from split rows, saved with the fit, and used by predict() so that a split row measured here is predicted back.

The fit here is made from points that follow known coefficients exactly (tests/predict/test_machine_fit.py), on
the CPU and on a GPU backend; the split rows' decode is what those sides and a chosen crossing cost give, so the
check is that learning and predicting read one placement alike (bytes on each side, crossings), through their
separate paths (crossing_fit.split_decode_bytes; prediction.predict)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from app.calibrate.ladder import CalibrateOptions, host_ffn_override, ladder_models, ladder_tests
from app.calibrate.synth_models import SynthShape, write_synth_model
from app.model.facts import ModelFacts
from app.model.gguf_facts import read_model_facts
from app.predict.answer import answer
from app.predict.ceilings.decode import transfer_seconds_per_token
from app.predict.machine_fit.calibration_fit import MachineFit, fit_machine, row_backend
from app.predict.machine_fit.crossing_fit import CrossingCost, split_decode_bytes
from app.predict.profiles import find_profile, load_profiles
from app.predict.settings import PredictSettings
from app.results.row_types import ResultRow
from tests.predict.answer_helpers import machine_of
from tests.predict.test_machine_fit import _known_samples

GPU = "Vulkan,CPU"
CROSSING_S = 3e-3


@pytest.fixture(scope="module")
def two_sided_fit(tmp_path_factory: pytest.TempPathFactory) -> MachineFit:
    """Made once for the module (a frozen fit; its synthetic models are written and read again for each side)."""
    folder = tmp_path_factory.mktemp("two-sided")
    (folder / "cpu").mkdir()
    (folder / "gpu").mkdir()
    samples = _known_samples(folder / "cpu") + _known_samples(folder / "gpu", backend=GPU)
    return fit_machine(samples, cpu_info="cpu X", gpu_info="gpu Y", build="b1", created="2026-12-03")


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> ModelFacts:
    path = tmp_path_factory.mktemp("model") / "m.gguf"
    return read_model_facts(write_synth_model(path, SynthShape(384, 6, "F16", arch="gemma")))


def _split_row(facts: ModelFacts, fit: MachineFit, *, crossing_s: float, **placement: Any) -> ResultRow:
    """A row of ``facts`` with ``placement`` whose decode is its two sides' (as ``fit`` predicts them) plus its
    extra crossings at ``crossing_s`` each."""
    row = ResultRow(status="ok", backends=GPU, model_path=facts.path, model_filename="m.gguf", n_prompt=8, n_gen=16,
                    n_depth=0, n_gpu_layers=99, n_gpu_layers_effective=facts.n_layer + 1, flash_attn=1, **placement)
    s = PredictSettings.from_row(row)
    read = split_decode_bytes(facts, s)
    full = PredictSettings.from_row(row.replace(n_cpu_moe=0, tensor_buft_overrides="none", no_kv_offload=0))
    device = fit.expected(facts, full, GPU)["decode"]
    host = fit.expected(facts, PredictSettings.from_row(row.replace(n_gpu_layers=0, tensor_buft_overrides="none",
                                                                    no_kv_offload=0)), "CPU")["decode"]
    assert device is not None and host is not None
    frac = read.gpu_bytes / (read.gpu_bytes + read.host_bytes)
    return row.replace(decode_tps=1 / (frac / device.value + (1 - frac) / host.value
                                       + read.extra_crossings * crossing_s))


def test_a_crossing_cost_is_learned_from_split_rows_and_predicts_them_back(two_sided_fit: MachineFit,
                                                                           model: ModelFacts) -> None:
    ot = _split_row(model, two_sided_fit, crossing_s=CROSSING_S, tensor_buft_overrides=host_ffn_override(6))
    nkvo = _split_row(model, two_sided_fit, crossing_s=CROSSING_S, no_kv_offload=1)
    fit = two_sided_fit.with_crossings([ot, nkvo], lambda _p: model)
    cost = fit.crossings[GPU]
    assert cost.seconds == pytest.approx(CROSSING_S, rel=1e-6) and len(cost.points) == 2
    assert split_decode_bytes(model, PredictSettings.from_row(ot)).extra_crossings == 6  # 3 layers, there and back
    profile = find_profile("RTX 4060 Laptop", load_profiles())
    here = machine_of(profile, fit=fit, gpu_backends=("Vulkan",))  # type: ignore[arg-type]
    unmeasured = machine_of(profile, fit=replace(fit, crossings={}), gpu_backends=("Vulkan",))  # type: ignore[arg-type]
    for row in (ot, nkvo):
        s = PredictSettings.from_row(row)
        learned, assumed = (answer(model, profile, s, m, measured=False).decode for m in (here, unmeasured))
        assert learned.kind == assumed.kind == "split"
        assert learned.value == pytest.approx(row.decode_tps, rel=1e-6)
        assert assumed.value > 1.5 * row.decode_tps  # 10 µs a crossing, not 3 ms
        assert "3.00 ms each, as this machine's calibration measured (2 split tests)" in learned.source.detail
        assert "each assumed" in assumed.source.detail


def test_the_band_spans_the_crossing_costs_its_tests_gave(two_sided_fit: MachineFit, model: ModelFacts) -> None:
    quick = _split_row(model, two_sided_fit, crossing_s=2e-3, tensor_buft_overrides=host_ffn_override(6))
    slow = _split_row(model, two_sided_fit, crossing_s=4e-3, tensor_buft_overrides=host_ffn_override(6))
    fit = two_sided_fit.with_crossings([quick, slow], lambda _p: model)
    least, most = fit.crossings[GPU].range_s  # each test's with its sides at their band edges (±5 % here)
    assert least < 2e-3 < 4e-3 < most < 4.5e-3
    profile = find_profile("RTX 4060 Laptop", load_profiles())
    band = answer(model, profile, PredictSettings.from_row(quick),
                  machine_of(profile, fit=fit, gpu_backends=("Vulkan",)), measured=False).decode  # type: ignore[arg-type]
    assert band.kind == "split" and band.low is not None and band.high is not None
    assert band.low < slow.decode_tps < band.value < quick.decode_tps < band.high


def test_rows_that_teach_no_crossing_cost_are_skipped(two_sided_fit: MachineFit, model: ModelFacts) -> None:
    whole = _split_row(model, two_sided_fit, crossing_s=0.0)  # every tensor on the device: no extra crossing
    cpu = _split_row(model, two_sided_fit, crossing_s=CROSSING_S, no_kv_offload=1).replace(backends="CPU")
    failed = _split_row(model, two_sided_fit, crossing_s=CROSSING_S, no_kv_offload=1).replace(status="failed")
    assert two_sided_fit.with_crossings([whole, cpu, failed], lambda _p: model) == two_sided_fit
    faster = _split_row(model, two_sided_fit, crossing_s=-1e-4, no_kv_offload=1)  # faster than its sides: not < 0
    assert two_sided_fit.with_crossings([faster], lambda _p: model).crossings[GPU].seconds == 0.0


def test_a_full_offload_with_tensors_on_the_host_teaches_no_one_backend_fit(model: ModelFacts) -> None:
    full = ResultRow(n_gpu_layers_effective=7, backends=GPU)
    assert row_backend(full, 6) == GPU
    for placement in ({"n_cpu_moe": 2}, {"no_kv_offload": 1}, {"tensor_buft_overrides": host_ffn_override(6)}):
        assert row_backend(full.replace(**placement), 6) is None, placement


def test_the_crossing_cost_is_saved_with_the_fit_and_an_older_fit_reads_without_one(two_sided_fit: MachineFit,
                                                                                 model: ModelFacts) -> None:
    row = _split_row(model, two_sided_fit, crossing_s=CROSSING_S, no_kv_offload=1)
    fit = two_sided_fit.with_crossings([row], lambda _p: model)
    doc = json.loads(json.dumps(fit.to_json_dict()))
    assert MachineFit.from_json_dict(doc).crossings == fit.crossings
    del doc["crossings"]
    assert MachineFit.from_json_dict(doc).crossings == {}
    with pytest.raises(ValueError, match="not a non-negative finite number"):
        CrossingCost.from_json_dict({"seconds": -1.0, "points": []})


def test_a_gpu_build_calibrates_the_host_side_and_the_crossings(tmp_path: Path) -> None:
    o = CalibrateOptions.quick()
    models = {tmp_path / f"{m.shape.name}.gguf": m for m in ladder_models(o)}
    cpu_only, gpu = ladder_tests(models, o), ladder_tests(models, o, gpu_build=True)
    assert all(t.tensor_buft_overrides == "none" for t in cpu_only)
    host = [t for t in gpu if t.n_gpu_layers == 0]
    crossing = [t for t in gpu if t.tensor_buft_overrides != "none"]
    assert len(host) == len(cpu_only) and len(gpu) == 2 * len(cpu_only) + len(crossing)
    assert len(crossing) == len(o.shapes) and all(t.n_gpu_layers != 0 for t in crossing)  # each anchor shape
    assert all(t.repetitions == 2 * o.repetitions for t in crossing)
    assert host_ffn_override(5) == r"blk\.(0|1)\.ffn_(gate|up|down)\.weight=CPU"
    assert transfer_seconds_per_token(64, 1) < CROSSING_S / 100  # what the assumed cost would have been
