"""Which file of a set to run on one device at one context: fit per KV-cache type with a device margin, speed,
expected quality, and a recommendation that weighs the two.

Pure functions of (model facts, hardware profile, settings, measured quality and speed). Gathering the files, URLs,
the results store and the machine is :mod:`app.choose.chooser`. Placements are searched by the one fit verdict
(:func:`app.predict.placement.fit_verdict`); every configuration is predicted with flash attention on where the
model has a KV cache (what llama.cpp's "auto" picks where it can, and what a quantized V cache needs).

The pick (:func:`recommend_one`): of the files that fit and meet the floors, the one with the best
:func:`app.choose.expected_quality.preference_score`, speed against expected loss at the exchange rate of the
preference (``balanced`` by default); the sentence says what it trades against the best-quality and the fastest
file, names close calls on a floor and a KV-cache type chosen to pass one, with its quality cost.
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import urlsplit

from app.model.facts import ModelFacts
from app.predict.answer import Figure, FigureKind, Machine, Measurement, answer
from app.predict.expected_quality import (
    EXCHANGE_KLD,
    KV_CACHE_KLD,
    SPEED_STEP,
    QualityFigure,
    measured_quality,
    preference_score,
    published_quality,
)
from app.predict.placement import (
    KV_TYPES,
    Placed,
    close_call,
    fit_verdict,
    floor_figure,
    meets_floor,
    placement_rank,
)
from app.predict.profiles import HardwareProfile
from app.predict.questions import DEFAULT_N_CTX, Question
from app.predict.settings import AT_CONTEXT_GEN

DEFAULT_N_GEN = AT_CONTEXT_GEN
DEFAULT_PREFER = "balanced"
#: Where no KLD is measured, files of one model rank by bits per weight with each tensor counted up to Q8_0's 8.5
#: bits: llama.cpp's quantize table (tools/quantize/quantize.cpp) puts Q8_0 at +0.0026 ppl (Llama-3-8B) and F16 at
#: +0.0020 ppl (Mistral-7B) of the full-precision model, both below what a perplexity run can tell apart, so a file
#: whose extra bits are all above that (F16 attention beside Q8_0) is no better, and the faster of the two wins.
QUALITY_BITS_CAP = 8.5
NOT_MEASURED = "not measured — run gguf-bench quality"
GIB = 2**30

__all__ = ["DEFAULT_N_GEN", "KV_TYPES", "Figure", "FileChoice", "Quality", "Recommendation", "evaluate_file",
           "floor_figure", "llama_server_command", "meets_floor", "recommend", "recommend_one"]


@dataclass(frozen=True)
class Quality:
    """Measured quality against a reference (``gguf-bench quality``)."""

    mean_kld: float | None
    ppl: float | None = None
    same_top_rate: float | None = None
    reference: str = ""
    #: the file is the reference the others were measured against (its KLD is 0 by definition)
    is_reference: bool = False


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
    budget_bytes: int  # usable device memory (less the margin kept free)
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
    #: the file's expected loss against its full-precision model (measured, published for its type, or from its
    #: bits), before its KV cache's own (:mod:`app.choose.expected_quality`)
    expected_quality: QualityFigure | None = None
    kv_cache: bool = True  # the model keeps a KV cache (a pure recurrent model does not)
    host_bytes: int = 0  # system RAM the chosen configuration needs for what stays on the host
    host_budget_bytes: int | None = None  # system RAM it may use (less the OS's share); None: not checked
    margin_bytes: int = 0  # device memory kept free beside budget_bytes
    verdict: str = ""  # the fit verdict in one line (app.predict.placement.FitVerdict.text)
    content_key: str = ""  # size and header: two files with the same key are one file twice

    @property
    def quality_bits(self) -> float:
        """The bits per weight the quality ranking reads (see QUALITY_BITS_CAP)."""
        return self.bits_per_weight if self.capped_bits_per_weight is None else self.capped_bits_per_weight

    @property
    def usable(self) -> bool:
        return self.status in ("fits", "partial")

    @property
    def total_quality(self) -> QualityFigure | None:
        """The expected loss of the configuration chosen: the file's and its KV cache's."""
        q = self.expected_quality
        if q is None and self.quality is not None and (self.quality.mean_kld is not None or self.quality.is_reference):
            q = measured_quality(self.quality.mean_kld or 0.0, self.quality.reference, self.quality.is_reference)
        if q is None:
            return None
        return q.plus_kv(self.type_k) if self.kv_cache else q

    @property
    def bpw_text(self) -> str:
        """Bits per weight as every surface prints them (two decimals, from the one value)."""
        return f"{self.bits_per_weight:.2f}"

    def to_json_dict(self) -> dict[str, Any]:
        """Every field, each figure in the one shape ``predict`` writes too (``Figure.to_json_dict``)."""
        d = asdict(self)
        d["kv_types_fitting"] = list(self.kv_types_fitting)
        d["notes"] = list(self.notes)
        for key in ("decode_tps", "ttft_ms", "decode_empty_tps"):
            fig = getattr(self, key)
            d[key] = fig.to_json_dict() if fig is not None else None
        q = self.total_quality
        d["expected_kld"] = q.kld if q is not None else None
        d["expected_kld_low"] = q.low if q is not None else None
        d["expected_kld_high"] = q.high if q is not None else None
        d["expected_quality_kind"] = q.kind if q is not None else None
        d["expected_quality_source"] = q.source if q is not None else None
        d["device_bytes"] = self.memory_bytes
        d["ttft_kind"] = str(self.ttft_ms.kind)
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
        c = self.choice
        return {"filename": c.filename if c else None, "source": c.source if c else None, "sentence": self.sentence,
                "command": self.command, "device_bytes": c.memory_bytes if c else None,
                "device_budget_bytes": c.budget_bytes if c else None, "margin_bytes": c.margin_bytes if c else None,
                "host_bytes": c.host_bytes if c else None, "host_budget_bytes": c.host_budget_bytes if c else None,
                "per_model": [{"model": m, **r.to_json_dict()} for m, r in self.per_model]}


def file_quality(facts: ModelFacts, quality: Quality | None) -> QualityFigure:
    """The file's expected loss: measured here where it was, else published for its type, else from its bits."""
    if quality is not None and quality.is_reference:
        return measured_quality(0.0, is_reference=True)
    if quality is not None and quality.mean_kld is not None:
        return measured_quality(quality.mean_kld, quality.reference)
    return published_quality(facts, quality_bits_per_weight(facts))


def kv_cost(type_k: str) -> float:
    """A KV-cache type's expected added loss (:data:`app.choose.expected_quality.KV_CACHE_KLD`)."""
    return KV_CACHE_KLD.get(type_k.lower(), (0.0, 0.0, 0.0))[0]


def placement_key(min_decode_tps: float | None, prefer: str):  # type: ignore[no-untyped-def]
    """How a file's placements rank: :func:`app.predict.placement.placement_rank`, the same on every surface (the
    file's own expected loss is the same in each of its placements: only its KV cache's differs)."""
    def key(p: Placed) -> tuple[float, ...]:
        return placement_rank(p, min_decode_tps, prefer)
    return key


def evaluate_file(
    source: str, facts: ModelFacts, profile: HardwareProfile, n_ctx: int = DEFAULT_N_CTX, *,
    n_prompt: int | None = None, n_gen: int = DEFAULT_N_GEN, machine: Machine | None = None,
    quality: Quality | None = None, requantized_from: str = "", min_decode_tps: float | None = None,
    prefer: str = DEFAULT_PREFER, question: Question | None = None,
) -> FileChoice:
    """The verdict for one file: a prompt of ``n_prompt`` tokens (default: the context less ``n_gen``), then
    ``n_gen`` generated, at ``n_ctx`` on ``profile``, in the best configuration that fits with the question's
    device margin kept free (``question``: the whole question, its margin included; else one at these values).

    Speed is judged the same way for every file: the answer for the configuration (app.predict.answer: measured
    here at that placement where it was, else expected, else the ceiling; the figure's ``kind`` says which).
    Placements are ranked on the figures of the sources alone and the file's expected quality
    (:func:`placement_key`); the one chosen is then answered with this machine's measurements."""
    q = question if question is not None else Question(n_ctx=n_ctx, n_prompt=n_prompt, n_gen=n_gen)
    expected = file_quality(facts, quality)
    verdict = fit_verdict(facts, profile, q, machine, kv_types=KV_TYPES,
                          rank=placement_key(min_decode_tps, prefer))
    chosen = verdict.best
    is_cpu = profile.kind == "cpu"
    if chosen is not None:
        got = answer(facts, profile, q.with_placement(chosen.n_gpu_layers, chosen.n_cpu_moe, chosen.type_k)
                     .at_context(), machine, measured=True)
    else:
        got = verdict.full[verdict.kv_types[0]]
    fit = got.prediction.fit
    ttft = got.ttft_ms or Figure(got.prediction.ttft_ms, FigureKind.CEILING)
    model_key, model_name = model_of(facts)
    return FileChoice(
        source=source, filename=display_name(source), file_type=facts.file_type, size_bytes=facts.file_bytes,
        bits_per_weight=facts.bits_per_weight, n_layer=facts.n_layer, status=verdict.status,
        n_gpu_layers=0 if is_cpu else chosen.n_gpu_layers if chosen else got.prediction.n_gpu_layers,
        type_k=chosen.type_k if chosen else verdict.kv_types[0],
        kv_types_fitting=verdict.fits_entirely,
        memory_bytes=fit.needed_bytes, budget_bytes=fit.budget_bytes, weights_bytes=fit.weight_bytes,
        kv_bytes=fit.kv_bytes, compute_bytes=fit.compute_buffer_bytes, overhead_bytes=fit.overhead_bytes,
        decode_tps=got.decode, ttft_ms=ttft, measured=got.measured, quality=quality, notes=got.notes,
        n_cpu_moe=chosen.n_cpu_moe if chosen else 0, decode_empty_tps=got.decode_empty,
        decode_depth=int(got.settings.decode_depth), placement=chosen.words if chosen else (
            f"no placement fits: {verdict.ran_out} runs out (figures: every layer on the GPU)" if verdict.ran_out
            else ""),
        requantized_from=requantized_from, placements=tuple(p.line() for p in verdict.tried),
        repack=got.settings.repack, model_key=model_key, model_name=model_name, ran_out=verdict.ran_out,
        capped_bits_per_weight=quality_bits_per_weight(facts), expected_quality=expected,
        kv_cache=verdict.kv_cache, host_bytes=fit.cpu_needed_bytes, host_budget_bytes=fit.host_budget_bytes,
        margin_bytes=fit.margin_bytes, verdict=verdict.text(), content_key=content_key(facts),
    )


def content_key(facts: ModelFacts) -> str:
    """What makes two files one file twice: the same size, type, shape and tensor types (a copy of a file in
    another folder); a different quantization or model differs in one of them."""
    types = ",".join(f"{k}:{v.n_bytes}" for k, v in sorted(facts.tensor_types.items()))
    return f"{facts.file_bytes}|{facts.file_type}|{model_of(facts)[0]}|{facts.name}|{types}"


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
    return c.quality is not None and (c.quality.mean_kld is not None or c.quality.is_reference)


def lineage_source(c: FileChoice, choices: Sequence[FileChoice]) -> FileChoice | None:
    """The file of the set ``c`` was requantized from (its header's ``requantized_from`` type), if it is there."""
    if not c.requantized_from:
        return None
    return next((o for o in choices if o is not c and not o.requantized_from
                 and o.file_type.upper() == c.requantized_from.upper()), None)


def effective_kld(c: FileChoice, choices: Sequence[FileChoice]) -> float:
    """The expected loss a ranking reads: the configuration's (file and KV cache). A file requantized from another
    of the set is never better than it: where both were measured, the larger measured loss; else the two
    quantizations' losses added (the copy carries its source's error and its own)."""
    q = c.total_quality
    kld = q.kld if q is not None else math.inf
    src = lineage_source(c, choices)
    if src is not None and src.expected_quality is not None:
        kv = kv_cost(c.type_k) if c.kv_cache else 0.0
        both_measured = (q is not None and q.kind == "measured" and src.expected_quality.kind == "measured")
        kld = max(kld, src.expected_quality.kld + kv) if both_measured else kld + src.expected_quality.kld
    return kld


def _effective_quality(c: FileChoice, choices: Sequence[FileChoice]) -> tuple[float | None, float]:
    """(measured KLD, bits per weight) as a ranking by them sees them: a requantized file is no better than its
    source."""
    src = lineage_source(c, choices)
    kld = c.quality.mean_kld if c.quality is not None else None
    bpw = c.quality_bits
    if src is not None:
        bpw = min(bpw, src.quality_bits)
        if kld is not None and src.quality is not None and src.quality.mean_kld is not None:
            kld = max(kld, src.quality.mean_kld)
    return kld, round(bpw, 6)  # sums over types in another order: equal files compare equal


def quality_key(c: FileChoice, choices: Sequence[FileChoice], by_kld: bool = False) -> tuple[float, ...]:
    """Best expected quality first (the configuration's loss, a requantized copy no better than its source); on
    equal quality the original before a copy requantized from it, then the faster."""
    copy = 1.0 if c.requantized_from else 0.0
    return (round(effective_kld(c, choices), 9), -_effective_quality(c, choices)[1], copy, -c.decode_tps.value)


def pick_key(c: FileChoice, choices: Sequence[FileChoice], prefer: str) -> tuple[float, ...]:
    """How the pick ranks files of one model (best first): :func:`preference_score` of its decode at the context
    and its expected loss; on an equal score the better quality, the original before a copy."""
    kld = effective_kld(c, choices)
    score = preference_score(c.decode_tps.value, kld if math.isfinite(kld) else 1e9, prefer)
    return (-round(score, 9), *quality_key(c, choices))


def llama_server_command(c: FileChoice, n_ctx: int) -> str:
    """The ready-to-run llama-server command line for a choice, its placement included; without ``-ctk``/``-ctv``
    and ``-fa`` for a model that keeps no KV cache."""
    model = f"-mu {shlex.quote(c.source)}" if "://" in c.source else f"-m {shlex.quote(c.source)}"
    moe = f" -ncmoe {c.n_cpu_moe}" if c.n_cpu_moe else ""
    no_repack = " --no-repack" if c.repack == 0 else ""  # llama-server's flag (common/arg.cpp: -nr, --no-repack)
    kv = f" -ctk {c.type_k} -ctv {c.type_k} -fa on" if c.kv_cache else ""
    return f"llama-server {model} -ngl {c.n_gpu_layers}{moe} -c {n_ctx}{kv}{no_repack}"


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


_QUANT_TAIL = re.compile(r"[-_. ]?(?:(?:I?Q\d\w*)|MXFP4\w*|F16|BF16|F32|FP16|FP8|UD-\w+)$", re.IGNORECASE)


def model_label(files: Sequence[FileChoice]) -> str:
    """A group's name: the model's name from its header with any quantization at its end taken off; else the part
    the file names share, without the extension and the quantization."""
    name = next((c.model_name for c in files if c.model_name), "")
    if name:
        return _QUANT_TAIL.sub("", name.strip()) or name
    stems = [re.sub(r"\.gguf$", "", c.filename, flags=re.IGNORECASE) for c in files]
    shared = stems[0]
    for s in stems[1:]:
        while not s.startswith(shared):
            shared = shared[:-1]
    shared = _QUANT_TAIL.sub("", shared.rstrip("-_. ")).rstrip("-_. ")
    return shared or stems[0]


def model_of(facts: ModelFacts) -> tuple[str, str]:
    """(key, name) of the model a file quantizes: its architecture and shape (the same for every quantization of
    it), and a name for it: the header's name, else the architecture with its parameter count."""
    key = (f"{facts.architecture}|{facts.n_layer}|{facts.n_embd}|{facts.n_head}|{facts.n_head_kv}|{facts.n_ff}|"
           f"{facts.n_expert}|{facts.n_vocab}")
    return key, facts.name or f"{facts.architecture} {facts.n_params / 1e9:.1f}B"


def recommend(choices: list[FileChoice], profile_name: str, n_ctx: int, min_decode_tps: float | None = None,
              max_kld: float | None = None, prefer: str = DEFAULT_PREFER) -> Recommendation:
    """One file per model (:func:`recommend_one`); files of different models are never ranked against each other
    on quality (a quantization's loss says nothing across models). Where the set holds several models, the answer
    has a line per model, and names the one to run only where the floors leave exactly one."""
    groups: dict[str, list[FileChoice]] = {}
    for c in choices:
        groups.setdefault(c.model_key, []).append(c)
    if len(groups) <= 1:
        return recommend_one(choices, profile_name, n_ctx, min_decode_tps, max_kld, prefer)
    per = tuple((model_label(g), recommend_one(g, profile_name, n_ctx, min_decode_tps, max_kld, prefer))
                for g in groups.values())
    lines = " ".join(f"{name}: {rec.sentence}" for name, rec in per)
    picked = [(name, rec) for name, rec in per if rec.choice is not None]
    floors = min_decode_tps is not None or max_kld is not None
    if floors and len(picked) == 1:
        name, rec = picked[0]
        assert rec.choice is not None
        return Recommendation(rec.choice, f"Of {len(per)} models, only {name} has a file that fits and meets the "
                                          f"floors: run {rec.choice.filename}. Per model: {lines}", rec.command, per)
    if not picked:
        return Recommendation(None, f"None of the {len(per)} models has a file that fits"
                                    + (" and meets the floors" if floors else "") + f". Per model: {lines}", "", per)
    which = ", ".join(name for name, _ in picked)
    why = ("meet the floors" if floors else "have a file that fits")
    return Recommendation(None, f"{len(picked)} of {len(per)} models {why} ({which}): which to run is a choice of "
                                "model, not of quantization, so there is one answer per model. Per model: "
                                f"{lines}", "", per)


def _copies(choices: Sequence[FileChoice]) -> dict[int, FileChoice]:
    """For each file that is another file of the set a second time (same size and header), the first of them."""
    first: dict[str, FileChoice] = {}
    out: dict[int, FileChoice] = {}
    for c in choices:
        if c.content_key and c.content_key in first:
            out[id(c)] = first[c.content_key]
        else:
            first.setdefault(c.content_key, c)
    return out


def _kld_text(q: QualityFigure | None) -> str:
    if q is None:
        return "quality unknown"
    return f"KLD {q.kld:.4f}" + ("" if q.kind in ("measured", "reference") else f" {q.kind}")


def _lower_words(c: FileChoice, choices: Sequence[FileChoice]) -> str:
    """A file that ranks below the pick on quality, in a few words: its expected loss, its speed or why it is out."""
    src = lineage_source(c, choices)
    if src is not None and c.bits_per_weight >= src.bits_per_weight and not _has_kld(c):
        return f"{c.filename} (requantized from {src.filename}, so no better than it" + (
            ", does not fit)" if not c.usable else ")")
    copy = f", requantized from {src.filename}" if src is not None else ""
    speed = f", {c.decode_tps.value:,.1f} tok/s" if c.usable else ", does not fit"
    q = c.total_quality
    kld = (f"KLD {effective_kld(c, choices):.4f}" + ("" if q.kind in ("measured", "reference") else f" {q.kind}")
           if q is not None else "quality unknown")
    return f"{c.filename} ({kld}{copy}{speed})"


def recommend_one(choices: list[FileChoice], profile_name: str, n_ctx: int, min_decode_tps: float | None = None,
                  max_kld: float | None = None, prefer: str = DEFAULT_PREFER) -> Recommendation:
    """The file of one model to run at ``n_ctx``: of those that fit (a device margin kept free) and meet the speed
    floor (a measured figure or an expected band's low edge, never a ceiling) and the KLD limit (where measured), the
    one with the best :func:`pick_key`: speed against expected loss at the ``prefer`` exchange rate. The sentence
    says what it trades, why each better-quality file lost, the close calls on the floor, and its llama-server
    command. A copy of a file ranks as that file; a file requantized from another of the set is no better than its
    source."""
    copies = _copies(choices)
    distinct = [c for c in choices if id(c) not in copies]
    usable = [c for c in distinct if c.usable]
    if not usable:
        short = sorted({c.ran_out for c in choices if c.ran_out})
        margin = next((c.margin_bytes for c in choices if c.margin_bytes), 0)
        keep = f" with {margin / GIB:.1f} GiB of the GPU kept free" if margin else ""
        return Recommendation(None, f"No file fits {profile_name} at {n_ctx:,} tokens{keep}, even with fewer layers "
                                    f"offloaded, experts in system RAM or a q4_0 KV cache"
                              + (f": {' and '.join(short)} ran out." if short else "."))
    fast = [c for c in usable if min_decode_tps is None or meets_floor(c.decode_tps, min_decode_tps)]
    if not fast:
        assert min_decode_tps is not None
        misses = "; ".join(f"{c.filename} {below_floors(c, min_decode_tps, None)}" for c in usable)
        close = [c for c in usable if close_call(c.decode_tps, min_decode_tps)]
        sentence = (f"No file is shown to reach {min_decode_tps:g} tok/s on {profile_name} at {n_ctx:,} tokens "
                    f"across its band: {misses}.")
        if close:
            sentence += " " + _close_words(close, min_decode_tps)
        return Recommendation(None, sentence)
    ok = [c for c in fast if max_kld is None or not _has_kld(c) or (c.quality.mean_kld or 0.0) <= max_kld]  # type: ignore[union-attr]
    if not ok:
        return Recommendation(None, f"No file that fits and is fast enough has a KLD within {max_kld:g}.")
    best = min(ok, key=lambda c: pick_key(c, distinct, prefer))
    ranked = sorted(distinct, key=lambda c: quality_key(c, distinct))
    at = ranked.index(best)
    better = [(c, why_not(c, distinct, min_decode_tps, max_kld)) for c in ranked[:at]]
    lost = "; ".join(f"{c.filename} {why}" for c, why in better if why)
    sentence = _sentence(best, distinct, profile_name, n_ctx, min_decode_tps, prefer)
    if lost:
        sentence += f" Better-quality files lost: {lost}."
    trades = _trades(best, [c for c in ok if c is not best], distinct, prefer)
    if trades:
        sentence += f" {trades}"
    worse = "; ".join(_lower_words(c, distinct) for c in ranked[at + 1:])
    if worse:
        sentence += f" The others rank lower on quality: {worse}."
    same = [c for c in choices if copies.get(id(c)) is best]
    if same:
        sentence += f" The same file (same size and header): {', '.join(c.source for c in same)}."
    if min_decode_tps is not None:
        close = [c for c in usable if c is not best and close_call(c.decode_tps, min_decode_tps)
                 and not meets_floor(c.decode_tps, min_decode_tps)]
        if close:
            sentence += " " + _close_words(close, min_decode_tps)
    kv = _kv_words(best, distinct, min_decode_tps)
    if kv:
        sentence += f" {kv}"
    return Recommendation(best, sentence, llama_server_command(best, n_ctx))


def _close_words(close: Sequence[FileChoice], floor: float) -> str:
    """The files whose band straddles the floor: the prediction cannot decide them; a measurement would."""
    names = "; ".join(f"{c.filename} (expected {c.decode_tps.value:,.1f}, band {c.decode_tps.low:,.1f}–"
                      f"{c.decode_tps.high:,.1f})" for c in close)
    return (f"Close calls on the {floor:g} tok/s floor, inside their band: {names}; measure to decide "
            f"(gguf-bench choose --measure --min-decode-tps {floor:g} on the machine itself).")


def _kv_words(c: FileChoice, choices: Sequence[FileChoice], floor: float | None) -> str:
    """A quantized KV cache the pick runs with, and what it costs in quality (and why it was taken)."""
    if not c.kv_cache or c.type_k == "f16":
        return ""
    cost = KV_CACHE_KLD.get(c.type_k, (0.0, 0.0, 0.0))
    f16_all = "f16" in c.kv_types_fitting
    f16_any = f16_all or any(p.split(":")[0].endswith("-ctk f16") for p in c.placements)
    if not f16_any:
        why = "because no placement with an f16 cache fits"
    elif floor is not None:
        why = "to meet the floor across its band"
    elif not f16_all:
        why = ("because an f16 cache does not fit entirely on the GPU, and keeping it would leave layers or experts "
               "in system RAM, slower by more than the cache costs")
    else:
        why = "for a speed-up that outweighs its cost"
    return (f"Its {c.type_k} KV cache was chosen {why}; it costs quality: about {cost[0]:g} KLD, up to {cost[2]:g} "
            "on sensitive models (llama.cpp PR #7412; localbench).")


def _trades(best: FileChoice, others: Sequence[FileChoice], choices: Sequence[FileChoice], prefer: str) -> str:
    """What the pick gives up against the best-quality file and the fastest file of the rest (each once)."""
    out: list[str] = []
    kld = effective_kld(best, choices)
    better = [c for c in others if effective_kld(c, choices) < kld]
    if better:
        b = min(better, key=lambda c: (effective_kld(c, choices), -c.decode_tps.value))
        ratio = best.decode_tps.value / b.decode_tps.value if b.decode_tps.value > 0 else math.inf
        slower = (f"{ratio:.1f}× slower" if ratio >= 1.05 else "about as fast" if ratio > 1 / 1.05
                  else f"{1 / ratio:.1f}× faster")
        out.append(f"{b.filename} would be about {kld - effective_kld(b, choices):.4f} KLD better and {slower} "
                   f"({b.decode_tps.value:,.1f} tok/s)")
    faster = [c for c in others if c.decode_tps.value > best.decode_tps.value and c not in better]
    if faster:
        f = max(faster, key=lambda c: c.decode_tps.value)
        ratio = f.decode_tps.value / best.decode_tps.value if best.decode_tps.value > 0 else math.inf
        faster_words = f"{ratio:.1f}× faster" if ratio >= 1.05 else "about as fast"
        out.append(f"{f.filename} would be {faster_words} ({f.decode_tps.value:,.1f} tok/s) and about "
                   f"{effective_kld(f, choices) - kld:.4f} KLD worse")
    if not out:
        return ""
    rate = EXCHANGE_KLD[prefer]
    return (f"It trades ({prefer}: {SPEED_STEP:g}× of speed is worth {rate:g} KLD, about {rate * 100:g} % "
            f"perplexity): {'; '.join(out)}.")


def _sentence(c: FileChoice, choices: Sequence[FileChoice], profile_name: str, n_ctx: int,
              min_decode_tps: float | None, prefer: str) -> str:
    q = c.total_quality
    if q is not None and q.kind == "reference":
        quality = "the reference the others' quality was measured against"
    elif q is not None:
        what = {"measured": "measured here", "published": "published for its type", "bits": "estimated from its "
                "bits per weight (no published figure for its type)"}.get(q.kind, q.kind)
        band = f" ({q.low:.4f}–{q.high:.4f})" if q.high > q.low else ""
        quality = f"an expected loss of KLD {q.kld:.4f}{band}, {what}"
    else:
        quality = "no quality figure"
    if c.status == "fits" and c.n_cpu_moe:
        place = f"fits on {profile_name} with {c.placement}"
    elif c.status == "fits":
        place = f"fits entirely on {profile_name}" if c.n_gpu_layers else f"fits in {profile_name}'s memory"
    else:
        place = f"fits on {profile_name} with {c.n_gpu_layers} of {c.n_layer + 1} layers offloaded"
    if c.margin_bytes:
        place += f" ({c.memory_bytes / GIB:.2f} GiB, {c.margin_bytes / GIB:.1f} GiB of the GPU kept free)"
    how = {"ceiling": "up to", "measured": "as measured here,"}.get(c.decode_tps.kind, "about")
    empty = (f" ({c.decode_empty_tps.value:,.1f} from an empty cache)" if c.decode_empty_tps is not None else "")
    among = "of the files that fit" + (" and meet the floor" if min_decode_tps is not None else "")
    cache = f" with a {c.type_k} KV cache" if c.kv_cache else ""
    weighs = (f"{among}, it weighs speed against expected quality best ({prefer})" if len(choices) > 1
              else "the only file of its model here")
    return (f"Run {c.filename} ({c.file_type}, {c.bpw_text} bits/weight): {weighs}, with {quality}; "
            f"it {place} at {n_ctx:,} tokens{cache}, decoding {how} {c.decode_tps.text()} tok/s with the context "
            f"full{empty}{floor_words(c.decode_tps, min_decode_tps)}.{_rests_on_ceiling(c.decode_tps)}")


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
                       f"{d.value:,.1f}: a close call)")
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
    ("expected_kld", "expected KLD", ""), ("quality_kind", "quality is", ""), ("ttft_kind", "TTFT is", ""),
    ("host_mib", "system RAM", "MiB"), ("margin_mib", "kept free", "MiB"),
)


def kv_fits_text(c: FileChoice) -> str:
    """The KV-cache types with which everything fits on the device: "f16,q8_0", "none", or "no KV cache"."""
    if not c.kv_cache:
        return "no KV cache"
    return ",".join(c.kv_types_fitting) or "none"


def choice_row(c: FileChoice) -> dict[str, Any]:
    """One file's values under :data:`CHOICE_COLUMNS` keys (None where there is nothing)."""
    q, m, eq = c.quality, c.measured, c.total_quality
    return {
        "filename": c.filename, "file_type": c.file_type, "bits_per_weight": round(c.bits_per_weight, 2),
        "size_mib": round(c.size_bytes / 2**20, 1), "status": c.status, "n_gpu_layers": c.n_gpu_layers,
        "type_k": c.type_k if c.kv_cache else None, "kv_types_fitting": kv_fits_text(c),
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
        "expected_kld": round(eq.kld, 5) if eq else None, "quality_kind": eq.kind if eq else None,
        "ttft_kind": str(c.ttft_ms.kind), "host_mib": round(c.host_bytes / 2**20, 1),
        "margin_mib": round(c.margin_bytes / 2**20, 1),
    }
