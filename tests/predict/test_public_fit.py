"""The public-GPU fit: synthetic rows with known parameters are recovered; the shipped table's leave-one-out runs."""

from __future__ import annotations

import dataclasses
import math

import pytest

from app.paths import HARDWARE_PROFILES_DIR
from app.predict.profiles import HardwareProfile, find_profile, load_profiles
from app.predict.public.arch_fit import (
    KAPPA_GRID,
    ArchFit,
    Demand,
    compute_scale,
    fit_phase_rows,
    leave_one_gpu_out,
    reference_demand,
    summarize,
)
from app.predict.public.bands import Basis, Memory, Situation
from app.predict.public.data import ReferenceModel, ReferenceResult, load_reference
from app.predict.public.fit import PublicGpuModel

SMALL = ReferenceModel("Small", 32, 4096, 128256, 32, 8, 128, False, "test")
BIG = ReferenceModel("Big", 80, 8192, 128256, 64, 8, 128, False, "test")
MID = ReferenceModel("Mid", 40, 5120, 128256, 40, 8, 128, False, "test")
TRUE_DECODE = {"class:k_quant": 1 / 0.80, "class:f16": 1 / 0.90, "layer": 60e-6, "fixed": 400e-6}
TRUE_PREFILL = {"class:k_quant": 1 / 0.45, "class:f16": 1 / 0.60, "layer": 2e-6}
TRUE_KAPPA = KAPPA_GRID[16]


def gpu(name: str, bw: float, tflops: float, watts: float, arch: str = "Synth") -> HardwareProfile:
    return HardwareProfile(name=name, vendor="NVIDIA", kind="desktop", vram_gib=48, memory_bus_bits=384,
                           memory_data_rate_gbps=bw / 48, peak_bandwidth_gbps=bw, fp16_tensor_tflops=tflops,
                           source="test", tdp_w=watts, architecture=arch)


# The power cap binds on B, C and D, not on A and E: with any one left out, both kinds remain, so κ stays identified.
GPUS = [gpu("A", 360, 100, 300), gpu("B", 1000, 300, 300), gpu("C", 700, 200, 400), gpu("D", 250, 60, 100),
        gpu("E", 500, 150, 500)]
PROFILES = {p.name: p for p in GPUS}


def row(gpu_name: str, model: ReferenceModel, weight_type: str) -> ReferenceResult:
    n_params_b = 8.03 if model is SMALL else 70.55
    size_gib = n_params_b * (0.57 if weight_type == "Q4_K_M" else 1.86)
    return ReferenceResult(
        gpu=gpu_name, model=model, weight_type=weight_type, ggml_type="Q4_K" if weight_type == "Q4_K_M" else "F16",
        file_size_gib=size_gib, n_params_b=n_params_b, backend="CUDA", n_gpu_layers=99, n_prompt=512, pp_tps=1.0,
        pp_sd_tps=0.0, n_gen=512, tg_tps=1.0, tg_sd_tps=0.0, build="", source_url="https://example.org/x",
        source_section="test",
    )


def truth(r: ReferenceResult) -> ReferenceResult:
    """The row with the rates the true parameters give."""
    p = PROFILES[r.gpu]
    dec = sum(TRUE_DECODE[k] * v for k, v in reference_demand(r, p, "decode").features().items())
    pre = sum(TRUE_PREFILL.get(k, 0.0) * v for k, v in reference_demand(r, p, "prefill", TRUE_KAPPA).features().items())
    return dataclasses.replace(r, tg_tps=1 / dec, pp_tps=1 / pre)


@pytest.fixture(scope="module")
def synthetic() -> list[ReferenceResult]:
    rows = [row(g.name, SMALL, wt) for g in GPUS for wt in ("Q4_K_M", "F16")]
    rows += [row(g.name, BIG, "Q4_K_M") for g in GPUS]
    return [truth(r) for r in rows]


def test_power_cap_only_binds_above_kappa_times_watts() -> None:
    assert compute_scale(GPUS[0], 0.4) == 1.0  # 100 TFLOPS < 0.4 × 300 W
    assert compute_scale(GPUS[1], 0.4) == pytest.approx(300 / 120)
    assert compute_scale(GPUS[1], None) == 1.0


def test_decode_parameters_are_recovered_within_2_percent(synthetic) -> None:
    fit = fit_phase_rows("decode", synthetic, PROFILES, "Synth")
    assert set(fit.coefficients) == set(TRUE_DECODE)
    for name, value in TRUE_DECODE.items():
        assert fit.coefficients[name] == pytest.approx(value, rel=0.02), name


def test_prefill_parameters_and_power_cap_are_recovered(synthetic) -> None:
    fit = fit_phase_rows("prefill", synthetic, PROFILES, "Synth")
    assert fit.tflops_per_w == TRUE_KAPPA
    for name, value in TRUE_PREFILL.items():
        assert fit.coefficients[name] == pytest.approx(value, rel=0.02), name
    assert fit.coefficients.get("fixed", 0.0) == pytest.approx(0.0, abs=1e-9)


def test_leave_one_gpu_out_on_exact_data_predicts_every_gpu(synthetic) -> None:
    held = leave_one_gpu_out(synthetic, PROFILES)
    assert len(held) == 2 * len(synthetic)
    s = summarize(held)
    assert s.unpredicted == 0 and s.worst < 0.01


def test_a_wrong_rate_shows_as_held_out_error(synthetic) -> None:
    bent = [dataclasses.replace(r, tg_tps=r.tg_tps * 1.5) if r.gpu == "D" else r for r in synthetic]
    held = [h for h in leave_one_gpu_out(bent, PROFILES) if h.phase == "decode" and h.row.gpu == "D"]
    assert all(h.rel_error == pytest.approx(1 / 1.5 - 1, rel=0.05) for h in held)


# ------------------------------------------------------------------------------------------ the ALU side (roofline)

TRUE_ALU_OPS = 30.0
# ALU-poor GPUs (P, Q, R: few FLOPs per byte of bandwidth) unpack their quantized weights slower than they stream
# them; S and T do not. Two or more on each side, so either side stays identified with any one GPU left out.
ALU_GPUS = [gpu("P", 400, 10, 60, "Unified"), gpu("Q", 800, 27, 200, "Unified"), gpu("R", 68, 2.3, 20, "Unified"),
            gpu("S", 400, 40, 90, "Unified"), gpu("T", 300, 30, 40, "Unified")]
ALU_PROFILES = {p.name: p for p in ALU_GPUS}


def alu_truth(r: ReferenceResult) -> ReferenceResult:
    """The row's decode rate under max(bytes / (η·BW), a × matmul params / FLOPS) + overheads."""
    d = reference_demand(r, ALU_PROFILES[r.gpu], "decode")
    streamed = sum(TRUE_DECODE[k] * v for k, v in d.features().items() if k.startswith("class:"))
    alu = TRUE_ALU_OPS * d.alu_s if d.quantized else 0.0
    return dataclasses.replace(r, tg_tps=1 / (max(streamed, alu) + TRUE_DECODE["layer"] * d.n_layer
                                               + TRUE_DECODE["fixed"]))


@pytest.fixture(scope="module")
def alu_rows() -> list[ReferenceResult]:
    rows = [row(g.name, m, wt) for g in ALU_GPUS for m in (SMALL, BIG) for wt in ("Q4_K_M", "F16")]
    return [alu_truth(r) for r in rows]


def test_alu_bound_decode_is_recovered_within_2_percent(alu_rows) -> None:
    bound = {r.gpu for r in alu_rows
             if r.ggml_type == "Q4_K" and TRUE_ALU_OPS * reference_demand(r, ALU_PROFILES[r.gpu], "decode").alu_s
             > TRUE_DECODE["class:k_quant"] * reference_demand(r, ALU_PROFILES[r.gpu], "decode").ideal_s["k_quant"]}
    assert bound and bound != set(ALU_PROFILES)  # both sides of the max are in the data
    fit = fit_phase_rows("decode", alu_rows, ALU_PROFILES, "Unified")
    assert fit.alu_ops == pytest.approx(TRUE_ALU_OPS, rel=0.02)
    for name, value in TRUE_DECODE.items():
        assert fit.coefficients[name] == pytest.approx(value, rel=0.02), name
    held = leave_one_gpu_out(alu_rows, ALU_PROFILES)
    assert summarize(h for h in held if h.phase == "decode").worst < 0.02


def test_bandwidth_bound_data_keep_the_linear_form(synthetic) -> None:
    assert fit_phase_rows("decode", synthetic, PROFILES, "Synth").alu_ops == 0.0
    f16_only = [r for r in synthetic if r.ggml_type == "F16"]
    assert fit_phase_rows("decode", f16_only, PROFILES, "Synth").alu_ops == 0.0  # nothing to unpack


def test_the_alu_side_binds_only_on_quantized_weights(alu_rows) -> None:
    fit = fit_phase_rows("decode", alu_rows, ALU_PROFILES, "Unified")
    slow = ALU_PROFILES["R"]
    q4, f16 = (next(r for r in alu_rows if r.gpu == "R" and r.model is SMALL and r.weight_type == wt)
               for wt in ("Q4_K_M", "F16"))
    d_q4, d_f16 = reference_demand(q4, slow, "decode"), reference_demand(f16, slow, "decode")
    assert d_q4.alu_s == d_f16.alu_s > 0 and d_q4.quantized and not d_f16.quantized
    assert fit.tps(d_f16) == pytest.approx(f16.tg_tps, rel=0.02)
    assert fit.tps(d_q4) == pytest.approx(q4.tg_tps, rel=0.02)


# ------------------------------------------------------------------------------------------ other forms (hooks)


def alu_s(r: ReferenceResult) -> float:
    """A made-up ALU time: 4 ops per weight at the GPU's spec rate (quantized rows only)."""
    return 0.0 if r.ggml_type == "F16" else 4 * r.n_params / (PROFILES[r.gpu].fp16_tensor_tflops * 1e12)


def with_known_alu(r, p, phase, kappa=None) -> Demand:
    d = reference_demand(r, p, phase, kappa)
    return dataclasses.replace(d, known_s=alu_s(r)) if phase == "decode" else d


def with_fitted_alu(r, p, phase, kappa=None) -> Demand:
    d = reference_demand(r, p, phase, kappa)
    return dataclasses.replace(d, extra={"alu": alu_s(r)}) if phase == "decode" else d


def test_unfitted_seconds_are_taken_out_of_the_fit_and_added_to_its_predictions(synthetic) -> None:
    slower = [dataclasses.replace(r, tg_tps=1 / (1 / r.tg_tps + alu_s(r))) for r in synthetic]
    fit = fit_phase_rows("decode", slower, PROFILES, "Synth", with_known_alu)
    for name, value in TRUE_DECODE.items():
        assert fit.coefficients[name] == pytest.approx(value, rel=0.02), name
    r = slower[0]
    assert fit.tps(with_known_alu(r, PROFILES[r.gpu], "decode")) == pytest.approx(r.tg_tps, rel=0.01)
    held = leave_one_gpu_out(slower, PROFILES, with_known_alu)
    assert summarize(h for h in held if h.phase == "decode").worst < 0.01


def test_an_extra_term_is_fitted_like_an_overhead(synthetic) -> None:
    slower = [dataclasses.replace(r, tg_tps=1 / (1 / r.tg_tps + 1.5 * alu_s(r))) for r in synthetic]
    fit = fit_phase_rows("decode", slower, PROFILES, "Synth", with_fitted_alu)
    assert fit.coefficients["alu"] == pytest.approx(1.5, rel=0.02)
    assert fit.coefficients["class:k_quant"] == pytest.approx(TRUE_DECODE["class:k_quant"], rel=0.02)
    plain = fit_phase_rows("decode", synthetic, PROFILES, "Synth", with_fitted_alu)
    assert plain.coefficients.get("alu", 0.0) == pytest.approx(0.0, abs=1e-9)  # no such time: no such term


def test_overheads_can_be_left_out(synthetic) -> None:
    def bare(r, p, phase, kappa=None) -> Demand:
        return dataclasses.replace(reference_demand(r, p, phase, kappa), overheads=())
    fit = fit_phase_rows("decode", synthetic, PROFILES, "Synth", bare)
    assert set(fit.coefficients) == {"class:k_quant", "class:f16"}


def test_leave_one_out_groups_as_told(synthetic) -> None:
    groups = {"A": "AB", "B": "AB", "C": "CDE", "D": "CDE", "E": "CDE"}
    held = leave_one_gpu_out(synthetic, PROFILES, group=groups.get)
    assert {h.architecture for h in held} == {"AB", "CDE"} and len(held) == 2 * len(synthetic)
    alone = leave_one_gpu_out(synthetic, PROFILES, group={**groups, "A": "A"}.get)
    assert {h.row.gpu for h in alone} == {"C", "D", "E"}  # "A" and "B" are each alone in a group: not held out


# ------------------------------------------------------------------------------------------ the shipped table


@pytest.fixture(scope="module")
def shipped_profiles() -> list[HardwareProfile]:
    return load_profiles([HARDWARE_PROFILES_DIR])


@pytest.fixture(scope="module")
def public(shipped_profiles) -> PublicGpuModel:
    return PublicGpuModel(load_reference(), shipped_profiles)


def test_shipped_leave_one_out_report(public: PublicGpuModel) -> None:
    archs = {h.architecture for h in public.held_out}
    assert archs == {"Ada", "Ampere", "Ampere GA100", "Apple silicon"}  # Hopper has one GPU: nothing to hold out
    assert ("Hopper", "decode") not in public.fits  # 3 rows for 3 coefficients: nothing checks them, so no fit
    for phase in ("decode", "prefill"):
        s = summarize(h for h in public.held_out if h.phase == phase)
        assert s.n >= 35 and math.isfinite(s.median)
        assert s.median <= 0.12, (phase, s)  # 5.8 % and 9.9 % today (target 10 %); worst: see the benchmark


def test_expected_figures_for_a_laptop_gpu_carry_band_and_source(public, shipped_profiles) -> None:
    laptop = find_profile("RTX 4060 Laptop", shipped_profiles)
    got = public.expect(laptop, decode_ceiling_tps=400.0, prefill_ceiling_tps=20000.0, ggml_type="Q4_K", shape=30)
    assert got.note == ""
    for exp, ceiling in ((got.decode, 400.0), (got.prefill, 20000.0)):
        assert exp is not None and exp.low < exp.value < exp.high and exp.value < ceiling
        assert exp.source.startswith("public llama-bench results, Ada fit, ")
        # Changed on purpose (issue #41 item 6): the band is made of the cross-validated errors of its situation
        assert "cross-validated errors" in exp.source and "XiongjieDai/GPU-Benchmarks-on-LLM-Inference" in exp.source


def test_a_type_without_public_rows_borrows_and_says_so(public, shipped_profiles) -> None:
    laptop = find_profile("RTX 4060 Laptop", shipped_profiles)
    k_quant = public.expect(laptop, 400.0, 20000.0, "Q4_K", 30)
    q8 = public.expect(laptop, 400.0, 20000.0, "Q8_0", 30)
    assert q8.decode.value == pytest.approx(k_quant.decode.value)
    assert "Q8_0 (legacy) taken as k_quant" in q8.decode.source


def test_an_architecture_without_public_data_borrows_with_a_wider_band(public, shipped_profiles) -> None:
    """Changed on purpose (issue #26 point 3): Blackwell borrows the nearest architecture's fit, labelled."""
    got = public.expect(find_profile("RTX 5090", shipped_profiles), 400.0, 20000.0, "Q4_K", 30, build=2824)
    ada = public.expect(find_profile("RTX 4090", shipped_profiles), 400.0, 20000.0, "Q4_K", 30, build=2824)
    assert got.note == "" and got.decode is not None
    assert "borrowed from " in got.decode.source and "for Blackwell" in got.decode.source
    width = got.decode.high / got.decode.low
    assert width > ada.decode.high / ada.decode.low  # a borrowed fit's band is the wider


def test_backend_and_era_are_inputs_named_in_the_source(public, shipped_profiles) -> None:
    gpu = find_profile("RTX 4090", shipped_profiles)
    own = public.expect(gpu, 400.0, 20000.0, "Q4_K", 30, backend="CUDA", build=2824).decode
    vulkan = public.expect(gpu, 400.0, 20000.0, "Q4_K", 30, backend="Vulkan", build=2824).decode
    later = public.expect(gpu, 400.0, 20000.0, "Q4_K", 30, backend="CUDA", build=7000).decode
    assert "for CUDA, b2824 (era ≤b2999)" in own.source and "its CUDA fit used" not in own.source
    assert "no public Vulkan rows for Ada: its CUDA fit used" in vulkan.source
    assert "no public rows of builds b6000–b7999" in later.source
    # Changed on purpose (issue #41 item 6): a substitution's band is that of the figures made with one, pooled with
    # the others where the table has too few of them (one publication here, so it takes every GPU figure's band)
    assert "(era ≤b2999); GPU with training rows;" in own.source
    assert "(too few of GPU with training rows, with a substitution" in later.source
    assert later.high / later.low >= own.high / own.low
    bound = public.for_setting("vulkan", 2824).expect(gpu, 400.0, 20000.0, "Q4_K", 30).decode
    assert bound.source == vulkan.source  # for_setting passes them through predict() unchanged


def test_a_figure_names_its_situation_and_the_errors_its_band_is_made_of(shipped_profiles) -> None:
    """Changed on purpose (issue #41 item 6): the band is no longer the architecture's errors, pooled under five,
    but those of the figure's situation (here: a GPU with training rows, another build era), each publication of
    the training tables left out in turn."""
    from app.predict.public.fit import load_public_model

    got = load_public_model().expect(find_profile("Arc A770 16GB", shipped_profiles), 400.0, 20000.0, "Q4_0", 30,
                                     backend="SYCL", build=6500)
    assert got.decode is not None and "Xe-HPG fit, for SYCL, b6500 (era b6000–b7999); GPU with training rows;" \
        in got.decode.source
    assert "cross-validated errors of figures made the same way" in got.decode.source
    assert "publications, each left out in turn" in got.decode.source


def test_an_architecture_with_no_more_rows_than_coefficients_borrows(public, shipped_profiles) -> None:
    """Hopper's rows (one H100, one model) are reproduced exactly by its own coefficients and cannot tell the
    per-byte costs from the fixed ones, which proves nothing: it borrows the nearest architecture's fit, and says
    so."""
    got = public.expect(find_profile("H200", shipped_profiles), 400.0, 20000.0, "Q4_K", 30, build=2824)
    assert got.decode is not None and "borrowed from Ampere for Hopper" in got.decode.source


def test_a_missing_family_takes_the_first_stand_in_the_fit_has() -> None:
    legacy_only = ArchFit("X", "decode", {"class:legacy": 1.2, "fixed": 1e-4}, ())
    assert (legacy_only.stand_in("k_quant"), legacy_only.stand_in("i_quant"), legacy_only.stand_in("legacy")) == (
        "legacy", "legacy", "legacy")
    assert legacy_only.stand_in("f16") is None and legacy_only.stand_in("bf16") is None
    both = ArchFit("X", "decode", {"class:legacy": 1.2, "class:k_quant": 1.1, "class:bf16": 1.0}, ())
    assert (both.stand_in("i_quant"), both.stand_in("mxfp4"), both.stand_in("bf16")) == ("k_quant", "k_quant", "bf16")
    # Changed on purpose: a float type has no stand-in (F16, BF16 and F32 run different matmul paths; BF16 on
    # Vulkan/RDNA 3.5 decodes ~3x slower than its bytes while F16 does not), so BF16's rows do not predict F16.
    assert both.stand_in("f16") is None and both.stand_in("f32") is None


def test_an_architecture_without_the_family_borrows_it_and_says_so(synthetic) -> None:
    other = gpu("F", 400, 100, 300, arch="Other")
    q4 = [dataclasses.replace(row("F", m, "F16"), weight_type="Q4_0", ggml_type="Q4_0", file_size_gib=size_gib,
                              tg_tps=tg, pp_tps=pp)  # two sizes: one model on one GPU would not be fitted
          for m, size_gib, tg, pp in ((SMALL, 4.33, 60.0, 900.0), (MID, 7.6, 36.0, 520.0), (BIG, 37.2, 7.5, 110.0))]
    model = PublicGpuModel([*synthetic, *q4], [*GPUS, other])
    own = model.expect(other, 100.0, 5000.0, "Q4_0", 32)
    assert own.decode is not None and own.decode.source.startswith("public llama-bench results, Other fit")
    f16 = model.expect(other, 100.0, 5000.0, "F16", 32)
    assert f16.note == "" and f16.decode is not None and f16.prefill is not None
    assert "borrowed from Synth: no public Other rows of f16 or a stand-in family" in f16.decode.source
    # Changed on purpose (issue #41 item 6): the band is that of borrowed figures (was: leave-one-architecture-out)
    assert "(era ≥b8000); borrowed fit;" in f16.decode.source
    assert "errors of figures made the same way, borrowed fit" in f16.decode.source
    assert f16.decode.high / f16.decode.low >= own.decode.high / own.decode.low


def test_a_float_family_is_never_borrowed_from_another_vendor(synthetic) -> None:
    """F16/BF16 matmuls run in each vendor's own library (cuBLAS, hipBLAS, Vulkan shaders...): an AMD GPU whose
    architecture has only quantized rows gets no float figure from an NVIDIA fit, and says why in one line; its
    quantized figure is its own fit's."""
    amd = dataclasses.replace(gpu("F", 400, 100, 300, arch="Other"), vendor="AMD")
    q4 = [dataclasses.replace(row("F", m, "F16"), weight_type="Q4_0", ggml_type="Q4_0", file_size_gib=size_gib,
                              tg_tps=tg, pp_tps=pp)
          for m, size_gib, tg, pp in ((SMALL, 4.33, 60.0, 900.0), (MID, 7.6, 36.0, 520.0), (BIG, 37.2, 7.5, 110.0))]
    model = PublicGpuModel([*synthetic, *q4], [*GPUS, amd])
    assert model.expect(amd, 100.0, 5000.0, "Q4_0", 32).decode is not None
    for float_type in ("F16", "BF16"):
        got = model.expect(amd, 100.0, 5000.0, float_type, 32)
        assert got.decode is None and got.prefill is None
        assert f"no public rows of {float_type} (float) kernels on any AMD GPU" in got.note, got.note
        assert "\n" not in got.note


def test_cross_validation_files_each_error_under_the_situation_its_fold_made_it_in(synthetic) -> None:
    """Issue #41 item 6. Two publications of the same exact rows: with one left out, every GPU keeps rows of its own
    (a GPU with training rows); with its GPU left out too, only the architecture's (no other architecture to
    borrow from, so none borrowed). Exact data of the newest era: every error is tiny, nothing substituted."""
    twice = [dataclasses.replace(r, source_url=f"https://example.org/{pub}", build="b8500") for pub in ("a", "b")
             for r in synthetic]
    model = PublicGpuModel(twice, GPUS)
    found = {(r.situation, r.phase) for r in model.residuals}
    assert found == {(Situation(basis, False, Memory.FIXED), phase) for basis in (Basis.GPU, Basis.ARCHITECTURE)
                     for phase in ("decode", "prefill")}  # NVIDIA parts on CUDA: memory and driver both fixed
    assert len(model.residuals) == 2 * len(twice) * 2  # each row and phase: its publication out, then its GPU too
    assert max(abs(r.log_error) for r in model.residuals) < 0.02
    own = model.expect(GPUS[0], 400.0, 20000.0, "Q4_K", 32)
    new = model.expect(gpu("N", 600, 150, 300), 400.0, 20000.0, "Q4_K", 32)
    assert own.decode is not None and "Synth fit, for CUDA, build not given (era ≥b8000); GPU with training rows;" \
        in own.decode.source
    assert new.decode is not None and "; architecture with training rows;" in new.decode.source
    assert "from 2 publications, each left out in turn" in own.decode.source
