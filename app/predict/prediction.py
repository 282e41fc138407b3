"""One prediction: ceilings, memory, fit and a request's times for (model facts, hardware profile, settings).

``PredictSettings`` holds what is asked (context, offload, cache types, the request); ``predict`` puts the decode,
prefill, memory, fit and scenario modules together. Pure functions; no I/O.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from app.model.facts import ModelFacts
from app.predict.decode import (
    DEFAULT_CPU_BANDWIDTH_GBPS,
    DecodeBytes,
    decode_bytes,
    decode_ceiling_offload_tps,
    transfer_seconds_per_token,
)
from app.predict.device_split import DeviceSplit, SplitSettings, device_split, host_only_split
from app.predict.fit import FitResult, fit_check
from app.predict.fitted_model import Expected
from app.predict.memory import DEFAULT_N_UBATCH, compute_buffer_bytes_for, kv_alloc_bytes
from app.predict.offload import Placement, WeightSplit, effective_n_gpu_layers, split_weights
from app.predict.prefill import matmul_params, prefill_ceiling_tps, prefill_compute_note, prefill_tflops
from app.predict.profiles import HardwareProfile
from app.predict.public_fit import PublicGpuModel, public_expected
from app.predict.repack_memory import RepackedWeights, repacked_weights
from app.predict.scenario import Scenario, scenario_time
from app.predict.split_expected import device_fraction, split_decode_expected
from app.telemetry.repack_guard import default_repack

if TYPE_CHECKING:
    from app.predict.crossing_fit import CrossingCost


@dataclass(frozen=True)
class Efficiency:
    """Achieved ÷ ceiling per phase, learned from measurements; multiplies the ceilings into "expected" figures."""

    prefill: float = 1.0
    decode: float = 1.0

    def __post_init__(self) -> None:
        if self.prefill <= 0 or self.decode <= 0:
            raise ValueError("Efficiency factors must be positive")



def flash_attn_enabled(value: Any) -> bool:
    """Flash attention as a yes/no: -1 (auto) and 1 are on, 0 is off; bools and "auto"/"on"/"off" text too."""
    if value is None or value == "":
        return False
    try:
        return int(float(value)) != 0
    except (TypeError, ValueError):
        return str(value).strip().lower() in ("auto", "on", "true", "yes", "enabled")


def _int(row: Mapping[str, Any], key: str, default: int) -> int:
    value = row.get(key)
    try:
        return int(value) if value is not None else default
    except (TypeError, ValueError):
        return default


@dataclass(frozen=True)
class PredictSettings:
    """What a prediction is asked for: the context, the offload, the KV cache types and the request.

    ``type_v`` None means ``type_k``; ``depth`` tokens already sit in the KV cache before the prompt (llama-bench
    ``-d``). ``flash_attn`` is whether flash attention runs (it sizes the compute buffer).
    """

    n_ctx: int
    n_gpu_layers: int = 999
    type_k: str = "f16"
    type_v: str | None = None
    n_prompt: int = 512
    n_gen: int = 128
    depth: int = 0
    n_ubatch: int = DEFAULT_N_UBATCH
    flash_attn: bool = False
    swa_full: bool = False
    #: llama.cpp's weight repacking (llama-bench --repack): 1 on, 0 off (weights as in the file); -1 (auto): this
    #: machine's default, as a run with --repack auto gets it
    repack: int = -1
    #: -ncmoe: layers 0..N-1 keep their MoE expert tensors in host memory; -1 all, -2 half (resolved per model)
    n_cpu_moe: int = 0
    #: -nkvo 1: the KV cache (and the attention over it) in host memory
    no_kv_offload: bool = False
    #: -ot: PATTERN=BUFT entries joined by ";" (llama-bench's column text), "none" for none
    tensor_buft_overrides: str = "none"

    def __post_init__(self) -> None:
        if self.repack not in (0, 1):
            object.__setattr__(self, "repack", default_repack())
        if not self.type_v:
            object.__setattr__(self, "type_v", self.type_k)
        if not self.tensor_buft_overrides:
            object.__setattr__(self, "tensor_buft_overrides", "none")

    @property
    def decode_depth(self) -> float:
        """The KV depth a decode figure is taken at: the depth before the prompt, the prompt and half the generated
        tokens (the generation's average)."""
        return self.depth + self.n_prompt + self.n_gen / 2.0

    def placement(self, n_layer: int) -> Placement:
        """-ot and -ncmoe for a model of ``n_layer`` layers (all/half resolved)."""
        return Placement.from_text(self.n_cpu_moe, n_layer, self.tensor_buft_overrides)

    @classmethod
    def from_row(cls, row: Mapping[str, Any], *, n_ctx: int | None = None,
                 n_gpu_layers: int | None = None) -> PredictSettings:
        """Settings of a result row or a test dict (same keys); missing keys take the defaults.

        n_ctx: ``n_ctx`` (the argument, else the row's), else depth + prompt + generated + 1; n_gpu_layers: the
        argument, else the row's requested ``n_gpu_layers``; type_v falls back to type_k; flash attention is the row's
        ``flash_attn_effective`` (what llama.cpp used) when present, else ``flash_attn`` (-1 auto counts as on).
        """
        n_prompt, n_gen, depth = _int(row, "n_prompt", 512), _int(row, "n_gen", 128), _int(row, "n_depth", 0)
        ctx = n_ctx if n_ctx is not None else (_int(row, "n_ctx", 0) or depth + n_prompt + n_gen + 1)
        effective = row.get("flash_attn_effective")
        fa = row.get("flash_attn") if effective is None or effective == "" else effective
        ngl = n_gpu_layers if n_gpu_layers is not None else _int(row, "n_gpu_layers", 999)
        type_k = str(row.get("type_k") or "f16")
        return cls(
            n_ctx=max(ctx, 1), n_gpu_layers=ngl, type_k=type_k, type_v=str(row.get("type_v") or type_k),
            n_prompt=max(n_prompt, 1), n_gen=max(n_gen, 0), depth=max(depth, 0),
            n_ubatch=_int(row, "n_ubatch", 0) or DEFAULT_N_UBATCH, flash_attn=flash_attn_enabled(fa),
            repack=_repack_of(row), n_cpu_moe=_int(row, "n_cpu_moe", 0),
            no_kv_offload=bool(_int(row, "no_kv_offload", 0)),
            tensor_buft_overrides=str(row.get("tensor_buft_overrides") or "none"),
        )

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> PredictSettings:
        """Settings from ``gguf-bench predict``'s arguments (--ctx, -ngl, -ncmoe, -nkvo, -ctk, -ctv, -p, -n, -d,
        -fa)."""
        return cls(
            n_ctx=args.ctx, n_gpu_layers=args.n_gpu_layers, type_k=args.type_k, type_v=args.type_v,
            n_prompt=args.n_prompt, n_gen=args.n_gen, depth=args.n_depth,
            flash_attn=flash_attn_enabled(args.flash_attn), repack=getattr(args, "repack", -1),
            n_cpu_moe=getattr(args, "n_cpu_moe", 0), no_kv_offload=bool(getattr(args, "no_kv_offload", 0)),
        )


#: tokens the "at this context" question generates (llama-bench's default -n)
AT_CONTEXT_GEN = 128


def at_context(n_ctx: int, *, type_k: str = "f16", type_v: str | None = None, n_gpu_layers: int = 999,
               n_ubatch: int = DEFAULT_N_UBATCH) -> PredictSettings:
    """The one question every view answers for "this file on this hardware at this context" (the inspector, the
    chooser, the scenario panel at that length, ``predict``'s ``at_context``): a request that fills the context,
    a prompt of ``n_ctx`` − 128 then 128 generated tokens, flash attention on (what llama.cpp's auto picks where
    it can). Its decode figure is at the generation's average depth (:func:`at_context_depth`), its memory the
    fit's needed bytes at ``n_ctx``."""
    n_gen = min(AT_CONTEXT_GEN, max(n_ctx // 2, 1))
    return PredictSettings(n_ctx=n_ctx, n_gpu_layers=n_gpu_layers, type_k=type_k, type_v=type_v,
                           n_prompt=max(n_ctx - n_gen, 1), n_gen=n_gen, depth=0, n_ubatch=n_ubatch, flash_attn=True)


def at_context_depth(settings: PredictSettings) -> int:
    """The KV depth a request's decode figure is for: its prompt and half its generated tokens."""
    return int(settings.decode_depth)


def at_context_answer(pred: Prediction, settings: PredictSettings) -> dict[str, Any]:
    """The answer to :func:`at_context`'s question, as every view words it: decode (expected with its band and
    source where a fit gives it, else the ceiling, marked) at its depth, and the memory the fit needs."""
    e = pred.expected_decode
    value = pred.expected_decode_tps
    kind = "expected" if value else "ceiling"
    return {
        "n_ctx": settings.n_ctx, "depth": at_context_depth(settings), "type_k": pred.type_k,
        "n_gpu_layers": pred.n_gpu_layers, "decode_tps": value or pred.decode_ceiling_tps, "decode_kind": kind,
        "decode_tps_low": e.low if e else None, "decode_tps_high": e.high if e else None,
        "decode_source": (e.source if e else "stored runs' efficiency × ceiling") if value else "ceiling",
        "decode_ceiling_tps": pred.decode_ceiling_tps,
        "decode_empty_tps": pred.expected_decode_empty_tps or pred.decode_ceiling_empty_tps,
        "decode_empty_kind": kind, "needed_bytes": pred.fit.needed_bytes,
        "fit_status": str(pred.fit.status),
    }


def _repack_of(row: Mapping[str, Any]) -> int:
    """A row's repacking: its 0 or 1; auto (-1, a test not yet run): this machine's default; none (rows from before
    the setting): 1, llama.cpp's default then."""
    value = row.get("repack")
    if value in (0, 1, -1):
        return int(value)  # -1 is resolved by PredictSettings
    return 1


@dataclass(frozen=True)
class Prediction:
    """Ceilings, memory and fit for one (model, hardware, settings), with scenario totals at the ceilings."""

    profile: str
    model: str
    kind: str
    n_ctx: int
    n_gpu_layers: int
    type_k: str
    type_v: str
    n_prompt: int
    n_gen: int
    weight_bytes: int
    gpu_weight_bytes: int
    cpu_weight_bytes: int
    kv_bytes: int  # allocated at n_ctx
    kv_bytes_per_token: float
    compute_buffer_bytes: int
    decode_ceiling_tps: float  # at the average depth of the generation (n_prompt + n_gen / 2)
    decode_ceiling_empty_tps: float  # at depth 0
    prefill_ceiling_tps: float  # for an n_prompt-token prompt from an empty cache
    gpu_bandwidth_gbps: float
    cpu_bandwidth_gbps: float | None
    tflops: float
    fit: FitResult
    scenario: Scenario
    efficiency: Efficiency | None = None
    expected_prefill_tps: float | None = None
    expected_decode_tps: float | None = None
    expected_scenario: Scenario | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    expected_decode: Expected | None = None  # from a fit of this machine: the value above with its band and source
    expected_prefill: Expected | None = None
    #: weights, KV cache and compute buffer per device (llama.cpp's device_buffers): "gpu" the device, "host" RAM
    device_memory: DeviceSplit | None = None
    n_cpu_moe: int = 0  # resolved layer count
    no_kv_offload: bool = False
    tensor_buft_overrides: str = "none"
    decode_gpu_read_bytes: float = 0.0  # bytes one token reads at the generation's average depth, per side
    decode_host_read_bytes: float = 0.0
    decode_extra_crossings: int = 0  # device crossings per token beyond the input's first (decode.py)
    depth: int = 0  # tokens in the KV cache before the prompt (llama-bench -d)
    no_expected_decode: str = ""  # why there is no expected decode (the ceiling speaks), where a source said why
    #: host memory weight repacking adds beside the mapped file (this machine's CPU, repack 1): llama.cpp's extra
    #: buffer types' copies (app.predict.repack_memory); counted in cpu_weight_bytes, the fit and the host's buffers
    repacked_weight_bytes: int = 0
    repack: int = 1  # the weight repacking the prediction is for (llama-bench --repack: 1 on, 0 off)

    @property
    def decode_depth(self) -> float:
        """The KV depth ``decode_ceiling_tps`` and ``expected_decode_tps`` are for: the prompt and half the
        generated tokens (llama-bench's tg, from an empty cache, is ``decode_ceiling_empty_tps``)."""
        return self.n_prompt + self.n_gen / 2.0 + self.depth

    @property
    def expected_decode_empty_tps(self) -> float | None:
        """Expected decode from an empty cache (llama-bench's tg): the expected figure at :attr:`decode_depth` at
        the same fraction of its ceiling, the empty cache's ceiling being known."""
        if not self.expected_decode_tps or not self.decode_ceiling_tps:
            return None
        return self.expected_decode_tps * self.decode_ceiling_empty_tps / self.decode_ceiling_tps

    def memory_per_device(self) -> dict[str, dict[str, int]]:
        """{"host"|"gpu": {"weights_bytes", "kv_bytes", "compute_bytes"}}, as a row's device_buffers splits them
        (the host's weights: its mapped span, as llama.cpp logs it)."""
        d = self.device_memory
        if d is None:
            return {}
        host = {"weights_bytes": round(d.cpu_mapped_weights_bytes), "kv_bytes": round(d.cpu_kv_bytes),
                "compute_bytes": round(d.cpu_compute_bytes)}
        if self.kind == "cpu":
            return {"host": host}
        return {"host": host, "gpu": {"weights_bytes": round(d.gpu_weights_bytes), "kv_bytes": round(d.gpu_kv_bytes),
                                      "compute_bytes": round(d.gpu_compute_bytes)}}

    @property
    def expected_source(self) -> str:
        """Where the fitted expected figures came from ("" when none came from a fit)."""
        return next((e.source for e in (self.expected_decode, self.expected_prefill) if e), "")

    @property
    def ttft_ms(self) -> float:
        return self.scenario.ttft_s * 1000.0

    def to_json_dict(self) -> dict[str, object]:
        """Flat headline keys plus the nested fit and scenario documents."""
        exp = self.expected_scenario
        return {
            "profile": self.profile, "model": self.model, "kind": self.kind, "n_ctx": self.n_ctx,
            "n_gpu_layers": self.n_gpu_layers, "type_k": self.type_k, "type_v": self.type_v,
            "n_prompt": self.n_prompt, "n_gen": self.n_gen,
            "weight_bytes": self.weight_bytes, "gpu_weight_bytes": self.gpu_weight_bytes,
            "cpu_weight_bytes": self.cpu_weight_bytes, "kv_bytes": self.kv_bytes,
            "kv_bytes_per_token": self.kv_bytes_per_token, "compute_buffer_bytes": self.compute_buffer_bytes,
            "decode_ceiling_tps": self.decode_ceiling_tps, "decode_ceiling_empty_tps": self.decode_ceiling_empty_tps,
            "decode_depth": self.decode_depth, "n_depth": self.depth,
            "prefill_ceiling_tps": self.prefill_ceiling_tps if self.n_prompt else None,
            "gpu_bandwidth_gbps": self.gpu_bandwidth_gbps,
            "cpu_bandwidth_gbps": self.cpu_bandwidth_gbps, "tflops": self.tflops,
            "fits": self.fit.fits, "fit_status": self.fit.status, "max_ngl": self.fit.max_ngl,
            "max_ctx": self.fit.max_ctx, "needed_bytes": self.fit.needed_bytes, "budget_bytes": self.fit.budget_bytes,
            "ttft_ms": self.ttft_ms, "decode_s": self.scenario.decode_s, "total_s": self.scenario.total_s,
            "ttft_share": self.scenario.ttft_share, "decode_share": self.scenario.decode_share,
            "chars_per_s": self.scenario.chars_per_s,
            "efficiency_prefill": self.efficiency.prefill if self.efficiency else None,
            "efficiency_decode": self.efficiency.decode if self.efficiency else None,
            "expected_prefill_tps": self.expected_prefill_tps if self.n_prompt else None,
            "expected_decode_tps": self.expected_decode_tps,
            "expected_decode_empty_tps": self.expected_decode_empty_tps,
            "expected_ttft_ms": exp.ttft_s * 1000.0 if exp else None, "expected_total_s": exp.total_s if exp else None,
            "fit": self.fit.to_json_dict(), "scenario": self.scenario.to_json_dict(),
            "expected_scenario": exp.to_json_dict() if exp else None, "notes": list(self.notes),
            **_bands("expected_decode_tps", self.expected_decode),
            **_bands("expected_prefill_tps", self.expected_prefill if self.n_prompt else None),
            "expected_source": self.expected_source,
            "n_cpu_moe": self.n_cpu_moe, "no_kv_offload": int(self.no_kv_offload),
            "tensor_buft_overrides": self.tensor_buft_overrides, "memory_per_device": self.memory_per_device(),
            "decode_gpu_read_bytes": self.decode_gpu_read_bytes, "decode_host_read_bytes": self.decode_host_read_bytes,
            "decode_extra_crossings": self.decode_extra_crossings,
            "no_expected_decode": "" if self.expected_decode_tps else self.no_expected_decode,
            "repacked_weight_bytes": self.repacked_weight_bytes, "repack": self.repack,
        }


def _bands(key: str, exp: Expected | None) -> dict[str, float | None]:
    return {f"{key}_low": exp.low if exp else None, f"{key}_high": exp.high if exp else None}


#: Expected figures from a fit (e.g. ``MachineFit.expected`` of this machine): phase -> Expected or None.
FittedExpectation = Callable[[ModelFacts, "PredictSettings"], Mapping[str, Expected | None]]


def _cpu_bandwidth(
    profile: HardwareProfile, split: WeightSplit, cpu_bandwidth_gbps: float | None, notes: list[str],
    kv_on_host: bool = False,
) -> float | None:
    """Bandwidth of the CPU side: the profile's own for a CPU or unified-memory profile when not given; for a
    discrete GPU with layers left on the CPU, DEFAULT_CPU_BANDWIDTH_GBPS with a note."""
    if profile.kind == "cpu":
        return profile.peak_bandwidth_gbps
    if cpu_bandwidth_gbps is None and profile.is_unified:
        return profile.peak_bandwidth_gbps
    if cpu_bandwidth_gbps is None and (split.cpu_read_bytes > 0 or kv_on_host):
        notes.append(f"CPU bandwidth not given; assumed {DEFAULT_CPU_BANDWIDTH_GBPS:g} GB/s for what is read from "
                     f"host memory")
        return DEFAULT_CPU_BANDWIDTH_GBPS
    return cpu_bandwidth_gbps


def _prefill_tps(
    facts: ModelFacts, profile: HardwareProfile, split: WeightSplit, s: PredictSettings,
    tensor_bytes: Mapping[str, int] | None,
) -> float:
    """The prefill ceiling for ``s.n_prompt`` tokens after ``s.depth`` cached ones."""
    n_embd_attn = facts.n_head * (facts.head_dim_k + facts.head_dim_v) // 2
    n_swa = len(facts.swa_layers) if facts.swa_window else 0
    return prefill_ceiling_tps(
        prefill_tflops(profile, facts.file_type, s.repack), matmul_params(facts, split, tensor_bytes), s.n_prompt,
        facts.n_layer, n_embd_attn, s.depth, n_swa, facts.swa_window,
    )


def host_repacked(facts: ModelFacts, profile: HardwareProfile, s: PredictSettings) -> RepackedWeights | None:
    """What weight repacking adds in host memory for a run of ``s`` on this machine's CPU (None: repacking off, a
    profile that is not this CPU, or a file read without its tensor table)."""
    if profile.kind != "cpu" or s.repack != 1 or not profile.repack_buffers or not facts.tensor_shapes:
        return None
    return repacked_weights(facts.tensor_shapes, facts.tensor_bytes, profile.repack_buffers, profile.cpu_flags)


def placed_weights(facts: ModelFacts, s: PredictSettings, tensor_bytes: Mapping[str, int] | None, *,
                   host_only: bool = False) -> tuple[WeightSplit, Placement, bool]:
    """(where ``s`` puts the weights, its -ncmoe/-ot placement, whether the KV cache sits with the offloaded
    layers): the one reading of a placement that predictions and the crossing fit share. On a CPU (``host_only``)
    everything stays in host memory whatever the flags say."""
    if host_only:
        return split_weights(facts, 0, tensor_bytes, Placement()), Placement(), True
    placement = s.placement(facts.n_layer)
    ngl = effective_n_gpu_layers(s.n_gpu_layers, facts.n_layer)
    return split_weights(facts, ngl, tensor_bytes, placement), placement, not s.no_kv_offload


def capped_at_ceiling(expected: Expected | None, value: float | None, ceiling_tps: float, phase: str,
                      notes: list[str]) -> tuple[Expected | None, float | None]:
    """An expected figure never above its ceiling: where a fit says more, the figure is the ceiling and its source
    marked (a note says by how much). Its band spans both readings: the fit's upper edge (the ceiling is itself a
    measured figure, this CPU's probed bandwidth, a floor on what its memory moves, read 25 % low at a busy moment
    here; a band cut at it left out decode runs of a MoE that landed 2-5 % above such a ceiling) and, below, the
    fit's relative band taken from the figure shown (a fit 15 % above a right ceiling otherwise left a band lying
    wholly above the figure, and the runs below it)."""
    if value is None or not ceiling_tps > 0 or value <= ceiling_tps:
        return expected, value
    notes.append(f"expected {phase} {value:,.1f} tok/s was above its ceiling {ceiling_tps:,.1f}: shown as the "
                 f"ceiling (the fit does not hold here, or the ceiling reads low)")
    if expected is not None:
        expected = replace(expected, value=ceiling_tps, low=expected.low * ceiling_tps / expected.value,
                           high=max(expected.high, ceiling_tps), source=f"{expected.source}; capped at the ceiling")
    return expected, ceiling_tps


def _split_expected(
    facts: ModelFacts, profile: HardwareProfile, s: PredictSettings, read: DecodeBytes,
    fitted: FittedExpectation | None, host_fitted: FittedExpectation | None, public: PublicGpuModel | None,
    cpu_bw: float | None, tensor_bytes: Mapping[str, int] | None, crossing: CrossingCost | None = None,
) -> tuple[dict[str, Expected | None], str]:
    """(the expected decode of a split placement, why there is none): from the device's full-offload figure and the
    host's own, both at ``s``'s request and depth, each extra crossing at ``crossing``'s cost (None: assumed); {}
    and which side has no figure."""
    full = replace(s, n_gpu_layers=999, n_cpu_moe=0, no_kv_offload=False, tensor_buft_overrides="none")
    device = fitted(facts, full).get("decode") if fitted is not None else None
    if device is None and public is not None:
        whole = split_weights(facts, facts.n_layer + 1, tensor_bytes, Placement())
        ceiling = decode_ceiling_offload_tps(facts, whole, s.decode_depth, s.type_k, s.type_v or s.type_k,
                                             profile.peak_bandwidth_gbps, cpu_bw)
        got, _ = public_expected(public, profile, facts, facts.n_layer + 1, ceiling,
                                 _prefill_tps(facts, profile, whole, full, tensor_bytes))
        device = got.get("decode")
    host = host_fitted(facts, replace(full, n_gpu_layers=0)).get("decode") if host_fitted is not None else None
    frac = device_fraction(read.gpu_bytes, read.host_bytes)
    transfer_s = (read.extra_crossings * crossing.seconds if crossing is not None
                  else transfer_seconds_per_token(facts.n_embd, read.extra_crossings))
    least_s, most_s = crossing.range_s if crossing is not None else (0.0, 0.0)
    transfer_range_s = (read.extra_crossings * least_s, read.extra_crossings * most_s) if crossing else None
    composed = split_decode_expected(device, host, frac, transfer_s, transfer_range_s)
    if composed is not None and read.extra_crossings:
        composed = replace(composed, source=f"{composed.source}; {read.extra_crossings} extra device crossings, "
                           + (crossing.describe() if crossing is not None else "each assumed (10 µs and PCIe)"))
    if composed is None:
        missing = [side for side, fig, share in (("the device with every layer on it", device, frac),
                                                 ("the host CPU alone", host, 1.0 - frac))
                   if share > 0 and fig is None]
        return {}, f"split placement: no expected decode without an expected figure for {' and '.join(missing)}"
    return {"decode": composed}, ""


def predict(
    facts: ModelFacts, profile: HardwareProfile, settings: PredictSettings, *, cpu_bandwidth_gbps: float | None = None,
    efficiency: Efficiency | None = None, tensor_bytes: Mapping[str, int] | None = None, chars_per_token: float = 4.0,
    fitted: FittedExpectation | None = None, public: PublicGpuModel | None = None,
    host_fitted: FittedExpectation | None = None, crossing: CrossingCost | None = None,
) -> Prediction:
    """Ceilings, memory, fit and an (n_prompt, n_gen) request's times for ``facts`` on ``profile``.

    Decode: weights read per token (split GPU/CPU by ``n_gpu_layers``) plus KV read at the generation's average depth,
    each side at its bandwidth (``decode_ceiling_split_tps``). The CPU side uses ``cpu_bandwidth_gbps``: for unified
    memory the profile's bandwidth when not given, for a discrete GPU DEFAULT_CPU_BANDWIDTH_GBPS with a note.
    Prefill: the profile's TFLOPS over ``prefill_flops_per_token`` with the matmul parameters; with a partial offload
    llama.cpp still runs large-batch matmuls on the GPU, copying CPU-held weights over PCIe, which is not counted.
    A profile of kind "cpu" runs everything on the host (n_gpu_layers is ignored).
    ``settings.depth`` tokens already in the KV cache (llama-bench ``-d``) add to the KV read and the attention work.
    ``fitted``: expected figures from a fit of this machine for the backend the test runs on (the CPU, or a GPU
    backend with every layer offloaded; app.predict.expected_sources picks it), taking the place of
    ``efficiency`` × ceiling for each phase it can predict. ``public`` (a GPU profile): expected figures from
    published llama-bench results fitted per GPU architecture (app/predict/public_fit.py) where no other is given.
    A placement split between the device and the host (partial ``-ngl``, ``-ncmoe``, ``-ot``, ``-nkvo``) takes
    neither directly: its expected decode composes the device side's full-offload figure (``fitted``, else
    ``public``) with the host side's (``host_fitted``: this machine's CPU fit) by the bytes each side reads, each
    device crossing at ``crossing``'s cost (what this machine's split tests measured; None: assumed).
    """
    s = settings
    type_k, type_v = s.type_k, s.type_v or s.type_k
    notes: list[str] = []
    is_cpu = profile.kind == "cpu"
    split, placement, offload_kqv = placed_weights(facts, s, tensor_bytes, host_only=is_cpu)
    ngl = split.n_gpu_layers
    if not split.exact:
        notes.append("weights split estimated from totals (no per-tensor byte map)")
        if facts.n_expert:
            notes.append("MoE: expert bytes estimated as 3 × n_embd × n_ff_expert × n_expert per layer")
    cpu_bw = _cpu_bandwidth(profile, split, cpu_bandwidth_gbps, notes, kv_on_host=not offload_kqv)
    repacked = host_repacked(facts, profile, s)
    repacked_bytes = repacked.total_bytes if repacked is not None else 0
    if repacked is not None and (repacked_bytes or repacked.not_counted):
        notes.append(f"weight repacking (--repack 1) adds host memory beside the mapped file: {repacked.describe()}")

    def decode_at(depth: float) -> float:
        return decode_ceiling_offload_tps(facts, split, depth, type_k, type_v, profile.peak_bandwidth_gbps, cpu_bw,
                                          host_only=is_cpu, offload_kqv=offload_kqv)

    decode_tps = decode_at(s.decode_depth)
    read = decode_bytes(facts, split, s.decode_depth, type_k, type_v, offload_kqv)
    if read.extra_crossings and not is_cpu:
        notes.append(f"decode: {read.extra_crossings} extra device crossings per token (-ncmoe/-ot/-nkvo); the "
                     f"ceiling takes each as 4 × n_embd bytes over PCIe (assumed 16 GB/s) + 10 µs"
                     + (f", the expected figure as {crossing.describe()}" if crossing is not None else ""))
    prefill_tps = _prefill_tps(facts, profile, split, s, tensor_bytes)
    # which CPU figure, and its source
    notes += [n for n in (prefill_compute_note(profile, facts.file_type, s.repack),) if n]
    if not is_cpu and (0 < split.n_gpu_layers < facts.n_layer + 1 or split.n_tensors_overridden):
        notes.append("partial offload: prefill ceiling ignores copying host-held weights to the GPU")
    fit = fit_check(
        facts, profile.vram_bytes, s.n_ctx, type_k, type_v, ngl, n_ubatch=s.n_ubatch, flash_attn=s.flash_attn,
        swa_full=s.swa_full, unified=profile.is_unified, usable_fraction=1.0 if is_cpu else None,
        tensor_bytes=tensor_bytes, placement=placement, offload_kqv=offload_kqv, host_repacked_bytes=repacked_bytes,
    )
    split_settings = SplitSettings(s.n_ctx, ngl, type_k, type_v, s.n_ubatch, s.flash_attn,
                                   n_cpu_moe=placement.n_cpu_moe, no_kv_offload=not offload_kqv,
                                   tensor_buft_overrides=s.tensor_buft_overrides if not is_cpu else "none")
    memory = (host_only_split(facts, split_settings, tensor_bytes, repacked_bytes) if is_cpu
              else device_split(facts, split_settings, tensor_bytes))
    exp_prefill = exp_decode = exp_scenario = None
    if efficiency is not None:
        exp_prefill, exp_decode = prefill_tps * efficiency.prefill, decode_tps * efficiency.decode
    is_split = not is_cpu and (ngl < facts.n_layer + 1 or not placement.is_default or not offload_kqv)
    if is_split:  # no one fit runs two devices: each side's own figure, composed (app.predict.split_expected)
        fit_exp, no_expected_decode = _split_expected(facts, profile, s, read, fitted, host_fitted, public, cpu_bw,
                                                      tensor_bytes, crossing)
        notes += [f"{no_expected_decode}; the ceiling speaks"] if no_expected_decode else []
        public = None
    else:
        fit_exp, no_expected_decode = (fitted(facts, s) if fitted is not None else {}), ""
    if public is not None and not is_cpu and exp_decode is None and not fit_exp:
        fit_exp, why = public_expected(public, profile, facts, split.n_gpu_layers, decode_tps, prefill_tps)
        notes += [why] if why else []
        no_expected_decode = why
    fit_decode, fit_prefill = fit_exp.get("decode"), fit_exp.get("prefill")
    exp_decode = fit_decode.value if fit_decode else exp_decode
    exp_prefill = fit_prefill.value if fit_prefill else exp_prefill
    fit_decode, exp_decode = capped_at_ceiling(fit_decode, exp_decode, decode_tps, "decode", notes)
    fit_prefill, exp_prefill = capped_at_ceiling(fit_prefill, exp_prefill, prefill_tps, "prefill", notes)
    if exp_prefill and exp_decode:
        exp_scenario = scenario_time(s.n_prompt, s.n_gen, exp_prefill, exp_decode, chars_per_token)
    return Prediction(
        profile=profile.name, model=facts.name, kind=profile.kind, n_ctx=s.n_ctx, n_gpu_layers=ngl, type_k=type_k,
        type_v=type_v, n_prompt=s.n_prompt, n_gen=s.n_gen, weight_bytes=facts.weight_bytes,
        gpu_weight_bytes=0 if is_cpu else split.gpu_bytes,
        cpu_weight_bytes=facts.weight_bytes + repacked_bytes if is_cpu else split.cpu_bytes,
        kv_bytes=round(kv_alloc_bytes(facts, s.n_ctx, type_k, type_v, s.n_ubatch, s.swa_full)),
        kv_bytes_per_token=facts.kv_bytes_per_token(type_k, type_v),
        compute_buffer_bytes=round(compute_buffer_bytes_for(facts, s.n_ctx, s.n_ubatch, s.flash_attn)),
        decode_ceiling_tps=decode_tps, decode_ceiling_empty_tps=decode_at(0.0), prefill_ceiling_tps=prefill_tps,
        gpu_bandwidth_gbps=0.0 if is_cpu else profile.peak_bandwidth_gbps, cpu_bandwidth_gbps=cpu_bw,
        tflops=prefill_tflops(profile, facts.file_type, s.repack), fit=fit,
        scenario=scenario_time(s.n_prompt, s.n_gen, prefill_tps, decode_tps, chars_per_token), efficiency=efficiency,
        expected_prefill_tps=exp_prefill, expected_decode_tps=exp_decode, expected_scenario=exp_scenario,
        notes=tuple(notes), expected_decode=fit_decode, expected_prefill=fit_prefill, device_memory=memory,
        n_cpu_moe=placement.n_cpu_moe, no_kv_offload=not offload_kqv,
        tensor_buft_overrides=split_settings.tensor_buft_overrides, decode_gpu_read_bytes=read.gpu_bytes,
        decode_host_read_bytes=read.host_bytes, decode_extra_crossings=read.extra_crossings, depth=s.depth,
        no_expected_decode=no_expected_decode, repacked_weight_bytes=repacked_bytes, repack=s.repack,
    )
