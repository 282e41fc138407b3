"""The families issue #26 found without a profile (AMD and Intel integrated GPUs, Intel Battlemage, Apple M5 and the
cut-down Apple bins, RTX 50 laptops): each loads, cites where its figures come from, resolves by its exact and
driver names, and gets expected figures from the public fit, labelled with their source: the architecture's own fit
where the public table has rows of it, else borrowed from the nearest (the issue's acceptance: `predict --hw
"Radeon 8060S"` and `--hw "Arc B580"`)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from app.model.gguf_facts import read_model_facts
from app.predict.answer import Machine, answer
from app.predict.profiles import SOURCE_URL_PATTERN, HardwareProfile, ProfileError, find_profile
from app.predict.public.fit import load_public_model
from app.predict.settings import PredictSettings
from tests.cli_helpers import gguf_bench

AMD_INTEGRATED = ("Radeon 8060S", "Radeon 8050S", "Radeon 890M", "Radeon 880M", "Radeon 780M", "Radeon 760M")
INTEL = ("Arc B580", "Arc B570", "Arc 140V", "Arc 130V", "Arc 140T", "Arc 130T")
APPLE = ("Apple M5", "Apple M1 Pro 14-core GPU", "Apple M1 Max 24-core GPU", "Apple M2 Max 30-core GPU",
         "Apple M3 Max 30-core GPU", "Apple M4 Pro 16-core GPU", "Apple M4 Max 32-core GPU")
RTX50_LAPTOPS = ("RTX 5060 Laptop", "RTX 5070 Laptop", "RTX 5070 Ti Laptop", "RTX 5080 Laptop", "RTX 5090 Laptop")
NEW = AMD_INTEGRATED + INTEL + APPLE + RTX50_LAPTOPS


def labelled_for(source: str, architecture: str) -> bool:
    """The public fit's label for a GPU of ``architecture``: its own fit, or one borrowed for it, and nothing else."""
    return source.startswith("public llama-bench results, ") and (
        f"{architecture} fit" in source or ("borrowed from " in source and f"for {architecture}" in source))


@pytest.fixture(scope="module")
def by_name(profiles: list[HardwareProfile]) -> dict[str, HardwareProfile]:
    return {p.name: p for p in profiles}


@pytest.mark.parametrize("name", NEW)
def test_each_new_profile_cites_a_page_and_says_what_it_computed(by_name: dict[str, HardwareProfile],
                                                                 name: str) -> None:
    p = by_name[name]  # the shipped files loaded through the schema check (conftest's fixture)
    assert p.source.strip() and p.source_url and SOURCE_URL_PATTERN.fullmatch(p.source_url), name
    assert "computed" in p.source, name  # fp16_tensor_tflops is derived everywhere here, and the source says how
    if p.source_url.startswith("github:"):
        assert "entry" in p.source, name


@pytest.mark.parametrize("name", AMD_INTEGRATED + INTEL[2:] + APPLE)
def test_integrated_parts_are_unified_and_their_bandwidth_is_their_bus(by_name: dict[str, HardwareProfile],
                                                                       name: str) -> None:
    """The schema does not check bus × rate for unified parts; these state both, so they must agree (Apple's
    rounded marketing figures, 300 for 307.2 GB/s, within 3 %)."""
    p = by_name[name]
    assert p.kind == "unified" and p.is_unified
    tolerance = 0.03 if p.vendor == "Apple" else 0.02
    assert abs(p.peak_bandwidth_gbps - p.bus_bandwidth_gbps) <= tolerance * p.bus_bandwidth_gbps, name


def test_the_figures_the_brief_names(by_name: dict[str, HardwareProfile]) -> None:
    halo = by_name["Radeon 8060S"]
    assert (halo.memory_bus_bits, halo.memory_data_rate_gbps, halo.peak_bandwidth_gbps) == (256, 8.0, 256.0)
    assert halo.architecture == "RDNA 3.5" and halo.fp16_tensor_tflops == pytest.approx(40 * 512 * 2.9e9 / 1e12, 0.01)
    assert by_name["Arc B580"].peak_bandwidth_gbps == 456.0 and by_name["Arc B580"].architecture == "Xe2-HPG"
    assert by_name["Arc 140V"].memory_data_rate_gbps == 8.533 and by_name["Arc 140V"].memory_bus_bits == 128
    assert by_name["Apple M3 Max 30-core GPU"].peak_bandwidth_gbps == 300.0  # not the 40-core's 400
    assert by_name["Apple M4 Max 32-core GPU"].peak_bandwidth_gbps == 410.0
    assert by_name["Apple M5"].architecture == "Apple silicon M5"  # matrix units: not pooled with M1-M4


@pytest.mark.parametrize(("query", "name"), [
    ("Radeon 8060S", "Radeon 8060S"),
    ("AMD Radeon 8060S Graphics", "Radeon 8060S"),
    ("Radeon 8060S Graphics (RADV GFX1151)", "Radeon 8060S"),
    ("AMD Radeon Graphics (RADV GFX1151)", "Radeon 8060S"),
    ("AMD Radeon 890M Graphics", "Radeon 890M"),
    ("radeon 780m", "Radeon 780M"),
    ("Arc B580", "Arc B580"),
    ("Intel(R) Arc(TM) B580 Graphics", "Arc B580"),
    ("Intel Arc B570", "Arc B570"),
    ("Intel(R) Arc(TM) 140V GPU (16GB)", "Arc 140V"),
    ("Intel(R) Arc(TM) 130V GPU (8GB)", "Arc 130V"),
    ("Intel(R) Arc(TM) 140T GPU (32GB)", "Arc 140T"),
    ("Apple M5", "Apple M5"),
    ("M3 Max 30-core", "Apple M3 Max 30-core GPU"),
    ("Apple M3 Max", "Apple M3 Max"),  # the Metal name of both bins stays the full chip
    ("M4 Max 32-core", "Apple M4 Max 32-core GPU"),
    ("NVIDIA GeForce RTX 5070 Laptop GPU", "RTX 5070 Laptop"),
])
def test_exact_and_driver_names_resolve(profiles: list[HardwareProfile], query: str, name: str) -> None:
    assert find_profile(query, profiles).name == name


@pytest.mark.parametrize("query", ["RTX 30", "Radeon 8060", "Arc B58", "Apple M5 Max", "140V"])
def test_partial_names_are_refused_with_candidates(profiles: list[HardwareProfile], query: str) -> None:
    with pytest.raises(ProfileError, match="no hardware profile .*did you mean") as exc:
        find_profile(query, profiles)
    assert "\n" not in str(exc.value)


@pytest.mark.heavy  # the real model
@pytest.mark.parametrize(("hw", "architecture"), [
    ("Radeon 8060S", "RDNA 3.5"), ("Arc B580", "Xe2-HPG"), ("Arc 140V", "Xe2-LPG"), ("Apple M5", "Apple silicon M5"),
])
def test_predict_gives_expected_figures_labelled_with_their_source(
        smollm2_path: Path, profiles: list[HardwareProfile], hw: str, architecture: str) -> None:
    facts = read_model_facts(smollm2_path)  # the header only: nothing is loaded
    p = answer(facts, find_profile(hw, profiles), PredictSettings(4096), Machine(public=load_public_model()))
    for phase, expected, ceiling in (("decode", p.expected_decode, p.prediction.decode_ceiling_tps),
                                     ("prefill", p.expected_prefill, p.prediction.prefill_ceiling_tps)):
        assert expected is not None and expected.low is not None and expected.high is not None, (hw, phase)
        assert expected.low < expected.value < expected.high and expected.value < ceiling, (hw, phase)
        assert labelled_for(expected.source.detail, architecture), expected.source


@pytest.mark.heavy  # the real model
def test_an_integrated_gpu_of_an_architecture_without_rows_borrows_and_says_so(
        smollm2_path: Path, profiles: list[HardwareProfile]) -> None:
    """Whatever rows the public table gains, a unified-memory part of an architecture it has none of gets a figure
    borrowed from the nearest (the same vendor's first) and labelled so. The renamed architecture is a test double:
    a label no shipped profile or public row uses."""
    halo = dataclasses.replace(find_profile("Radeon 8060S", profiles), architecture="RDNA 3.5 (no rows: test double)")
    p = answer(read_model_facts(smollm2_path), halo, PredictSettings(4096), Machine(public=load_public_model()))
    assert p.expected_decode is not None and p.expected_decode.value < p.prediction.decode_ceiling_tps
    source = p.expected_decode.source.detail
    assert "borrowed from " in source and "for RDNA 3.5 (no rows: test double)" in source, source


@pytest.mark.heavy  # a subprocess of the CLI
def test_cli_predict_for_the_issue_acceptance_names(smollm2_path: Path) -> None:
    for hw, architecture in (("Radeon 8060S", "RDNA 3.5"), ("Arc B580", "Xe2-HPG")):
        out = gguf_bench("predict", "-m", str(smollm2_path), "--hw", hw, "--json")
        assert out.returncode == 0, out.stderr
        d = json.loads(out.stdout)
        assert d["decode"]["low"] < d["decode"]["value"] < d["decode"]["high"]
        assert labelled_for(d["decode"]["source"], architecture), d["decode"]["source"]
