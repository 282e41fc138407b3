"""Which file of a set to run on one device at one context: fit per KV-cache type, speed, quality, a recommendation.

Pure functions of (model facts, hardware profile, settings, measured quality and speed). Gathering the files, URLs,
the results store and the machine is :mod:`app.choose.chooser`. Every configuration is predicted with flash attention
on (what llama.cpp's "auto" picks where it can, and what a quantized V cache needs).
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import urlsplit

from app.model.facts import ModelFacts
from app.predict.answer import Answer, Figure, FigureKind, Machine, Measurement, answer
from app.predict.profiles import HardwareProfile
from app.predict.settings import AT_CONTEXT_GEN, at_context

#: KV-cache types tried, best quality first.
KV_TYPES: tuple[str, ...] = ("f16", "q8_0", "q4_0")
DEFAULT_N_GEN = AT_CONTEXT_GEN
#: Where no KLD is measured, files of one model rank by bits per weight with each tensor counted up to Q8_0's 8.5
#: bits: llama.cpp's quantize table (tools/quantize/quantize.cpp) puts Q8_0 at +0.0004 ppl (LLaMA-v1-7B) and F16 at
#: -0.0020 ppl (Mistral-7B) of the full-precision model, both below what a perplexity run can tell apart, so a file
#: whose extra bits are all above that (F16 attention beside Q8_0) is no better, and the faster of the two wins.
QUALITY_BITS_CAP = 8.5
NOT_MEASURED = "not measured — run gguf-bench quality"


@dataclass(frozen=True)
class Quality:
    """Measured quality against a reference (``gguf-bench quality``)."""

    mean_kld: float | None
    ppl: float | None = None
    same_top_rate: float | None = None
    reference: str = ""


@dataclass(frozen=True)
class FileChoice:
    """One file's verdict at the asked context on one device."""

    source: str  # path or URL
    filename: str
    file_type: str
    size_bytes: int
    bits_per_weight: float
    n_layer: int
    status: str  # fits | partial | does_not_fit
    n_gpu_layers: int  # -ngl of the configuration chosen (0 on a CPU)
    type_k: str  # KV-cache type of the configuration chosen
    kv_types_fitting: tuple[str, ...]  # cache types with which everything fits on the device
    memory_bytes: int  # device memory the chosen configuration needs
    budget_bytes: int  # usable device memory
    weights_bytes: int
    kv_bytes: int
    compute_bytes: int
    overhead_bytes: int
    decode_tps: Figure
    ttft_ms: Figure
    measured: Measurement | None = None  # the stable measurement here the figures were carried from, if any
    quality: Quality | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    n_cpu_moe: int = 0  # -ncmoe of the configuration chosen: the first N layers' experts kept in system RAM
    decode_empty_tps: Figure | None = None  # from an empty cache (llama-bench's tg); decode_tps is at the context
    decode_depth: int = 0  # the KV depth decode_tps is for
    placement: str = ""  # the configuration in words: "all 31 layers on the GPU", "experts of 12 layers on the CPU"
    requantized_from: str = ""  # the quantized type this file was made from (its header's lineage), "" if none
    placements: tuple[str, ...] = field(default_factory=tuple)  # every configuration tried, one line each
    #: the model the file is a quantization of: its architecture and shape (files of one model are compared on
    #: quality; files of different models never are), and its name for a sentence
    model_key: str = ""
    model_name: str = ""
    ran_out: str = ""  # which memory a file that does not fit runs out of ("GPU memory", "system RAM")
    #: llama.cpp's weight repacking the figures and the command are for: 0 on a machine whose repack crash guard found
    #: repacked weights crash llama.cpp (app.telemetry.repack_guard), so the command says --no-repack
    repack: int = 1
    #: bits per weight with each tensor type counted up to QUALITY_BITS_CAP (:func:`quality_bits_per_weight`); None:
    #: the file's own bits per weight
    capped_bits_per_weight: float | None = None

    @property
    def quality_bits(self) -> float:
        """The bits per weight the quality ranking reads (see QUALITY_BITS_CAP)."""
        return self.bits_per_weight if self.capped_bits_per_weight is None else self.capped_bits_per_weight

    @property
    def usable(self) -> bool:
        return self.status in ("fits", "partial")

    def to_json_dict(self) -> dict[str, Any]:
        """Every field, each figure in the one shape ``predict`` writes too (``Figure.to_json_dict``)."""
        d = asdict(self)
        d["kv_types_fitting"] = list(self.kv_types_fitting)
        d["notes"] = list(self.notes)
        for key in ("decode_tps", "ttft_ms", "decode_empty_tps"):
            fig = getattr(self, key)
            d[key] = fig.to_json_dict() if fig is not None else None
        return d


@dataclass(frozen=True)
class Recommendation:
    choice: FileChoice | None
    sentence: str
    command: str = ""
    #: one answer per model where the files are of several (model name, its own recommendation)
    per_model: tuple[tuple[str, Recommendation], ...] = ()

    def picks(self) -> list[FileChoice]:
        """The files answered: the one pick, and each model's where there are several models."""
        out = [self.choice] if self.choice is not None else []
        return out + [r.choice for _, r in self.per_model if r.choice is not None and r.choice not in out]

    def command_for(self, c: FileChoice) -> str:
        """The command of ``c``'s model's answer ("" where its model has no file to run)."""
        if self.choice is not None and c.model_key == self.choice.model_key:
            return self.command
        return next((r.command for _, r in self.per_model if r.choice is not None
                     and r.choice.model_key == c.model_key), "")

    def lines(self) -> str:
        """The answer as the window shows it: the sentence, and with several models one line each."""
        if not self.per_model:
            return self.sentence
        head = self.sentence.split(" Per model: ")[0]
        return "\n".join([head, *(f"• {name}: {r.sentence}" for name, r in self.per_model)])

    def to_json_dict(self) -> dict[str, Any]:
        return {"filename": self.choice.filename if self.choice else None, "source": self.choice.source
                if self.choice else None, "sentence": self.sentence, "command": self.command,
                "per_model": [{"model": m, **r.to_json_dict()} for m, r in self.per_model]}


def _answer_at(facts: ModelFacts, profile: HardwareProfile, n_ctx: int, type_k: str, ngl: int, n_prompt: int | None,
               n_gen: int, machine: Machine | None, n_cpu_moe: int = 0, measured: bool = False) -> Answer:
    """The answer at ``n_ctx``: the question every view answers for a context (``at_context``) unless the request was
    given (``n_prompt``, ``n_gen`` other than its own)."""
    settings = at_context(n_ctx, type_k=type_k, n_gpu_layers=ngl, n_cpu_moe=n_cpu_moe)
    if n_prompt is not None or n_gen != settings.n_gen:
        settings = replace(settings, n_prompt=max(1, n_ctx - n_gen) if n_prompt is None else n_prompt, n_gen=n_gen)
    return answer(facts, profile, settings, machine, measured=measured)


@dataclass(frozen=True)
class _Config:
    """One configuration tried for a file: where its weights and cache go, and the prediction there."""

    status: str  # fits | partial
    type_k: str
    n_gpu_layers: int
    n_cpu_moe: int
    got: Answer
    words: str

    def rank(self, min_decode_tps: float | None = None) -> tuple[float, ...]:
        """Placements that meet the speed floor first (:func:`meets_floor`: a measured figure, or the low edge of an
        expected band; never a ceiling); among them everything on the device first, then the better cache type (a
        quantized KV cache costs quality), then the faster; where none meets the floor, the fastest."""
        kv = KV_TYPES.index(self.type_k) if self.type_k in KV_TYPES else len(KV_TYPES)
        decode = self.got.decode.value
        if min_decode_tps is not None and not meets_floor(self.got.decode, min_decode_tps):
            return (1, -decode, kv, 0)
        return (0, 0 if self.status == "fits" and not self.n_cpu_moe else 1, kv, -decode)


def floor_figure(fig: Figure) -> float | None:
    """What a floor is judged on: a measured figure's value, an expected figure's low edge (its value without a
    band); None for a ceiling, which says what cannot be exceeded, not what will be reached."""
    if fig.kind == FigureKind.CEILING:
        return None
    if fig.kind == FigureKind.MEASURED:
        return fig.value
    return fig.low if fig.low is not None else fig.value


def meets_floor(fig: Figure, floor: float) -> bool:
    """Whether ``fig`` meets a speed floor (:func:`floor_figure`)."""
    judged = floor_figure(fig)
    return judged is not None and judged >= floor


def _smallest_n_cpu_moe(facts: ModelFacts, profile: HardwareProfile, n_ctx: int, type_k: str, n_prompt: int | None,
                        n_gen: int, machine: Machine | None) -> Answer | None:
    """The fewest layers whose experts stay in system RAM (-ncmoe) for the rest of a MoE model to fit on the
    device with every layer offloaded (binary search: more on the CPU never needs more device memory)."""
    def at(n: int) -> Answer:
        return _answer_at(facts, profile, n_ctx, type_k, 999, n_prompt, n_gen, machine, n_cpu_moe=n)

    top = at(facts.n_layer)
    if not top.prediction.fit.device_fits:
        return None
    lo, hi, best = 1, facts.n_layer, top
    while lo < hi:
        mid = (lo + hi) // 2
        p = at(mid)
        if p.prediction.fit.device_fits:
            hi, best = mid, p
        else:
            lo = mid + 1
    # the fewest experts in system RAM: where even those do not fit the RAM, more never would
    return best if best.prediction.fit.host_fits else None


def _configurations(facts: ModelFacts, profile: HardwareProfile, n_ctx: int, n_prompt: int | None, n_gen: int,
                    machine: Machine | None) -> tuple[list[_Config], dict[str, Answer]]:
    """Every configuration that fits, per KV-cache type: everything on the device; for a MoE model the fewest
    layers' experts in system RAM; the most layers that fit (the rest on the CPU). And the full-offload answer per
    cache type (for the fit columns)."""
    full = {t: _answer_at(facts, profile, n_ctx, t, 999, n_prompt, n_gen, machine) for t in KV_TYPES}
    n_all = facts.n_layer + 1
    configs: list[_Config] = []
    for t, p in full.items():
        fit = p.prediction.fit
        if profile.kind == "cpu" or profile.is_unified:
            if fit.fits:
                configs.append(_Config("fits", t, 0 if profile.kind == "cpu" else n_all, 0, p,
                                       "in system RAM" if profile.kind == "cpu" else "in unified memory"))
            continue
        if fit.fits:
            configs.append(_Config("fits", t, n_all, 0, p, f"all {n_all} layers on the GPU"))
            continue
        if facts.n_expert:
            moe = _smallest_n_cpu_moe(facts, profile, n_ctx, t, n_prompt, n_gen, machine)
            if moe is not None:
                ncmoe = moe.prediction.n_cpu_moe
                configs.append(_Config("fits", t, n_all, ncmoe, moe,
                                       f"all layers on the GPU but the experts of {ncmoe} of "
                                       f"{facts.n_layer} in system RAM"))
        if fit.max_ngl >= 1:
            part = _answer_at(facts, profile, n_ctx, t, fit.max_ngl, n_prompt, n_gen, machine)
            if part.prediction.fit.host_fits:  # the rest on the CPU needs the system RAM to hold it
                configs.append(_Config("partial", t, fit.max_ngl, 0, part,
                                       f"{fit.max_ngl} of {n_all} layers on the GPU, the rest on the CPU"))
    return configs, full


def _config_line(c: _Config) -> str:
    return (f"-ngl {c.n_gpu_layers}{f' -ncmoe {c.n_cpu_moe}' if c.n_cpu_moe else ''} -ctk {c.type_k}: {c.words}; "
            f"{c.got.decode.value:,.1f} tok/s ({c.got.decode.kind}), {c.got.needed_bytes / 2**20:,.0f} MiB")


def evaluate_file(
    source: str, facts: ModelFacts, profile: HardwareProfile, n_ctx: int, *, n_prompt: int | None = None,
    n_gen: int = DEFAULT_N_GEN, machine: Machine | None = None, quality: Quality | None = None,
    requantized_from: str = "", min_decode_tps: float | None = None,
) -> FileChoice:
    """The verdict for one file: a prompt of ``n_prompt`` tokens (default: the context less ``n_gen``), then
    ``n_gen`` generated, at ``n_ctx`` on ``profile``, in the best configuration that fits.

    Speed is judged the same way for every file: the answer for the configuration (app.predict.answer: measured
    here at that placement where it was, else expected, else the ceiling; the figure's ``kind`` says which).
    Placements are ranked on the figures of the sources alone (:meth:`_Config.rank`, ``min_decode_tps`` the floor
    a placement should meet); the one chosen is then answered with this machine's measurements."""
    configs, full = _configurations(facts, profile, n_ctx, n_prompt, n_gen, machine)
    is_cpu = profile.kind == "cpu"

    def rank(c: _Config) -> tuple[float, ...]:
        return c.rank(min_decode_tps)

    chosen = min(configs, key=rank) if configs else None
    if chosen is not None:
        got = _answer_at(facts, profile, n_ctx, chosen.type_k, chosen.n_gpu_layers, n_prompt, n_gen, machine,
                         n_cpu_moe=chosen.n_cpu_moe, measured=True)
    else:
        got = full[KV_TYPES[0]]
    fit = got.prediction.fit
    ttft = got.ttft_ms or Figure(got.prediction.ttft_ms, FigureKind.CEILING)
    model_key, model_name = model_of(facts)
    ran_out = ""
    if chosen is None:  # with the smallest cache: which memory even the leanest placement runs out of
        lean = full[KV_TYPES[-1]].prediction.fit
        ran_out = (lean.ran_out if is_cpu or profile.is_unified
                   else "system RAM" if lean.max_ngl >= 1 else "GPU memory")
    return FileChoice(
        source=source, filename=display_name(source), file_type=facts.file_type, size_bytes=facts.file_bytes,
        bits_per_weight=facts.bits_per_weight, n_layer=facts.n_layer, status=chosen.status if chosen else
        "does_not_fit", n_gpu_layers=0 if is_cpu else chosen.n_gpu_layers if chosen else got.prediction.n_gpu_layers,
        type_k=chosen.type_k if chosen else KV_TYPES[0],
        kv_types_fitting=tuple(t for t, p in full.items()
                               if p.prediction.fit.status == "fits" and p.prediction.fit.fits),
        memory_bytes=fit.needed_bytes, budget_bytes=fit.budget_bytes, weights_bytes=fit.weight_bytes,
        kv_bytes=fit.kv_bytes, compute_bytes=fit.compute_buffer_bytes, overhead_bytes=fit.overhead_bytes,
        decode_tps=got.decode, ttft_ms=ttft, measured=got.measured, quality=quality, notes=got.notes,
        n_cpu_moe=chosen.n_cpu_moe if chosen else 0, decode_empty_tps=got.decode_empty,
        decode_depth=int(got.settings.decode_depth), placement=chosen.words if chosen else (
            f"no placement fits: {ran_out} runs out (figures: every layer on the GPU)" if ran_out else ""),
        requantized_from=requantized_from, placements=tuple(_config_line(c) for c in sorted(configs, key=rank)),
        repack=got.settings.repack, model_key=model_key, model_name=model_name, ran_out=ran_out,
        capped_bits_per_weight=quality_bits_per_weight(facts),
    )


def quality_bits_per_weight(facts: ModelFacts) -> float:
    """Bits per weight over the file with each tensor type's bits counted up to QUALITY_BITS_CAP; the file's own
    bits per weight where the header gives no types."""
    parts = [(8.0 * t.n_bytes / t.n_elements, t.n_elements) for t in facts.tensor_types.values() if t.n_elements > 0]
    total = sum(n for _, n in parts)
    if not total:
        return facts.bits_per_weight
    return sum(min(bits, QUALITY_BITS_CAP) * n for bits, n in parts) / total


def display_name(source: str) -> str:
    """The file name of a path or URL."""
    path = urlsplit(source).path if "://" in source else source.replace("\\", "/")
    return PurePosixPath(path).name or source


def _has_kld(c: FileChoice) -> bool:
    return c.quality is not None and c.quality.mean_kld is not None


def lineage_source(c: FileChoice, choices: Sequence[FileChoice]) -> FileChoice | None:
    """The file of the set ``c`` was requantized from (its header's ``requantized_from`` type), if it is there."""
    if not c.requantized_from:
        return None
    return next((o for o in choices if o is not c and not o.requantized_from
                 and o.file_type.upper() == c.requantized_from.upper()), None)


def _effective_quality(c: FileChoice, choices: Sequence[FileChoice]) -> tuple[float | None, float]:
    """(KLD, bits per weight) as a ranking should see them: a requantized file is no better than its source."""
    src = lineage_source(c, choices)
    kld = c.quality.mean_kld if c.quality is not None else None
    bpw = c.quality_bits
    if src is not None:
        bpw = min(bpw, src.quality_bits)
        if kld is not None and src.quality is not None and src.quality.mean_kld is not None:
            kld = max(kld, src.quality.mean_kld)
    return kld, round(bpw, 6)  # sums over types in another order: equal files compare equal


def quality_key(c: FileChoice, choices: Sequence[FileChoice], by_kld: bool) -> tuple[float, ...]:
    """Best quality first; on equal quality the original before a copy requantized from it, then the faster."""
    kld, bpw = _effective_quality(c, choices)
    copy = 1.0 if c.requantized_from else 0.0
    if by_kld:
        return (kld if kld is not None else math.inf, -bpw, copy, -c.decode_tps.value)
    return (-bpw, copy, -c.decode_tps.value)


def llama_server_command(c: FileChoice, n_ctx: int) -> str:
    """The ready-to-run llama-server command line for a choice, its placement included."""
    model = f"-mu {shlex.quote(c.source)}" if "://" in c.source else f"-m {shlex.quote(c.source)}"
    moe = f" -ncmoe {c.n_cpu_moe}" if c.n_cpu_moe else ""
    no_repack = " --no-repack" if c.repack == 0 else ""  # llama-server's flag (common/arg.cpp: -nr, --no-repack)
    return (f"llama-server {model} -ngl {c.n_gpu_layers}{moe} -c {n_ctx} -ctk {c.type_k} -ctv {c.type_k} -fa on"
            f"{no_repack}")


def why_not(c: FileChoice, choices: Sequence[FileChoice], min_decode_tps: float | None,
            max_kld: float | None) -> str:
    """Why a file was not the pick, in a few words ("does not fit", "below the 20 tok/s floor (12.1 measured)")."""
    if not c.usable:
        return f"does not fit ({c.ran_out} ran out)" if c.ran_out else "does not fit"
    why = below_floors(c, min_decode_tps, max_kld)
    if why:
        return why
    src = lineage_source(c, choices)
    if src is not None:
        return f"requantized from {src.filename}, so no better than it"
    return ""


def _same_quality(c: FileChoice, best: FileChoice, choices: Sequence[FileChoice], by_kld: bool) -> bool:
    """Whether ``c`` ranked after ``best`` only on speed: the same capped bits per weight (no KLD ranking), both
    originals, and not a file whose own bits are fewer (that one is simply lower)."""
    if by_kld or c.requantized_from or best.requantized_from:
        return False
    return (_effective_quality(c, choices)[1] == _effective_quality(best, choices)[1]
            and c.bits_per_weight > best.bits_per_weight)


def _lower_quality(c: FileChoice, choices: Sequence[FileChoice], by_kld: bool) -> str:
    """How a file ranked below the pick on quality, in a few words."""
    kld, bpw = _effective_quality(c, choices)
    src = lineage_source(c, choices)
    fits = "" if c.usable else ", does not fit"
    if src is not None and c.bits_per_weight >= src.bits_per_weight and not (by_kld and kld is not None):
        return f"(requantized from {src.filename}, so no better than it{fits})"
    copy = f", requantized from {src.filename}" if src is not None else ""
    if by_kld and kld is not None:
        return f"(KLD {kld:.4f}{copy}{fits})"
    return f"({bpw:.2f} bits/weight{copy}{fits})"


def model_of(facts: ModelFacts) -> tuple[str, str]:
    """(key, name) of the model a file quantizes: its architecture and shape (the same for every quantization of
    it), and a name for it: the header's name, else the architecture with its parameter count."""
    key = (f"{facts.architecture}|{facts.n_layer}|{facts.n_embd}|{facts.n_head}|{facts.n_head_kv}|{facts.n_ff}|"
           f"{facts.n_expert}|{facts.n_vocab}")
    return key, facts.name or f"{facts.architecture} {facts.n_params / 1e9:.1f}B"


def recommend(choices: list[FileChoice], profile_name: str, n_ctx: int, min_decode_tps: float | None = None,
              max_kld: float | None = None) -> Recommendation:
    """One file per model (:func:`recommend_one`); files of different models are never ranked against each other
    on quality (bits per weight say nothing across models). Where the set holds several models, the answer has a
    line per model, and names the one to run only where the floors leave exactly one."""
    groups: dict[str, list[FileChoice]] = {}
    for c in choices:
        groups.setdefault(c.model_key, []).append(c)
    if len(groups) <= 1:
        return recommend_one(choices, profile_name, n_ctx, min_decode_tps, max_kld)
    per = tuple((g[0].model_name or g[0].filename, recommend_one(g, profile_name, n_ctx, min_decode_tps, max_kld))
                for g in groups.values())
    lines = " ".join(f"{name}: {rec.sentence}" for name, rec in per)
    picked = [(name, rec) for name, rec in per if rec.choice is not None]
    floors = min_decode_tps is not None or max_kld is not None
    if floors and len(picked) == 1:
        name, rec = picked[0]
        return Recommendation(rec.choice, f"Of {len(per)} models, only {name} has a file that fits and meets the "
                                          f"floors: run {rec.choice.filename}. Per model: {lines}",  # type: ignore
                              rec.command, per)
    if not picked:
        return Recommendation(None, f"None of the {len(per)} models has a file that fits"
                                    + (" and meets the floors" if floors else "") + f". Per model: {lines}", "", per)
    which = ", ".join(name for name, _ in picked)
    why = ("meet the floors" if floors else "have a file that fits")
    return Recommendation(None, f"{len(picked)} of {len(per)} models {why} ({which}): which to run is a choice of "
                                "model, not of quantization, so there is one answer per model. Per model: "
                                f"{lines}", "", per)


def recommend_one(choices: list[FileChoice], profile_name: str, n_ctx: int, min_decode_tps: float | None = None,
                  max_kld: float | None = None) -> Recommendation:
    """The highest-quality file of one model that fits at ``n_ctx`` and meets the speed floor (judged on a measured
    figure or an expected band's low edge, never a ceiling) and the KLD limit (when the file's KLD is measured),
    with the reason in one sentence, why each better-quality file lost, and its llama-server command. A file
    requantized from another of the set ranks as no better than its source and after it, so it is the pick only
    where the source fails a floor or does not fit."""
    usable = [c for c in choices if c.usable]
    if not usable:
        short = sorted({c.ran_out for c in choices if c.ran_out})
        return Recommendation(None, f"No file fits {profile_name} at {n_ctx:,} tokens, even with fewer layers "
                                    f"offloaded, experts in system RAM or a q4_0 KV cache"
                              + (f": {' and '.join(short)} ran out." if short else "."))
    fast = [c for c in usable if min_decode_tps is None or meets_floor(c.decode_tps, min_decode_tps)]
    if not fast:
        misses = "; ".join(f"{c.filename} {below_floors(c, min_decode_tps, None)}" for c in usable)
        return Recommendation(None, f"No file is shown to reach {min_decode_tps:g} tok/s on {profile_name} at "
                                    f"{n_ctx:,} tokens: {misses}.")
    ok = [c for c in fast if max_kld is None or not _has_kld(c) or c.quality.mean_kld <= max_kld]  # type: ignore
    if not ok:
        return Recommendation(None, f"No file that fits and is fast enough has a KLD within {max_kld:g}.")
    by_kld = all(_has_kld(c) for c in ok)
    ranked = sorted(choices, key=lambda c: quality_key(c, choices, by_kld))
    best = min(ok, key=lambda c: quality_key(c, choices, by_kld))
    at = ranked.index(best)
    better = [(c, why_not(c, choices, min_decode_tps, max_kld)) for c in ranked[:at]]
    lost = "; ".join(f"{c.filename} {why}" for c, why in better if why)
    after = ranked[at + 1:]
    same = [c for c in after if _same_quality(c, best, choices, by_kld)]
    equal = "; ".join(f"{c.filename} ({c.bits_per_weight:.2f} bits/weight, "
                      f"{why_not(c, choices, min_decode_tps, max_kld) or f'slower: {c.decode_tps.text()} tok/s'})"
                      for c in same)
    worse = "; ".join(f"{c.filename} {_lower_quality(c, choices, by_kld)}" for c in after if c not in same)
    sentence = _sentence(best, choices, profile_name, n_ctx, min_decode_tps, by_kld)
    if lost:
        sentence += f" Better-quality files lost: {lost}."
    if equal:
        sentence += (f" As good on quality, counting each tensor up to Q8_0's {QUALITY_BITS_CAP:g} bits (llama.cpp's "
                     f"quantize table puts Q8_0 within 0.0004 perplexity of full precision): {equal}.")
    if worse:
        sentence += f" The others rank lower on quality: {worse}."
    return Recommendation(best, sentence, llama_server_command(best, n_ctx))


def _sentence(c: FileChoice, choices: Sequence[FileChoice], profile_name: str, n_ctx: int,
              min_decode_tps: float | None, by_kld: bool) -> str:
    kld, _ = _effective_quality(c, choices)
    quality = (f"the lowest measured KLD ({kld:.4f})" if by_kld and kld is not None
               else "the most bits per weight (quality not measured for every file)")
    if any(o is not c and _same_quality(o, c, choices, by_kld) for o in choices):
        quality = "as many bits per weight as any (quality not measured for every file) and is the fastest of those"
    if c.status == "fits" and c.n_cpu_moe:
        place = f"fits on {profile_name} with {c.placement}"
    elif c.status == "fits":
        place = f"fits entirely on {profile_name}" if c.n_gpu_layers else f"fits in {profile_name}'s memory"
    else:
        place = f"fits on {profile_name} with {c.n_gpu_layers} of {c.n_layer + 1} layers offloaded"
    how = {"ceiling": "up to", "measured": "as measured here,"}.get(c.decode_tps.kind, "about")
    empty = (f" ({c.decode_empty_tps.value:,.1f} from an empty cache)" if c.decode_empty_tps is not None else "")
    among = "of the files that fit" + (" and meet the floor" if min_decode_tps is not None else "")
    return (f"Run {c.filename} ({c.file_type}, {c.bits_per_weight:.2f} bits/weight): {among}, it has "
            f"{quality}; it {place} at {n_ctx:,} tokens with a {c.type_k} KV cache, decoding {how} "
            f"{c.decode_tps.text()} tok/s with the context full{empty}"
            f"{floor_words(c.decode_tps, min_decode_tps)}.{_rests_on_ceiling(c.decode_tps)}")


def _rests_on_ceiling(decode: Figure) -> str:
    """Where the pick's speed is only a ceiling, the sentence says so: nothing expected stands behind it."""
    if decode.kind != FigureKind.CEILING:
        return ""
    return (" Its speed rests on a ceiling (what the hardware's bandwidth allows, not what llama.cpp is expected to "
            "reach): no expected figure exists for it here; measure it before relying on the speed.")


def floor_words(decode: Figure, min_decode_tps: float | None) -> str:
    """How a figure meets the speed floor: measured above it, or its whole band above it."""
    if min_decode_tps is None:
        return ""
    if decode.kind == FigureKind.MEASURED:
        return f", above the {min_decode_tps:g} tok/s floor as measured"
    return f", above the {min_decode_tps:g} tok/s floor" + (" across its band" if decode.low is not None else "")


def below_floors(c: FileChoice, min_decode_tps: float | None, max_kld: float | None) -> str:
    """Why a file that fits fails the floors ("below the 20 tok/s floor", "KLD over 0.05"), or ""."""
    why = []
    if min_decode_tps is not None and not meets_floor(c.decode_tps, min_decode_tps):
        d = c.decode_tps
        if d.kind == FigureKind.CEILING:
            why.append(f"not shown to reach the {min_decode_tps:g} tok/s floor (only a ceiling, up to {d.value:,.1f}: "
                       "no expected figure for it here; measure it)")
        elif d.kind != FigureKind.MEASURED and d.low is not None and d.value >= min_decode_tps:
            why.append(f"below the {min_decode_tps:g} tok/s floor at its band's low edge ({d.low:,.1f}; expected "
                       f"{d.value:,.1f})")
        else:
            why.append(f"below the {min_decode_tps:g} tok/s floor ({d.value:,.1f} {d.kind})")
    kld = c.quality.mean_kld if c.quality is not None else None
    if max_kld is not None and kld is not None and kld > max_kld:
        why.append(f"KLD over {max_kld:g}")
    return ", ".join(why)


#: The chooser table's columns (CSV export, the window's table): (key, header, unit).
CHOICE_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("filename", "file", ""), ("file_type", "type", ""), ("bits_per_weight", "bits/weight", ""),
    ("size_mib", "size", "MiB"), ("status", "fit", ""), ("n_gpu_layers", "-ngl", ""), ("type_k", "KV cache", ""),
    ("kv_types_fitting", "KV types that fit", ""), ("memory_mib", "memory", "MiB"), ("budget_mib", "device", "MiB"),
    ("ttft_ms", "TTFT", "ms"), ("decode_tps", "decode", "tok/s"), ("decode_kind", "speed is", ""),
    ("decode_low_tps", "decode low", "tok/s"), ("decode_high_tps", "decode high", "tok/s"),
    ("speed_source", "speed source", ""), ("measured_decode_tps", "measured decode", "tok/s"),
    ("measured_ttft_ms", "measured TTFT", "ms"), ("measured_settings", "measured at", ""),
    ("mean_kld", "KLD", ""), ("ppl", "PPL", ""), ("same_top_rate", "same top", ""), ("source", "path or URL", ""),
    ("n_cpu_moe", "-ncmoe", ""), ("placement", "placement", ""), ("decode_depth", "decode at depth", "tokens"),
    ("decode_empty_tps", "decode, empty cache", "tok/s"), ("requantized_from", "requantized from", ""),
)


def choice_row(c: FileChoice) -> dict[str, Any]:
    """One file's values under :data:`CHOICE_COLUMNS` keys (None where there is nothing)."""
    q, m = c.quality, c.measured
    return {
        "filename": c.filename, "file_type": c.file_type, "bits_per_weight": round(c.bits_per_weight, 3),
        "size_mib": round(c.size_bytes / 2**20, 1), "status": c.status, "n_gpu_layers": c.n_gpu_layers,
        "type_k": c.type_k, "kv_types_fitting": ",".join(c.kv_types_fitting),
        "memory_mib": round(c.memory_bytes / 2**20, 1), "budget_mib": round(c.budget_bytes / 2**20, 1),
        "ttft_ms": round(c.ttft_ms.value, 1), "decode_tps": round(c.decode_tps.value, 2),
        "decode_kind": c.decode_tps.kind, "decode_low_tps": c.decode_tps.low, "decode_high_tps": c.decode_tps.high,
        "speed_source": c.decode_tps.source.text(), "measured_decode_tps": m.decode_tps if m else None,
        "measured_ttft_ms": m.ttft_ms if m else None, "measured_settings": m.settings if m else None,
        "mean_kld": q.mean_kld if q else None, "ppl": q.ppl if q else None,
        "same_top_rate": q.same_top_rate if q else None, "source": c.source,
        "n_cpu_moe": c.n_cpu_moe, "placement": c.placement, "decode_depth": c.decode_depth,
        "decode_empty_tps": round(c.decode_empty_tps.value, 2) if c.decode_empty_tps else None,
        "requantized_from": c.requantized_from or None,
    }
