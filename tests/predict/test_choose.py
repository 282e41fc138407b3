"""The chooser's pure part: fit per KV-cache type, the configuration picked, the ranking and the command."""

from __future__ import annotations

from dataclasses import replace

import pytest

from app.choose.verdicts import (
    Quality,
    display_name,
    evaluate_file,
    llama_server_command,
    recommend,
)
from app.predict.memory.buffers import MIB
from app.predict.profiles import GIB, HardwareProfile, find_profile
from tests.predict.samples import make_facts, smollm2_facts


def _gpu(profiles: list[HardwareProfile], vram_mib: float) -> HardwareProfile:
    return replace(find_profile("RTX 4060 Laptop", profiles), vram_gib=vram_mib * MIB / GIB)


def test_smollm2_memory_by_hand(profiles: list[HardwareProfile]) -> None:
    """8192 tokens, f16 cache: 30 layers × 8192 cells × 3 heads × 64 × 2 (K and V) × 2 bytes = 180 MiB, plus the
    weights, the flash-attention compute buffer (ubatch 512: the logits stage, 4 × (49152 + 3 × 576) × 512) and
    the 512 MiB GPU allowance."""
    c = evaluate_file("/m/smol.gguf", smollm2_facts(), _gpu(profiles, 8192), 8192)
    assert c.kv_bytes == 180 * MIB
    assert c.compute_bytes == 4 * (49152 + 3 * 576) * 512
    assert c.memory_bytes == 96_576_768 + 180 * MIB + c.compute_bytes + 512 * MIB
    assert (c.status, c.type_k, c.n_gpu_layers, c.kv_types_fitting) == ("fits", "f16", 31, ("f16", "q8_0", "q4_0"))


def test_a_smaller_cache_type_makes_it_fit(profiles: list[HardwareProfile]) -> None:
    # f16 needs ~882 MiB, q8_0 ~798 MiB, q4_0 ~754 MiB: with 800 MiB left beside the 1 GiB margin only the quantized
    # caches fit entirely; the sentence names the cache's quality cost and why it was taken
    c = evaluate_file("/m/smol.gguf", smollm2_facts(), _gpu(profiles, 800 + 1024), 8192)
    assert (c.status, c.type_k, c.kv_types_fitting) == ("fits", "q8_0", ("q8_0", "q4_0"))
    assert c.memory_bytes <= c.budget_bytes and c.margin_bytes == 1024 * MIB
    assert c.budget_bytes + c.margin_bytes == 1824 * MIB
    rec = recommend([c], "GPU", 8192)
    assert "q8_0 KV cache was chosen because an f16 cache does not fit entirely on the GPU" in rec.sentence
    assert "it costs quality: about 0.0008 KLD, up to 0.04" in rec.sentence


def test_the_margin_is_kept_free_and_can_be_set(profiles: list[HardwareProfile]) -> None:
    """Every placement leaves the margin free (llama.cpp's --fit-target, 1 GiB by default); a smaller margin lets
    more of a large model on the GPU."""
    from app.predict.questions import Question

    big, gpu = make_facts(), _gpu(profiles, 5 * 1024)  # 4 GB of weights on a 5 GiB card
    kept = evaluate_file("/m/7b.gguf", big, gpu, 8192)
    assert kept.memory_bytes + kept.margin_bytes <= gpu.vram_bytes and kept.margin_bytes == 1024 * MIB
    none = evaluate_file("/m/7b.gguf", big, gpu, 8192, question=Question(n_ctx=8192, margin_bytes=0))
    assert none.margin_bytes == 0 and none.n_gpu_layers > kept.n_gpu_layers
    assert "1.0 GiB of the GPU kept free" in kept.verdict


def test_partial_offload_and_no_fit(profiles: list[HardwareProfile]) -> None:
    big = make_facts()  # 4 GB of weights
    c = evaluate_file("/m/7b.gguf", big, _gpu(profiles, 3 * 1024), 8192)
    assert c.status == "partial" and 0 < c.n_gpu_layers < big.n_layer + 1 and c.kv_types_fitting == ()
    assert c.memory_bytes <= c.budget_bytes
    full = evaluate_file("/m/7b.gguf", big, _gpu(profiles, 8 * 1024), 8192)
    assert c.decode_tps.value < full.decode_tps.value  # layers on the CPU slow decoding
    none = evaluate_file("/m/7b.gguf", big, _gpu(profiles, 400), 8192)
    assert none.status == "does_not_fit" and not none.usable


def test_ceiling_is_labelled_when_no_efficiency(profiles: list[HardwareProfile]) -> None:
    c = evaluate_file("/m/smol.gguf", smollm2_facts(), _gpu(profiles, 8192), 8192)
    assert c.decode_tps.kind == "ceiling" and "(ceiling)" in c.decode_tps.text()


def _choices(profiles: list[HardwareProfile], klds: dict[str, float | None]) -> list:
    """Three quantizations of one model on this machine's GPU, expected figures from its stored runs (a stand-in)."""
    from app.predict.machine_fit.store_efficiency import Efficiency
    from tests.predict.answer_helpers import StandInEfficiency, machine_of

    gpu = _gpu(profiles, 8192)
    here = machine_of(gpu, efficiency=StandInEfficiency(Efficiency(prefill=0.5, decode=0.6)))
    out = []
    for i, (name, kld) in enumerate(klds.items()):
        facts = make_facts(weight_bytes=4_000_000_000 - i * 800_000_000, file_bytes=4_000_000_000 - i * 800_000_000)
        q = Quality(mean_kld=kld) if kld is not None else None
        out.append(evaluate_file(f"/m/{name}", facts, gpu, 8192, quality=q, machine=here))
    return out


def test_the_pick_weighs_measured_kld_against_speed_by_the_preference(profiles: list[HardwareProfile]) -> None:
    """``quality`` takes the lowest loss; ``balanced`` (the default) gives up 0.05 KLD for every 1.5× of speed
    and says what it trades; ``speed`` the fastest that is not far worse; floors first in each."""
    import math

    from app.predict.expected_quality import preference_score

    choices = _choices(profiles, {"q8.gguf": 0.001, "q6.gguf": 0.01, "q4.gguf": 0.05})
    rec = recommend(choices, "RTX 4060 Laptop", 8192, prefer="quality")
    assert rec.choice is choices[0] and "KLD 0.0010, measured here" in rec.sentence
    assert rec.command == "llama-server -m /m/q8.gguf -ngl 33 -c 8192 -ctk f16 -ctv f16 -fa on"
    rec = recommend(choices, "RTX 4060 Laptop", 8192)
    scores = [preference_score(c.decode_tps.value, c.quality.mean_kld) for c in choices]  # type: ignore[union-attr]
    assert rec.choice is choices[scores.index(max(scores))]
    if rec.choice is not choices[0]:  # the lower-loss file it passed over, and by how much
        ratio = rec.choice.decode_tps.value / choices[0].decode_tps.value  # type: ignore[union-attr]
        assert f"q8.gguf would be about {rec.choice.quality.mean_kld - 0.001:.4f} KLD better and {ratio:.1f}× " \
               "slower" in rec.sentence  # type: ignore[union-attr]
        assert math.log(ratio) / math.log(1.5) * 0.05 > rec.choice.quality.mean_kld - 0.001  # type: ignore[union-attr]
    floor = (choices[0].decode_tps.value + choices[2].decode_tps.value) / 2  # only the smallest is fast enough
    rec = recommend(choices, "RTX 4060 Laptop", 8192, min_decode_tps=floor, prefer="quality")
    assert rec.choice is choices[2] and f"above the {floor:g} tok/s floor" in rec.sentence
    rec = recommend(choices, "RTX 4060 Laptop", 8192, min_decode_tps=floor, max_kld=0.02)
    assert rec.choice is None and "KLD within 0.02" in rec.sentence
    rec = recommend(choices, "RTX 4060 Laptop", 8192, min_decode_tps=1e9)
    assert rec.choice is None and "No file is shown to reach" in rec.sentence
    assert all(f"{c.filename} below the 1e+09 tok/s floor" in rec.sentence for c in choices)  # each named, and why


def test_unmeasured_quality_is_the_published_figure_for_its_type(profiles: list[HardwareProfile]) -> None:
    """Without a measurement a file's expected loss is llama.cpp's published figure for its type (Q4_K_M: 0.0313,
    its LLaMA 3 8B scoreboard), with a band, said so; a measured file beside it keeps its measurement."""
    choices = _choices(profiles, {"q8.gguf": None, "q6.gguf": 0.01})
    assert choices[0].expected_quality is not None and choices[0].expected_quality.kind == "published"
    assert choices[0].expected_quality.kld == pytest.approx(0.031273)
    assert choices[0].expected_quality.low < 0.031273 < choices[0].expected_quality.high
    assert choices[1].expected_quality.kind == "measured"  # type: ignore[union-attr]
    rec = recommend(choices, "RTX 4060 Laptop", 8192)
    assert rec.choice is choices[1]  # measured lower and faster
    assert "q8.gguf (KLD 0.0313 published" in rec.sentence


def test_bits_past_q8_0_count_for_nothing_in_the_ranking() -> None:
    from app.choose.verdicts import quality_bits_per_weight
    from app.model.facts import TensorTypeStat

    n = 1_000_000  # elements of each part: MXFP4 experts (4.25 bits) beside F16 or Q8_0 attention
    experts = TensorTypeStat(10, n * 17 // 32, n)
    f16_form = make_facts(tensor_types={"MXFP4": experts, "F16": TensorTypeStat(5, 2 * n, n)})
    q8_form = make_facts(tensor_types={"MXFP4": experts, "Q8_0": TensorTypeStat(5, n * 34 // 32, n)})
    q6_form = make_facts(tensor_types={"MXFP4": experts, "Q6_K": TensorTypeStat(5, n * 210 // 256, n)})
    assert quality_bits_per_weight(f16_form) == quality_bits_per_weight(q8_form) == (4.25 + 8.5) / 2
    assert quality_bits_per_weight(q6_form) < quality_bits_per_weight(q8_form)  # Q6_K's 6.56 bits still count
    assert quality_bits_per_weight(make_facts()) == make_facts().bits_per_weight  # no types: the file's own


def test_nothing_fits() -> None:
    assert recommend([], "X", 4096).choice is None


def test_url_command_and_names(profiles: list[HardwareProfile]) -> None:
    url = "https://huggingface.co/o/r/resolve/main/m-Q4_K_M.gguf?download=true"
    assert display_name(url) == "m-Q4_K_M.gguf" and display_name("/a/b/c.gguf") == "c.gguf"
    c = evaluate_file(url, smollm2_facts(), _gpu(profiles, 8192), 4096)
    assert llama_server_command(c, 4096).startswith(f"llama-server -mu '{url}' -ngl 31 -c 4096")


@pytest.mark.parametrize("ctx", [512, 8192])
def test_memory_grows_with_context(profiles: list[HardwareProfile], ctx: int) -> None:
    c = evaluate_file("/m/smol.gguf", smollm2_facts(), _gpu(profiles, 8192), ctx)
    assert c.kv_bytes == 30 * 768 * max(ctx, 512)


def test_choice_row_has_every_column(profiles: list[HardwareProfile]) -> None:
    from app.choose.verdicts import CHOICE_COLUMNS, choice_row

    c = evaluate_file("/m/smol.gguf", smollm2_facts(), _gpu(profiles, 8192), 8192, quality=Quality(0.02, 21.0, 0.9))
    row = choice_row(c)
    assert list(row) == [k for k, _, _ in CHOICE_COLUMNS]
    assert (row["mean_kld"], row["status"], row["kv_types_fitting"]) == (0.02, "fits", "f16,q8_0,q4_0")
    assert row["memory_mib"] == round(c.memory_bytes / MIB, 1)
