"""The shipped table of published llama-bench results: it loads, every row is sourced, every GPU has a profile."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from app.paths import HARDWARE_PROFILES_DIR
from app.predict.profiles import load_profiles
from app.predict.public.arch_fit import published, used
from app.predict.public.data import PUBLIC_TABLE_PATH, ReferenceTableError, load_reference, parse_reference


@pytest.fixture(scope="module")
def rows():
    return load_reference()


def test_shipped_table_loads_with_a_source_on_every_row(rows) -> None:
    assert len(rows) >= 40
    for r in rows:
        assert r.source_url.startswith("https://github.com/XiongjieDai/GPU-Benchmarks-on-LLM-Inference/blob/")
        assert "pp512" in r.source_section and "tg512" in r.source_section
        assert r.build, r.label  # every row so far names its llama.cpp build
        assert r.pp_tps > 0 and r.tg_tps > 0 and r.n_prompt == 512 and r.n_gen == 512
    assert {r.model.name for r in rows} == {"Llama 3 8B", "Llama 3 70B"}
    assert {r.weight_type for r in rows} == {"Q4_K_M", "F16"}


def test_a_known_row_is_copied_exactly(rows) -> None:
    r = next(r for r in rows if r.gpu == "RTX 4090" and r.weight_type == "Q4_K_M")
    assert (r.tg_tps, r.tg_sd_tps, r.pp_tps, r.build) == (130.58, 0.66, 7138.99, "4426e298 (2824)")
    assert r.file_bytes == pytest.approx(4.58 * 2**30) and r.model.n_layer == 32
    assert r.source_url.endswith("LLaMA%203/Gaming%20GPUs/4090_v3.ipynb")


def test_every_gpu_is_a_shipped_profile_with_an_architecture(rows) -> None:
    profiles = {p.name: p for p in load_profiles([HARDWARE_PROFILES_DIR])}
    for gpu in {r.gpu for r in rows}:
        assert gpu in profiles, gpu
        assert profiles[gpu].architecture, gpu
    assert len({r.gpu for r in rows}) == 20


def test_excluded_figures_say_why(rows) -> None:
    excluded = [r for r in rows if r.exclude_pp or r.exclude_tg]
    assert {(r.gpu, r.weight_type) for r in excluded} == {("A100 80GB SXM", "F16"), ("L40S", "F16"), ("A40", "Q4_K_M")}
    assert all(len(r.exclude_pp) > 40 for r in excluded)


def _doc() -> dict:
    with PUBLIC_TABLE_PATH.open("rb") as f:
        return tomllib.load(f)


@pytest.mark.parametrize(("change", "needle"), [
    (lambda d: d["result"][0].pop("source_url"), "missing key 'source_url'"),
    (lambda d: d["result"][0].update(source_url="  "), "source_url must not be empty"),
    (lambda d: d["result"][0].update(model="Llama 9"), "model 'Llama 9' has no [[model]] table"),
    (lambda d: d["result"][0].update(tg_tps="fast"), "tg_tps must be a number"),
    (lambda d: d["result"][0].update(pp_tps=0), "must be positive"),
    (lambda d: d["result"][0].update(colour="red"), "unknown key 'colour'"),
    (lambda d: d["model"][0].update(tied_embeddings=1), "tied_embeddings must be true or false"),
    (lambda d: d.update(extra=[]), "unknown top-level key 'extra'"),
])
def test_malformed_tables_give_one_line(change, needle: str) -> None:
    doc = _doc()
    change(doc)
    with pytest.raises(ReferenceTableError) as info:
        parse_reference(doc)
    assert needle in str(info.value) and "\n" not in str(info.value)


def test_a_row_of_one_test_loads_and_the_fit_leaves_the_other_phase_out() -> None:
    """A source that published tg only (or pp only): its count is 0 and its figures absent; the fit uses the other
    phase alone. A count without its figure, a figure without its count, or neither test is refused in one line."""
    doc = _doc()
    tg_only = {k: v for k, v in doc["result"][0].items() if k not in ("pp_tps", "pp_sd_tps")} | {"n_prompt": 0}
    (r,) = parse_reference({"model": doc["model"], "result": [tg_only]})
    assert (r.n_prompt, r.pp_tps, r.tg_tps) == (0, 0.0, doc["result"][0]["tg_tps"])
    assert (published(r, "prefill"), used(r, "prefill"), used(r, "decode")) == (False, False, True)
    for bad, needle in (({**tg_only, "n_prompt": 512}, "pp_tps must be positive with a positive n_prompt"),
                        ({**tg_only, "pp_tps": 100.0}, "pp_tps must be positive with a positive n_prompt"),
                        ({**tg_only, "n_gen": 0, "tg_tps": 0}, "neither a pp")):
        with pytest.raises(ReferenceTableError) as info:
            parse_reference({"model": doc["model"], "result": [bad]})
        assert needle in str(info.value) and "\n" not in str(info.value)


def test_unreadable_files_give_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[[result]\n", encoding="utf-8")
    with pytest.raises(ReferenceTableError, match="not valid TOML"):
        load_reference(bad)
    with pytest.raises(ReferenceTableError, match="cannot read"):
        load_reference(tmp_path / "missing.toml")
