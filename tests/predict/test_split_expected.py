"""A split placement's expected decode composes the device's full-offload figure with the host's own by the bytes
each side reads (app.predict.machine_fit.split_expected); no fit is applied to a split whole (issue #27 point 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.calibrate.synth_models import SynthShape, write_synth_model
from app.model.gguf_facts import read_model_facts
from app.predict.answer import answer
from app.predict.machine_fit.fitted_model import Expected
from app.predict.machine_fit.split_expected import device_fraction, split_decode_expected
from app.predict.profiles import find_profile, load_profiles
from app.predict.settings import PredictSettings


def _fig(value: float, spread: float = 0.2, source: str = "s") -> Expected:
    return Expected(value, value * (1 - spread), value * (1 + spread), source)


def test_the_composition_adds_each_sides_time_for_its_share() -> None:
    device, host = _fig(100.0, source="device fit"), _fig(20.0, source="cpu fit")
    half = split_decode_expected(device, host, 0.5)
    assert half is not None
    assert half.value == pytest.approx(1 / (0.5 / 100 + 0.5 / 20))
    assert half.low == pytest.approx(1 / (0.5 / 80 + 0.5 / 16))
    assert half.high == pytest.approx(1 / (0.5 / 120 + 0.5 / 24))
    assert "device part (50% of the bytes read): device fit" in half.source and "cpu fit" in half.source
    assert split_decode_expected(device, host, 1.0).value == pytest.approx(100.0)  # type: ignore[union-attr]
    assert split_decode_expected(None, host, 0.0).value == pytest.approx(20.0)  # type: ignore[union-attr]
    with_transfer = split_decode_expected(device, host, 0.5, transfer_s=0.01)
    assert with_transfer is not None and with_transfer.value < half.value
    assert split_decode_expected(device, None, 0.5) is None and split_decode_expected(None, host, 0.5) is None
    assert device_fraction(3.0, 1.0) == 0.75 and device_fraction(0.0, 0.0) == 0.0
    with pytest.raises(ValueError):
        split_decode_expected(device, host, 1.5)


def test_predict_composes_a_partial_offload_and_never_applies_a_full_offload_fit_to_it(tmp_path: Path) -> None:
    facts = read_model_facts(write_synth_model(tmp_path / "m.gguf", SynthShape(384, 6, "F16", gqa=2)))
    gpu = find_profile("RTX 4060 Laptop", load_profiles())
    calls: list[tuple[str, int]] = []

    def fit_of(name: str, rate: float):  # a fit as MachineFit.expected gives it: decode tok/s for the settings
        def fitted(f, s: PredictSettings):
            calls.append((name, s.n_gpu_layers))
            return {"decode": _fig(rate, source=f"{name} fit"), "prefill": None}
        return fitted

    from tests.predict.answer_helpers import StandInFit, machine_of

    settings = PredictSettings(n_ctx=1024, n_gpu_layers=3, n_prompt=64, n_gen=16)
    both = machine_of(gpu, fit=StandInFit({"CUDA,CPU": fit_of("device", 400.0), "CPU": fit_of("host", 40.0)}))
    got = answer(facts, gpu, settings, both)
    pred = got.prediction
    frac = device_fraction(pred.decode_gpu_read_bytes, pred.decode_host_read_bytes)
    assert 0 < frac < 1
    assert ("device", 999) in calls and ("host", 0) in calls and all(n in (0, 999) for _, n in calls)
    assert got.decode.kind == "split" and 40.0 < got.decode.value < 400.0
    assert "split by the bytes" in got.decode.source.detail
    assert got.prefill is not None and got.prefill.kind == "ceiling"  # no fit runs a split's prefill
    # no CPU fit here: the host side is this CPU's bandwidth at the share published CPU rows reach (issue #41 point 5)
    alone = answer(facts, gpu, settings, machine_of(gpu, fit=StandInFit({"CUDA,CPU": fit_of("device", 400.0)})))
    assert alone.decode.kind == "split" and "published CPU-backend llama-bench rows" in alone.decode.source.detail
    assert alone.decode.low < alone.decode.value < alone.decode.high
    # no figure for the device with every layer on it (no fit of it, no public fit): a reason, never both
    bare = answer(facts, gpu, settings, machine_of(gpu, fit=StandInFit({"CPU": fit_of("host", 40.0)})))
    assert bare.decode.kind == "ceiling"
    assert "no expected decode without an expected figure for the device with every layer on it" in \
        bare.no_expected_decode
    full = answer(facts, gpu, PredictSettings(n_ctx=1024, n_prompt=64, n_gen=16), both)
    assert full.decode.kind == "fit" and full.decode.value == pytest.approx(400.0)  # a full offload: its fit as is


def test_a_split_with_only_stored_rows_efficiency_gives_that_figure_and_no_reason(tmp_path: Path) -> None:
    """Issue #42: a split placement with a stored-row efficiency gave a figure beside the note "no expected decode
    … the ceiling speaks"; the answer gives either a figure or a reason, never both."""
    from app.predict.machine_fit.store_efficiency import Efficiency
    from tests.predict.answer_helpers import StandInEfficiency, machine_of

    facts = read_model_facts(write_synth_model(tmp_path / "m.gguf", SynthShape(384, 6, "F16", gqa=2)))
    gpu = find_profile("RTX 4060 Laptop", load_profiles())
    settings = PredictSettings(n_ctx=1024, n_gpu_layers=3, n_prompt=64, n_gen=16)
    got = answer(facts, gpu, settings, machine_of(gpu, efficiency=StandInEfficiency(Efficiency(0.5, 0.6))))
    assert got.decode.kind == "efficiency" and got.no_expected_decode == ""
    assert not any("ceiling speaks" in n for n in got.notes)
    bare = answer(facts, gpu, settings, machine_of(gpu))
    assert bare.decode.kind == "ceiling" and bare.no_expected_decode
