"""Bounded input (issue #13): every count is checked before anything is allocated or planned, in one place
(params.PARAMS limits and SweepSpec.validate), so the CLI, TOML presets and the sweep editor refuse alike."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from app.model.gguf_facts import read_model_facts
from app.run.model_limits import context_warnings, too_big_for_memory
from app.run.params import MAX_LIST_VALUES, MAX_TESTS, MAX_TOKENS, THREADS_PER_CPU, parse_list
from app.run.plan import PlanError, SweepSpec, TestSpec, load_sweep_preset
from app.telemetry.host import usable_cpu_threads


def test_a_prompt_past_the_bound_is_one_line() -> None:
    spec = SweepSpec(models=["m.gguf"], n_prompt=[5_000_000_000])
    with pytest.raises(PlanError, match=r"^command line: n_prompt value 5000000000 must be ≤ 16777216$"):
        spec.validate("command line")


@pytest.mark.parametrize("text", ["1-100000000", "1-100000000000000000000+1", "1-" + "9" * 400 + "*2", "1-2000"])
def test_huge_ranges_are_refused_before_they_are_built(text: str) -> None:
    t0 = time.perf_counter()
    with pytest.raises(PlanError) as info:
        parse_list("-p", text, int)
    assert str(info.value) == f"-p: {text!r} gives more than 1,000 values (at most 1,000 in one list)"
    assert time.perf_counter() - t0 < 0.5


def test_many_small_parts_are_refused_too() -> None:
    with pytest.raises(PlanError, match="more than 1,000 values"):
        parse_list("-n", ",".join(["1-600"] * 2), int)
    assert len(parse_list("-n", "1-1000", int)) == MAX_LIST_VALUES


def test_too_many_tests_name_the_lists_and_nothing_is_built() -> None:
    spec = SweepSpec(models=["m.gguf"], n_prompt=list(range(1, 1001)), n_gen=list(range(1, 1001)))
    assert spec.n_tests() == 1_000_000
    with pytest.raises(PlanError) as info:
        spec.tests()
    assert str(info.value) == ("sweep: 1,000,000 tests, at most 10,000 in one sweep; shorten the lists "
                               "(n_prompt (-p) 1000, n_gen (-n) 1000)")
    ok = SweepSpec(models=["m.gguf"], n_prompt=list(range(1, 101)), n_gen=list(range(1, 101)))
    assert len(ok.tests()) == ok.n_tests() == MAX_TESTS


def test_a_1000_by_1000_toml_grid_is_refused_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "grid.toml"
    path.write_text(f"[sweep]\nn_prompt = {list(range(1, 1001))}\nn_gen = {list(range(1, 1001))}\n")
    t0 = time.perf_counter()
    with pytest.raises(PlanError, match=rf"^{path}: 1,000,000 tests, at most 10,000"):
        load_sweep_preset(path)
    assert time.perf_counter() - t0 < 2


def test_a_list_longer_than_the_cap_in_toml(tmp_path: Path) -> None:
    path = tmp_path / "long.toml"
    path.write_text(f"[sweep]\nn_depth = {list(range(2000))}\n")
    with pytest.raises(PlanError, match=rf"^{path}: n_depth has 2,000 values \(at most 1,000 in one list\)$"):
        load_sweep_preset(path)


def test_a_context_past_the_bound_is_refused() -> None:
    spec = SweepSpec(models=["m.gguf"], n_prompt=[100_000], n_depth=[100_000], n_parallel=[256])
    with pytest.raises(PlanError, match="a test needs a context of 51,233,024 tokens"):
        spec.validate()
    SweepSpec(models=["m.gguf"], n_prompt=[MAX_TOKENS // 2 - 200], n_gen=[1]).validate()


def test_threads_far_beyond_the_usable_cpus_are_refused() -> None:
    limit = THREADS_PER_CPU * usable_cpu_threads()
    SweepSpec(models=["m.gguf"], n_threads=[limit]).validate()
    with pytest.raises(PlanError, match=rf"n_threads {limit + 1:,} is far beyond the {usable_cpu_threads()} CPU"):
        SweepSpec(models=["m.gguf"], n_threads=[limit + 1]).validate()
    with pytest.raises(PlanError, match="n_threads value 9999 must be ≤ 4096"):
        SweepSpec(models=["m.gguf"], n_threads=[9999]).validate()


@pytest.mark.parametrize("toml, needle", [
    ("[sweep]\nn_prompt = [8]\n[extra]\nn_gen = [4]\n", "unknown table [extra]"),
    ("n_gen = 4\n[sweep]\nn_prompt = [8]\n", "unknown key 'n_gen' outside [sweep]"),
    ("[sweeps]\nn_prompt = [8]\n", "unknown table [sweeps]"),
    ("sweep = 3\n", "'sweep' must be a table"),
    ('[sweep]\nflash_attn = "no"\n', "flash_attn value 'no' is not on, off or auto"),
    ("[sweep]\nprompt_file = 7\n", "prompt_file value 7 is not a string"),
])
def test_sweep_files_with_unknown_tables_or_bad_values(tmp_path: Path, toml: str, needle: str) -> None:
    path = tmp_path / "odd.toml"
    path.write_text(toml)
    with pytest.raises(PlanError) as info:
        load_sweep_preset(path)
    assert needle in str(info.value) and str(path) in str(info.value) and "\n" not in str(info.value)


def test_a_directory_as_sweep_file(tmp_path: Path) -> None:
    with pytest.raises(PlanError, match="is a directory, not a sweep file"):
        load_sweep_preset(tmp_path)


@pytest.mark.heavy  # the real model
def test_past_the_trained_context_is_a_warning_naming_model_and_context(smollm2_path: Path) -> None:
    facts = {str(smollm2_path): read_model_facts(smollm2_path)}
    inside = TestSpec(str(smollm2_path), n_prompt=100, n_gen=92, n_depth=8000)
    past = TestSpec(str(smollm2_path), n_prompt=512, n_gen=128, n_depth=8192)
    assert context_warnings([inside], facts) == []
    (line,) = context_warnings([inside, past], facts)
    assert smollm2_path.name in line and "8,832 tokens" in line and "trained context of 8,192" in line


@pytest.mark.heavy  # the real model
def test_a_kv_cache_beyond_ram_and_vram_fails_before_loading(smollm2_path: Path) -> None:
    facts = {str(smollm2_path): read_model_facts(smollm2_path)}
    machine = {"ram_total_bytes": 8 * 2**30, "gpus": [{"vram_total_bytes": 8 * 2**30}]}
    # SmolLM2: 30 layers × 3 KV heads × 64 × 2 (K and V) × 2 bytes = 23,040 bytes per token in f16
    fits = TestSpec(str(smollm2_path), n_depth=700_000)  # 16.1 GB < 16 GiB
    too_big = TestSpec(str(smollm2_path), n_depth=800_000)  # 18.4 GB
    out = too_big_for_memory([fits, too_big], facts, machine)
    assert list(out) == [too_big]
    assert "cannot allocate a context for SmolLM2" in out[too_big] and "16.0 GiB of memory" in out[too_big]
    assert too_big_for_memory([too_big], facts, {}) == {}  # RAM unknown: no guess
