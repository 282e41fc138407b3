"""The one parameter table: it drives argparse, TOML presets, SweepSpec/TestSpec and rows; flash attention values."""

from __future__ import annotations

import argparse
from dataclasses import fields, replace
from pathlib import Path

import pytest

from app.cli.main import build_parser
from app.cli.run_cmd import build_sweep
from app.run.params import FA_AUTO, PARAM, PARAMS, flash_attn_text, parse_flash_attn
from app.run.plan import PlanError, RemoteTest, SweepSpec, TestSpec, load_sweep_preset
from app.run.rows import base_row


def _run_parser() -> argparse.ArgumentParser:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["run"]


def _toml(value: object) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return str(value).lower() if isinstance(value, bool) else str(value)


@pytest.mark.parametrize("prm", PARAMS, ids=lambda p: p.name)
def test_every_parameter_has_a_run_option_with_its_flags_dest_and_help(prm) -> None:  # noqa: ANN001
    options = {a.dest: a for a in _run_parser()._actions}
    assert prm.name in options, f"gguf-bench run has no option for {prm.name}"
    action = options[prm.name]
    assert tuple(action.option_strings) == prm.flags
    assert action.help == prm.help and action.default is None  # None: "not given", the preset or default stays


@pytest.mark.parametrize("prm", [p for p in PARAMS if p.default is not None], ids=lambda p: p.name)
def test_every_parameter_is_a_toml_key_and_a_spec_field(prm, tmp_path: Path) -> None:  # noqa: ANN001
    assert prm.name in {f.name for f in fields(SweepSpec)} and prm.name in {f.name for f in fields(TestSpec)}
    assert getattr(SweepSpec(), prm.name) == (list(prm.default) if prm.is_list else prm.default)
    assert getattr(TestSpec("m.gguf"), prm.name) == prm.first_default
    value = prm.default[-1] if prm.is_list else prm.default
    preset = tmp_path / "one.toml"
    preset.write_text(f"[sweep]\n{prm.name} = {_toml(value)}\n")
    spec = load_sweep_preset(preset)
    assert getattr(spec, prm.name) == ([value] if prm.is_list else value)
    row = base_row(TestSpec("m.gguf"), 0)
    assert row.value(prm.row_column) == prm.first_default


def test_command_line_values_reach_the_spec_through_the_table() -> None:
    args = _run_parser().parse_args(["-m", "m.gguf", "-p", "8,16", "-fa", "0,1,auto", "-ctv", "q8_0", "-r", "2",
                                     "--parallel", "1-4*2", "-t", "2"])
    spec = build_sweep(args)
    assert (spec.n_prompt, spec.flash_attn, spec.type_v, spec.repetitions) == ([8, 16], [0, 1, -1], ["q8_0"], 2)
    assert (spec.n_parallel, spec.n_threads, spec.n_gen) == ([1, 2, 4], [2], [128])
    assert build_sweep(_run_parser().parse_args(["-m", "m.gguf", "-fa", "-1"])).flash_attn == [FA_AUTO]
    with pytest.raises(PlanError, match=r"-fa: cannot read 'no'"):
        build_sweep(_run_parser().parse_args(["-m", "m.gguf", "-fa", "no"]))


@pytest.mark.parametrize(("text", "value"), [
    ("on", 1), ("1", 1), ("true", 1), ("enabled", 1), ("off", 0), ("0", 0), ("false", 0), ("disabled", 0),
    ("auto", -1), ("-1", -1), (" Auto ", -1), (True, 1), (False, 0), (-1, -1), (0, 0), (1, 1),
])
def test_flash_attn_accepts_the_llama_bench_spellings(text: object, value: int) -> None:
    assert parse_flash_attn(text) == value


@pytest.mark.parametrize("bad", ["no", "yes", "2", "", "fa", 2, -2, 1.0, None])
def test_flash_attn_refuses_anything_else(bad: object) -> None:
    with pytest.raises(ValueError, match="on, off or auto"):
        parse_flash_attn(bad)


def test_flash_attn_no_in_a_preset_is_a_one_line_error_naming_file_and_key(tmp_path: Path) -> None:
    preset = tmp_path / "strict.toml"
    preset.write_text('[sweep]\nflash_attn = "no"\n')
    with pytest.raises(PlanError) as err:
        load_sweep_preset(preset)
    assert str(err.value).startswith(f"{preset}: flash_attn value 'no'") and "\n" not in str(err.value)
    preset.write_text('[sweep]\nflash_attn = [true, "auto", -1, "off", 0]\n')
    assert load_sweep_preset(preset).flash_attn == [1, -1, -1, 0, 0]


@pytest.mark.parametrize(("line", "match"), [
    ('n_prompt = ["128"]', r"n_prompt value '128' is not an integer"),
    ("n_gen = [true]", r"n_gen value True is not an integer"),
    ('type_k = "q9_9"', r"unknown cache type 'q9_9' for type_k"),
    ("n_parallel = 0", r"n_parallel value 0 must be ≥ 1"),
    ("repetitions = [3]", r"repetitions value \[3\] is not an integer"),
    ("description = 3", r"description must be a string"),
])
def test_preset_values_are_read_strictly(tmp_path: Path, line: str, match: str) -> None:
    preset = tmp_path / "bad.toml"
    preset.write_text(f"[sweep]\n{line}\n")
    with pytest.raises(PlanError, match=rf"bad\.toml: {match}"):
        load_sweep_preset(preset)


def test_flash_attn_defaults_to_auto_like_llama_bench() -> None:
    test = SweepSpec(models=["m.gguf"]).tests()[0]
    assert test.flash_attn == FA_AUTO
    assert base_row(test, 0).flash_attn == -1
    assert flash_attn_text(FA_AUTO) == "auto"


def test_old_stored_test_dicts_with_booleans_still_load() -> None:
    old = {"model_path": "m.gguf", "n_prompt": 32, "flash_attn": True, "gone_field": 1}
    assert TestSpec.from_dict(old).flash_attn == 1
    assert TestSpec.from_dict({**old, "flash_attn": False}).flash_attn == 0
    spec = TestSpec.from_dict(old)
    assert spec.to_dict()["flash_attn"] == 1 and TestSpec.from_dict(spec.to_dict()) == spec
    # bools in a SweepSpec built in code count as 0/1 too, and keep their crossing
    tests = SweepSpec(models=["m.gguf"], flash_attn=[False, True]).tests()
    assert [t.flash_attn for t in tests] == [0, 1]


def test_empty_v_cache_list_means_same_as_k() -> None:
    tests = SweepSpec(models=["m.gguf"], type_k=["f16", "q8_0"], type_v=[]).tests()
    assert [(t.type_k, t.type_v) for t in tests] == [("f16", "f16"), ("q8_0", "q8_0")]


def test_short_name_is_built_from_the_table_tags() -> None:
    t = TestSpec("/models/Qwen3-8B-Q4_K_M.gguf", n_prompt=128, n_gen=32, type_k="q8_0")
    assert t.short_name() == "Qwen3-8B-Q4_K_M p128 n32 d0 ngl99 q8_0 fa auto"
    assert replace(t, flash_attn=0).short_name() == "Qwen3-8B-Q4_K_M p128 n32 d0 ngl99 q8_0 fa0"
    assert TestSpec.from_dict({**t.to_dict(), "flash_attn": True, "n_parallel": 4}).short_name().endswith(" fa1 x4")
    assert TestSpec.from_dict({"model_path": "m.gguf"}).short_name() == "m p512 n128 d0 ngl99 f16 fa auto"
    assert RemoteTest("http://h", "qwen", 64, 16, 4, 16, rate_rps=2.0).short_name() == "qwen p64 n16 c4 2/s"


def test_gui_label_and_cli_progress_use_the_same_name() -> None:
    from app.cli.progress import Progress
    from app.run.live import test_label

    t = TestSpec("m.gguf", flash_attn=0, n_parallel=2)
    progress = Progress(1, enabled=False)
    progress.test = t
    assert progress._name() == test_label(t) == t.short_name() == "m p512 n128 d0 ngl99 f16 fa0 x2"


def test_table_limits_are_the_validation_limits() -> None:
    for name in ("n_batch", "n_ubatch", "n_parallel", "repetitions"):
        assert PARAM[name].min == 1
    with pytest.raises(PlanError, match="n_ubatch value 0 must be ≥ 1"):
        SweepSpec(models=["m.gguf"], n_ubatch=[0]).tests()
    with pytest.raises(PlanError, match="flash_attn value 'sometimes'"):
        SweepSpec(models=["m.gguf"], flash_attn=["sometimes"]).tests()
    with pytest.raises(PlanError, match="type_k needs at least one value"):
        SweepSpec(models=["m.gguf"], type_k=[]).tests()
