"""A split placement's expected decode composes the device's full-offload figure with the host's own by the bytes
each side reads (app.predict.split_expected); no fit is applied to a split whole (issue #27 point 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.calibrate.synth_models import SynthShape, write_synth_model
from app.model.gguf_facts import read_model_facts
from app.predict.fitted_model import Expected
from app.predict.prediction import PredictSettings, predict
from app.predict.profiles import find_profile, load_profiles
from app.predict.split_expected import device_fraction, split_decode_expected


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

    settings = PredictSettings(n_ctx=1024, n_gpu_layers=3, n_prompt=64, n_gen=16)
    pred = predict(facts, gpu, settings, cpu_bandwidth_gbps=50.0, fitted=fit_of("device", 400.0),
                   host_fitted=fit_of("host", 40.0))
    frac = device_fraction(pred.decode_gpu_read_bytes, pred.decode_host_read_bytes)
    assert 0 < frac < 1
    assert ("device", 999) in calls and ("host", 0) in calls and all(n in (0, 999) for _, n in calls)
    assert pred.expected_decode_tps is not None and 40.0 < pred.expected_decode_tps < 400.0
    assert pred.expected_decode is not None and "split by the bytes" in pred.expected_decode.source
    assert pred.expected_prefill_tps is None  # no fit runs a split's prefill
    alone = predict(facts, gpu, settings, cpu_bandwidth_gbps=50.0, fitted=fit_of("device", 400.0))
    assert alone.expected_decode_tps is None
    assert any("no expected decode without an expected figure for the host CPU alone" in n
               for n in alone.notes)
    full = predict(facts, gpu, PredictSettings(n_ctx=1024, n_prompt=64, n_gen=16), fitted=fit_of("device", 400.0))
    assert full.expected_decode_tps == pytest.approx(400.0)  # a full offload takes its fit as it is
