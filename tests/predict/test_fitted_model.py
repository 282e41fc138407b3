"""The fitted model's form: known parameters are recovered from synthetic points; degenerate input is refused."""

from __future__ import annotations

import numpy as np
import pytest

from app.predict.machine_fit.fitted_model import BAND_FLOOR, FitError, PhaseFit, fit_phase
from app.predict.machine_fit.workload import Workload, kernel_class, workload_for

TRUE_DECODE = {"bytes:q_legacy": 1 / 9e9, "bytes:f16": 1 / 14e9, "kv:fa": 1 / 6e9, "attn:fa": 1 / 30e9,
               "layer": 40e-6, "fixed": 300e-6}
TRUE_PREFILL = {"flops:q_legacy": 1 / 60e9, "flops:f16": 1 / 35e9, "attn:fa": 1 / 20e9, "layer": 30e-6,
                "layer_ubatch": 2e-3}


def ladder(n_prompts: tuple[int, ...] = (32, 128)) -> list[Workload]:
    """Workloads like the calibration ladder's: two classes, three widths (GQA 1 and 4), two depths, two prompt
    lengths."""
    out = []
    for wtype, bpw in (("Q4_0", 4.5), ("F16", 16.0)):
        for n_embd, n_layer, gqa in ((256, 4, 1), (512, 8, 4), (768, 6, 4)):
            params = 10 * n_embd * n_embd * n_layer
            for depth in (0, 1024):
                for p in n_prompts:
                    out.append(workload_for({wtype: params * bpw / 8, "F32": 4 * n_embd * n_layer},
                                            {wtype: params}, n_layer=n_layer, n_embd_attn=n_embd,
                                            kv_bytes_per_token=4 * n_layer * n_embd / gqa, n_prompt=p, n_gen=16,
                                            depth=depth))
    return out


def tps(coefs: dict[str, float], w: Workload, phase: str) -> float:
    return 1.0 / sum(coefs[k] * v for k, v in w.features(phase).items())  # type: ignore[arg-type]


@pytest.mark.parametrize(("phase", "truth"), [("decode", TRUE_DECODE), ("prefill", TRUE_PREFILL)])
def test_fit_recovers_known_parameters_within_2_percent(phase: str, truth: dict[str, float]) -> None:
    rng = np.random.default_rng(1)
    works = ladder()
    points = [(w, tps(truth, w, phase) * (1 + rng.normal(0, 0.003))) for w in works]
    fit = fit_phase(phase, points)  # type: ignore[arg-type]
    assert set(fit.coefficients) == set(truth)
    for name, value in truth.items():
        assert fit.coefficients[name] == pytest.approx(value, rel=0.02), name
    assert fit.worst_error < 0.02
    assert fit.band_frac == BAND_FLOOR


def test_expected_carries_band_and_source_and_round_trips() -> None:
    works = ladder()
    fit = fit_phase("decode", [(w, tps(TRUE_DECODE, w, "decode")) for w in works])
    exp = fit.expected(works[3], "fit of this machine")
    assert exp is not None and exp.kind == "expected" and exp.source == "fit of this machine"
    assert exp.value == pytest.approx(tps(TRUE_DECODE, works[3], "decode"), rel=1e-6)
    assert exp.low == pytest.approx(exp.value / (1 + BAND_FLOOR)) and exp.high == pytest.approx(exp.value * 1.05)
    again = PhaseFit.from_json_dict(fit.to_json_dict())
    assert again.coefficients == fit.coefficients and again.points == fit.points


def test_band_follows_the_residuals() -> None:
    rng = np.random.default_rng(2)
    works = ladder()
    noisy = [(w, tps(TRUE_DECODE, w, "decode") * (1 + rng.choice([-0.2, 0.2]))) for w in works]
    fit = fit_phase("decode", noisy)
    assert fit.band_frac > 0.1
    assert fit.worst_error >= fit.median_error > 0.05


def test_uncalibrated_class_gives_no_expected_figure() -> None:
    fit = fit_phase("decode", [(w, tps(TRUE_DECODE, w, "decode")) for w in ladder()])
    other = workload_for({"Q6_K": 1e7}, {"Q6_K": 1e7}, n_layer=4, n_embd_attn=256, kv_bytes_per_token=1e3,
                         n_prompt=64, n_gen=16)
    assert fit.missing(other) == ["bytes:k_quant"]
    assert fit.expected(other, "x") is None


def test_too_few_points_is_a_clear_error() -> None:
    works = ladder()[:4]
    with pytest.raises(FitError, match="points for .* coefficients"):
        fit_phase("decode", [(w, 100.0) for w in works])


def test_one_model_size_cannot_separate_bytes_from_fixed_costs() -> None:
    works = [w for w in ladder() if w.n_layer == 8]
    with pytest.raises(FitError, match="cannot separate"):
        fit_phase("decode", [(w, tps(TRUE_DECODE, w, "decode")) for w in works * 3])


def test_one_prompt_length_cannot_separate_per_ubatch_costs() -> None:
    works = ladder(n_prompts=(64,)) * 2
    with pytest.raises(FitError, match="cannot separate"):
        fit_phase("prefill", [(w, tps(TRUE_PREFILL, w, "prefill")) for w in works])


def test_kernel_classes_and_minor_types() -> None:
    assert kernel_class("Q4_K") == kernel_class("Q6_K") == "k_quant"
    assert kernel_class("q4_1") == "q_legacy" and kernel_class("F16") == "f16"
    w = workload_for({"Q4_1": 1e8, "F32": 1e5}, {"Q4_1": 2e8, "F32": 2.5e4}, n_layer=2, n_embd_attn=64,
                     kv_bytes_per_token=0, n_prompt=8, n_gen=8)
    assert dict(w.class_bytes) == {"q_legacy": 1e8 + 1e5}


def test_an_outlier_is_set_aside_and_the_parameters_still_recovered() -> None:
    works = ladder()
    points = [(w, tps(TRUE_DECODE, w, "decode")) for w in works]
    points[5] = (points[5][0], points[5][1] * 0.2)  # a test slowed 5× by another process
    fit = fit_phase("decode", points)
    assert [p.used for p in fit.points].count(False) == 1 and not fit.points[5].used
    for name, value in TRUE_DECODE.items():
        assert fit.coefficients[name] == pytest.approx(value, rel=0.02), name
    assert fit.worst_error < 0.02


def test_costs_are_never_negative() -> None:
    """Points whose small models run *faster* than the form allows would want a negative fixed cost: it is 0."""
    works = ladder()
    truth = dict(TRUE_DECODE, fixed=0.0)
    points = [(w, tps(truth, w, "decode") * (1.3 if w.n_layer == 4 else 1.0)) for w in works]
    fit = fit_phase("decode", points)
    assert min(fit.coefficients.values()) >= 0.0
    assert all(p.fitted_tps > 0 for p in fit.points)


def test_attention_beyond_the_cache_is_its_own_term() -> None:
    """The KV span per head (depth + prompt keys × bytes per key) beyond the cache adds a cost per unit of attention
    work; the fit recovers it from points on both sides, and without a cache size the term is absent."""
    truth = dict(TRUE_PREFILL, **{"attn_spill:fa": 1 / 8e9})
    works = []
    for w in ladder():
        for depth in (0, 2048, 4096):
            works.append(workload_for(
                {"F16": 2e7}, {"F16": sum(w.class_flops.values()) / 2}, n_layer=w.n_layer, n_embd_attn=256,
                kv_bytes_per_token=1e3, n_prompt=w.n_prompt, n_gen=16, depth=depth, kv_head_bytes_per_token=256,
                cache_bytes=512 * 1024))
    near = next(w for w in works if w.n_prompt == 32 and w.attn_work and w.attn_spill_work == 0)
    deep = max(works, key=lambda w: w.attn_spill_work)
    assert deep.attn_spill_work == pytest.approx(deep.attn_work * (1 - 512 * 1024 / ((4096 + 128) * 256)))
    assert "attn_spill:fa" not in near.features("prefill")
    truth = {k: v for k, v in truth.items() if "q_legacy" not in k}
    fit = fit_phase("prefill", [(w, tps(truth, w, "prefill")) for w in works])
    for name, value in truth.items():
        assert fit.coefficients[name] == pytest.approx(value, rel=0.02), name
    unknown = workload_for({"F16": 2e7}, {"F16": 1e7}, n_layer=4, n_embd_attn=256, kv_bytes_per_token=1e3,
                           n_prompt=512, n_gen=16, depth=4096, kv_head_bytes_per_token=256)
    assert unknown.attn_spill_work == 0 and "attn_spill:fa" not in unknown.features("prefill")


def test_the_caller_names_the_kernel_classes() -> None:
    w = workload_for({"Q4_1": 1e8, "Q4_0": 5e7}, {"Q4_1": 2e8, "Q4_0": 1e8}, n_layer=2, n_embd_attn=64,
                     kv_bytes_per_token=0, n_prompt=8, n_gen=8, classify=str.lower)
    assert dict(w.class_bytes) == {"q4_1": 1e8, "q4_0": 5e7}


def _split_ladder() -> list[Workload]:
    """Like the calibration ladder's anchor: widths at depths either side of the CPU's split-KV switch."""
    out = []
    for n_embd, n_layer, gqa in ((256, 16, 1), (512, 6, 4), (576, 8, 3), (1024, 8, 4)):
        params = 10 * n_embd * n_embd * n_layer
        for depth, p in ((0, 32), (0, 240), (0, 256), (256, 32), (1024, 32), (2048, 256), (4096, 512)):
            out.append(workload_for({"Q8_0": params * 8.5 / 8}, {"Q8_0": params}, n_layer=n_layer,
                                    n_embd_attn=n_embd, kv_bytes_per_token=4 * n_layer * n_embd / gqa,
                                    n_prompt=p, n_gen=32, depth=depth, split_kv_cells=512))
    return out


def test_decode_attention_either_side_of_the_split_kv_switch_is_recovered_within_2_percent() -> None:
    # attention at ~100 ns a head (64 wide) and cell on the whole-head path, ~50 ns on the split one, which also
    # costs 30 µs a layer
    truth = {"bytes:q8_0": 1 / 9e9, "kv:fa": 1 / 8e9, "attn:fa": 1 / 0.6e9, "attn_view:fa": 1 / 1.2e9,
             "split:fa": 30e-6, "layer": 40e-6, "fixed": 300e-6}
    rng = np.random.default_rng(5)
    works = _split_ladder()
    whole_heads = [w for w in works if w.decode_split_share == 0]
    straddling = [w for w in works if 0 < w.decode_split_share < 1]
    assert whole_heads and straddling and len(whole_heads) < len(works)  # both paths are in the ladder
    # 0.1 % noise: deep points are mostly attention, so the per-layer and fixed costs rest on the shallow ones
    fit = fit_phase("decode", [(w, tps(truth, w, "decode") * (1 + rng.normal(0, 0.001))) for w in works])
    assert set(fit.coefficients) == set(truth)
    for name, value in truth.items():
        assert fit.coefficients[name] == pytest.approx(value, rel=0.02), name


def test_a_token_splits_from_position_256_on_and_costs_its_padded_view() -> None:
    def work(depth: int, p: int, n_gen: int = 32) -> Workload:
        return workload_for({"Q8_0": 1e6}, {"Q8_0": 1e6}, n_layer=8, n_embd_attn=1024, kv_bytes_per_token=1.0,
                            n_prompt=p, n_gen=n_gen, depth=depth, split_kv_cells=512)
    per_cell = 8 * 1024
    assert work(0, 32).decode_split_share == 0.0 and work(0, 32).decode_attn_split_work == 0.0
    assert work(0, 224).decode_split_share == 0.0  # positions 224..255: a view of 256 cells
    deep = work(0, 512)  # positions 512..543: 513..544 cells, a view of 768: every token on the split path
    assert deep.decode_split_share == 1.0
    assert deep.decode_attn_split_used_work == pytest.approx(deep.decode_attn_work)
    assert deep.decode_attn_split_work == pytest.approx(768 * per_cell)  # the view, not the used cells
    half = work(0, 240)  # positions 240..271: 256..271 split, each with a view of 512 cells
    assert half.decode_split_share == 0.5
    assert half.decode_attn_split_used_work == pytest.approx(sum(p + 0.5 for p in range(256, 272)) * per_cell / 32)
    assert half.decode_attn_split_work == pytest.approx(16 * 512 * per_cell / 32)
    feats = half.features("decode")
    assert feats["split:fa"] == pytest.approx(0.5 * 8)
    assert feats["attn:fa"] == pytest.approx(half.decode_attn_work - half.decode_attn_split_used_work)
    across = work(4096, 400, 128)  # positions 4496..4623: 112 tokens with a view of 4608, 16 of 4864
    assert across.decode_attn_split_work == pytest.approx((112 * 4608 + 16 * 4864) * per_cell / 128)


def test_a_fit_without_the_split_terms_takes_all_decode_attention_as_one() -> None:
    old = PhaseFit("decode", {"bytes:q8_0": 1 / 9e9, "kv:fa": 1 / 40e9, "attn:fa": 1 / 5e9, "layer": 40e-6,
                              "fixed": 300e-6}, 0.05, ())
    w = _split_ladder()[-1]
    feats = w.features("decode")
    assert not old.missing(w)
    expected_s = sum(old.coefficients[k] * v for k, v in feats.items() if k not in ("attn_view:fa", "split:fa",
                                                                                     "attn:fa")) \
        + old.coefficients["attn:fa"] * w.decode_attn_work
    assert old.seconds_per_token(w) == pytest.approx(expected_s)  # as the old fit was made: one attention term


def test_a_fit_whose_split_term_counted_used_cells_predicts_as_it_was_made() -> None:
    coefs = {"bytes:q8_0": 1 / 9e9, "kv:fa": 1 / 40e9, "attn:fa": 1 / 5e9, "attn_split:fa": 1 / 10e9,
             "split:fa": 30e-6, "layer": 40e-6, "fixed": 300e-6}
    old = PhaseFit("decode", coefs, 0.05, ())
    w = _split_ladder()[-1]
    assert not old.missing(w) and w.decode_attn_split_work > w.decode_attn_split_used_work > 0
    feats = w.features("decode")
    expected_s = sum(coefs[k] * v for k, v in feats.items() if k != "attn_view:fa") \
        + coefs["attn_split:fa"] * w.decode_attn_split_used_work
    assert old.seconds_per_token(w) == pytest.approx(expected_s)


def test_too_few_points_fold_the_split_kv_terms_away() -> None:
    truth = {"bytes:q8_0": 1 / 9e9, "kv:fa": 1 / 8e9, "attn:fa": 1 / 0.6e9, "attn_view:fa": 1 / 1.2e9,
             "split:fa": 30e-6, "layer": 40e-6, "fixed": 300e-6}
    # two points per shape, one on each path: 8 points, where 7 terms need 9
    works = [w for i, w in enumerate(_split_ladder()) if i % 7 in (0, 5)]
    assert {"attn_view:fa", "split:fa"} <= {k for w in works for k in w.features("decode")}
    fit = fit_phase("decode", [(w, tps(truth, w, "decode")) for w in works])
    assert "split:fa" not in fit.coefficients and "attn_view:fa" in fit.coefficients
    assert fit.seconds_per_token(works[-1]) > 0  # it still predicts, as a fit saved without the term does
    with pytest.raises(FitError):
        fit_phase("decode", [(w, tps(truth, w, "decode")) for w in works[:3]])


def test_a_fit_that_folded_the_view_away_predicts_with_the_terms_it_was_fitted_with() -> None:
    truth = {"bytes:q8_0": 1 / 9e9, "kv:fa": 1 / 8e9, "attn:fa": 1 / 0.6e9, "attn_view:fa": 1 / 1.2e9,
             "split:fa": 30e-6, "layer": 40e-6, "fixed": 300e-6}
    works = [w for i, w in enumerate(_split_ladder()) if i % 7 in (0, 5)][:7]  # 7 points: 5 terms at most
    fit = fit_phase("decode", [(w, tps(truth, w, "decode")) for w in works])
    assert not {"split:fa", "attn_view:fa"} & set(fit.coefficients)
    # each point as fitted: the fit's own residuals and its predictions agree
    for p, w in zip(fit.points, works, strict=True):
        assert 1.0 / fit.seconds_per_token(w) == pytest.approx(p.fitted_tps, rel=1e-9)


def _width_ladder() -> list[Workload]:
    """Two classes, each at three widths and two layer counts, short and long prompts from empty and at depth."""
    out = []
    for wtype, bpw in (("Q4_1", 5.0), ("Q8_0", 8.5)):
        for n_embd, n_layer in ((256, 16), (512, 6), (512, 24), (1024, 8)):
            params = 12 * n_embd * n_embd * n_layer
            for depth, p in ((0, 32), (0, 256), (1024, 256)):
                out.append(workload_for({wtype: params * bpw / 8}, {wtype: params}, n_layer=n_layer,
                                        n_embd_attn=n_embd, kv_bytes_per_token=n_layer * n_embd, n_prompt=p,
                                        n_gen=16, depth=depth, width_per_layer=n_embd * 3.75))
    return out


def test_per_class_width_costs_are_recovered_within_2_percent() -> None:
    truth = {"flops:q_legacy": 1 / 55e9, "flops:q8_0": 1 / 110e9, "width:q_legacy": 20e-9, "width:q8_0": 6e-9,
             "attn:fa": 1 / 20e9, "layer": 3e-6, "layer_ubatch": 2e-4}
    works = _width_ladder()
    assert works[0].width_work == 16 * 256 * 3.75
    fit = fit_phase("prefill", [(w, tps(truth, w, "prefill")) for w in works])
    assert set(fit.coefficients) == set(truth)
    for name, value in truth.items():
        assert fit.coefficients[name] == pytest.approx(value, rel=0.02), name
    # With noise the width term trades against attention (both grow with layers × width; only the prompt length and
    # depth tell them apart), so the coefficient moves more than the others; the figures it predicts do not.
    rng = np.random.default_rng(3)
    noisy = fit_phase("prefill", [(w, tps(truth, w, "prefill") * (1 + rng.normal(0, 0.003))) for w in works])
    held_out = workload_for({"Q4_1": 9e7 * 5 / 8}, {"Q4_1": 9e7}, n_layer=30, n_embd_attn=576,
                            kv_bytes_per_token=30 * 192, n_prompt=512, n_gen=16, width_per_layer=576 + 1536)
    assert 1 / noisy.seconds_per_token(held_out) == pytest.approx(tps(truth, held_out, "prefill"), rel=0.02)
    # FLOPs alone (no width term) cannot fit narrow and wide models of one type at once
    no_width = [(w, tps(truth, w, "prefill")) for w in works]
    plain = fit_phase("prefill", [(Workload(**{**w.__dict__, "width_work": 0.0}), r) for w, r in no_width])
    assert plain.worst_error > 0.05


def test_a_fit_without_the_width_term_predicts_as_it_was_made() -> None:
    old = PhaseFit("prefill", {"flops:q8_0": 1 / 100e9, "attn:fa": 1 / 20e9, "layer": 3e-6, "layer_ubatch": 2e-4},
                   0.05, ())
    w = _width_ladder()[-1]
    assert any(k.startswith("width:") for k in w.features("prefill"))
    assert not old.missing(w)
    feats = {k: v for k, v in w.features("prefill").items() if not k.startswith("width:")}
    assert old.seconds_per_token(w) == pytest.approx(sum(old.coefficients[k] * v for k, v in feats.items()))
    new = PhaseFit("prefill", {**old.coefficients, "width:q8_0": 5e-9}, 0.05, ())
    assert new.seconds_per_token(w) > old.seconds_per_token(w)
