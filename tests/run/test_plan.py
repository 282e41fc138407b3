"""Sweep plans: llama-bench list syntax, crossing, ordering that minimises model loads, presets."""

from __future__ import annotations

import pytest

from app.paths import SWEEP_PRESETS_DIR
from app.run.params import FLASH_ATTN
from app.run.plan import PlanError, SweepSpec, TestSpec, count_loads, load_sweep_preset, order_tests, parse_list


def test_parse_list_values_and_ranges() -> None:
    assert parse_list("-p", "128,512", int) == [128, 512]
    assert parse_list("-p", "256-2048*2", int) == [256, 512, 1024, 2048]
    assert parse_list("-d", "0-4096+2048", int) == [0, 2048, 4096]
    assert parse_list("-fa", "0,1,auto", FLASH_ATTN) == [0, 1, -1]
    assert parse_list("-ctk", "f16,q8_0", str) == ["f16", "q8_0"]


@pytest.mark.parametrize("text", ["12x", "1-5*1", "", "a,b"])
def test_parse_list_rejects_garbage_with_the_flag_named(text: str) -> None:
    with pytest.raises(PlanError, match="-p"):
        parse_list("-p", text, int)


def test_every_combination_runs() -> None:
    spec = SweepSpec(models=["a.gguf", "b.gguf"], n_prompt=[128, 512], n_gen=[64], n_depth=[0, 4096],
                     n_gpu_layers=[0, 99], type_k=["f16", "q8_0"], flash_attn=[False, True])
    tests = spec.tests()
    assert len(tests) == 2 * 2 * 1 * 2 * 2 * 2 * 2
    assert len({t.to_dict().values().__repr__() for t in tests}) == len(tests)


def test_ordering_loads_each_model_once_per_gpu_layer_setting() -> None:
    spec = SweepSpec(models=["a.gguf", "b.gguf"], n_prompt=[128, 512], n_depth=[0, 4096],
                     n_gpu_layers=[0, 99], type_k=["f16", "q8_0"])
    tests = spec.tests()
    distinct = {t.load_key() for t in tests}
    assert count_loads(tests) == len(distinct) == 4


def test_order_tests_groups_a_shuffled_list() -> None:
    a = [TestSpec("a.gguf", n_prompt=p) for p in (1, 2)]
    b = [TestSpec("b.gguf", n_prompt=p) for p in (1, 2)]
    shuffled = [a[0], b[0], a[1], b[1]]
    assert count_loads(shuffled) == 4
    ordered = order_tests(shuffled)
    assert count_loads(ordered) == 2
    assert ordered == [a[0], a[1], b[0], b[1]]  # first-seen order kept inside and across groups


def test_type_v_stays_f16_unless_given_like_llama_bench() -> None:
    assert SweepSpec(models=["m.gguf"], type_k=["q8_0"]).tests()[0].type_v == "f16"
    both = SweepSpec(models=["m.gguf"], type_k=["q8_0"], type_v=["q8_0"]).tests()[0]
    assert (both.type_k, both.type_v) == ("q8_0", "q8_0")


def test_n_ctx_covers_depth_prompt_and_generation_for_every_sequence() -> None:
    t = TestSpec("m.gguf", n_prompt=512, n_gen=128, n_depth=4096, n_parallel=4)
    assert t.n_ctx >= 4 * (4096 + 512 + 128)
    assert t.n_ctx % 256 == 0


@pytest.mark.parametrize("bad", [dict(type_k=["q9_9"]), dict(n_prompt=[-1]), dict(repetitions=0),
                                 dict(n_prompt=[0], n_gen=[0]), dict(n_parallel=[0])])
def test_invalid_sweeps_are_refused(bad: dict) -> None:
    with pytest.raises(PlanError):
        SweepSpec(models=["m.gguf"], **bad).tests()


@pytest.mark.parametrize("name", ["quick", "standard", "long-context", "chat", "rag"])
def test_shipped_presets_load(name: str) -> None:
    spec = load_sweep_preset(SWEEP_PRESETS_DIR / f"{name}.toml")
    spec.models = ["m.gguf"]
    assert spec.tests()


def test_worked_example_presets_hold_the_worked_lengths() -> None:
    chat = load_sweep_preset(SWEEP_PRESETS_DIR / "chat.toml")
    rag = load_sweep_preset(SWEEP_PRESETS_DIR / "rag.toml")
    assert (chat.n_prompt, chat.n_gen) == ([1000], [300])
    assert (rag.n_prompt, rag.n_gen) == ([12000], [500])
    assert max(load_sweep_preset(SWEEP_PRESETS_DIR / "long-context.toml").n_depth) == 16384


def test_preset_errors_name_the_file(tmp_path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[sweep]\nn_promt = [1]\n")
    with pytest.raises(PlanError, match=r"bad\.toml: unknown key 'n_promt'"):
        load_sweep_preset(bad)
    broken = tmp_path / "broken.toml"
    broken.write_text("[sweep\n")
    with pytest.raises(PlanError, match="broken.toml: not valid TOML"):
        load_sweep_preset(broken)
    with pytest.raises(PlanError, match="not found"):
        load_sweep_preset(tmp_path / "missing.toml")
