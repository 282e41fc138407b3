"""The held-out table of published llama-bench rows: it loads with its extra keys, bad keys fail in one line, and
no fit ever learns from it (refused by construction; the shipped fit reads only the training table)."""

from __future__ import annotations

import dataclasses
import math
import tomllib
from pathlib import Path

import pytest

from app.paths import HARDWARE_PROFILES_DIR
from app.predict.profiles import find_profile, load_profiles
from app.predict.public import fit as public_fit
from app.predict.public.arch_fit import PublicFitError, era_of, matmul_params, weight_family
from app.predict.public.data import PUBLIC_TABLE_PATH, ReferenceTableError, load_reference, parse_reference
from app.predict.public.held_out import HELD_OUT_TABLE_PATH, check_held_out, load_held_out


@pytest.fixture(scope="module")
def held() -> list:
    return load_held_out()


def test_the_held_out_file_loads_with_its_extra_keys(held) -> None:
    assert len(held) >= 80 and all(r.held_out for r in held)
    assert {r.backend for r in held} >= {"Vulkan", "ROCm", "Metal"}
    assert any(r.n_depth > 0 for r in held) and any(r.flash_attn == 1 for r in held)
    assert all(r.date == "" or len(r.date) == 10 for r in held)
    moe = {r.model.name: r for r in held if r.model.n_expert}
    qwen = moe["Qwen3 30B-A3B"]  # 30.5 B parameters, 3.3 B active (its model card)
    assert qwen.model.n_expert_used == 8 and 3.0e9 < qwen.n_params - qwen.model.inactive_expert_params < 3.6e9
    assert matmul_params(qwen) < 0.12 * qwen.n_params


def _doc() -> dict:
    with HELD_OUT_TABLE_PATH.open("rb") as f:
        return tomllib.load(f)


@pytest.mark.parametrize(("table", "key", "value", "needle"), [
    ("result", "tokens_per_watt", 3.0, "unknown key 'tokens_per_watt'"),
    ("model", "n_routed", 3, "unknown key 'n_routed'"),
    ("result", "date", "May 2025", "date must be YYYY-MM-DD"),
    ("result", "flash_attn", 2, "flash_attn must be 1, 0 or -1"),
    ("result", "n_depth", "32k", "n_depth must be an integer"),
])
def test_bad_keys_give_one_line_naming_the_file(table: str, key: str, value: object, needle: str) -> None:
    doc = _doc()
    doc[table][0][key] = value
    with pytest.raises(ReferenceTableError) as info:
        parse_reference(doc, HELD_OUT_TABLE_PATH.name, held_out=True)
    msg = str(info.value)
    assert msg.startswith("llama_bench_public_more.toml: ") and needle in msg and "\n" not in msg


def test_a_fit_refuses_held_out_rows_by_construction(held) -> None:
    profiles = load_profiles([HARDWARE_PROFILES_DIR])
    train = load_reference()
    with pytest.raises(PublicFitError, match="never learns from held-out rows"):
        public_fit.PublicGpuModel([*train, dataclasses.replace(train[0], held_out=True)], profiles)
    shipped = public_fit.load_public_model()
    assert shipped.rows and not any(r.held_out for r in shipped.rows)
    keys = {(r.gpu, r.model.name, r.weight_type, r.source_url) for r in held}
    assert not keys & {(r.gpu, r.model.name, r.weight_type, r.source_url) for r in shipped.rows}
    source = Path(public_fit.__file__).read_text(encoding="utf-8")
    assert "from app.predict.public.held_out" not in source and "llama_bench_public_more" not in source
    assert PUBLIC_TABLE_PATH != HELD_OUT_TABLE_PATH


def test_held_out_check_predicts_profiled_gpus_and_skips_the_rest(held) -> None:
    profiles = load_profiles([HARDWARE_PROFILES_DIR])
    checks, skipped = check_held_out(public_fit.load_public_model(), held, profiles)
    assert checks and len({id(c.row) for c in checks}) + len(skipped) == len(held)  # every GPU may have a profile
    assert all("no hardware profile" in s.reason or "ambiguous" in s.reason for s in skipped)
    for c in checks:
        if c.expected is None:  # only a float type on a vendor the training tables hold no float rows of
            assert weight_family(c.row.ggml_type) in {"f16", "bf16", "f32"}, (c.row.label, c.why_none)
            assert f"(float) kernels on any {c.profile.vendor} GPU" in c.why_none
            continue
        assert math.isfinite(c.rel_error)
        assert c.expected.low < c.expected.value <= c.expected.high  # the value may be the ceiling, the band's top
        assert f"for {c.row.backend}" in c.expected.source  # predicted for the row's own backend
    r4090 = next(c for c in checks if c.profile.name == "RTX 4090" and c.row.backend == "Vulkan")
    # the Vulkan scoreboard (#10879) holds Ada rows: the figure is made by a fit that has the backend asked
    assert "for Vulkan" in r4090.expected.source and "no public Vulkan rows for Ada" not in r4090.expected.source


def test_eras_and_families() -> None:
    assert (era_of(2824), era_of(4696), era_of(6040), era_of(None, "2025-09-01"), era_of(None)) == (
        "≤b2999", "b3000–b5999", "b6000–b7999", "b6000–b7999", "")
    assert (era_of(8000), era_of(None, "2026-03-01")) == ("≥b8000", "≥b8000")
    assert [weight_family(t) for t in ("Q4_0", "Q8_0", "Q6_K", "IQ4_XS", "MXFP4", "BF16")] == [
        "legacy", "legacy", "k_quant", "i_quant", "mxfp4", "bf16"]
    profiles = load_profiles([HARDWARE_PROFILES_DIR])
    assert public_fit.default_backend(find_profile("RX 7900 XTX", profiles)) == "ROCm"
    assert public_fit.default_backend(find_profile("RX 7900 XTX", profiles), ["Vulkan"]) == "Vulkan"
    assert public_fit.default_backend(find_profile("RTX 4090", profiles), ["Metal"]) == "CUDA"


def test_the_repeat_spread_predicts_each_figure_by_the_others_of_its_question(held) -> None:
    from app.predict.public.held_out import repeat_spread

    base = next(r for r in held if r.pp_tps > 0 and not r.exclude_pp and r.build_number is not None)
    same = [dataclasses.replace(base, pp_tps=tps) for tps in (100.0, 110.0, 90.0)]
    other_build = dataclasses.replace(base, pp_tps=500.0, build=f"abc1234 ({base.build_number + 1})")
    f = repeat_spread([*same, other_build], "prefill", exact_build=True)
    # 100 against median(110, 90) = 100: 0 %; 110 against 95: 13.6 %; 90 against 105: 16.7 %
    assert (f.repeated, f.single) == (3, 1)
    assert math.isclose(f.median_abs_error, 1 - 95 / 110) and math.isclose(f.within, 2 / 3)
    assert [r.pp_tps for r in f.rows] == [100.0, 110.0, 90.0] and math.isclose(f.errors[2], 105 / 90 - 1)
    by_era = repeat_spread([*same, other_build], "prefill")  # the next build is in the same era: one question
    assert by_era.repeated == 4 and by_era.median_abs_error > f.median_abs_error
    assert repeat_spread([base], "prefill").repeated == 0 and math.isnan(repeat_spread([base], "prefill").within)
    assert f.across_publications == 0  # one publication's repeats: one machine's spread, not two machines'
    elsewhere = dataclasses.replace(same[1], source_url="https://example.org/another-laptop")
    assert repeat_spread([same[0], elsewhere], "prefill", exact_build=True).across_publications == 2
