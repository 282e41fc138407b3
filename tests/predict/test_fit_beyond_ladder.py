"""This machine's fit beyond its ladder (issue #41 item 7): the last-level-cache term, a mixture's experts, the
stand-in of a type the ladder never measured, and a band that widens with how far a figure lies from the ladder's
models (leave one model out, leave one type out). Pure arithmetic on hand-made workloads; the synthetic files are
small (a few hundred KB)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from app.calibrate.ladder import held_out_stand_ins
from app.calibrate.synth_models import SynthShape, write_synth_model
from app.model.gguf_facts import read_model_facts
from app.predict.cpu_kernels import bits_per_weight
from app.predict.machine_fit.calibration_fit import (
    MachineContext,
    MachineFit,
    Sample,
    active_expert_params,
    beyond_ladder,
    expert_matmuls,
    fit_machine,
    leave_one_model_out,
    stand_in_scales,
    stand_in_share,
    workload_of,
)
from app.predict.machine_fit.fitted_model import REACH_Z, Expected, PhaseFit
from app.predict.machine_fit.workload import Workload, llc_share
from app.predict.settings import PredictSettings
from app.telemetry.cpu_cache import llc_bytes

MB = 1e6


def test_the_last_level_cache_serves_small_working_sets_and_none_beyond_it() -> None:
    llc = 32 << 20
    assert llc_share(8 * MB, llc) == 1.0  # well inside: every byte from the cache
    assert llc_share(llc / 2, llc) == 1.0
    assert llc_share(0.75 * llc, llc) == pytest.approx(0.5)  # linear between half the cache and the whole
    assert llc_share(llc, llc) == 0.0 and llc_share(300 * MB, llc) == 0.0
    assert llc_share(8 * MB, 0) == 0.0  # unknown size: no cache term


def test_decode_reads_cached_bytes_at_their_own_cost_and_an_old_fit_reads_them_from_memory() -> None:
    w = Workload({"q8_0": 10 * MB}, {"q8_0": 20e6}, n_layer=4, kv_bytes_read=0.0, attn_work=0.0, flash_attn=True,
                 n_prompt=32, llc_share=0.75)
    feats = w.features("decode")
    assert feats["bytes:q8_0"] == pytest.approx(2.5 * MB) and feats["bytes_llc"] == pytest.approx(7.5 * MB)
    old = PhaseFit("decode", {"bytes:q8_0": 4e-11, "layer": 1e-5, "fixed": 1e-4}, 0.05)
    assert old.seconds_per_token(w) == pytest.approx(10 * MB * 4e-11 + 4e-5 + 1e-4)  # every byte from memory
    new = replace(old, coefficients={**old.coefficients, "bytes_llc": 2e-11})
    assert new.seconds_per_token(w) == pytest.approx(2.5 * MB * 4e-11 + 7.5 * MB * 2e-11 + 4e-5 + 1e-4)


def test_llc_bytes_reads_the_deepest_data_cache(tmp_path: Path) -> None:
    for i, (level, kind, size) in enumerate([(1, "Data", "48K"), (1, "Instruction", "32K"), (2, "Unified", "1024K"),
                                             (3, "Unified", "32768K")]):
        d = tmp_path / f"index{i}"
        d.mkdir()
        (d / "level").write_text(f"{level}\n")
        (d / "type").write_text(f"{kind}\n")
        (d / "size").write_text(f"{size}\n")
    assert llc_bytes(tmp_path) == 32 << 20
    assert llc_bytes(tmp_path / "missing") == 0


def test_a_mixture_counts_its_active_experts_in_prefill_and_its_expert_matmuls_in_decode(tmp_path: Path) -> None:
    shape = SynthShape(256, 2, "Q8_0", ff_ratio=1.0, n_expert=8, n_expert_used=2, embd_type="F16")
    facts = read_model_facts(write_synth_model(tmp_path / "moe.gguf", shape))
    assert (facts.n_expert, facts.n_expert_used) == (8, 2)
    assert expert_matmuls(facts) == 2 * 3 * 2  # layers × gate, up, down × used
    expert = 256 * 256  # one expert's matrix: n_embd × n_ff
    assert active_expert_params(facts) == 2 * 3 * 2 * expert
    w = workload_of(facts, PredictSettings(n_ctx=256, n_prompt=64, n_gen=16))
    attn = 2 * 256 * (256 + 64 + 64 + 256)  # q, k, v, o of two layers (4 heads, 1 KV head of 64)
    router = 2 * 8 * 256
    output = 1024 * 256 / 64  # the last prompt token's logits, spread over the prompt
    norms = 2 * 2 * 256 + 256  # f32, counted as they always were
    assert sum(w.class_flops.values()) == pytest.approx(2 * (attn + router + 2 * 3 * 2 * expert + output + norms))
    assert w.decode_expert_matmuls == 12 and w.prefill_expert_flops == 2 * 12 * expert
    dense = read_model_facts(write_synth_model(tmp_path / "dense.gguf", SynthShape(256, 2, "Q8_0")))
    assert expert_matmuls(dense) == 0 and active_expert_params(dense) == 0


def test_a_stand_in_costs_the_larger_of_its_bytes_and_its_weights() -> None:
    assert bits_per_weight("Q3_K") == 3.4375 and bits_per_weight("Q5_K") == 5.5 and bits_per_weight("Q8_0") == 8.5
    coefficients = {"bytes:q5_k": 5e-11, "bytes:q8_0": 3e-11, "layer": 1e-5}
    # Q3_K through Q5_K's kernel: unpacking a weight costs as much as Q5_K's (ALU-bound), well above streaming it
    assert stand_in_scales(coefficients, {"Q3_K": "Q5_K"})["Q3_K"] == pytest.approx(5.5 / 3.4375)
    # Q8_0's bytes through Q5_K: streaming them (the cheapest byte known) costs more than Q5_K's per-weight work
    assert stand_in_scales({"bytes:q5_k": 5e-11, "bytes:q4_0": 4.5e-11}, {"Q8_0": "Q5_K"})["Q8_0"] == \
        pytest.approx(max(4.5 / 5.0, 5.5 / 8.5))
    assert stand_in_scales(coefficients, {"Q3_K": "Q6_K"}) == {}  # a stand-in the fit has no cost for


def test_leave_one_type_out_names_each_measured_types_stand_in() -> None:
    got = held_out_stand_ins(("Q4_0", "Q4_1", "Q5_0", "Q4_K", "Q5_K", "Q6_K", "Q8_0", "F16"), ("avx2",))
    assert got["Q4_1"] == "Q5_0" and got["Q5_0"] == "Q4_1" and got["Q6_K"] == "Q5_K"
    assert "Q4_0" not in got and "F16" not in got  # no other repacked type of its kind, no other float type


def _work(bytes_a: float, bytes_b: float, n_layer: int) -> Workload:
    return Workload({k: v for k, v in (("q8_0", bytes_a), ("q6_k", bytes_b)) if v}, {}, n_layer=n_layer,
                    kv_bytes_read=0.0, attn_work=0.0, flash_attn=True, n_prompt=32)


def _samples(law: dict[str, float], shapes: list[tuple[str, float, float, int]],
             odd: dict[str, float] | None = None) -> list[Sample]:
    """Samples whose decode follows ``law`` exactly, but for the models in ``odd`` (model -> factor on its time)."""
    out = []
    for model, a, b, n_layer in shapes:
        w = _work(a, b, n_layer)
        seconds = sum(law[k] * v for k, v in w.features("decode").items())
        out.append(Sample("CPU", w, f"{model} p32 d0", 1.0 / (seconds * (odd or {}).get(model, 1.0)), None, model))
    return out


LAW = {"bytes:q8_0": 3e-11, "bytes:q6_k": 4e-11, "layer": 2e-5, "fixed": 3e-4}
#: six Q8_0 models of several sizes and depths, and two Q6_K ones: the Q6_K cost rests on two models
SHAPES = [(f"a{i}", a * MB, 0.0, n) for i, (a, n) in enumerate([(20, 4), (40, 8), (60, 6), (80, 12), (100, 10),
                                                                 (120, 16)])] + [("b0", 0.0, 50 * MB, 8),
                                                                                 ("b1", 0.0, 75 * MB, 12)]


def test_leaving_one_model_out_moves_no_figure_where_the_models_agree() -> None:
    pts = [(s, s.decode_tps) for s in _samples(LAW, SHAPES)]
    refits = leave_one_model_out("decode", pts)
    assert len(refits) == len(SHAPES)
    fit = PhaseFit("decode", LAW, 0.05, refits=refits)
    assert fit.reach(_work(500 * MB, 300 * MB, 40)) < 1e-6  # far beyond the ladder, but every model agrees


def test_the_band_widens_where_one_model_alone_decides_a_term_the_figure_leans_on() -> None:
    samples = _samples(LAW, SHAPES, odd={"b1": 1.25})  # the two Q6_K models disagree by 25 %
    fit = fit_machine(samples, cpu_info="c", gpu_info="", build="b", created="d").fits["CPU"]["decode"]
    q8_heavy, q6_heavy = _work(400 * MB, 0.0, 24), _work(20 * MB, 400 * MB, 24)
    assert fit.reach(q6_heavy) > 0.05 > fit.reach(q8_heavy)
    base = Expected(100.0, 100.0 / (1 + fit.band_frac), 100.0 * (1 + fit.band_frac), "fit of this machine")
    near, far = beyond_ladder(base, fit, q8_heavy, 0.0, {}), beyond_ladder(base, fit, q6_heavy, 0.0, {})
    assert far.high - far.low > near.high - near.low
    assert far.high == pytest.approx(100.0 * (1 + fit.band_frac + REACH_Z * fit.reach(q6_heavy)))
    assert "one ladder model left out" in far.source and far.value == base.value


def test_a_type_read_through_a_stand_in_widens_by_the_stand_in_error_on_its_share() -> None:
    fit = PhaseFit("decode", LAW, 0.05, stand_in_error=0.2)
    base = Expected(50.0, 50.0 / 1.05, 50.0 * 1.05, "fit of this machine")
    got = beyond_ladder(base, fit, _work(100 * MB, 0.0, 8), 0.5, {"Q3_K": "Q5_K"})
    assert got.high == pytest.approx(50.0 * (1 + 0.05 + 0.5 * 0.2))
    assert "Q3_K read as Q5_K" in got.source
    assert beyond_ladder(base, fit, _work(100 * MB, 0.0, 8), 0.0, {}) == base  # nothing beyond: unchanged


def test_a_fit_carries_its_reach_through_json_and_an_older_one_has_none(tmp_path: Path) -> None:
    samples = _samples(LAW, SHAPES, odd={"b1": 1.25})
    ctx = MachineContext({"Q8_0": "q8_0", "Q6_K": "q6_k", "Q3_K": "q6_k"}, 1 << 20, 32 << 20, {"Q8_0": "Q6_K"})
    fit = fit_machine(samples, cpu_info="c", gpu_info="", build="b", created="d", context=ctx)
    back = MachineFit.from_json_dict(fit.to_json_dict())
    assert back == fit and back.context.llc_bytes == 32 << 20 and back.fits["CPU"]["decode"].refits
    doc = fit.to_json_dict()
    del doc["llc_bytes"], doc["held_out_stand_ins"]
    for phase in doc["fits"]["CPU"].values():
        del phase["refits"], phase["stand_in_error"]
    old = MachineFit.from_json_dict(doc)
    assert old.context.llc_bytes == 0 and not old.fits["CPU"]["decode"].refits


def test_a_stand_in_types_share_is_of_its_bytes_or_parameters(tmp_path: Path) -> None:
    shape = SynthShape(256, 2, "Q8_0", mix=((r"blk\.\d+\.ffn_down\.weight", "Q3_K"),))
    facts = read_model_facts(write_synth_model(tmp_path / "mix.gguf", shape))
    assert set(facts.tensor_types) == {"Q8_0", "Q3_K", "F32"}
    share = stand_in_share(facts, {"Q3_K": "Q5_K"}, "decode")
    down = facts.tensor_bytes["blk.0.ffn_down.weight"] * 2
    assert share == pytest.approx(down / (facts.weight_bytes - facts.tensor_bytes["token_embd.weight"]))
    assert stand_in_share(facts, {}, "decode") == 0.0
