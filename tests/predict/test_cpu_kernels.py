"""The CPU's kernel classes follow llama.cpp's repack rules: repacked and plain paths never stand in for each other."""

from __future__ import annotations

from app.predict.cpu_kernels import cpu_class_table, fallback_type, repacked_types

LADDER = ("Q4_0", "Q4_1", "Q5_0", "Q4_K", "Q5_K", "Q6_K", "Q8_0", "F16")
AVX2 = ("avx", "avx2", "f16c", "fma")
NEON_I8MM = ("asimd", "asimddp", "i8mm")


def test_repacked_types_follow_the_cpu_features() -> None:
    assert set(repacked_types(AVX2)) == {"Q4_0", "Q4_K", "IQ4_NL", "MXFP4"}
    assert set(repacked_types((*AVX2, "avx512f"))) == {"Q4_0", "Q4_K", "IQ4_NL", "MXFP4", "Q2_K"}
    assert {"Q5_K", "Q6_K", "Q8_0"} <= set(repacked_types(NEON_I8MM)) and "Q2_K" not in repacked_types(NEON_I8MM)
    assert repacked_types(("sse2",)) == {}
    assert repacked_types(AVX2)["Q4_K"] == "Q8_K" and repacked_types(AVX2)["Q4_0"] == "Q8_0"


def test_measured_types_are_their_own_class_and_others_take_the_same_path() -> None:
    table = cpu_class_table(LADDER, AVX2)
    assert {t: table[t] for t in LADDER} == {t: t.lower() for t in LADDER}
    assert table["IQ4_NL"] == "q4_0"  # repacked, Q8_0 activations, like Q4_0 here
    assert table["Q5_1"] == "q5_0" and table["Q3_K"] == "q5_k" and table["BF16"] == "f16"
    assert table["Q2_K"] == "q5_k"  # plain without AVX-512 ...
    assert cpu_class_table(LADDER, (*AVX2, "avx512f"))["Q2_K"] == "q4_k"  # ... repacked with it


def test_no_stand_in_across_paths() -> None:
    # Q4_0 unmeasured: on AVX2 it is repacked and only a repacked Q8_0-activation type may stand in; none here
    assert fallback_type("Q4_0", ("Q4_1", "Q8_0"), AVX2) is None
    assert fallback_type("Q4_0", ("Q4_1", "Q8_0"), ("sse2",)) == "Q4_1"  # not repacked: the plain Q4_1 path
    # on arm64 with dotprod Q5_K and Q6_K are repacked: a plain K-quant has no stand-in among them
    assert "Q3_K" not in cpu_class_table(LADDER, NEON_I8MM)
    assert cpu_class_table(("F16",), AVX2) == {"F16": "f16", "BF16": "f16", "F32": "f16"}
