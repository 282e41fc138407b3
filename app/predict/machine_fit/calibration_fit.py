"""A fit of one machine: the fitted model's coefficients per backend and phase, from measured rows.

``workload_of`` reduces (model facts, test settings) to a ``fitted_model.Workload``; ``fit_machine`` fits every
backend that has enough points; ``MachineFit.expected`` gives the expected figures (with bands and their source)
for any model on this machine. Pure functions and plain data; saving and loading is ``calibration_store``.

A fit carries its ``MachineContext``: the CPU's kernel-class table (which measured weight type stands for which:
:mod:`app.predict.cpu_kernels`) and its L2 size, both used for the CPU backend only; a fit saved without them (an
older one) classifies with ``kernel_class`` and has no cache-spill term, as it was fitted.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from app.model.facts import ModelFacts
from app.predict.ceilings.offload import is_expert_tensor
from app.predict.cpu_kernels import SPLIT_KV_CELLS, bits_per_weight
from app.predict.machine_fit.crossing_fit import CrossingCost, learn_crossing_costs
from app.predict.machine_fit.fitted_model import BAND_PERCENTILE, REACH_Z, Expected, FitError, PhaseFit, fit_phase
from app.predict.machine_fit.workload import PHASES, Phase, Workload, kernel_class, llc_share, workload_for
from app.predict.settings import PredictSettings
from app.results.fields import RowStatus
from app.results.phases import row_rate
from app.results.row_types import ResultRow
from app.telemetry.repack_guard import default_repack

#: Fit document version; a file of another version is not read (calibrate again, the one line says). 2: every key
#: required (machine context, repacking, each point's "used"), the forms of version 1 no longer read; "crossings"
#: is optional (a fit saved before it learned crossing costs has none).
FIT_VERSION = 2
#: Tests measured in two passes a phase needs before their spread may widen its band.
MIN_NOISE_TESTS = 3


def _type_of_tensor(facts: ModelFacts, n_bytes: int, n_elements: int) -> str:
    """The ggml type whose bytes per element match a tensor's (the header summary has no per-tensor types)."""
    ratio = n_bytes / max(n_elements, 1)
    return min(facts.tensor_types, key=lambda t: abs(facts.tensor_types[t].n_bytes
                                                     / max(facts.tensor_types[t].n_elements, 1) - ratio))


def _read_parts(facts: ModelFacts) -> tuple[dict[str, float], dict[str, float], str]:
    """(bytes read per generated token by type, matmul parameters per prompt token by type, the output's type).

    A MoE model's routed experts count ``n_expert_used / n_expert`` of their bytes and of their parameters (a token
    runs through its own experts only).

    The token embedding is looked up one row per token: it is read in full only when the output reuses it (tied).
    Prefill computes logits for the last prompt token only, so the output matmul is left out of the parameters.
    """
    type_bytes = {t: float(s.n_bytes) for t, s in facts.tensor_types.items()}
    type_params = {t: float(s.n_elements) for t, s in facts.tensor_types.items()}
    head = facts.n_vocab * facts.n_embd
    if not facts.tensor_types or not head:
        return type_bytes, type_params, ""
    embd_bytes = facts.tensor_bytes.get("token_embd.weight", round(head * facts.bits_per_weight / 8))
    embd_type = _type_of_tensor(facts, embd_bytes, head)
    out_bytes = facts.tensor_bytes.get("output.weight")
    tied = out_bytes is None if facts.tensor_bytes else True
    out_type = embd_type if tied else _type_of_tensor(facts, out_bytes or 0, head)
    type_params[embd_type] -= head
    _drop_inactive_experts(facts, type_bytes, type_params)
    if not tied:
        type_bytes[embd_type] -= embd_bytes
        type_params[out_type] -= head
    return ({t: v for t, v in type_bytes.items() if v > 0}, {t: v for t, v in type_params.items() if v > 0},
            out_type)


def _expert_ff(facts: ModelFacts) -> int:
    ff = facts.extra.get("n_ff_expert")
    return ff if isinstance(ff, int) and ff > 0 else facts.n_ff


def _drop_inactive_experts(facts: ModelFacts, type_bytes: dict[str, float], type_params: dict[str, float]) -> None:
    """A token reads and multiplies through ``n_expert_used / n_expert`` of each routed-expert tensor (offload.py):
    take the rest off its type's bytes and parameters, the type found from the tensor's bytes per element
    (n_expert × n_embd × the expert width)."""
    if not facts.n_expert or not facts.tensor_types:
        return
    share = facts.n_expert_used / facts.n_expert
    n_ff = _expert_ff(facts)
    for name, n_bytes in facts.tensor_bytes.items():
        if is_expert_tensor(name) and name.endswith(".weight"):
            elements = facts.n_expert * facts.n_embd * n_ff * (2 if "gate_up" in name else 1)
            t = _type_of_tensor(facts, n_bytes, elements)
            type_bytes[t] = type_bytes.get(t, 0.0) - n_bytes * (1.0 - share)
            type_params[t] = type_params.get(t, 0.0) - elements * (1.0 - share)


def active_expert_params(facts: ModelFacts) -> float:
    """The routed experts' parameters one token multiplies through: ``n_expert_used / n_expert`` of every expert
    tensor. In a prompt llama.cpp runs them with ``mul_mat_id``, expert by expert, not the dense matmul's kernel: on
    1 thread here a MoE's prompt ran at half the speed of a dense model of the same active FLOPs."""
    if not facts.n_expert or not facts.n_expert_used:
        return 0.0
    n_ff = _expert_ff(facts)
    matrices = sum((2 if "gate_up" in name else 1) for name in facts.tensor_bytes
                   if is_expert_tensor(name) and name.endswith(".weight")) or 3 * facts.n_layer
    return matrices * facts.n_embd * n_ff * facts.n_expert_used


def expert_matmuls(facts: ModelFacts) -> float:
    """Routed-expert matmuls one decoded token runs: the expert matrices (gate, up, down per layer holding experts)
    × n_expert_used; each is a small matmul of its own in llama.cpp's ``mul_mat_id``, and one token's experts lie
    scattered over their tensor. 0 for a dense model."""
    if not facts.n_expert or not facts.n_expert_used:
        return 0.0
    matrices = sum((2 if "gate_up" in name else 1) for name in facts.tensor_bytes
                   if is_expert_tensor(name) and name.endswith(".weight"))
    if not matrices:  # no tensor table: every layer's gate, up and down
        matrices = 3 * facts.n_layer
    return float(matrices * facts.n_expert_used)


@dataclass(frozen=True)
class MachineContext:
    """What a CPU fit needs besides the model: this CPU's kernel classes (ggml type -> class; empty: the generic
    ``kernel_class``) and its per-core L2 bytes (0: unknown, no spill term)."""

    cpu_classes: Mapping[str, str] = field(default_factory=dict)
    l2_cache_bytes: int = 0
    llc_bytes: int = 0  # the last-level cache (0: unknown, no cache term)
    #: measured type -> the measured type that would stand in for it had the ladder not measured it (the stand-ins'
    #: own error is judged on these, leave one type out)
    held_out_stand_ins: Mapping[str, str] = field(default_factory=dict)

    def classify(self, backend: str) -> Callable[[str], str]:
        """The kernel class of a ggml type on ``backend``: the CPU table on the CPU (a type it lacks is its own,
        uncalibrated class), ``kernel_class`` elsewhere."""
        table = self.cpu_classes
        if backend != "CPU" or not table:
            return kernel_class
        return lambda t: table.get(t.upper(), t.lower())

    def cache_bytes(self, backend: str) -> int:
        return self.l2_cache_bytes if backend == "CPU" else 0

    def last_level_cache_bytes(self, backend: str) -> int:
        return self.llc_bytes if backend == "CPU" else 0

    def stand_in(self, ggml_type: str) -> str | None:
        """The measured type whose class ``ggml_type`` takes on the CPU when it was not measured itself; None when
        it was (or has no class)."""
        cls = self.cpu_classes.get(ggml_type.upper())
        return cls.upper() if cls is not None and cls != ggml_type.lower() else None


def workload_of(facts: ModelFacts, s: PredictSettings, ctx: MachineContext | None = None,
                backend: str = "CPU", byte_scale: Mapping[str, float] | None = None) -> Workload:
    """The workload of ``facts`` run with settings ``s`` (prompt, generated tokens, depth, cache types, fa) on
    ``backend`` of the machine ``ctx`` describes (None: generic kernel classes, no cache term); ``byte_scale``:
    ggml type -> factor on its bytes (a type read through a stand-in's kernel class, :func:`stand_in_scales`)."""
    ctx = ctx or MachineContext()
    type_bytes, type_params, out_type = _read_parts(facts)
    for t, k in (byte_scale or {}).items():
        if t in type_bytes:
            type_bytes[t] *= k
    if out_type:  # the one output matmul of the prompt, spread over its tokens
        type_params[out_type] = type_params.get(out_type, 0.0) + facts.n_vocab * facts.n_embd / max(s.n_prompt, 1)
    n_embd_attn = facts.n_head * (facts.head_dim_k + facts.head_dim_v) // 2
    kv_per_token = facts.kv_bytes_per_token(s.type_k, s.type_v)
    return workload_for(
        type_bytes, type_params, n_layer=facts.n_layer, n_embd_attn=n_embd_attn,
        kv_bytes_per_token=kv_per_token, n_prompt=s.n_prompt, n_gen=s.n_gen,
        depth=s.depth, flash_attn=s.flash_attn, n_ubatch=s.n_ubatch, classify=ctx.classify(backend),
        kv_head_bytes_per_token=kv_per_token / max(facts.n_layer * facts.n_head_kv, 1),
        cache_bytes=ctx.cache_bytes(backend), split_kv_cells=SPLIT_KV_CELLS if backend == "CPU" else 0,
        width_per_layer=facts.n_embd + _ff_per_token(facts),
        llc_share=llc_share(_working_set_bytes(facts, kv_per_token * s.decode_depth),
                            ctx.last_level_cache_bytes(backend)),
        decode_expert_matmuls=expert_matmuls(facts), prefill_expert_flops=2.0 * active_expert_params(facts),
    )


def _working_set_bytes(facts: ModelFacts, kv_bytes: float) -> float:
    """What successive decoded tokens read between them: every weight but an untied embedding table's (a mixture's
    experts all, over a few tokens) and the KV cache at the depth."""
    embd = facts.tensor_bytes.get("token_embd.weight", 0) if "output.weight" in facts.tensor_bytes else 0
    return float(facts.weight_bytes - embd) + kv_bytes


def _ff_per_token(facts: ModelFacts) -> int:
    """The feed-forward width one token runs through per layer: the used experts' together in a mixture of
    experts, else ``n_ff``."""
    expert_ff = facts.extra.get("n_ff_expert")
    if facts.n_expert_used and isinstance(expert_ff, int) and expert_ff > 0:
        return facts.n_expert_used * expert_ff
    return facts.n_ff


@dataclass(frozen=True)
class Sample:
    """One measured test reduced for the fit: its backend, workload and the rates measured (None: not measured)."""

    backend: str
    workload: Workload
    label: str
    decode_tps: float | None
    prefill_tps: float | None
    group: str = ""  # the model file: a fit's points of one model are left out together (its reach beyond them)


def row_backend(row: ResultRow, n_layer: int) -> str | None:
    """The backend a row ran on as a fit key: "CPU" with no layer offloaded, the row's backends with all of them;
    None for a partial offload, or a full one with tensors kept in host memory (-ncmoe, -ot, -nkvo): two devices,
    not one fit (app.predict.machine_fit.crossing_fit learns from those)."""
    ngl = row.n_gpu_layers_effective or 0
    if ngl <= 0:
        return "CPU"
    s = PredictSettings.from_row(row)
    if s.n_cpu_moe or s.no_kv_offload or s.tensor_buft_overrides not in ("", "none"):
        return None
    return (row.backends or "GPU") if ngl >= n_layer + 1 else None


def row_label(row: ResultRow) -> str:
    """A fit point's label: ``<model file> p<prompt> d<depth>`` and `` fa`` with flash attention."""
    s = PredictSettings.from_row(row)
    return f"{row.model_filename or ''} p{s.n_prompt} d{s.depth}{' fa' if s.flash_attn else ''}"


def samples_from_rows(rows: Sequence[ResultRow], facts_of: Callable[[str], ModelFacts | None],
                      ctx: MachineContext | None = None) -> list[Sample]:
    """Samples of the ok, single-sequence rows whose model file can still be read (``facts_of`` gives None if not),
    reduced with the machine context ``ctx``. Which rows may teach a fit is the caller's to choose: calibrate gives
    only stable, quiet ones (``app.calibrate.ladder.trusted_rows``)."""
    out = []
    for row in rows:
        if row.status != RowStatus.OK or (row.n_parallel or 1) != 1:
            continue
        facts = facts_of(row.model_path or "")
        backend = row_backend(row, facts.n_layer) if facts else None
        if facts is None or backend is None:
            continue
        s = PredictSettings.from_row(row)
        out.append(Sample(backend, workload_of(facts, s, ctx, backend), row_label(row), row_rate(row, "decode_tps"),
                          row_rate(row, "prefill_tps"), str(row.model_filename or row.model_path)))
    return out


@dataclass(frozen=True)
class MachineFit:
    """The fitted coefficients of one machine and llama.cpp build, per backend and phase."""

    cpu_info: str
    gpu_info: str
    build: str
    created: str  # ISO date
    fits: dict[str, dict[str, PhaseFit]]  # backend -> phase -> fit
    n_points: int
    notes: tuple[str, ...] = field(default_factory=tuple)
    context: MachineContext = field(default_factory=MachineContext)
    repack: int = 1  # the weight repacking its measurements ran with (fits saved before the setting: on)
    #: weight types whose calibration rows had repacked weights (extra buffers); None: not recorded (older fits)
    repacked_types: tuple[str, ...] | None = None
    #: GPU backend -> what one device crossing of a split placement costs here (app.predict.machine_fit.crossing_fit);
    #: empty: no split measured (the cost is assumed)
    crossings: dict[str, CrossingCost] = field(default_factory=dict)

    def applies_to(self, facts: ModelFacts, settings: PredictSettings) -> bool:
        """Whether this fit's kernels are the ones ``settings`` run: the same repacking, or a weight type that no
        extra buffer repacked here (its kernels are the same either way)."""
        if settings.repack == self.repack:
            return True
        return self.repacked_types is not None and self.repack == 1 and facts.file_type not in self.repacked_types

    def source(self, backend: str, phase: str) -> str:
        fit = self.fits[backend][phase]
        return (f"fit of this machine, {self.created}, {len(fit.points)} points, "
                f"median error {fit.median_error * 100:.1f}%")

    def expected(self, facts: ModelFacts, settings: PredictSettings, backend: str = "CPU"
                 ) -> dict[str, Expected | None]:
        """Expected decode and prefill tokens/s of ``facts`` with ``settings`` on ``backend`` (None: not fitted, or
        fitted with other repacking for weights whose kernels it changes)."""
        phases = self.fits.get(backend, {}) if self.applies_to(facts, settings) else {}
        stand_ins = {t: s for t in facts.tensor_types if (s := self.context.stand_in(t))} if backend == "CPU" else {}
        scales = stand_in_scales(phases["decode"].coefficients, stand_ins) if "decode" in phases else {}
        work = workload_of(facts, settings, self.context, backend, scales)
        out: dict[str, Expected | None] = {}
        for p in PHASES:
            got = phases[p].expected(work, self.source(backend, p)) if p in phases else None
            out[p] = got and beyond_ladder(got, phases[p], work, stand_in_share(facts, stand_ins, p), stand_ins)
        return out

    def to_json_dict(self) -> dict[str, Any]:
        return {"version": FIT_VERSION, "cpu_info": self.cpu_info, "gpu_info": self.gpu_info, "build": self.build,
                "created": self.created, "n_points": self.n_points, "notes": list(self.notes),
                "fits": {b: {p: f.to_json_dict() for p, f in ph.items()} for b, ph in self.fits.items()},
                "cpu_classes": dict(self.context.cpu_classes), "l2_cache_bytes": self.context.l2_cache_bytes,
                "llc_bytes": self.context.llc_bytes, "held_out_stand_ins": dict(self.context.held_out_stand_ins),
                "repack": self.repack,
                "repacked_types": list(self.repacked_types) if self.repacked_types is not None else None,
                "crossings": {b: c.to_json_dict() for b, c in self.crossings.items()}}

    @classmethod
    def from_json_dict(cls, d: Mapping[str, Any]) -> MachineFit:
        """Raises ValueError (or KeyError/TypeError) on a document of another version or shape."""
        if d.get("version") != FIT_VERSION:
            raise ValueError(f"fit version {d.get('version')!r} is not {FIT_VERSION}")
        fits = {str(b): {str(p): PhaseFit.from_json_dict(f) for p, f in ph.items()} for b, ph in d["fits"].items()}
        ctx = MachineContext({str(k): str(v) for k, v in d["cpu_classes"].items()}, int(d["l2_cache_bytes"]),
                             int(d.get("llc_bytes", 0)),
                             {str(k): str(v) for k, v in d.get("held_out_stand_ins", {}).items()})
        types = d["repacked_types"]
        if d["repack"] not in (0, 1) or not (types is None or isinstance(types, list)):
            raise ValueError("repack must be 0 or 1 and repacked_types a list or null")
        crossings = {str(b): CrossingCost.from_json_dict(c) for b, c in d.get("crossings", {}).items()}
        return cls(str(d["cpu_info"]), str(d["gpu_info"]), str(d["build"]), str(d["created"]), fits,
                   int(d["n_points"]), tuple(str(n) for n in d["notes"]), ctx, repack=int(d["repack"]),
                   repacked_types=tuple(str(t) for t in types) if types is not None else None, crossings=crossings)

    def with_pass_noise(self, spreads: Mapping[tuple[str, str], Sequence[float]],
                        min_tests: int = MIN_NOISE_TESTS) -> MachineFit:
        """This fit with each phase's band at least the spread between calibration passes: ``spreads`` maps
        (backend, phase) to |pass a ÷ pass b − 1| of each test measured in two passes; a phase with at least
        ``min_tests`` of them takes their 90th percentile where it is wider than its residuals' band (a fit's
        residuals miss how far the next run of the same test lands on a noisy machine), with a note."""
        import numpy as np

        fits = {b: dict(phases) for b, phases in self.fits.items()}
        notes = list(self.notes)
        for (backend, phase), xs in sorted(spreads.items()):
            pf = fits.get(backend, {}).get(phase)
            if pf is None or len(xs) < min_tests:
                continue
            noise = float(np.percentile(np.abs(np.asarray(xs, dtype=float)), BAND_PERCENTILE))
            if noise > pf.band_frac:
                fits[backend][phase] = replace(pf, band_frac=noise)
                notes.append(f"{backend} {phase}: band ±{noise:.0%}, the spread between calibration passes (90th "
                             f"percentile of {len(xs)} tests), wider than the residuals' ±{pf.band_frac:.0%}")
        return replace(self, fits=fits, notes=tuple(notes))

    def with_crossings(self, rows: Sequence[ResultRow],
                       facts_of: Callable[[str], ModelFacts | None]) -> MachineFit:
        """This fit with each GPU backend's crossing cost learned from the split rows among ``rows`` (the
        caller's trusted ones), where this fit predicts both of a row's sides; unchanged without such rows."""
        learned = learn_crossing_costs(rows, facts_of, self.expected, row_label)
        return replace(self, crossings={**self.crossings, **learned}) if learned else self


def fit_machine(samples: Sequence[Sample], *, cpu_info: str, gpu_info: str, build: str, created: str,
                context: MachineContext | None = None, repack: int | None = None,
                repacked_types: tuple[str, ...] | None = None) -> MachineFit:
    """Fit every backend and phase of ``samples`` (reduced with ``context``); a phase that cannot be fitted becomes
    a note.

    Raises FitError when no phase of any backend could be fitted.
    """
    fits: dict[str, dict[str, PhaseFit]] = {}
    notes: list[str] = []
    for backend in sorted({s.backend for s in samples}):
        mine = [s for s in samples if s.backend == backend]
        for phase in PHASES:
            pts = [(s, rate) for s in mine if (rate := getattr(s, f"{phase}_tps")) is not None]
            try:
                fitted = fit_phase(phase, [(s.workload, r) for s, r in pts], [s.label for s, _ in pts])
            except FitError as e:
                notes.append(f"{backend}: {e}")
                continue
            held_out = context.held_out_stand_ins if context is not None and backend == "CPU" else {}
            fits.setdefault(backend, {})[phase] = replace(
                fitted, refits=leave_one_model_out(phase, pts),
                stand_in_error=stand_in_error(fitted, [s.workload for s, _ in pts], held_out,
                                              fits.get(backend, {}).get("decode")))
    fits = {b: ph for b, ph in fits.items() if ph}
    if not fits:
        raise FitError("; ".join(notes) or "no measured points to fit")
    repack = default_repack() if repack is None else repack  # None: the samples ran with this machine's default
    return MachineFit(cpu_info, gpu_info, build, created, fits, len(samples), tuple(notes),
                      context or MachineContext(), repack=repack, repacked_types=repacked_types)



def stand_in_scales(decode_coefficients: Mapping[str, float], stand_ins: Mapping[str, str]) -> dict[str, float]:
    """ggml type -> the factor on its bytes that makes its stand-in's cost per byte its cost, for types read through
    another type's kernel class (``stand_ins``: type -> stand-in). A plain kernel's cost is the larger of streaming
    its bytes and unpacking and multiplying its weights: the cheapest byte the fit knows bounds the first, the
    stand-in's cost per weight (its cost per byte × its bits ÷ 8) estimates the second. So the factor is the larger
    of (the cheapest byte's cost ÷ the stand-in's) and (the stand-in's bits ÷ the type's). Per byte alone, Q3_K
    read as Q5_K came out 40-70 % fast on 1 thread here (a 3.4-bit weight costs as much to unpack as a 5.5-bit one);
    leave one type out on the ladder, costs per weight missed by 2-17 %, costs per byte by 7-79 %."""
    byte_costs = {k.removeprefix("bytes:"): v for k, v in decode_coefficients.items()
                  if k.startswith("bytes:") and v > 0}
    if not byte_costs:
        return {}
    cheapest = min(byte_costs.values())
    out = {}
    for t, stand_in in stand_ins.items():
        cost, bits, own = byte_costs.get(stand_in.lower()), bits_per_weight(stand_in), bits_per_weight(t)
        if cost and bits and own:
            out[t] = max(cheapest / cost, bits / own)
    return out


def stand_in_share(facts: ModelFacts, stand_ins: Mapping[str, str], phase: str) -> float:
    """The share of ``facts``' bytes read per token (decode) or parameters multiplied (prefill) in types read
    through a stand-in's class."""
    if not stand_ins:
        return 0.0
    type_bytes, type_params, _ = _read_parts(facts)
    parts = type_bytes if phase == "decode" else type_params
    total = sum(parts.values())
    return sum(v for t, v in parts.items() if t in stand_ins) / total if total > 0 else 0.0


def beyond_ladder(got: Expected, fit: PhaseFit, work: Workload, stand_in_share_frac: float,
                  stand_ins: Mapping[str, str]) -> Expected:
    """``got`` with its band widened by how far the figure lies beyond the ladder: :data:`REACH_Z` × its spread over
    the leave-one-model-out refits (:meth:`PhaseFit.reach`), plus the stand-in error on the share read through a
    stand-in's class; the source says so where that adds a point or more."""
    reach = REACH_Z * fit.reach(work)
    stand_in = stand_in_share_frac * fit.stand_in_error
    extra = reach + stand_in
    if extra < 0.01:
        return got
    band = fit.band_frac + extra
    why = []
    if reach >= 0.005:
        why.append(f"±{reach:.0%} as far as the figure moves with one ladder model left out")
    if stand_in >= 0.005:
        read_as = ", ".join(f"{t} read as {s}" for t, s in sorted(stand_ins.items()))
        why.append(f"±{stand_in:.0%} for the {stand_in_share_frac:.0%} whose kernel the ladder did not measure "
                   f"({read_as})")
    return replace(got, low=got.value / (1.0 + band), high=got.value * (1.0 + band),
                   source=f"{got.source}; band ±{band:.0%} beyond the ladder: {', '.join(why)}")


def leave_one_model_out(phase: Phase, points: Sequence[tuple[Sample, float]]) -> tuple[dict[str, float], ...]:
    """The coefficients of ``phase`` refitted without each model's points in turn (a refit that cannot be made is
    left out): where the ladder's models disagree on a term, the refits do too."""
    groups = sorted({s.group for s, _ in points if s.group})
    out = []
    for g in groups:
        rest = [(s.workload, r) for s, r in points if s.group != g]
        try:
            out.append(dict(fit_phase(phase, rest).coefficients))
        except FitError:
            continue
    return tuple(out) if len(out) > 1 else ()


def _as_stand_in(work: Workload, ggml_type: str, stand_in: str, byte_factor: float) -> Workload:
    """``work`` with the class of ``ggml_type`` (its own, a measured type's) read as ``stand_in``'s."""
    own, other = ggml_type.lower(), stand_in.lower()

    def moved(by_class: Mapping[str, float], factor: float) -> dict[str, float]:
        out = {k: v for k, v in by_class.items() if k != own}
        if own in by_class:
            out[other] = out.get(other, 0.0) + by_class[own] * factor
        return out

    return replace(work, class_bytes=moved(work.class_bytes, byte_factor), class_flops=moved(work.class_flops, 1.0))


def stand_in_error(fit: PhaseFit, works: Sequence[Workload], held_out: Mapping[str, str],
                   decode: PhaseFit | None = None) -> float:
    """Leave one type out: for each measured type of ``held_out`` (type -> the type that would stand in for it),
    how far the fit's figures of the ladder models of that type alone move when it is read as its stand-in (as a
    type never measured is, :func:`stand_in_scales` with the decode fit ``decode``, else ``fit``); the median over
    each type's points, the largest over the types (0: none judged)."""
    import numpy as np

    coefficients = (decode or fit).coefficients
    worst = 0.0
    for t, s in held_out.items():
        own = f"bytes:{t.lower()}" if fit.phase == "decode" else f"flops:{t.lower()}"
        if own not in fit.coefficients or f"bytes:{s.lower()}" not in coefficients:
            continue
        rest = {k: v for k, v in coefficients.items() if k != f"bytes:{t.lower()}"}
        factor = stand_in_scales(rest, {t: s}).get(t, 1.0)
        errs = []
        for w in works:
            if set(w.class_bytes) != {t.lower()}:
                continue
            try:
                errs.append(abs(fit.seconds_per_token(w) / fit.seconds_per_token(_as_stand_in(w, t, s, factor)) - 1))
            except (KeyError, ZeroDivisionError):
                continue
        if errs:
            worst = max(worst, float(np.median(errs)))
    return worst
