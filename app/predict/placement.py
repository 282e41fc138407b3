"""One fit verdict for one file at one context on one machine: whether it fits, in which placement, and what runs
out where it does not. The inspector, ``predict``, the chooser and compare all print this verdict.

:func:`fit_verdict` tries the placements llama.cpp's own fitting tries (common/fit.cpp: everything on the device;
a mixture of experts' experts to system RAM first, fewest layers' worth; whole layers back to the CPU), each with
the device margin the question keeps free, and the KV-cache types asked; it never overrides a placement the user
set (``-ngl`` below all layers, ``-ncmoe``): that one is judged as asked, with the best placement beside it.
Placements are ranked by :func:`placement_rank` (a speed floor first where one is asked, then everything on the
device, then the better cache type, then the faster).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.model.facts import ModelFacts
from app.predict.answer import Answer, Figure, FigureKind, Machine, answer, fit_of
from app.predict.expected_quality import kv_risk, preference_score
from app.predict.memory.fit import FitResult
from app.predict.profiles import HardwareProfile
from app.predict.questions import Question

#: KV-cache types a search tries, best quality first.
KV_TYPES: tuple[str, ...] = ("f16", "q8_0", "q4_0")
GIB = 2**30


@dataclass(frozen=True)
class Placed:
    """One configuration tried for a file: where its weights and cache go, and the answer there."""

    status: str  # fits (everything on the device, or experts in system RAM) | partial (layers on the CPU)
    type_k: str
    n_gpu_layers: int
    n_cpu_moe: int
    got: Answer = field(compare=False)
    words: str  # "all 33 layers on the GPU", "the experts of 12 of 48 layers in system RAM"

    @property
    def on_device_only(self) -> bool:
        return self.status == "fits" and not self.n_cpu_moe

    def flags(self, with_kv: bool = True) -> str:
        """llama.cpp's flags for this placement: ``-ngl 49 -ncmoe 12 -ctk f16``."""
        moe = f" -ncmoe {self.n_cpu_moe}" if self.n_cpu_moe else ""
        return f"-ngl {self.n_gpu_layers}{moe}" + (f" -ctk {self.type_k}" if with_kv else "")

    def line(self) -> str:
        """One line for a list of the placements tried."""
        return (f"{self.flags()}: {self.words}; {self.got.decode.value:,.1f} tok/s ({self.got.decode.kind}), "
                f"{self.got.needed_bytes / 2**20:,.0f} MiB")


def floor_figure(fig: Figure) -> float | None:
    """What a speed floor is judged on: a measured figure's value, an expected figure's low edge (its value without
    a band); None for a ceiling, which says what cannot be exceeded, not what will be reached."""
    if fig.kind == FigureKind.CEILING:
        return None
    if fig.kind == FigureKind.MEASURED:
        return fig.value
    return fig.low if fig.low is not None else fig.value


def meets_floor(fig: Figure, floor: float) -> bool:
    """Whether ``fig`` is shown to meet a speed floor (:func:`floor_figure`)."""
    judged = floor_figure(fig)
    return judged is not None and judged >= floor


def close_call(fig: Figure, floor: float) -> bool:
    """Whether a floor lies inside an expected figure's band: its band's edges fall either side of it, so the
    prediction cannot decide it and a measurement must."""
    if fig.kind in (FigureKind.CEILING, FigureKind.MEASURED) or fig.low is None or fig.high is None:
        return False
    return fig.low < floor <= fig.high


def placement_rank(p: Placed, min_decode_tps: float | None = None, prefer: str = "balanced") -> tuple[float, ...]:
    """How one file's placements rank, the same on every surface: those that meet the speed floor first
    (:func:`meets_floor`); among them everything on the device with an f16 KV cache (llama.cpp's default: a quantized
    cache is never taken for speed alone); else the best :func:`preference_score` of speed against the KV cache's
    risk (:func:`kv_risk`: the most it is published to cost); where none meets the floor, the fastest."""
    decode = p.got.decode.value
    if min_decode_tps is not None and not meets_floor(p.got.decode, min_decode_tps):
        return (1, -decode, 0, 0)
    plain = 0 if p.on_device_only and p.type_k == KV_TYPES[0] else 1
    return (0, plain, -preference_score(decode, kv_risk(p.type_k), prefer), 0 if p.on_device_only else 1)


def has_kv_cache(facts: ModelFacts) -> bool:
    """Whether the model keeps a KV cache at all (a pure recurrent model, Mamba or RWKV, keeps a fixed state only:
    ``-ctk``/``-ctv`` and flash attention do not apply to it)."""
    return facts.kv_layers > 0


@dataclass(frozen=True)
class FitVerdict:
    """The verdict for one file at ``n_ctx`` on one piece of hardware.

    ``status``: "fits" (everything on the device, or a mixture of experts' experts in system RAM with every layer
    offloaded), "partial" (some layers on the CPU), "does_not_fit". ``best`` is the placement chosen (None where
    nothing fits); ``asked`` the placement the user set, where they set one (judged as asked). ``ran_out`` names the
    memory that runs out where nothing fits."""

    status: str
    best: Placed | None
    tried: tuple[Placed, ...]
    full: dict[str, Answer]  # every layer on the device, per KV-cache type tried
    kv_types: tuple[str, ...]
    n_ctx: int
    n_ctx_train: int
    n_layer: int
    margin_bytes: int
    device: str  # "GPU", "unified memory", "system RAM" (a CPU)
    ran_out: str = ""
    asked: Placed | None = None
    user_placed: bool = False
    kv_cache: bool = True
    #: the KV-cache types with which everything fits on the device (every type asked, checked by its fit alone)
    fits_entirely: tuple[str, ...] = ()

    @property
    def usable(self) -> bool:
        return self.status in ("fits", "partial")

    @property
    def answer(self) -> Answer:
        """The answer the verdict's figures come from: the placement judged (asked, else the best), else every layer
        on the device with the first KV type."""
        placed = self.asked if self.user_placed else self.best
        return placed.got if placed is not None else self.full[self.kv_types[0]]

    @property
    def word(self) -> str:
        """"Fits", "Fits with experts in system RAM", "Fits with layers on the CPU" or "Does not fit"."""
        if self.status == "does_not_fit":
            return "Does not fit"
        placed = self.asked if self.user_placed else self.best
        if placed is not None and placed.n_cpu_moe:
            return "Fits with experts in system RAM"
        return "Fits" if self.status == "fits" else "Fits with layers on the CPU"

    @property
    def beyond_trained(self) -> bool:
        return bool(self.n_ctx_train) and self.n_ctx > self.n_ctx_train

    def margin_words(self) -> str:
        return (f"{self.margin_bytes / GIB:.1f} GiB of the {self.device} kept free" if self.margin_bytes
                else "no margin kept free")

    def reason(self) -> str:
        """Why, in a few words: where the chosen placement puts the model and the memory it needs; or which memory
        runs out; and a context beyond the trained one."""
        placed = self.asked if self.user_placed else self.best
        if placed is not None:
            fit = placed.got.prediction.fit
            need = (f"{fit.needed_bytes / GIB:.2f} of {fit.budget_bytes / GIB:.2f} GiB"
                    + (f" ({self.margin_words()})" if fit.margin_bytes else ""))
            host = (f"; system RAM {fit.cpu_needed_bytes / GIB:.1f} of {fit.host_budget_bytes / GIB:.1f} GiB"
                    if fit.cpu_needed_bytes and fit.host_budget_bytes else "")
            kv = f", {placed.type_k} KV cache" if self.kv_cache else ""
            why = f"{placed.words}{kv}: {need}{host}"
        else:
            why = (f"{self.ran_out} runs out, even with fewer layers offloaded, experts in system RAM or a "
                   f"{self.kv_types[-1]} KV cache" if self.ran_out else "nothing fits")
            if self.margin_bytes and "GPU" in self.ran_out:
                why += f" ({self.margin_words()})"
        if self.user_placed and self.best is not None and self.asked is not None \
                and (self.best.n_gpu_layers, self.best.n_cpu_moe) != (self.asked.n_gpu_layers, self.asked.n_cpu_moe):
            why += f"; best placement {self.best.flags(self.kv_cache)}"
        if self.beyond_trained:
            why += (f"; {self.n_ctx:,} tokens is beyond the trained context ({self.n_ctx_train:,}): llama.cpp warns "
                    "and answers degrade")
        return why

    def text(self) -> str:
        """The verdict in one line: ``Fits with experts in system RAM (-ngl 49 -ncmoe 12 -ctk f16): …``."""
        placed = self.asked if self.user_placed else self.best
        flags = f" ({placed.flags(self.kv_cache)})" if placed is not None else ""
        return f"{self.word}{flags} at {self.n_ctx:,} tokens: {self.reason()}"

    def to_json_dict(self) -> dict[str, Any]:
        placed = self.asked if self.user_placed else self.best
        fit = placed.got.prediction.fit if placed is not None else None
        return {
            "status": self.status, "word": self.word, "reason": self.reason(), "text": self.text(),
            "n_gpu_layers": placed.n_gpu_layers if placed else None, "n_cpu_moe": placed.n_cpu_moe if placed else None,
            "type_k": placed.type_k if placed else None, "placement": placed.words if placed else "",
            "ran_out": self.ran_out, "margin_bytes": self.margin_bytes,
            "device_bytes": fit.needed_bytes if fit else None, "device_budget_bytes": fit.budget_bytes if fit else None,
            "host_bytes": fit.cpu_needed_bytes if fit else None,
            "host_budget_bytes": fit.host_budget_bytes if fit else None,
            "beyond_trained_context": self.beyond_trained, "user_placed": self.user_placed,
            "best_flags": self.best.flags(self.kv_cache) if self.best else None,
        }


def _smallest_n_cpu_moe(facts: ModelFacts, fit_at: Callable[[int], FitResult]) -> int | None:
    """The fewest layers whose experts stay in system RAM (-ncmoe) for the rest of a mixture of experts to fit on the
    device with every layer offloaded (binary search over the fit alone: more on the CPU never needs more device
    memory); None where none does, or where even the fewest overflow the system RAM (more never would fit it)."""
    if not fit_at(facts.n_layer).device_fits:
        return None
    lo, hi = 1, facts.n_layer
    while lo < hi:
        mid = (lo + hi) // 2
        if fit_at(mid).device_fits:
            hi = mid
        else:
            lo = mid + 1
    return hi if fit_at(hi).host_fits else None


def placements(facts: ModelFacts, profile: HardwareProfile, question: Question, machine: Machine | None,
               kv_types: Sequence[str], enough: Callable[[list[Placed]], bool] | None = None,
               ) -> tuple[list[Placed], dict[str, Answer]]:
    """Every placement that fits, per KV-cache type in order: everything on the device; for a mixture of experts the
    fewest layers' experts in system RAM; the most layers that fit (the rest on the CPU). And the full-offload
    answer per type tried. ``enough(tried)`` true after a type: the later types are not tried (their placements
    could not rank first)."""
    n_all = facts.n_layer + 1

    def at(t: str) -> Callable[[int, int], Answer]:
        def ask(ngl: int, ncmoe: int) -> Answer:
            return answer(facts, profile, question.with_placement(ngl, ncmoe, t).at_context(), machine,
                          measured=False)
        return ask

    def fit_at(t: str) -> Callable[[int], FitResult]:
        def ask(ncmoe: int) -> FitResult:
            return fit_of(facts, profile, question.with_placement(999, ncmoe, t).at_context(), machine)
        return ask

    full: dict[str, Answer] = {}
    out: list[Placed] = []
    for t in kv_types:
        if enough is not None and out and enough(out):
            break
        p = full[t] = at(t)(999, 0)
        fit = p.prediction.fit
        if profile.kind == "cpu" or profile.is_unified:
            if fit.fits:
                out.append(Placed("fits", t, 0 if profile.kind == "cpu" else n_all, 0, p,
                                  "in system RAM" if profile.kind == "cpu" else "in unified memory"))
            continue
        if fit.fits:
            out.append(Placed("fits", t, n_all, 0, p, f"all {n_all} layers on the GPU"))
            continue
        if facts.n_expert:
            n_moe = _smallest_n_cpu_moe(facts, fit_at(t))
            if n_moe is not None:
                moe = at(t)(999, n_moe)
                n = moe.prediction.n_cpu_moe
                out.append(Placed("fits", t, n_all, n, moe,
                                  f"all layers on the GPU but the experts of {n} of {facts.n_layer} in system RAM"))
        if fit.max_ngl >= 1:
            part = at(t)(fit.max_ngl, 0)
            if part.prediction.fit.host_fits:  # the rest on the CPU needs the system RAM to hold it
                out.append(Placed("partial", t, fit.max_ngl, 0, part,
                                  f"{fit.max_ngl} of {n_all} layers on the GPU, the rest on the CPU"))
    return out, full


def _ran_out(profile: HardwareProfile, full: dict[str, Answer], kv_types: Sequence[str]) -> str:
    """Which memory even the leanest placement (the smallest cache, a layer or none on the device) runs out of."""
    lean = full[kv_types[-1]].prediction.fit
    if profile.kind == "cpu" or profile.is_unified:
        return lean.ran_out
    return "system RAM" if lean.max_ngl >= 1 else "GPU memory"


def _asked(facts: ModelFacts, profile: HardwareProfile, question: Question, machine: Machine | None) -> Placed:
    got = answer(facts, profile, question.at_context(), machine, measured=False)
    fit = got.prediction.fit
    n_all = facts.n_layer + 1
    ngl = got.prediction.n_gpu_layers
    ncmoe = got.prediction.n_cpu_moe
    if profile.kind == "cpu" or profile.is_unified:
        words = "in system RAM" if profile.kind == "cpu" else "in unified memory"
    elif ncmoe:
        words = f"{ngl} of {n_all} layers on the GPU, the experts of {ncmoe} of {facts.n_layer} in system RAM"
    else:
        words = f"{ngl} of {n_all} layers on the GPU" + (", the rest on the CPU" if ngl < n_all else "")
    status = ("fits" if fit.fits and (ngl >= n_all or profile.kind == "cpu" or profile.is_unified)
              else "partial" if fit.fits else "does_not_fit")
    return Placed(status, question.type_k, ngl if profile.kind != "cpu" else 0, ncmoe, got, words)


def fit_verdict(facts: ModelFacts, profile: HardwareProfile, question: Question, machine: Machine | None = None, *,
                kv_types: Sequence[str] | None = None, min_decode_tps: float | None = None,
                rank: Callable[[Placed], Any] | None = None) -> FitVerdict:
    """The verdict for ``facts`` on ``profile`` for ``question`` (its context, margin and request).

    ``kv_types``: the cache types to try (default: the question's own, or where that is f16, llama.cpp's default,
    every type, f16 first: a quantized cache where f16 does not fit, said so). A placement the question sets
    (``-ngl`` below all layers, or ``-ncmoe``) is judged as asked, never overridden, with the best placement beside
    it. ``rank``: how placements are ordered (default :func:`placement_rank` with ``min_decode_tps``)."""
    kv_cache = has_kv_cache(facts)
    types = tuple(kv_types) if kv_types else KV_TYPES if question.type_k == KV_TYPES[0] else (question.type_k,)
    if not kv_cache:
        types = types[:1]  # no KV cache: its type changes nothing
    key = rank if rank is not None else (lambda p: placement_rank(p, min_decode_tps))

    def enough(found: list[Placed]) -> bool:  # everything on the device with the first type, meeting the floor:
        return any(p.on_device_only and p.type_k == types[0]  # no other type can rank above it
                   and (min_decode_tps is None or meets_floor(p.got.decode, min_decode_tps)) for p in found)

    tried, full = placements(facts, profile, question, machine, types, enough)
    def fit_entirely(t: str) -> FitResult:
        return full[t].prediction.fit if t in full else fit_of(
            facts, profile, question.with_placement(999, 0, t).at_context(), machine)

    entirely = tuple(t for t in types if (f := fit_entirely(t)).fits and f.status == "fits")
    best = min(tried, key=key) if tried else None
    device = ("system RAM" if profile.kind == "cpu" else "unified memory" if profile.is_unified else "GPU")
    user_placed = profile.kind != "cpu" and (question.n_gpu_layers < facts.n_layer + 1 or question.n_cpu_moe != 0)
    asked = _asked(facts, profile, question, machine) if user_placed else None
    judged = asked if user_placed else best
    status = judged.status if judged is not None else "does_not_fit"
    return FitVerdict(status=status, best=best, tried=tuple(sorted(tried, key=key)), full=full, kv_types=types,
                      n_ctx=question.n_ctx, n_ctx_train=facts.n_ctx_train, n_layer=facts.n_layer,
                      margin_bytes=0 if device != "GPU" else question.margin_bytes, device=device,
                      ran_out="" if judged is not None and status != "does_not_fit" else
                      (_asked_ran_out(asked) if user_placed and asked is not None else _ran_out(profile, full, types)),
                      asked=asked, user_placed=user_placed, kv_cache=kv_cache, fits_entirely=entirely)


def _asked_ran_out(asked: Placed) -> str:
    return asked.got.prediction.fit.ran_out or "memory"


__all__ = ["KV_TYPES", "FitVerdict", "Placed", "close_call", "fit_verdict", "floor_figure", "has_kv_cache",
           "meets_floor", "placement_rank", "placements"]
