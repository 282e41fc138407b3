"""The chooser's one answer (issue #27): placements searched per file (everything on the GPU, MoE experts in
system RAM, the most layers that fit), every file judged measured > expected > ceiling, lineage, why each other
file lost, and the same decode figures as ``predict`` for the same question."""

from __future__ import annotations

from dataclasses import replace

import pytest

from app.choose.verdicts import Quality, evaluate_file, llama_server_command, recommend
from app.predict.answer import Machine, answer
from app.predict.memory.buffers import MIB
from app.predict.prediction import predict
from app.predict.profiles import GIB, HardwareProfile, cpu_profile, find_profile
from app.predict.settings import at_context
from app.results.row_types import ResultRow
from engines.base import resolve_n_threads
from tests.predict.answer_helpers import StandInFit, machine_of
from tests.predict.samples import make_facts, smollm2_facts


def _laptop(profiles: list[HardwareProfile]) -> HardwareProfile:
    return find_profile("RTX 4060 Laptop", profiles)


def moe_facts():
    """A Qwen3-30B-A3B-shaped MoE at ~4.5 bits per weight: 48 layers of 128 experts, 8 used per token (17 GB)."""
    return make_facts(name="moe-30b-a3b", n_params=30_500_000_000, weight_bytes=17_200_000_000,
                      file_bytes=17_250_000_000, n_layer=48, n_head=32, n_head_kv=4, n_embd=2048, n_ff=768,
                      n_expert=128, n_expert_used=8, n_vocab=151936)


def dense_14b_facts():
    """A 14B dense model at ~4.6 bits per weight (8.5 GB): too large for an 8 GB GPU."""
    return make_facts(name="dense-14b", n_params=14_770_000_000, weight_bytes=8_500_000_000,
                      file_bytes=8_510_000_000, n_layer=48, n_head=40, n_head_kv=8, n_embd=5120, n_ff=13824,
                      n_vocab=152064)


@pytest.mark.heavy  # seconds of placement search over full-size model shapes
def test_moe_keeps_the_fewest_layers_experts_in_system_ram(profiles: list[HardwareProfile]) -> None:
    gpu, facts = _laptop(profiles), moe_facts()
    c = evaluate_file("/m/moe.gguf", facts, gpu, 8192)
    assert c.status == "fits" and c.n_cpu_moe > 0 and c.n_gpu_layers == facts.n_layer + 1
    assert c.memory_bytes <= c.budget_bytes
    one_less = predict(facts, gpu, replace(at_context(8192, type_k=c.type_k), n_cpu_moe=c.n_cpu_moe - 1,
                                           device_margin_bytes=c.margin_bytes), tensor_bytes=None)
    assert not one_less.fit.fits  # the smallest -ncmoe that fits
    assert f"-ncmoe {c.n_cpu_moe} " in llama_server_command(c, 8192)
    assert "experts of" in c.placement and any("-ncmoe" in line for line in c.placements)
    # public llama-bench rows are full offloads: no expected figure borrowed for experts in system RAM
    assert c.decode_tps.kind == "ceiling"


@pytest.mark.heavy  # seconds of placement search over full-size model shapes
def test_one_answer_per_model_and_a_floor_is_never_met_by_a_ceiling(profiles: list[HardwareProfile]) -> None:
    """Issue #41 point 4: files of different models are never ranked on bits per weight: one answer per model, and
    the one to run named only where the floors leave one model; a floor is met by a measured figure or an expected
    band's low edge, never by a ceiling (a GPU not owned with layers in system RAM has only ceilings here)."""
    gpu = _laptop(profiles)
    dense = evaluate_file("/m/dense-14b.gguf", dense_14b_facts(), gpu, 8192)
    moe = evaluate_file("/m/moe-30b.gguf", moe_facts(), gpu, 8192)
    assert dense.status == "partial" and 0 < dense.n_gpu_layers < 49 and dense.n_cpu_moe == 0
    assert dense.decode_tps.kind == moe.decode_tps.kind == "ceiling"
    assert moe.decode_tps.value > dense.decode_tps.value  # 3B active read per token against 14B
    rec = recommend([dense, moe], gpu.name, 8192, min_decode_tps=min(dense.decode_tps.value, 1.0))
    assert rec.choice is None and "only a ceiling" in rec.sentence
    rec = recommend([dense, moe], gpu.name, 8192)
    assert rec.choice is None and [m for m, _ in rec.per_model] == ["dense-14b", "moe-30b-a3b"]
    one = dict(rec.per_model)
    assert one["dense-14b"].choice is dense
    assert f"{dense.n_gpu_layers} of 49 layers offloaded" in one["dense-14b"].sentence
    assert one["moe-30b-a3b"].choice is moe and "-ncmoe" in one["moe-30b-a3b"].command
    # nothing expected stands behind either pick (no public fit here): each sentence says it rests on a ceiling
    assert all("rests on a ceiling" in r.sentence for r in one.values())
    assert "a choice of model, not of quantization" in rec.sentence and "bits per weight" not in rec.sentence.split(
        "Per model:")[0]


def test_the_floors_name_the_one_model_that_meets_them(profiles: list[HardwareProfile]) -> None:
    """With expected figures (a stand-in fit of this machine's CUDA device and its CPU), the MoE's split meets a
    floor at its band's low edge and the dense model's does not: the answer runs the MoE, and says why not the other."""
    from tests.predict.answer_helpers import fixed

    gpu = _laptop(profiles)
    here = machine_of(gpu, fit=StandInFit({"CUDA,CPU": fixed(120.0), "CPU": fixed(12.0)}))
    dense = evaluate_file("/m/dense-14b.gguf", dense_14b_facts(), gpu, 8192, machine=here)
    moe = evaluate_file("/m/moe-30b.gguf", moe_facts(), gpu, 8192, machine=here)
    assert dense.decode_tps.kind == moe.decode_tps.kind == "split"
    floor = (moe.decode_tps.low + dense.decode_tps.low) / 2  # type: ignore[operator]
    assert dense.decode_tps.low < floor < moe.decode_tps.low  # type: ignore[operator]  # judged on the low edge
    rec = recommend([dense, moe], gpu.name, 8192, min_decode_tps=floor)
    assert rec.choice is moe and "-ncmoe" in rec.command and "only moe-30b-a3b has a file" in rec.sentence
    assert "dense-14b.gguf below the" in dict(rec.per_model)["dense-14b"].sentence


def _cpu() -> HardwareProfile:
    return cpu_profile("this CPU", 20.0, 200.0, 24 * GIB)


def _measured(filename: str, decode_tps: float, ttft_ms: float = 250.0, **settings: object) -> ResultRow:
    """A stable row of ``filename`` measured here (p512 n128 d0 on the CPU at the default thread count)."""
    return ResultRow.from_mapping({
        "model_filename": filename, "status": "ok", "decode_tps": decode_tps, "ttft_ms": ttft_ms, "n_prompt": 512,
        "n_gen": 128, "n_depth": 0, "n_gpu_layers_effective": 0, "n_threads": 0,
        "n_threads_effective": resolve_n_threads(0), "unstable": 0, "host_other_cpu_pct": 1.0, **settings})


def test_a_measured_file_is_judged_on_its_measurement_not_its_ceiling() -> None:
    cpu, facts = _cpu(), replace(smollm2_facts(), path="/m/q4_1.gguf")
    bare = evaluate_file("/m/q4_1.gguf", facts, cpu, 8192, machine=machine_of(cpu))
    assert bare.decode_tps.kind == "ceiling"
    here = machine_of(cpu, rows=(_measured("q4_1.gguf", 5.5),))
    c = evaluate_file("/m/q4_1.gguf", facts, cpu, 8192, machine=here)
    assert c.decode_tps.kind == "measured" and c.measured is not None
    assert c.decode_tps.value < 5.5  # at depth ~8k, scaled from depth 576 by the ceilings' ratio
    assert c.decode_empty_tps is not None and c.decode_tps.value < c.decode_empty_tps.value
    assert "5.5 tok/s at depth 576 (p512 n128 d0 ngl0 t" in c.decode_tps.source.detail
    assert c.decode_tps.source.name == "measured here" and c.ttft_ms.kind == "measured"
    # a floor the ceiling passes but the measurement does not: the file fails it, and the sentence says so
    rec = recommend([c], cpu.name, 8192, min_decode_tps=bare.decode_tps.value / 2)
    assert rec.choice is None and "measured" in rec.sentence


def test_a_measurement_at_another_placement_is_not_used(profiles: list[HardwareProfile]) -> None:
    laptop = _laptop(profiles)
    facts = replace(smollm2_facts(), path="/m/smol.gguf")
    c = evaluate_file("/m/smol.gguf", facts, laptop, 8192, machine=machine_of(laptop, rows=(_measured("smol.gguf",
                                                                                                     5.5),)))
    assert c.n_gpu_layers == 31 and c.decode_tps.kind != "measured" and c.measured is None


def _variant(name: str, file_type: str, bpw: float, cpu: HardwareProfile, *, requantized_from: str = "",
             kld: float | None = None, measured: float | None = None):
    facts = make_facts(**{**smollm2_facts().__dict__, "file_type": file_type, "path": f"/m/{name}",
                          "weight_bytes": int(134_515_008 * bpw / 8), "file_bytes": int(134_515_008 * bpw / 8)})
    rows = (_measured(name, measured),) if measured else ()
    return evaluate_file(f"/m/{name}", facts, cpu, 2048, requantized_from=requantized_from,
                         quality=Quality(kld) if kld is not None else None, machine=machine_of(cpu, rows=rows))


def test_a_requantized_copy_is_neither_better_than_nor_picked_over_its_source() -> None:
    cpu = _cpu()
    q4_1 = _variant("s-Q4_1.gguf", "Q4_1", 5.0, cpu)
    q8_0 = _variant("s-Q8_0.gguf", "Q8_0", 8.5, cpu, requantized_from="Q4_1")
    q4_0 = _variant("s-Q4_0.gguf", "Q4_0", 4.5, cpu, requantized_from="Q4_1")
    rec = recommend([q8_0, q4_1, q4_0], cpu.name, 2048)
    assert rec.choice is q4_1
    assert "s-Q8_0.gguf (requantized from s-Q4_1.gguf, so no better than it)" in rec.sentence
    # the copy is the pick only where the source fails a floor it meets
    q4_1_slow = _variant("s-Q4_1.gguf", "Q4_1", 5.0, cpu, measured=1.0)
    q8_0_fast = _variant("s-Q8_0.gguf", "Q8_0", 8.5, cpu, requantized_from="Q4_1", measured=50.0)
    rec = recommend([q8_0_fast, q4_1_slow], cpu.name, 2048, min_decode_tps=5.0)
    assert rec.choice is q8_0_fast and "s-Q4_1.gguf below the 5 tok/s floor" in rec.sentence


def test_a_requantized_copys_kld_is_no_better_than_its_sources() -> None:
    cpu = _cpu()
    q4_1 = _variant("s-Q4_1.gguf", "Q4_1", 5.0, cpu, kld=0.0053)
    q8_0 = _variant("s-Q8_0.gguf", "Q8_0", 8.5, cpu, requantized_from="Q4_1", kld=0.0001)
    rec = recommend([q8_0, q4_1], cpu.name, 2048)
    assert rec.choice is q4_1 and "KLD 0.0053, measured here" in rec.sentence
    assert "s-Q8_0.gguf (KLD 0.0053, requantized from s-Q4_1.gguf" in rec.sentence  # no better than its source


def test_the_sentence_says_why_a_better_file_lost_to_the_floor() -> None:
    cpu = _cpu()
    q8 = _variant("s-Q8_0.gguf", "Q8_0", 8.5, cpu, kld=0.0, measured=2.0)
    q4 = _variant("s-Q4_1.gguf", "Q4_1", 5.0, cpu, kld=0.0053, measured=80.0)
    rec = recommend([q8, q4], cpu.name, 2048, min_decode_tps=3.0)
    assert rec.choice is q4
    assert "of the files that fit and meet the floor, it weighs speed against expected quality best (balanced), " \
           "with an expected loss of KLD 0.0053, measured here" in rec.sentence
    assert "Better-quality files lost: s-Q8_0.gguf below the 3 tok/s floor" in rec.sentence


@pytest.mark.parametrize("ctx", [2048, 8192])
def test_predict_and_choose_give_the_same_decode_at_the_context(profiles: list[HardwareProfile], ctx: int) -> None:
    gpu, facts = _laptop(profiles), smollm2_facts()
    c = evaluate_file("/m/smol.gguf", facts, gpu, ctx, machine=Machine())
    got = answer(facts, gpu, at_context(ctx, type_k=c.type_k), Machine())
    assert c.decode_tps == got.decode and c.decode_depth == got.decode.depth
    assert c.decode_empty_tps == got.decode_empty


def test_no_prefill_figures_for_a_prompt_of_zero_tokens(profiles: list[HardwareProfile]) -> None:
    doc = predict(smollm2_facts(), _laptop(profiles), replace(at_context(4096), n_prompt=0)).to_json_dict()
    assert doc["prefill_ceiling_tps"] is None
    assert doc["decode_depth"] == 64 and doc["decode_ceiling_tps"] > 0
    got = answer(smollm2_facts(), _laptop(profiles), replace(at_context(4096), n_prompt=0))
    assert got.prefill is None and got.ttft_ms is None and got.to_json_dict()["prefill"] is None


@pytest.mark.heavy  # seconds of placement search over full-size model shapes
def test_memory_budget_is_bytes_not_mib(profiles: list[HardwareProfile]) -> None:
    c = evaluate_file("/m/moe.gguf", moe_facts(), _laptop(profiles), 8192)
    assert c.budget_bytes + c.margin_bytes == _laptop(profiles).vram_bytes and c.margin_bytes == 1024 * MIB


def test_a_measurement_is_scaled_to_the_asked_request_by_the_fit_where_there_is_one() -> None:
    """A 64-token prompt's prefill runs below a long prompt's batch rate; the ceilings cannot know that, this
    machine's fit can (here a stand-in fit whose prefill rate grows with the prompt, labelled as such)."""
    from app.predict.machine_fit.fitted_model import Expected

    def stand_in_fit(facts, s):  # test double for MachineFit.expected: prefill rises with the prompt's batch
        prefill = 100.0 * min(s.n_prompt, 512) / 512
        decode = 50.0 / (1 + (s.depth + s.n_prompt + s.n_gen / 2) / 4096)
        return {"prefill": Expected(prefill, prefill * 0.9, prefill * 1.1, "stand-in fit"),
                "decode": Expected(decode, decode * 0.9, decode * 1.1, "stand-in fit")}

    cpu, facts = _cpu(), replace(smollm2_facts(), path="/m/q4_1.gguf")
    short = _measured("q4_1.gguf", 40.0, 64 / 12.5 * 1000, n_prompt=64, n_gen=32, prefill_tps=12.5)
    by_ceilings = evaluate_file("/m/q4_1.gguf", facts, cpu, 2048, machine=machine_of(cpu, rows=(short,)))
    by_fit = evaluate_file("/m/q4_1.gguf", facts, cpu, 2048,
                           machine=machine_of(cpu, rows=(short,), fit=StandInFit({"CPU": stand_in_fit})))
    assert "by the ratio of the fit figures" in by_fit.ttft_ms.source.detail
    assert "by the ratio of the ceilings" in by_ceilings.ttft_ms.source.detail
    # the fit's prefill at the asked prompt is 8x its rate at 64 tokens: TTFT is the measured rate scaled by it
    asked_prompt = 2048 - 128
    assert by_fit.ttft_ms.value == pytest.approx(asked_prompt / (12.5 * 8) * 1000, rel=1e-6)
    assert by_fit.ttft_ms.value < by_ceilings.ttft_ms.value
    assert "at depth" in by_fit.decode_tps.source.detail and "fit figures" in by_fit.decode_tps.source.detail
