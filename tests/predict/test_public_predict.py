"""predict() on a GPU profile with the public fit: expected figures beside the ceilings, with band and source."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.model.gguf_facts import read_model_facts
from app.predict.prediction import PredictSettings, predict
from app.predict.profiles import find_profile, load_profiles
from app.predict.public_fit import load_public_model
from tests.cli_helpers import gguf_bench


@pytest.fixture(scope="module")
def profiles():
    return load_profiles()


def test_a_laptop_gpu_gets_expected_figures_under_its_ceilings(smollm2_path: Path, profiles) -> None:
    facts = read_model_facts(smollm2_path)
    laptop = find_profile("RTX 4060 Laptop", profiles)
    p = predict(facts, laptop, PredictSettings(4096), public=load_public_model())
    d = json.loads(json.dumps(p.to_json_dict()))
    for phase in ("decode", "prefill"):
        value, low, high = (d[f"expected_{phase}_tps{s}"] for s in ("", "_low", "_high"))
        assert low < value < high and value < d[f"{phase}_ceiling_tps"]
    assert d["expected_source"].startswith("public llama-bench results, Ada fit, ")
    # Changed on purpose: llama_bench_public_2025.toml gives Ada a Q4_0 (legacy) row, so Q4_1 has its own family now.
    assert "Q4_1 (legacy) taken as" not in d["expected_source"] and "lhl/intel-inference" in d["expected_source"]
    assert d["expected_total_s"] > d["total_s"]  # expected figures sit below the ceilings: a longer request


def test_no_public_fit_keeps_the_prediction_as_it_was(smollm2_path: Path, profiles) -> None:
    facts = read_model_facts(smollm2_path)
    laptop = find_profile("RTX 4060 Laptop", profiles)
    d = predict(facts, laptop, PredictSettings(4096)).to_json_dict()
    assert d["expected_decode_tps"] is None and d["expected_source"] == ""


def test_an_architecture_without_data_borrows_and_says_so(smollm2_path: Path, profiles) -> None:
    """Changed on purpose (issue #26 point 3): a GPU of an architecture without rows gets a borrowed figure."""
    facts = read_model_facts(smollm2_path)
    # Changed on purpose: Blackwell has public Vulkan rows now (llama.cpp PRs), so Turing is the family without rows.
    public = load_public_model()
    p = predict(facts, find_profile("RTX 2080 Ti", profiles), PredictSettings(4096), public=public)
    assert p.expected_decode is not None and p.expected_prefill is not None
    assert "borrowed from " in p.expected_decode.source and "for Turing" in p.expected_decode.source


def test_a_backend_without_rows_uses_the_same_architecture_on_another_backend_and_says_so(
        smollm2_path: Path, profiles) -> None:
    facts = read_model_facts(smollm2_path)
    p = predict(facts, find_profile("RTX 5090", profiles), PredictSettings(4096), public=load_public_model())
    assert p.expected_decode is not None and "Blackwell fit, for CUDA" in p.expected_decode.source
    assert "no public CUDA rows for Blackwell: its Vulkan fit used" in p.expected_decode.source


def test_a_partial_offload_gets_no_public_figure(smollm2_path: Path, profiles) -> None:
    facts = read_model_facts(smollm2_path)
    laptop = find_profile("RTX 4060 Laptop", profiles)
    p = predict(facts, laptop, PredictSettings(4096, n_gpu_layers=10), public=load_public_model())
    assert p.expected_decode_tps is None  # the GPU side has the public fit; a GPU not owned has no CPU figure
    assert any(n.startswith("split placement: no expected decode without an expected figure for the host CPU "
                            "alone") for n in p.notes)


def test_cli_predict_for_a_gpu_profile_gives_expected_figures_with_band_and_source(smollm2_path: Path) -> None:
    out = gguf_bench("predict", "-m", str(smollm2_path), "--hw", "RTX 4060 Laptop", "--json")
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert d["expected_decode_tps_low"] < d["expected_decode_tps"] < d["expected_decode_tps_high"]
    assert d["expected_prefill_tps_low"] < d["expected_prefill_tps"] < d["expected_prefill_tps_high"]
    assert d["expected_source"].startswith("public llama-bench results, Ada fit")
    assert d["decode_ceiling_tps"] > d["expected_decode_tps"]  # the ceilings stay, beside the expected figures
