"""One answer per question: :func:`answer` decides every expected figure the workbench shows.

``answer(facts, profile, settings, machine)`` is the only place where a figure's value, band, kind, depth and source
are decided; rows, plots, the inspector, the scenario panel, compare, ``predict``, the chooser and CSV/JSON print its
fields. It takes the physics from :func:`app.predict.prediction.predict` (ceilings, memory, fit) and, for each phase,
the first source that gives a figure, in this order:

========== ======================================================================================================
kind       where the figure comes from
========== ======================================================================================================
measured   this file measured here at this placement (a question only, never a row's own expected figure), carried
           to the asked request by the ratio of the figures below at both (the fit's where it has one, else the
           ceilings')
fit        this machine's calibration fit for the backend the test runs on (``gguf-bench calibrate``): the CPU with
           no layer offloaded, the GPU backend with every layer offloaded; for the CPU only at the thread count a
           default run uses
split      a placement split between the device and the host (partial -ngl, -ncmoe, -ot, -nkvo): the device's
           full-offload figure (fit, else public) and the host CPU's (fit), composed by the bytes each side reads,
           each device crossing at the cost this machine measured (app.predict.machine_fit.split_expected)
efficiency achieved ÷ ceiling of other models' stored rows here on that backend, times the ceilings
public     published llama-bench results fitted per GPU architecture, for a GPU with every layer on it
ceiling    what the hardware allows: bandwidth ÷ bytes a token reads (decode), compute ÷ work (prefill)
========== ======================================================================================================

This machine's sources apply only to this machine's hardware (:meth:`Machine.is_this`). An expected figure is never
shown above its ceiling: it is the ceiling, marked, its band spanning both readings (:func:`capped_at_ceiling`).
Decode from an empty cache (llama-bench's tg128) is one figure per file, placement and hardware: the same sources
asked the question :meth:`PredictSettings.empty_cache`, whatever context the request fills. The decode at the
request's depth is the same rule asked at that depth. A ceiling figure carries the reason there is no expected one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from app.model.facts import ModelFacts
from app.predict.ceilings.decode import (
    DEFAULT_CPU_BANDWIDTH_GBPS,
    decode_ceiling_offload_tps,
    transfer_seconds_per_token,
)
from app.predict.ceilings.offload import Placement, split_weights
from app.predict.ceilings.op_offload import (
    OP_OFFLOAD_MIN_BATCH,
    PCIE_SHARE_SOURCE,
    micro_batches,
    offload_traffic,
    pcie_link,
    transfer_seconds,
)
from app.predict.ceilings.prefill import attention_flops_per_token, prefill_compute_doc, prefill_flops_per_token
from app.predict.hardware_context import backend_name
from app.predict.machine import Machine, same_hardware
from app.predict.machine_fit.crossing_fit import CrossingCost
from app.predict.machine_fit.fitted_model import Expected, FittedExpectation
from app.predict.machine_fit.split_expected import (
    PrefillSplit,
    device_fraction,
    split_decode_expected,
    split_prefill_expected,
)
from app.predict.machine_fit.store_efficiency import Efficiency, fitted_expectation, threads_for
from app.predict.memory.buffers import compute_buffer_bytes_for, kv_alloc_bytes
from app.predict.memory.fit import DEFAULT_GPU_OVERHEAD_BYTES, UNIFIED_USABLE_FRACTION, FitResult
from app.predict.memory.host import HostEfficiency, host_memory_table
from app.predict.memory_truth import MemoryCheck, dry_run_settings, memory_check, with_dry_run
from app.predict.power import (
    PowerError,
    PowerScale,
    lowest_power_w,
    power_scale,
    power_state_words,
    power_sweeps,
    scale_at,
    top_power_w,
    with_power_state,
)
from app.predict.prediction import Prediction, predict
from app.predict.profiles import HardwareProfile
from app.predict.public.arch_fit import BACKENDS, WorkShape, canonical_backend
from app.predict.public.fit import PublicGpuModel, default_backend, public_expected, work_shape
from app.predict.scenario import Scenario, scenario_time
from app.predict.settings import PredictSettings, at_context, at_context_depth, placed_weights

__all__ = ["BACKENDS", "DEFAULT_GPU_OVERHEAD_BYTES", "UNIFIED_USABLE_FRACTION", "Answer", "Figure", "FigureKind",
           "Machine", "Measurement", "MemoryCheck", "PowerError", "PredictSettings", "Source", "answer", "at_context",
           "at_context_depth", "canonical_backend", "kv_cache_bytes", "lowest_power_w", "memory_by_context",
           "same_hardware", "threads_for", "top_power_w", "with_power_state"]


class FigureKind(StrEnum):
    """Where a figure comes from (the table in the module docstring)."""

    MEASURED = "measured"
    FIT = "fit"
    SPLIT = "split"
    EFFICIENCY = "efficiency"
    PUBLIC = "public"
    CEILING = "ceiling"


#: The kinds that are expected figures (learned from measurements), as opposed to measured or a bound.
EXPECTED_KINDS = frozenset({FigureKind.FIT, FigureKind.SPLIT, FigureKind.EFFICIENCY, FigureKind.PUBLIC})


@dataclass(frozen=True)
class Source:
    """Where a figure comes from: its kind, a short name for a table cell, the whole description (which fit or
    rows, what it learned from, its band), and the llama.cpp build it is for. :meth:`text` is the one way to print
    it: the description, which stands on its own."""

    kind: FigureKind
    name: str
    detail: str = ""
    build: str = ""

    def text(self) -> str:
        return self.detail or self.name

    def __str__(self) -> str:
        return self.text()

    def to_json_dict(self) -> dict[str, str]:
        return {"kind": str(self.kind), "name": self.name, "detail": self.detail, "build": self.build}


@dataclass(frozen=True)
class Figure:
    """A speed figure (tokens/s, or ms for a TTFT): its value, its band where it has one, its kind and source, and
    the KV depth a decode figure is for."""

    value: float
    kind: FigureKind
    low: float | None = None
    high: float | None = None
    source: Source = field(default_factory=lambda: Source(FigureKind.CEILING, "ceiling"))
    depth: int | None = None

    @property
    def is_expected(self) -> bool:
        return self.kind in EXPECTED_KINDS

    def text(self, fmt: str = "{:.1f}") -> str:
        """``"45.1 (40.2–50.3, fit)"`` or ``"63.2 (ceiling)"``."""
        band = f"{fmt.format(self.low)}–{fmt.format(self.high)}, " if self.low is not None and self.high else ""
        return f"{fmt.format(self.value)} ({band}{self.kind})"

    def to_json_dict(self) -> dict[str, Any]:
        return {"value": self.value, "kind": str(self.kind), "low": self.low, "high": self.high,
                "source": self.source.text(), "source_detail": self.source.to_json_dict(), "depth": self.depth}


@dataclass(frozen=True)
class Measurement:
    """The stable measurement here that a measured figure was carried from, as it ran."""

    decode_tps: float
    ttft_ms: float | None
    settings: str  # e.g. "p512 n128 d0 ngl0 t2"

    def to_json_dict(self) -> dict[str, Any]:
        return {"decode_tps": self.decode_tps, "ttft_ms": self.ttft_ms, "settings": self.settings}


@dataclass(frozen=True)
class Answer:
    """The answer to one question (a file, a hardware profile, settings) on one machine: the physics
    (``prediction``: ceilings, memory, fit) and the figures every surface prints."""

    profile: HardwareProfile
    settings: PredictSettings  # as asked, repack resolved for the machine
    this_machine: bool
    prediction: Prediction
    decode: Figure  # at the request's decode depth (settings.decode_depth)
    decode_empty: Figure  # from an empty cache (llama-bench's tg128): one per file, placement and hardware
    prefill: Figure | None  # None without a prompt
    ttft_ms: Figure | None
    no_expected_decode: str = ""  # why ``decode`` is a ceiling ("" when it is not)
    notes: tuple[str, ...] = ()
    file_type: str = ""  # the model's (which compute figure a CPU's prefill ceiling took depends on it)
    measured: Measurement | None = None  # what the measured figures were carried from

    @property
    def needed_bytes(self) -> int:
        """Device memory the request needs (on a CPU or unified memory: all of it)."""
        return self.prediction.fit.needed_bytes

    @property
    def expected_decode(self) -> Figure | None:
        """The decode figure where it is an expected one (not measured, not a ceiling)."""
        return self.decode if self.decode.is_expected else None

    @property
    def expected_prefill(self) -> Figure | None:
        return self.prefill if self.prefill is not None and self.prefill.is_expected else None

    def scenario(self, chars_per_token: float = 4.0) -> Scenario:
        """The request's times at the figures shown (expected or measured where there are, else the ceilings)."""
        s = self.settings
        prefill = self.prefill.value if self.prefill is not None else self.prediction.prefill_ceiling_tps
        return scenario_time(s.n_prompt, s.n_gen, prefill, self.decode.value, chars_per_token)

    def to_json_dict(self) -> dict[str, Any]:
        """The one JSON shape ``predict``, ``choose`` and the window's exports share: the physics' flat keys, and
        each figure as ``{value, kind, low, high, source, depth}``."""
        d = self.prediction.to_json_dict()
        d.update({
            "this_machine": self.this_machine, "decode": self.decode.to_json_dict(),
            "decode_empty": self.decode_empty.to_json_dict(),
            "prefill": self.prefill.to_json_dict() if self.prefill is not None else None,
            "ttft_ms_figure": self.ttft_ms.to_json_dict() if self.ttft_ms is not None else None,
            "no_expected_decode": self.no_expected_decode, "notes": list(self.notes),
            "measured": self.measured.to_json_dict() if self.measured is not None else None,
            **prefill_compute_doc(self.profile, self.file_type),
        })
        return d


@dataclass(frozen=True)
class _Inputs:
    """The sources one answer takes (by the policy in the module docstring), already chosen for its hardware."""

    fitted: FittedExpectation | None = None
    efficiency: Efficiency | None = None
    efficiency_source: str = ""
    efficiency_note: str = ""  # why the stored rows gave no efficiency
    public: PublicGpuModel | None = None
    host_fitted: FittedExpectation | None = None  # this machine's CPU fit: the host side of a split placement
    #: published CPU rows' share of peak memory bandwidth: the host side of a split where no CPU fit speaks for it
    host_public: HostEfficiency | None = None
    crossing: CrossingCost | None = None  # a split's device crossing as this machine measured it (None: assumed)
    backend: str = ""
    build: str = ""
    #: what the power state asked does to the public fit's figures (they assume the part's top power), and to this
    #: machine's own (measured at the limit NVML read); None: nothing to scale (app/predict/power.py)
    power_public: PowerScale | None = None
    power_here: PowerScale | None = None


def machine_backend(machine: Machine, profile: HardwareProfile, row_backends: str = "") -> str:
    """The backend a test on ``profile`` runs (and a fit of it is keyed) on: ``CPU`` for a CPU profile; for a GPU,
    a measured row's own ``backends``, else this build's GPU backend (``Vulkan,CPU``), else the vendor's."""
    if profile.kind == "cpu":
        return "CPU"
    if row_backends and row_backends != "CPU":
        return row_backends
    return f"{machine.gpu_backends[0]},CPU" if machine.gpu_backends else backend_name(profile)


def _inputs(machine: Machine, profile: HardwareProfile, facts: ModelFacts, s: PredictSettings,
            this: bool) -> _Inputs:
    """The sources for ``profile``: this machine's only where it is this machine's hardware; the public fit for a GPU,
    bound to this machine's backend for the vendor and the installed build unless a setting was asked."""
    public = None
    if machine.public is not None and profile.kind != "cpu":
        backend = machine.public_backend or default_backend(profile, machine.gpu_backends if this else None)
        label = "" if machine.public_build is not None else machine.build_label
        public = machine.public.for_setting(backend, machine.public_build, label)
    host_public = host_memory_table().efficiency() if profile.kind != "cpu" and not profile.is_unified else None
    power_public = power_scale(profile)
    if not this:
        return _Inputs(public=public, host_public=host_public, power_public=power_public)
    threads = threads_for(s.n_threads)
    backend = machine_backend(machine, profile, s.backends)
    # The fit is taken at the default thread count; the threads matter only where the CPU runs the layers (a full
    # offload's CPU threads only schedule the device's work). A split placement takes no fit whole: the device's
    # full-offload fit and the CPU's are composed.
    at_default = threads == threads_for(None)
    fitted = fitted_expectation(machine.fit, backend) if at_default or profile.kind != "cpu" else None
    host_fitted = fitted_expectation(machine.fit, "CPU") if profile.kind != "cpu" and at_default else None
    eff, eff_source, note = None, "", ""
    if machine.efficiency is not None:
        eff, eff_source = machine.efficiency(backend, facts_filename(facts), facts.file_type, threads)
        if eff is None:
            note = machine.efficiency.why_none(backend, facts_filename(facts), facts.file_type, threads)
    crossing = machine.fit.crossings.get(backend) if machine.fit is not None and profile.kind != "cpu" else None
    return _Inputs(fitted=fitted, efficiency=eff, efficiency_source=eff_source, efficiency_note=note, public=public,
                   host_fitted=host_fitted, host_public=host_public, crossing=crossing, backend=backend,
                   power_public=power_public, power_here=_power_here(profile, power_public),
                   build=machine.fit.build if machine.fit is not None else "")


def _power_here(profile: HardwareProfile, asked: PowerScale | None) -> PowerScale | None:
    """What the power state asked does to this machine's own figures: they were measured at the limit NVML read
    (``power_read_w``), so the asked state relative to that one (None where the two are the same); without a reading
    they are taken as at the part's top, as the public fit's are."""
    if profile.power_read_w is None or asked is None:
        return asked if profile.power_read_w is None else None
    read_w = min(max(profile.power_read_w, 1e-3), asked.top_w)
    if abs(read_w - asked.watts) < 1e-9:
        return None
    return asked.relative_to(scale_at(profile, read_w, asked.top_w, power_sweeps()))


def _powered(e: Expected | None, phase: str, scale: PowerScale | None) -> Expected | None:
    """``e`` at the power state ``scale`` stands for (its value and each edge by their factor, the why appended)."""
    if e is None or scale is None:
        return e
    value, low, high = scale.factor(phase)
    if value == low == high == 1.0:
        return e
    return replace(e, value=e.value * value, low=e.low * low, high=e.high * high,
                   source=f"{e.source}; power: {scale.words}")


def facts_filename(facts: ModelFacts) -> str:
    """The file name rows record for a model (``model_filename``)."""
    return facts.path.replace("\\", "/").rsplit("/", 1)[-1]


def _figure(e: Expected, kind: FigureKind, name: str, depth: int | None, build: str = "") -> Figure:
    return Figure(e.value, kind, e.low, e.high, Source(kind, name, e.source, build), depth)


def capped_at_ceiling(fig: Figure | None, ceiling_tps: float, phase: str, notes: list[str], *,
                      spec_bound: bool = False) -> Figure | None:
    """An expected figure never above its ceiling: where a source says more, the figure is the ceiling and its source
    marked (a note says by how much), and below, its band keeps the source's relative width from the figure shown
    (else a band could lie wholly above the figure).

    The band's top depends on what the ceiling is. ``spec_bound``: a GPU's spec-sheet bandwidth or compute, a bound
    no run passes, so no band edge lies above it either. Otherwise (a CPU's ceiling is its probed bandwidth, a
    measurement that reads low when other work ran during the probe; a split's host side is probed or assumed) the
    band keeps the source's upper edge: the figure shown never passes the ceiling, but the ceiling may be the
    reading that is off, and the band says so by reaching past it."""
    if fig is None or not ceiling_tps > 0:
        return fig
    if fig.value <= ceiling_tps:
        if spec_bound and fig.high is not None and fig.high > ceiling_tps:
            source = replace(fig.source, detail=f"{fig.source.detail}; band's top at the ceiling".lstrip("; "))
            return replace(fig, high=ceiling_tps, source=source)
        return fig
    notes.append(f"expected {phase} {fig.value:,.1f} tok/s was above its ceiling {ceiling_tps:,.1f}: shown as the "
                 f"ceiling (the source does not hold here, or the ceiling reads low)")
    low = fig.low * ceiling_tps / fig.value if fig.low is not None else None
    high = (ceiling_tps if spec_bound else max(fig.high, ceiling_tps)) if fig.high is not None else None
    source = replace(fig.source, detail=f"{fig.source.detail}; capped at the ceiling".lstrip("; "))
    return replace(fig, value=ceiling_tps, low=low, high=high, source=source)


def _device_full_offload(facts: ModelFacts, profile: HardwareProfile, s: PredictSettings, pred: Prediction,
                         src: _Inputs) -> dict[str, Expected | None]:
    """The device's expected figures with every layer on it, at ``s``'s request and depth, at the power state asked:
    this machine's fit of that backend, else the public fit (phase -> figure, None where neither speaks)."""
    full = replace(s, n_gpu_layers=999, n_cpu_moe=0, no_kv_offload=False, tensor_buft_overrides="none")
    fitted = src.fitted(facts, full) if src.fitted is not None else {}
    got: dict[str, Expected | None] = {p: _powered(fitted.get(p), p, src.power_here) for p in ("decode", "prefill")}
    if any(e is None for e in got.values()) and src.public is not None:
        whole = split_weights(facts, facts.n_layer + 1, facts.tensor_bytes or None, Placement())
        ceiling = decode_ceiling_offload_tps(facts, whole, s.decode_depth, s.type_k, s.type_v or s.type_k,
                                             profile.peak_bandwidth_gbps, pred.cpu_bandwidth_gbps)
        full_pred = predict(facts, profile, full, cpu_bandwidth_gbps=pred.cpu_bandwidth_gbps,
                            tensor_bytes=facts.tensor_bytes or None)
        public, _ = public_expected(src.public, profile, facts, facts.n_layer + 1, ceiling,
                                    full_pred.prefill_ceiling_tps, _work_shape(facts, s))
        got = {p: got[p] or _powered(public.get(p), p, src.power_public) for p in ("decode", "prefill")}
    return got


def _split_decode(facts: ModelFacts, profile: HardwareProfile, s: PredictSettings, pred: Prediction,
                  src: _Inputs, device_full: Mapping[str, Expected | None]) -> tuple[Figure | None, str]:
    """(the expected decode of a split placement, why there is none): the device's full-offload figure and the
    host's own, both at ``s``'s request and depth, composed by the bytes each side reads, each extra crossing at
    the cost this machine measured (else assumed)."""
    full = replace(s, n_gpu_layers=999, n_cpu_moe=0, no_kv_offload=False, tensor_buft_overrides="none")
    device = device_full.get("decode")
    host = src.host_fitted(facts, replace(full, n_gpu_layers=0)).get("decode") if src.host_fitted else None
    if host is None and src.host_public is not None:  # no CPU fit speaks for this host: the published CPU rows
        host = _host_public(facts, s, pred, src.host_public)
    frac = device_fraction(pred.decode_gpu_read_bytes, pred.decode_host_read_bytes)
    crossings, crossing = pred.decode_extra_crossings, src.crossing
    transfer_s = (crossings * crossing.seconds if crossing is not None
                  else transfer_seconds_per_token(facts.n_embd, crossings))
    least_s, most_s = crossing.range_s if crossing is not None else (0.0, 0.0)
    transfer_range_s = (crossings * least_s, crossings * most_s) if crossing else None
    composed = split_decode_expected(device, host, frac, transfer_s, transfer_range_s)
    if composed is None:
        missing = [side for side, fig, share in (("the device with every layer on it", device, frac),
                                                 ("the host CPU alone", host, 1.0 - frac)) if share > 0 and fig is None]
        return None, f"split placement: no expected decode without an expected figure for {' and '.join(missing)}"
    detail = composed.source + (f"; {crossings} extra device crossings, "
                                + (crossing.describe() if crossing is not None else "each assumed (10 µs and PCIe)")
                                if crossings else "")
    return Figure(composed.value, FigureKind.SPLIT, composed.low, composed.high,
                  Source(FigureKind.SPLIT, "split: device and host composed", detail, src.build),
                  int(s.decode_depth)), ""


def _split_prefill(facts: ModelFacts, profile: HardwareProfile, s: PredictSettings, pred: Prediction,
                   src: _Inputs, device_full: Mapping[str, Expected | None]) -> tuple[Figure | None, str]:
    """(the expected prefill of a split placement, why there is none): the device's full-offload expected prefill
    for its work, plus the time to move the host-held weights over PCIe once per micro-batch (llama.cpp's op
    offload), the CPU's host-only prefill for the work it keeps (-nopo 1, -nkvo's attention, a micro-batch under
    llama.cpp's minimum); app.predict.machine_fit.split_expected.split_prefill_expected composes them."""
    full = replace(s, n_gpu_layers=999, n_cpu_moe=0, no_kv_offload=False, tensor_buft_overrides="none")
    device = device_full.get("prefill")
    host = src.host_fitted(facts, replace(full, n_gpu_layers=0)).get("prefill") if src.host_fitted else None
    split, _placement, kv_on_gpu = placed_weights(facts, s, facts.tensor_bytes or None)
    weights = split.cpu_read_bytes + split.gpu_read_bytes
    weights_host = split.cpu_read_bytes / weights if weights > 0 else 0.0  # the CPU's share of the matmul work
    n_embd_attn = facts.n_head * (facts.head_dim_k + facts.head_dim_v) // 2
    n_swa = len(facts.swa_layers) if facts.swa_window else 0
    attn = attention_flops_per_token(facts.kv_layers, n_embd_attn, s.depth + s.n_prompt / 2.0, n_swa, facts.swa_window)
    total = prefill_flops_per_token(facts.n_params, s.n_prompt, facts.kv_layers, n_embd_attn, s.depth, n_swa,
                                    facts.swa_window)
    attn_host = attn / total if not kv_on_gpu and total > 0 else 0.0  # -nkvo: the attention runs on the CPU
    offload = not s.no_op_offload
    device_tokens = host_tokens = tail_tokens = 0.0
    for b in micro_batches(s.n_prompt, s.n_ubatch):
        moved = offload and b >= OP_OFFLOAD_MIN_BATCH
        share = attn_host + (0.0 if moved else weights_host * (1.0 - attn_host))
        host_tokens += b * share
        device_tokens += b * (1.0 - share)
        tail_tokens += b * share if offload and not moved and not attn_host else 0.0
    traffic = offload_traffic(facts, split, s.type_k, s.type_v or s.type_k, kv_on_gpu=kv_on_gpu)
    link = pcie_link(profile)
    words: list[str] = []
    transfer = (0.0, 0.0, 0.0)
    if offload and traffic.moves_anything:
        fig_gbps, least_gbps, most_gbps = link.copy_gbps()
        transfer = tuple(transfer_seconds(traffic, s.n_prompt, s.n_ubatch, s.depth, g)  # type: ignore[assignment]
                         for g in (fig_gbps, most_gbps, least_gbps))
        ub = min(s.n_ubatch, s.n_prompt)
        words.append(f"op offload: each micro-batch of up to {s.n_ubatch} tokens moves "
                     f"{traffic.bytes_for(ub, s.depth + ub) / 1e9:,.2f} GB of host-held weights"
                     + (" (the routed experts its tokens pick, all of them with routing spread evenly)"
                        if traffic.expert_bytes else "")
                     + f" over {link.describe()}, copied at {fig_gbps:.1f} GB/s ({least_gbps:.1f}-{most_gbps:.1f}: "
                       f"{PCIE_SHARE_SOURCE}), after the device's compute")
    elif not offload:
        words.append(f"-nopo 1: the CPU computes its layers' share ({weights_host:.0%} of the weights read)")
    if attn_host:
        words.append(f"-nkvo 1: the CPU computes the attention ({attn_host:.0%} of the prompt's work)")
    if host is None and host_tokens and tail_tokens >= host_tokens and src.host_public is not None:
        stand_in = _host_public(facts, s, pred, src.host_public)
        host = replace(stand_in, source=f"the CPU's decode stands in for its prefill of the last micro-batch, under "
                                        f"llama.cpp's minimum of {OP_OFFLOAD_MIN_BATCH} tokens (a floor): "
                                        f"{stand_in.source}")
    parts = PrefillSplit(s.n_prompt, device_tokens, host_tokens, transfer, "; ".join(words))
    composed = split_prefill_expected(device, host, parts)
    if composed is None:
        missing = [side for side, fig, work in (("the device with every layer on it", device, device_tokens),
                                                ("the host CPU alone", host, host_tokens)) if work > 0 and fig is None]
        return None, f"split placement: no expected prefill without an expected figure for {' and '.join(missing)}"
    return Figure(composed.value, FigureKind.SPLIT, composed.low, composed.high,
                  Source(FigureKind.SPLIT, "split: device, PCIe and host composed", composed.source, src.build)), ""


def _work_shape(facts: ModelFacts, s: PredictSettings) -> WorkShape:
    """What the request asks beyond its ceilings (the public fit's terms): its decode depth and its prompt."""
    return work_shape(facts, s.decode_depth, s.type_k, s.type_v or s.type_k, s.n_prompt, s.depth)


def _host_public(facts: ModelFacts, s: PredictSettings, pred: Prediction, eff: HostEfficiency) -> Expected:
    """The host-only decode of ``facts`` (every layer in system RAM) as published CPU rows reach their memory's
    peak: the host's decode ceiling at ``pred``'s host bandwidth times their share (median; least and most)."""
    bw = pred.cpu_bandwidth_gbps or DEFAULT_CPU_BANDWIDTH_GBPS
    none = split_weights(facts, 0, facts.tensor_bytes or None, Placement())
    ceiling = decode_ceiling_offload_tps(facts, none, s.decode_depth, s.type_k, s.type_v or s.type_k, bw, bw)
    return Expected(ceiling * eff.median, ceiling * eff.low, ceiling * eff.high,
                    f"host at {bw:.1f} GB/s: {eff.describe()}", kind="public")


def _expected(facts: ModelFacts, profile: HardwareProfile, s: PredictSettings, pred: Prediction,
              src: _Inputs) -> tuple[Figure | None, Figure | None, str, list[str]]:
    """(expected decode, expected prefill, why there is no expected decode, notes) by the module's order."""
    notes: list[str] = []
    depth = int(s.decode_depth)
    decode: Figure | None = None
    prefill: Figure | None = None
    why = ""
    if src.efficiency is not None:
        eff_source = Source(FigureKind.EFFICIENCY, "stored runs here",
                            f"stored runs' achieved ÷ ceiling here, times the ceiling: {src.efficiency_source}")
        decode = Figure(pred.decode_ceiling_tps * src.efficiency.decode, FigureKind.EFFICIENCY,
                        source=eff_source, depth=depth)
        prefill = Figure(pred.prefill_ceiling_tps * src.efficiency.prefill, FigureKind.EFFICIENCY, source=eff_source)
    fitted: Mapping[str, Expected | None] = {}
    if pred.split:  # no one fit runs two devices: each side's own figure, composed
        device_full = _device_full_offload(facts, profile, s, pred, src)
        composed, why = _split_decode(facts, profile, s, pred, src, device_full)
        if composed is not None:
            decode = composed
        elif decode is not None:
            why = ""  # the stored rows' efficiency speaks for the split
        split_prefill, why_prefill = (_split_prefill(facts, profile, s, pred, src, device_full) if s.n_prompt
                                      else (None, ""))
        if split_prefill is not None:
            prefill = split_prefill
        elif why_prefill and prefill is None:
            notes.append(why_prefill)
    else:
        fitted = src.fitted(facts, s) if src.fitted is not None else {}
        fitted = {phase: _powered(e, phase, src.power_here) for phase, e in fitted.items()}
        name = f"this machine's fit ({src.backend})"
        if (fit_decode := fitted.get("decode")) is not None:
            decode = _figure(fit_decode, FigureKind.FIT, name, depth, src.build)
        if (fit_prefill := fitted.get("prefill")) is not None:
            prefill = _figure(fit_prefill, FigureKind.FIT, name, None, src.build)
        if src.public is not None and profile.kind != "cpu" and src.efficiency is None and not any(fitted.values()):
            got, why = public_expected(src.public, profile, facts, pred.n_gpu_layers, pred.decode_ceiling_tps,
                                       pred.prefill_ceiling_tps, _work_shape(facts, s))
            got = {phase: _powered(e, phase, src.power_public) for phase, e in got.items()}
            name = "public llama-bench fit"
            if (public_decode := got.get("decode")) is not None:
                decode = _figure(public_decode, FigureKind.PUBLIC, name, depth)
                why = ""
            if (public_prefill := got.get("prefill")) is not None:
                prefill = _figure(public_prefill, FigureKind.PUBLIC, name, None)
    if decode is None and not why:
        why = src.efficiency_note or ("no fit, stored runs or public data for this hardware"
                                      if src.public is None else "no expected figure for this hardware")
    spec = profile.kind != "cpu" and not pred.split  # a GPU's own spec sheet, no probed or assumed host side
    decode = capped_at_ceiling(decode, pred.decode_ceiling_tps, "decode", notes, spec_bound=spec)
    prefill = capped_at_ceiling(prefill, pred.prefill_ceiling_tps, "prefill", notes, spec_bound=spec)
    return decode, prefill, why if decode is None else "", notes


def _ceiling(value: float, phase: str, why: str, depth: int | None = None) -> Figure:
    what = ("decode ceiling: bandwidth ÷ bytes a token reads" if phase == "decode"
            else "prefill ceiling: compute ÷ the prompt's work")
    return Figure(value, FigureKind.CEILING, depth=depth,
                  source=Source(FigureKind.CEILING, "ceiling", f"{what}; no expected figure: {why}" if why else what))


def _measured(facts: ModelFacts, profile: HardwareProfile, s: PredictSettings, machine: Machine, src: _Inputs,
              pred: Prediction, asked: tuple[Figure, Figure, Figure | None], empty_ceiling_tps: float,
              ) -> tuple[Figure, Figure, Figure | None, Measurement] | None:
    """This file measured here at this placement, carried to the asked request and to an empty cache by the ratio of
    the figures the sources give at both settings (where both are expected figures: a fit knows a short prompt's
    batch runs below a long one's), else of the ceilings; None when it was not measured."""
    decode, decode_empty, prefill = asked
    ngl = pred.n_gpu_layers if profile.kind != "cpu" else 0
    rows = [r for r in machine.measured_rows(facts_filename(facts))
            if (r.n_gpu_layers_effective or 0) == ngl and (r.n_cpu_moe or 0) == s.n_cpu_moe]
    if not rows:
        return None
    r = rows[0]
    m = replace(PredictSettings.from_row(r, n_gpu_layers=ngl), flash_attn=True, n_threads=s.n_threads, backends="",
                repack=s.repack, type_k=r.type_k or "f16", type_v=None)
    m = replace(m, n_ctx=max(s.n_ctx, m.depth + m.n_prompt + m.n_gen + 1))
    m_pred = predict(facts, profile, m, cpu_bandwidth_gbps=pred.cpu_bandwidth_gbps,
                     tensor_bytes=facts.tensor_bytes or None)
    m_decode, m_prefill, _, _ = _expected(facts, profile, m, m_pred, src)
    threads = r.n_threads_effective or r.n_threads
    where = f"p{r.n_prompt} n{r.n_gen} d{r.n_depth or 0} ngl{ngl}" + (f" t{threads}" if threads
                                                                                            else "")

    def ratio(to: Figure, to_ceiling: float, at: Figure | None, at_ceiling: float) -> tuple[float, str]:
        if to.is_expected and at is not None and at.is_expected and at.value > 0:
            return to.value / at.value, f"{to.kind} figures"
        return to_ceiling / at_ceiling, "ceilings"

    rate, m_depth = float(r.decode_tps or 0.0), int(m.decode_depth)
    said = f"{rate:,.1f} tok/s at depth {m_depth:,} ({where})"
    to_asked, whose = ratio(decode, pred.decode_ceiling_tps, m_decode, m_pred.decode_ceiling_tps)
    to_empty, whose_empty = ratio(decode_empty, empty_ceiling_tps, m_decode, m_pred.decode_ceiling_tps)
    moved = "" if decode.depth == m_depth else f"; at depth {decode.depth:,} by the ratio of the {whose}"
    got_decode = Figure(rate * to_asked, FigureKind.MEASURED, depth=decode.depth, source=Source(
        FigureKind.MEASURED, "measured here", f"measured here: {said}{moved}"))
    got_empty = Figure(rate * to_empty, FigureKind.MEASURED, depth=decode_empty.depth, source=Source(
        FigureKind.MEASURED, "measured here", f"measured here: {said}; from an empty cache by the ratio of the "
                                              f"{whose_empty}"))
    got_prefill = prefill
    measured_prefill = r.prefill_tps or ((r.n_prompt or 0) / (r.ttft_ms / 1000.0) if r.ttft_ms else None)
    if measured_prefill and prefill is not None:
        to_prompt, whose_p = ratio(prefill, pred.prefill_ceiling_tps, m_prefill, m_pred.prefill_ceiling_tps)
        got_prefill = Figure(float(measured_prefill) * to_prompt, FigureKind.MEASURED, source=Source(
            FigureKind.MEASURED, "measured here", f"measured here: prefill {float(measured_prefill):,.1f} tok/s at a "
            f"{r.n_prompt}-token prompt ({where}); for {s.n_prompt:,} tokens by the ratio of the {whose_p}"))
    ttft = float(r.ttft_ms) if r.ttft_ms else None
    return got_decode, got_empty, got_prefill, Measurement(rate, ttft, where)


def _ttft(prefill: Figure | None, n_prompt: int) -> Figure | None:
    """The TTFT of an ``n_prompt``-token prompt at a prefill figure (its band flipped: a faster prefill is a shorter
    TTFT)."""
    if prefill is None or not n_prompt or not prefill.value > 0:
        return None
    ms = n_prompt / prefill.value * 1000.0
    low = n_prompt / prefill.high * 1000.0 if prefill.high else None
    high = n_prompt / prefill.low * 1000.0 if prefill.low else None
    return Figure(ms, prefill.kind, low, high, prefill.source)


def answer(facts: ModelFacts, profile: HardwareProfile, settings: PredictSettings, machine: Machine | None = None, *,
           measured: bool = True) -> Answer:
    """The answer for ``facts`` on ``profile`` with ``settings`` on ``machine`` (None: nothing of this machine, no
    public fit either: ceilings only). ``measured`` False: never this file's own measurement (a row's expected
    figure is what the sources say of it, not itself)."""
    machine = machine if machine is not None else Machine()
    this = machine.is_this(profile)
    s = settings.resolved(machine.repack_default if this else 1)
    host_bw = machine.host_bandwidth_gbps(profile)
    host_memory = None
    if host_bw is None and not profile.is_unified:  # a GPU not owned: the memory assumed beside it (stated)
        host_memory = host_memory_table().assumed_for(profile)
        host_bw = host_memory.peak_bandwidth_gbps
    tensor_bytes = facts.tensor_bytes or None
    ram, ram_words = host_ram(profile, machine)
    pred = predict(facts, profile, s, cpu_bandwidth_gbps=host_bw, tensor_bytes=tensor_bytes, host_ram_bytes=ram)
    truth = machine.memory_truth(facts, s) if this and profile.kind == "cpu" else None
    if truth is not None:  # llama.cpp's dry run here: its memory is this CPU's (app.predict.memory_truth)
        pred = with_dry_run(pred, facts, s, *truth)
    src = _inputs(machine, profile, facts, s, this)
    decode_exp, prefill_exp, why, notes = _expected(facts, profile, s, pred, src)
    empty_s = s.empty_cache()
    empty_pred = predict(facts, profile, empty_s, cpu_bandwidth_gbps=host_bw, tensor_bytes=tensor_bytes)
    empty_exp, _, why_empty, _ = _expected(facts, profile, empty_s, empty_pred, src)
    depth, empty_depth = int(s.decode_depth), int(empty_s.decode_depth)
    decode = decode_exp or _ceiling(pred.decode_ceiling_tps, "decode", why, depth)
    decode_empty = empty_exp or _ceiling(empty_pred.decode_ceiling_tps, "decode", why_empty, empty_depth)
    prefill = (prefill_exp or _ceiling(pred.prefill_ceiling_tps, "prefill", "no expected prefill for this "
                                       "hardware")) if s.n_prompt else None
    measurement = None
    if measured and this:
        got = _measured(facts, profile, s, machine, src, pred, (decode, decode_empty, prefill),
                        empty_pred.decode_ceiling_tps)
        if got is not None:
            decode, decode_empty, prefill, measurement = got
            why = ""
    if why and decode.kind == FigureKind.CEILING:
        notes.append(f"{why}; the ceiling speaks")
    if ram is not None and (pred.fit.cpu_needed_bytes or profile.kind == "cpu"):
        notes.append(ram_words)
    if host_memory is not None and pred.decode_host_read_bytes:
        notes.append(f"host memory assumed: {host_memory.name}, {host_memory.peak_bandwidth_gbps:.1f} GB/s peak "
                     f"({host_memory.source})")
    if pred.fit.ran_out:
        notes.append(f"does not fit: it runs out of {pred.fit.ran_out}")
    scale = src.power_public
    if scale is not None:
        notes.append(f"power{f' ({profile.power_state_source})' if profile.power_state_source else ''}: {scale.words}")
    elif words := power_state_words(profile):
        notes.append(words)
    return Answer(profile=profile, settings=s, this_machine=this, prediction=pred, decode=decode,
                  decode_empty=decode_empty, prefill=prefill, ttft_ms=_ttft(prefill, s.n_prompt),
                  no_expected_decode=why if decode.kind == FigureKind.CEILING else "",
                  notes=(*pred.notes, *notes), file_type=facts.file_type, measured=measurement)


def fit_of(facts: ModelFacts, profile: HardwareProfile, settings: PredictSettings,
           machine: Machine | None = None) -> FitResult:
    """The fit :func:`answer` would give for these settings (the same RAM, repacking and host side), without its
    figures: what a placement search asks at each of its steps. Not for this machine's CPU, whose fit takes
    llama.cpp's dry run (:func:`answer` does)."""
    machine = machine if machine is not None else Machine()
    this = machine.is_this(profile)
    s = settings.resolved(machine.repack_default if this else 1)
    host_bw = machine.host_bandwidth_gbps(profile)
    if host_bw is None and not profile.is_unified:
        host_bw = host_memory_table().assumed_for(profile).peak_bandwidth_gbps
    ram, _ = host_ram(profile, machine)
    return predict(facts, profile, s, cpu_bandwidth_gbps=host_bw, tensor_bytes=facts.tensor_bytes or None,
                   host_ram_bytes=ram).fit


#: System RAM assumed around a GPU that is not this machine's, by the kind of part, where none was given (--ram):
#: what laptops and desktops with such a GPU commonly ship with (stated as assumed wherever it decides a fit).
ASSUMED_LAPTOP_RAM_GIB = 16.0
ASSUMED_DESKTOP_RAM_GIB = 32.0
#: System RAM held back for the OS and other programs: at least this much, or this share of it, whichever is larger
#: (a desktop session idles at 2-4 GiB; stated, not measured).
OS_RESERVE_GIB = 2.0
OS_RESERVE_SHARE = 0.15
GIB = 2**30


def host_ram(profile: HardwareProfile, machine: Machine) -> tuple[int | None, str]:
    """(the system RAM a placement's host side may use, in bytes, and where the figure comes from): this machine's
    RAM for its own hardware, the one given (--ram) for a GPU that is not, else an assumption by the kind of part;
    each less the OS's share. None for unified memory: one pool, the profile's own."""
    if profile.is_unified and profile.kind != "cpu":
        return None, ""
    if profile.host_ram_gib is not None:
        total, source = profile.host_ram_gib * GIB, profile.host_ram_source or "given"
    elif machine.is_this(profile) and machine.ram_total_bytes:
        total, source = float(machine.ram_total_bytes), "this machine's"
    elif profile.kind == "cpu":
        total, source = float(profile.vram_bytes), "the profile's"
    else:
        laptop = profile.is_laptop_part
        gib = ASSUMED_LAPTOP_RAM_GIB if laptop else ASSUMED_DESKTOP_RAM_GIB
        kind = "laptop" if laptop else "desktop"
        total, source = gib * GIB, f"assumed: {gib:g} GiB, common beside a {kind} GPU (--ram sets it)"
    reserve = max(OS_RESERVE_GIB * GIB, OS_RESERVE_SHARE * total)
    usable = max(int(total - reserve), 0)
    return usable, (f"system RAM {total / GIB:.0f} GiB ({source}), less {reserve / GIB:.1f} GiB held back for the OS "
                    f"and other programs: {usable / GIB:.1f} GiB for the model")


def memory_by_context(facts: ModelFacts, settings: PredictSettings,
                      n_ctxs: Sequence[float]) -> tuple[list[float], list[float]]:
    """(KV cache bytes, weights + KV + compute bytes) llama.cpp allocates at each context size, for the plots."""
    s = settings
    kv = [kv_alloc_bytes(facts, int(x), s.type_k, s.type_v, s.n_ubatch, flash_attn=s.flash_attn) for x in n_ctxs]
    total = [facts.weight_bytes + k + compute_buffer_bytes_for(facts, int(x), s.n_ubatch, s.flash_attn)
             for k, x in zip(kv, n_ctxs, strict=True)]
    return kv, total


def kv_cache_bytes(facts: ModelFacts, settings: PredictSettings) -> float:
    """KV-cache bytes llama.cpp allocates for ``settings`` (its n_ctx, cache types and micro-batch)."""
    return kv_alloc_bytes(facts, settings.n_ctx, settings.type_k, settings.type_v or settings.type_k,
                          settings.n_ubatch, flash_attn=settings.flash_attn)


def memory_checks(facts: ModelFacts, settings: Sequence[PredictSettings], machine: Machine) -> list[MemoryCheck | str]:
    """For each of ``settings``, our memory formulas beside llama.cpp's dry run of the file on this machine (which
    ``machine`` carries: :meth:`Machine.with_dry_run`), or the reason there is none."""
    run = machine.dry_run_of(facts)
    out: list[MemoryCheck | str] = []
    for s in settings:
        ctx = run.context(dry_run_settings(s)) if run is not None else None
        if ctx is None or run is None:
            out.append(run.problem if run is not None and run.problem else "llama.cpp's dry run did not size it")
        else:
            out.append(memory_check(facts, s, ctx, run.size_bytes))
    return out
