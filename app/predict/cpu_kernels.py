"""Which kernel runs a weight type's matmuls on this CPU, as kernel classes for the machine fit.

llama.cpp's CPU backend repacks some weight types at load time into interleaved blocks (the CPU_REPACK buffer) and
runs them with GEMM/GEMV kernels that multiply 8 rows at once; every other type runs the plain per-row ``vec_dot``.
The two paths differ by up to 3× in prefill on the same bits per weight (Q4_0 repacked against Q4_1 plain), so a
type's measured speed stands only for types that take the same path. ``REPACKED`` mirrors
``ggml_repack_get_optimal_repack_type`` (ggml-cpu/repack.cpp, llama-cpp-python 0.3.36): which types are repacked,
under which CPU features, and the activation type of the kernel (Q8_0 or Q8_K).

On the CPU every type the ladder measured is its own class (``q4_1``, ``q4_k``, ...). A type it did not measure
takes the class of a measured type on the same path (``fallback_type``): a repacked type stands in for a repacked
one of the same activation, a plain one for a plain one of the same family. The table is worked out once, when the
machine is calibrated, and saved with the fit (``cpu_class_table``).
"""

from __future__ import annotations

from collections.abc import Iterable

from app.model.gguf_constants import tables

#: The KV cells at which the CPU's flash attention for one query (a generated token) changes kernel: below it each
#: thread takes whole heads; from it on (``use_split_kv_path``: ``nek1 >= 512`` in ggml-cpu/ops.cpp,
#: ``ggml_compute_forward_flash_attn_ext_f16``, llama-cpp-python 0.3.36) each thread takes a span of the cells for
#: every head and the partial results are reduced. ``nek1`` is the cache view's length, the used cells rounded up to
#: ``KV_PAD_CELLS`` (``llama_kv_cache::get_n_kv``: at least 256), so a token at position 256 or later (257 cells)
#: already takes the split path, for all of its cells. That path gives each thread an equal span of the view (the
#: masked cells past the used ones are skipped, so the first thread's span sets the time) and adds a cost per layer
#: (the partials' reduction).
SPLIT_KV_CELLS = 512
KV_PAD_CELLS = 256

#: (ggml type, activation of its repacked kernel, the CPU flags any one of which makes llama.cpp repack it).
REPACKED: tuple[tuple[str, str, frozenset[str]], ...] = (
    ("Q4_0", "Q8_0", frozenset({"avx2", "asimddp", "i8mm"})),
    ("IQ4_NL", "Q8_0", frozenset({"avx2", "asimddp"})),
    ("MXFP4", "Q8_0", frozenset({"avx2", "asimddp"})),
    ("Q8_0", "Q8_0", frozenset({"asimddp", "i8mm"})),
    ("Q4_K", "Q8_K", frozenset({"avx2", "asimddp", "i8mm"})),
    ("Q5_K", "Q8_K", frozenset({"asimddp", "i8mm"})),
    ("Q6_K", "Q8_K", frozenset({"asimddp", "i8mm"})),
    ("Q2_K", "Q8_K", frozenset({"avx512f"})),
)
#: Plain-path families, nearest first: a type not measured takes the first measured plain type of its family.
PLAIN_FAMILIES: tuple[tuple[str, ...], ...] = (
    ("Q4_1", "Q5_0", "Q5_1", "Q4_0", "IQ4_NL", "MXFP4", "Q8_0"),  # 32-weight blocks, Q8_0 activations
    ("Q3_K", "Q2_K", "Q5_K", "Q6_K", "Q4_K", "IQ4_XS", "IQ3_S", "IQ3_XXS", "IQ2_S", "IQ2_XS", "IQ2_XXS", "IQ1_S",
     "IQ1_M", "TQ1_0", "TQ2_0", "Q8_K"),  # 256-weight super-blocks, Q8_K activations
    ("F16", "BF16", "F32"),
)
#: Families' order of preference for a type's stand-in (the nearest bits per weight first).
_NEAR: dict[str, tuple[str, ...]] = {
    "Q5_1": ("Q5_0", "Q4_1"), "Q4_0": ("Q4_1", "Q5_0"), "IQ4_NL": ("Q4_1", "Q5_0"), "MXFP4": ("Q4_1", "Q5_0"),
    "Q4_1": ("Q5_0",), "Q5_0": ("Q4_1",), "Q8_0": ("Q5_0", "Q4_1"),
    "Q2_K": ("Q3_K", "Q5_K", "Q6_K"), "Q3_K": ("Q5_K", "Q6_K"), "IQ4_XS": ("Q5_K", "Q6_K"),
    "Q8_K": ("Q8_0",), "BF16": ("F16",), "F32": ("F16",), "F16": ("BF16",),
}


def repacked_types(flags: Iterable[str]) -> dict[str, str]:
    """Types llama.cpp repacks on a CPU with ``flags`` (/proc/cpuinfo names) -> the activation type of the kernel."""
    have = set(flags)
    return {t: act for t, act, need in REPACKED if need & have}


def fallback_type(ggml_type: str, measured: Iterable[str], flags: Iterable[str]) -> str | None:
    """The measured type whose kernel stands in for ``ggml_type`` on this CPU (itself when measured), or None."""
    t = ggml_type.upper()
    done = {m.upper() for m in measured}
    if t in done:
        return t
    packed = repacked_types(flags)
    if t in packed:  # a repacked kernel of the same activation type, else none: plain paths are far slower
        return next((m for m in sorted(done) if packed.get(m) == packed[t]), None)
    near = [m for m in _NEAR.get(t, ()) if m in done and m not in packed]
    if near:
        return near[0]
    family = next((f for f in PLAIN_FAMILIES if t in f), ())
    return next((m for m in family if m in done and m not in packed), None)


def cpu_class_table(measured: Iterable[str], flags: Iterable[str]) -> dict[str, str]:
    """ggml type -> kernel class on this CPU, for every type this module knows: the class is the lower-case name
    of the measured type that stands in for it; types with no stand-in are left out (no expected figure)."""
    measured = tuple(measured)
    flags = tuple(flags)
    known = {t for f in PLAIN_FAMILIES for t in f} | {t for t, _, _ in REPACKED}
    table = {}
    for t in sorted(known):
        stand_in = fallback_type(t, measured, flags)
        if stand_in is not None:
            table[t] = stand_in.lower()
    return table


def bits_per_weight(ggml_type: str) -> float | None:
    """Bits one weight of ``ggml_type`` takes in its blocks (ggml's block size and bytes: Q4_0 4.5, Q6_K 6.5625); None
    for a name ggml does not have."""
    try:
        block, size = tables().quant_sizes[tables().quant_type[ggml_type.upper()]]
    except KeyError:
        return None
    return 8.0 * size / block
