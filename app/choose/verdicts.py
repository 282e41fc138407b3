"""Which file of a set to run on one device at one context: fit per KV-cache type, speed, quality, a recommendation.

Pure functions of (model facts, hardware profile, settings, measured quality and speed). Gathering the files, URLs,
the results store and the machine is :mod:`app.choose.chooser`. Every configuration is predicted with flash attention
on (what llama.cpp's "auto" picks where it can, and what a quantized V cache needs).
"""

from __future__ import annotations

import shlex
from dataclasses import asdict, dataclass, field, replace
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import urlsplit

from app.model.facts import ModelFacts
from app.predict.prediction import (
    AT_CONTEXT_GEN,
    Efficiency,
    FittedExpectation,
    Prediction,
    at_context,
    predict,
)
from app.predict.profiles import HardwareProfile
from app.predict.public_fit import PublicGpuModel

#: KV-cache types tried, best quality first.
KV_TYPES: tuple[str, ...] = ("f16", "q8_0", "q4_0")
DEFAULT_N_GEN = AT_CONTEXT_GEN
NOT_MEASURED = "not measured — run gguf-bench quality"


@dataclass(frozen=True)
class Figure:
    """A speed figure: ``kind`` "expected" (learned from measurements) or "ceiling" (physics bound), band if any."""

    value: float
    kind: str
    low: float | None = None
    high: float | None = None
    source: str = ""

    def text(self, fmt: str = "{:.1f}") -> str:
        """``"45.1 (40.2–50.3, expected)"`` or ``"63.2 (ceiling)"``."""
        band = f"{fmt.format(self.low)}–{fmt.format(self.high)}, " if self.low is not None and self.high else ""
        return f"{fmt.format(self.value)} ({band}{self.kind})"


@dataclass(frozen=True)
class Quality:
    """Measured quality against a reference (``gguf-bench quality``)."""

    mean_kld: float | None
    ppl: float | None = None
    same_top_rate: float | None = None
    reference: str = ""


@dataclass(frozen=True)
class Measured:
    """Speed this machine measured for the file (newest ok row in the results store)."""

    decode_tps: float | None
    ttft_ms: float | None
    settings: str  # e.g. "p512 n128 d0 ngl0"


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
    measured: Measured | None = None
    quality: Quality | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def usable(self) -> bool:
        return self.status in ("fits", "partial")

    def to_json_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["kv_types_fitting"] = list(self.kv_types_fitting)
        d["notes"] = list(self.notes)
        return d


@dataclass(frozen=True)
class Recommendation:
    choice: FileChoice | None
    sentence: str
    command: str = ""

    def to_json_dict(self) -> dict[str, Any]:
        return {"filename": self.choice.filename if self.choice else None, "source": self.choice.source
                if self.choice else None, "sentence": self.sentence, "command": self.command}


def _expected(doc: dict[str, Any], key: str, ceiling_key: str, source: str) -> Figure:
    """The prediction's expected figure (with band and source when predict gives them), else its ceiling."""
    value = doc.get(f"expected_{key}")
    if not value:
        return Figure(float(doc[ceiling_key]), "ceiling", source="no measurements here to learn an efficiency from")
    low, high = doc.get(f"expected_{key}_low"), doc.get(f"expected_{key}_high")
    return Figure(float(value), "expected", low, high, str(doc.get("expected_source") or source))


@dataclass(frozen=True)
class SpeedSources:
    """What turns ceilings into expected figures: stored efficiencies, this machine's fit, the public GPU fit."""

    cpu_bandwidth_gbps: float | None = None
    efficiency: Efficiency | None = None
    efficiency_source: str = ""
    fitted: FittedExpectation | None = None
    public: PublicGpuModel | None = None


def _ttft(doc: dict[str, Any], source: str) -> Figure:
    """Expected TTFT (its band scaled from the prefill rate's band, the prompt being the same), else the ceiling's."""
    fig = _expected(doc, "ttft_ms", "ttft_ms", source)
    prefill, low, high = (doc.get(f"expected_prefill_tps{k}") for k in ("", "_low", "_high"))
    if fig.kind == "expected" and prefill and low and high:
        return Figure(fig.value, fig.kind, fig.value * prefill / high, fig.value * prefill / low, fig.source)
    return fig


def _predict_at(facts: ModelFacts, profile: HardwareProfile, n_ctx: int, type_k: str, ngl: int,
                n_prompt: int | None, n_gen: int, speed: SpeedSources) -> Prediction:
    """The prediction at ``n_ctx``: the question every view answers for a context (``at_context``) unless the
    request was given (``n_prompt``, ``n_gen`` other than its own)."""
    settings = at_context(n_ctx, type_k=type_k, n_gpu_layers=ngl)
    if n_prompt is not None or n_gen != settings.n_gen:
        settings = replace(settings, n_prompt=max(1, n_ctx - n_gen) if n_prompt is None else n_prompt, n_gen=n_gen)
    return predict(facts, profile, settings, cpu_bandwidth_gbps=speed.cpu_bandwidth_gbps,
                   efficiency=speed.efficiency, tensor_bytes=facts.tensor_bytes or None, fitted=speed.fitted,
                   public=speed.public)


def _configuration(preds: dict[str, Prediction]) -> tuple[str, str, int]:
    """(status, cache type, -ngl): the best cache type that fits fully, else the one offloading most layers."""
    for t, p in preds.items():
        if p.fit.fits and p.fit.status == "fits":
            return "fits", t, p.fit.max_ngl
    partial = [(p.fit.max_ngl, -i, t) for i, (t, p) in enumerate(preds.items()) if p.fit.status == "partial"]
    if partial:
        ngl, _, t = max(partial)
        return "partial", t, ngl
    return "does_not_fit", KV_TYPES[0], 0


def evaluate_file(
    source: str, facts: ModelFacts, profile: HardwareProfile, n_ctx: int, *, n_prompt: int | None = None,
    n_gen: int = DEFAULT_N_GEN, speed: SpeedSources | None = None, measured: Measured | None = None,
    quality: Quality | None = None,
) -> FileChoice:
    """The verdict for one file: a prompt of ``n_prompt`` tokens (default: the context less ``n_gen``), then
    ``n_gen`` generated, at ``n_ctx`` on ``profile``."""
    speed = speed or SpeedSources()
    prompt = n_prompt
    preds = {t: _predict_at(facts, profile, n_ctx, t, 999, prompt, n_gen, speed) for t in KV_TYPES}
    status, type_k, ngl = _configuration(preds)
    is_cpu = profile.kind == "cpu"
    pred = preds[type_k]
    if status == "partial" and not is_cpu:
        pred = _predict_at(facts, profile, n_ctx, type_k, ngl, prompt, n_gen, speed)
    doc = pred.to_json_dict()
    fit = pred.fit
    source_text = f"calibrated from {speed.efficiency_source}" if speed.efficiency_source else "calibrated"
    return FileChoice(
        source=source, filename=display_name(source), file_type=facts.file_type, size_bytes=facts.file_bytes,
        bits_per_weight=facts.bits_per_weight, n_layer=facts.n_layer, status=status,
        n_gpu_layers=0 if is_cpu else (ngl if status != "does_not_fit" else 0), type_k=type_k,
        kv_types_fitting=tuple(t for t, p in preds.items() if p.fit.fits and p.fit.status == "fits"),
        memory_bytes=fit.needed_bytes, budget_bytes=fit.budget_bytes, weights_bytes=fit.weight_bytes,
        kv_bytes=fit.kv_bytes, compute_bytes=fit.compute_buffer_bytes, overhead_bytes=fit.overhead_bytes,
        decode_tps=_expected(doc, "decode_tps", "decode_ceiling_tps", source_text),
        ttft_ms=_ttft(doc, source_text), measured=measured, quality=quality,
        notes=pred.notes,
    )


def display_name(source: str) -> str:
    """The file name of a path or URL."""
    path = urlsplit(source).path if "://" in source else source.replace("\\", "/")
    return PurePosixPath(path).name or source


def _quality_key(c: FileChoice, by_kld: bool) -> tuple[float, ...]:
    if by_kld:
        assert c.quality is not None and c.quality.mean_kld is not None
        return (c.quality.mean_kld, -c.bits_per_weight, -c.decode_tps.value)
    return (-c.bits_per_weight, -c.decode_tps.value)


def _has_kld(c: FileChoice) -> bool:
    return c.quality is not None and c.quality.mean_kld is not None


def llama_server_command(c: FileChoice, n_ctx: int) -> str:
    """The ready-to-run llama-server command line for a choice."""
    model = f"-mu {shlex.quote(c.source)}" if "://" in c.source else f"-m {shlex.quote(c.source)}"
    return f"llama-server {model} -ngl {c.n_gpu_layers} -c {n_ctx} -ctk {c.type_k} -ctv {c.type_k} -fa on"


def recommend(choices: list[FileChoice], profile_name: str, n_ctx: int, min_decode_tps: float | None = None,
              max_kld: float | None = None) -> Recommendation:
    """The highest-quality file that fits at ``n_ctx`` and meets the speed floor (and the KLD limit, when the
    file's KLD is measured), with the reason in one sentence and its llama-server command."""
    usable = [c for c in choices if c.usable]
    if not usable:
        return Recommendation(None, f"No file fits {profile_name} at {n_ctx:,} tokens, even with fewer layers "
                                    f"offloaded or a q4_0 KV cache.")
    fast = [c for c in usable if min_decode_tps is None or c.decode_tps.value >= min_decode_tps]
    if not fast:
        best = max(usable, key=lambda c: c.decode_tps.value)
        return Recommendation(None, f"No file reaches {min_decode_tps:g} tok/s on {profile_name} at {n_ctx:,} tokens; "
                                    f"the fastest that fits is {best.filename} at {best.decode_tps.text()} tok/s.")
    ok = [c for c in fast if max_kld is None or not _has_kld(c) or c.quality.mean_kld <= max_kld]  # type: ignore
    if not ok:
        return Recommendation(None, f"No file that fits and is fast enough has a KLD within {max_kld:g}.")
    by_kld = all(_has_kld(c) for c in ok)
    best = min(ok, key=lambda c: _quality_key(c, by_kld))
    return Recommendation(best, _sentence(best, profile_name, n_ctx, min_decode_tps, by_kld),
                          llama_server_command(best, n_ctx))


def _sentence(c: FileChoice, profile_name: str, n_ctx: int, min_decode_tps: float | None, by_kld: bool) -> str:
    quality = (f"the lowest measured KLD ({c.quality.mean_kld:.4f})" if by_kld and c.quality  # type: ignore[union-attr]
               else "the most bits per weight (quality not measured for every file)")
    if c.status == "fits":
        place = f"fits entirely on {profile_name}" if c.n_gpu_layers else f"fits in {profile_name}'s memory"
    else:
        place = f"fits on {profile_name} with {c.n_gpu_layers} of {c.n_layer + 1} layers offloaded"
    return (f"Run {c.filename} ({c.file_type}, {c.bits_per_weight:.2f} bits/weight): of the files that fit, it has "
            f"{quality}; it {place} at {n_ctx:,} tokens with a {c.type_k} KV cache, decoding at "
            f"{'up to' if c.decode_tps.kind == 'ceiling' else 'about'} {c.decode_tps.text()} tok/s with the context "
            f"full{floor_words(c.decode_tps, min_decode_tps)}.")


def floor_words(decode: Figure, min_decode_tps: float | None) -> str:
    """How a figure that meets the speed floor meets it: clearly (its whole band), or only within its band."""
    if min_decode_tps is None:
        return ""
    if decode.low is not None and decode.low < min_decode_tps:
        return (f"; at the {min_decode_tps:g} tok/s floor only within its band (its low end is "
                f"{decode.low:.1f}): a close call")
    return f", above the {min_decode_tps:g} tok/s floor" + (" across its band" if decode.low is not None else "")


def below_floors(c: FileChoice, min_decode_tps: float | None, max_kld: float | None) -> str:
    """Why a file that fits fails the floors ("below the 20 tok/s floor", "KLD over 0.05"), or ""."""
    why = []
    if min_decode_tps is not None and c.decode_tps.value < min_decode_tps:
        why.append(f"below the {min_decode_tps:g} tok/s floor")
    if max_kld is not None and _has_kld(c) and c.quality.mean_kld > max_kld:  # type: ignore[union-attr]
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
        "speed_source": c.decode_tps.source, "measured_decode_tps": m.decode_tps if m else None,
        "measured_ttft_ms": m.ttft_ms if m else None, "measured_settings": m.settings if m else None,
        "mean_kld": q.mean_kld if q else None, "ppl": q.ppl if q else None,
        "same_top_rate": q.same_top_rate if q else None, "source": c.source,
    }
