"""What a file and a KV-cache type are expected to cost in quality, as mean KL divergence against the full-precision
model (lower is better), and the one rule that weighs it against speed.

A file's figure comes, in this order, from:

- **measured**: ``gguf-bench quality`` ran on it here (its mean KLD against a reference);
- **published**: the figure llama.cpp publishes for its type, its LLaMA 3 8B scoreboard (tools/perplexity/README.md,
  revision f364eb6f, CUDA on an RTX 4090, Wikitext-2 against FP16; the same table's LLaMA 2 7B column for the spread
  between model families); gpt-oss's MXFP4 experts are its release format (OpenAI's), so the file is the original
  experts and its loss the Q8_0 rest's;
- **bits**: the last resort, for a type the table does not have: interpolated on the scoreboard's bits per weight,
  and said so.

The band of a published figure is the spread between the two models measured for each type: LLaMA 3 8B loses 2.5
to 4.1 times what LLaMA 2 7B does (q2_K 0.445 / 0.109, q4_K_M 0.0313 / 0.0127, q6_K 0.0055 / 0.0021, q8_0 0.0014 /
0.0004), so a model of another family is taken to lose between a third and three times the LLaMA 3 8B figure.

A quantized KV cache adds its own loss: q8_0 about 0.0008 (llama.cpp PR #7412, LLaMA 3 8B: KLD 0.000980 with a
q8_0 K and V cache against 0.000189 with f16), up to 0.04 (localbench, Qwen 3.6 27B and 35B-A3B over 250k tokens
with long documents); q4_0 about 0.10 (localbench, Qwen 3.6: 0.087-0.117), up to 1.09 (Gemma 4 26B-A4B).

:func:`preference_score` is the rule the chooser picks by: a file is worth a faster one only when its expected loss
is lower by more than :data:`EXCHANGE_KLD` of the preference for every 1.5× of speed it gives up (``balanced``:
0.05 KLD, about 5 % perplexity: for LLaMA 3 8B ln(PPL ratio) tracks KLD, q4_K_M 0.028 against 0.031).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from app.model.facts import ModelFacts

#: llama.cpp's LLaMA 3 8B scoreboard (tools/perplexity/README.md): type -> (mean KLD against FP16, model size GiB).
#: Types without an importance matrix where the table has one; the i-quants with its "WT 10m" importance matrix.
LLAMA3_8B_KLD: dict[str, tuple[float, float]] = {
    "Q8_0": (0.001355, 7.96), "Q6_K": (0.005452, 6.14), "Q5_K_M": (0.010762, 5.33), "Q5_K_S": (0.016595, 5.21),
    "Q5_1": (0.018045, 5.65), "Q5_0": (0.022239, 5.21), "Q4_K_M": (0.031273, 4.58), "IQ4_NL": (0.035742, 4.35),
    "IQ4_XS": (0.036334, 4.14), "Q4_K_S": (0.043136, 4.37), "Q4_1": (0.071683, 4.78), "Q4_0": (0.071940, 4.34),
    "Q3_K_L": (0.087176, 4.03), "Q3_K_M": (0.101913, 3.74), "IQ3_M": (0.102534, 3.53), "IQ3_S": (0.111278, 3.42),
    "IQ3_XS": (0.138693, 3.28), "IQ3_XXS": (0.183625, 3.05), "Q3_K_S": (0.228217, 3.41), "IQ2_M": (0.325989, 2.74),
    "Q2_K_S": (0.403360, 2.96), "IQ2_S": (0.439197, 2.56), "Q2_K": (0.445132, 2.96), "IQ2_XS": (0.546290, 2.43),
    "IQ2_XXS": (0.812022, 2.24), "IQ1_M": (1.393084, 2.01), "IQ1_S": (2.254554, 1.88),
}
#: full precision: the reference itself
LOSSLESS_TYPES = frozenset({"F32", "F16", "BF16", "ALL_F32", "MOSTLY_F16", "MOSTLY_BF16"})
LLAMA3_8B_PARAMS = 8.03e9
#: a model family loses between this much less and this much more than LLaMA 3 8B (its LLaMA 2 7B spread)
FAMILY_SPREAD = 3.0
SCOREBOARD = "llama.cpp's LLaMA 3 8B scoreboard (tools/perplexity/README.md)"
#: a quantized KV cache's added loss: type -> (expected, least, most) mean KLD (module docstring)
KV_CACHE_KLD: dict[str, tuple[float, float, float]] = {
    "f16": (0.0, 0.0, 0.0), "bf16": (0.0, 0.0, 0.0), "f32": (0.0, 0.0, 0.0),
    "q8_0": (0.0008, 0.0008, 0.04), "q4_0": (0.10, 0.087, 1.09),
}
KV_CACHE_SOURCES = ("llama.cpp PR #7412 (q8_0 K and V cache, LLaMA 3 8B); localbench's KV cache quantization "
                    "benchmark (Qwen 3.6, Gemma 4)")
#: How much expected loss 1.5× of decode speed is worth, by preference (see the module docstring).
EXCHANGE_KLD: dict[str, float] = {"quality": 0.005, "balanced": 0.05, "speed": 0.5}
SPEED_STEP = 1.5
PREFERENCES: tuple[str, ...] = ("balanced", "quality", "speed")


@dataclass(frozen=True)
class QualityFigure:
    """A file's expected loss against its full-precision model, as mean KL divergence, with its band and source."""

    kld: float
    low: float
    high: float
    kind: str  # measured | published | bits | reference
    source: str

    def text(self) -> str:
        """``"KLD 0.031 (0.010-0.094, published)"``."""
        if self.kind in ("measured", "reference") or self.high <= self.low:
            return f"KLD {self.kld:.4f} ({self.kind})"
        return f"KLD {self.kld:.4f} ({self.low:.4f}-{self.high:.4f}, {self.kind})"

    def plus_kv(self, type_k: str) -> QualityFigure:
        """This figure with a ``type_k`` KV cache's own loss added."""
        kv = KV_CACHE_KLD.get(type_k.lower())
        if kv is None or kv[0] == 0.0:
            return self
        return QualityFigure(self.kld + kv[0], self.low + kv[1], self.high + kv[2], self.kind,
                             f"{self.source}; a {type_k} KV cache adds about {kv[0]:g} ({KV_CACHE_SOURCES})")


def _type_key(file_type: str) -> str:
    return file_type.upper().replace("MOSTLY_", "").strip()


def _bits(size_gib: float) -> float:
    return size_gib * 2**30 * 8 / LLAMA3_8B_PARAMS


def _from_bits(bits: float) -> float:
    """Mean KLD at ``bits`` per weight, interpolated on the scoreboard's (bits, ln KLD) points of its k-quants and
    legacy quants (clamped at its ends)."""
    pts = sorted((_bits(gib), math.log(kld)) for t, (kld, gib) in LLAMA3_8B_KLD.items() if not t.startswith("IQ"))
    merged: dict[float, float] = {}
    for b, lk in pts:  # one point per size: the better figure
        merged[round(b, 3)] = min(lk, merged.get(round(b, 3), lk))
    xs = sorted(merged)
    if bits <= xs[0]:
        return math.exp(merged[xs[0]])
    if bits >= xs[-1]:
        return math.exp(merged[xs[-1]]) * (xs[-1] / bits) ** 8  # above Q8_0: smaller still
    for a, b in zip(xs, xs[1:], strict=False):
        if a <= bits <= b:
            f = (bits - a) / (b - a)
            return math.exp(merged[a] + f * (merged[b] - merged[a]))
    return math.exp(merged[xs[-1]])


def published_quality(facts: ModelFacts, capped_bits: float | None = None) -> QualityFigure:
    """The expected loss of ``facts``'s file from what is published for its type (module docstring), else from its
    bits per weight (``capped_bits``: each tensor counted up to Q8_0's bits, else the file's own)."""
    key = _type_key(facts.file_type)
    if key in LOSSLESS_TYPES:
        return QualityFigure(0.0, 0.0, 0.0, "published", f"{key}: full precision, the reference itself")
    if key == "MXFP4_MOE" and facts.architecture == "gpt-oss":
        kld = LLAMA3_8B_KLD["Q8_0"][0]
        return QualityFigure(kld, kld / FAMILY_SPREAD, kld * FAMILY_SPREAD, "published",
                             "gpt-oss's experts ship in MXFP4 (OpenAI's release), so this file holds the original "
                             f"experts; the rest in Q8_0, as {SCOREBOARD} gives Q8_0")
    if key in LLAMA3_8B_KLD:
        kld = LLAMA3_8B_KLD[key][0]
        return QualityFigure(kld, kld / FAMILY_SPREAD, kld * FAMILY_SPREAD, "published",
                             f"{key} in {SCOREBOARD}; another model family loses between a third and three times "
                             "as much (its LLaMA 2 7B column)")
    bits = capped_bits if capped_bits is not None else facts.bits_per_weight
    kld = _from_bits(bits)
    return QualityFigure(kld, kld / FAMILY_SPREAD, kld * FAMILY_SPREAD, "bits",
                         f"no published figure for {facts.file_type or 'this type'}: estimated from its {bits:.2f} "
                         f"bits per weight on {SCOREBOARD}")


def measured_quality(mean_kld: float, reference: str = "", is_reference: bool = False) -> QualityFigure:
    """A figure ``gguf-bench quality`` measured here (the reference file itself: 0 by definition)."""
    if is_reference:
        return QualityFigure(0.0, 0.0, 0.0, "reference", "the reference the others were measured against")
    where = f" against {reference}" if reference else ""
    return QualityFigure(mean_kld, mean_kld, mean_kld, "measured", f"measured here (gguf-bench quality){where}")


def kv_risk(type_k: str) -> float:
    """What a placement's ranking weighs a KV-cache type at: the most it is published to cost. Its loss depends on
    the model far more than a weight type's (localbench: Gemma 4 26B-A4B loses ten times what Qwen 3.6 does at
    q4_0), so a quantized cache is taken only for a large gain in speed, or to fit at all."""
    return KV_CACHE_KLD.get(type_k.lower(), (0.0, 0.0, 0.0))[2]


def preference_score(decode_tps: float, kld: float, prefer: str = "balanced") -> float:
    """The one rule the chooser weighs quality against speed by: decode speed in steps of 1.5× less the expected
    loss in units of what the preference trades for one such step (:data:`EXCHANGE_KLD`). Higher is better."""
    speed = math.log(max(decode_tps, 1e-9)) / math.log(SPEED_STEP)
    return speed - kld / EXCHANGE_KLD[prefer]


def worth_it(slower_kld: float, faster_kld: float, speed_ratio: float, prefer: str = "balanced") -> bool:
    """Whether a file ``speed_ratio`` times slower is worth its lower loss (:func:`preference_score`)."""
    return (faster_kld - slower_kld) / EXCHANGE_KLD[prefer] > math.log(max(speed_ratio, 1e-9)) / math.log(SPEED_STEP)


__all__ = ["EXCHANGE_KLD", "KV_CACHE_KLD", "LLAMA3_8B_KLD", "PREFERENCES", "QualityFigure", "measured_quality",
           "preference_score", "published_quality", "worth_it"]
