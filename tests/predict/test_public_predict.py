"""answer() on a GPU profile with the public fit: expected figures beside the ceilings, with band and source."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.model.gguf_facts import read_model_facts
from app.predict.answer import Machine, answer
from app.predict.profiles import find_profile, load_profiles
from app.predict.public.fit import load_public_model
from app.predict.settings import PredictSettings
from tests.cli_helpers import gguf_bench

pytestmark = pytest.mark.heavy  # the real model and the CLI in a subprocess


@pytest.fixture(scope="module")
def profiles():
    return load_profiles()


def test_a_laptop_gpu_gets_expected_figures_under_its_ceilings(smollm2_path: Path, profiles) -> None:
    facts = read_model_facts(smollm2_path)
    laptop = find_profile("RTX 4060 Laptop", profiles)
    got = answer(facts, laptop, PredictSettings(4096), Machine(public=load_public_model()))
    d = json.loads(json.dumps(got.to_json_dict()))
    for phase in ("decode", "prefill"):
        fig = d[phase]
        assert fig["kind"] == "public" and fig["low"] < fig["value"] < fig["high"] < 2 * d[f"{phase}_ceiling_tps"]
        assert fig["value"] < d[f"{phase}_ceiling_tps"]
    detail = d["decode"]["source_detail"]["detail"]
    assert detail.startswith("public llama-bench results, Ada fit, ")
    # Changed on purpose: llama_bench_public_2025.toml gives Ada a Q4_0 (legacy) row, so Q4_1 has its own family now.
    assert "Q4_1 (legacy) taken as" not in detail and "lhl/intel-inference" in detail
    assert got.scenario().total_s > d["total_s"]  # expected figures sit below the ceilings: a longer request


def test_no_public_fit_keeps_the_prediction_as_it_was(smollm2_path: Path, profiles) -> None:
    facts = read_model_facts(smollm2_path)
    laptop = find_profile("RTX 4060 Laptop", profiles)
    got = answer(facts, laptop, PredictSettings(4096), Machine())
    assert got.decode.kind == "ceiling" and got.expected_decode is None and got.no_expected_decode


def test_an_architecture_without_data_borrows_and_says_so(smollm2_path: Path, profiles) -> None:
    """Changed on purpose (issue #26 point 3): a GPU of an architecture without rows gets a borrowed figure."""
    facts = read_model_facts(smollm2_path)
    # Changed on purpose: Blackwell has public Vulkan rows now (llama.cpp PRs), so Turing is the family without rows.
    public = load_public_model()
    p = answer(facts, find_profile("RTX 2080 Ti", profiles), PredictSettings(4096), Machine(public=public))
    assert p.expected_decode is not None and p.expected_prefill is not None
    assert "borrowed from " in p.expected_decode.source.detail and "for Turing" in p.expected_decode.source.detail


def test_a_backend_without_rows_uses_the_same_architecture_on_another_backend_and_says_so(
        smollm2_path: Path, profiles) -> None:
    # Changed on purpose: the CUDA scoreboard (#15013) gives Blackwell CUDA rows; the A100's architecture (GA100)
    # has CUDA rows only, so a Vulkan figure for it stands in its CUDA fit.
    facts = read_model_facts(smollm2_path)
    machine = Machine(public=load_public_model(), public_backend="Vulkan")
    p = answer(facts, find_profile("A100 80GB PCIe", profiles), PredictSettings(4096), machine)
    assert p.expected_decode is not None and "Ampere GA100 fit, for Vulkan" in p.expected_decode.source.detail
    assert "no public Vulkan rows for Ampere GA100: its CUDA fit used" in p.expected_decode.source.detail


def test_a_partial_offload_composes_the_public_fit_with_the_published_cpu_rows(smollm2_path: Path, profiles) -> None:
    """Issue #41 point 5: the public fit is of full offloads, so a partial one is never given it whole; its device
    side takes the public figure, its host side the memory assumed beside the GPU at the published CPU rows' share."""
    facts = read_model_facts(smollm2_path)
    laptop = find_profile("RTX 4060 Laptop", profiles)
    p = answer(facts, laptop, PredictSettings(4096, n_gpu_layers=10), Machine(public=load_public_model()))
    assert p.decode.kind == "split" and p.decode.low < p.decode.value < p.decode.high and not p.no_expected_decode
    detail = p.decode.source.detail
    assert "public llama-bench results" in detail and "published CPU-backend llama-bench rows" in detail
    full = answer(facts, laptop, PredictSettings(4096), Machine(public=load_public_model()))
    assert full.decode.kind == "public"  # every layer on the GPU: the public fit as is


def test_cli_predict_for_a_gpu_profile_gives_expected_figures_with_band_and_source(smollm2_path: Path) -> None:
    out = gguf_bench("predict", "-m", str(smollm2_path), "--hw", "RTX 4060 Laptop", "--json")
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    for phase in ("decode", "prefill"):
        assert d[phase]["kind"] == "public" and d[phase]["low"] < d[phase]["value"] < d[phase]["high"]
    assert d["decode"]["source"].startswith("public llama-bench results, Ada fit")
    assert d["decode_ceiling_tps"] > d["decode"]["value"]  # the ceilings stay, beside the expected figures
