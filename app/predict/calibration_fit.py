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

import numpy as np

from app.model.facts import ModelFacts
from app.predict.cpu_kernels import SPLIT_KV_CELLS
from app.predict.crossing_fit import CrossingCost, learn_crossing_costs
from app.predict.fitted_model import BAND_PERCENTILE, Expected, FitError, PhaseFit, fit_phase
from app.predict.offload import is_expert_tensor
from app.predict.settings import PredictSettings
from app.predict.workload import PHASES, Workload, kernel_class, workload_for
from app.results.fields import RowStatus
from app.results.phases import row_rate
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

    A MoE model's routed experts count ``n_expert_used / n_expert`` of their bytes.

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
    _drop_inactive_experts(facts, type_bytes)
    if not tied:
        type_bytes[embd_type] -= embd_bytes
        type_params[out_type] -= head
    return ({t: v for t, v in type_bytes.items() if v > 0}, {t: v for t, v in type_params.items() if v > 0},
            out_type)


def _drop_inactive_experts(facts: ModelFacts, type_bytes: dict[str, float]) -> None:
    """A token reads ``n_expert_used / n_expert`` of each routed-expert tensor (offload.py): take the rest off its
    type's bytes, the type found from the tensor's bytes per element (n_expert × n_embd × the expert width)."""
    if not facts.n_expert or not facts.tensor_types:
        return
    share = facts.n_expert_used / facts.n_expert
    ff = facts.extra.get("n_ff_expert")
    n_ff = ff if isinstance(ff, int) and ff > 0 else facts.n_ff
    for name, n_bytes in facts.tensor_bytes.items():
        if is_expert_tensor(name) and name.endswith(".weight"):
            elements = facts.n_expert * facts.n_embd * n_ff * (2 if "gate_up" in name else 1)
            t = _type_of_tensor(facts, n_bytes, elements)
            type_bytes[t] = type_bytes.get(t, 0.0) - n_bytes * (1.0 - share)


@dataclass(frozen=True)
class MachineContext:
    """What a CPU fit needs besides the model: this CPU's kernel classes (ggml type -> class; empty: the generic
    ``kernel_class``) and its per-core L2 bytes (0: unknown, no spill term)."""

    cpu_classes: Mapping[str, str] = field(default_factory=dict)
    l2_cache_bytes: int = 0

    def classify(self, backend: str) -> Callable[[str], str]:
        """The kernel class of a ggml type on ``backend``: the CPU table on the CPU (a type it lacks is its own,
        uncalibrated class), ``kernel_class`` elsewhere."""
        table = self.cpu_classes
        if backend != "CPU" or not table:
            return kernel_class
        return lambda t: table.get(t.upper(), t.lower())

    def cache_bytes(self, backend: str) -> int:
        return self.l2_cache_bytes if backend == "CPU" else 0


def workload_of(facts: ModelFacts, s: PredictSettings, ctx: MachineContext | None = None,
                backend: str = "CPU") -> Workload:
    """The workload of ``facts`` run with settings ``s`` (prompt, generated tokens, depth, cache types, fa) on
    ``backend`` of the machine ``ctx`` describes (None: generic kernel classes, no cache term)."""
    ctx = ctx or MachineContext()
    type_bytes, type_params, out_type = _read_parts(facts)
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
    )


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


def row_backend(row: Mapping[str, Any], n_layer: int) -> str | None:
    """The backend a row ran on as a fit key: "CPU" with no layer offloaded, the row's backends with all of them;
    None for a partial offload, or a full one with tensors kept in host memory (-ncmoe, -ot, -nkvo): two devices,
    not one fit (app.predict.crossing_fit learns from those)."""
    ngl = int(row.get("n_gpu_layers_effective") or 0)
    if ngl <= 0:
        return "CPU"
    s = PredictSettings.from_row(row)
    if s.n_cpu_moe or s.no_kv_offload or s.tensor_buft_overrides not in ("", "none"):
        return None
    return str(row.get("backends") or "GPU") if ngl >= n_layer + 1 else None


def row_label(row: Mapping[str, Any]) -> str:
    """A fit point's label: ``<model file> p<prompt> d<depth>`` and `` fa`` with flash attention."""
    s = PredictSettings.from_row(row)
    return f"{row.get('model_filename', '')} p{s.n_prompt} d{s.depth}{' fa' if s.flash_attn else ''}"


def samples_from_rows(rows: Sequence[Mapping[str, Any]], facts_of: Callable[[str], ModelFacts | None],
                      ctx: MachineContext | None = None) -> list[Sample]:
    """Samples of the ok, single-sequence rows whose model file can still be read (``facts_of`` gives None if not),
    reduced with the machine context ``ctx``. Which rows may teach a fit is the caller's to choose: calibrate gives
    only stable, quiet ones (``app.calibrate.ladder.trusted_rows``)."""
    out = []
    for row in rows:
        if row.get("status") != RowStatus.OK or int(row.get("n_parallel") or 1) != 1:
            continue
        facts = facts_of(str(row.get("model_path") or ""))
        backend = row_backend(row, facts.n_layer) if facts else None
        if facts is None or backend is None:
            continue
        s = PredictSettings.from_row(row)
        out.append(Sample(backend, workload_of(facts, s, ctx, backend), row_label(row), row_rate(row, "decode_tps"),
                          row_rate(row, "prefill_tps")))
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
    #: GPU backend -> what one device crossing of a split placement costs here (app.predict.crossing_fit); empty:
    #: no split measured (the cost is assumed)
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
        work = workload_of(facts, settings, self.context, backend)
        return {p: (phases[p].expected(work, self.source(backend, p)) if p in phases else None) for p in PHASES}

    def to_json_dict(self) -> dict[str, Any]:
        return {"version": FIT_VERSION, "cpu_info": self.cpu_info, "gpu_info": self.gpu_info, "build": self.build,
                "created": self.created, "n_points": self.n_points, "notes": list(self.notes),
                "fits": {b: {p: f.to_json_dict() for p, f in ph.items()} for b, ph in self.fits.items()},
                "cpu_classes": dict(self.context.cpu_classes), "l2_cache_bytes": self.context.l2_cache_bytes,
                "repack": self.repack,
                "repacked_types": list(self.repacked_types) if self.repacked_types is not None else None,
                "crossings": {b: c.to_json_dict() for b, c in self.crossings.items()}}

    @classmethod
    def from_json_dict(cls, d: Mapping[str, Any]) -> MachineFit:
        """Raises ValueError (or KeyError/TypeError) on a document of another version or shape."""
        if d.get("version") != FIT_VERSION:
            raise ValueError(f"fit version {d.get('version')!r} is not {FIT_VERSION}")
        fits = {str(b): {str(p): PhaseFit.from_json_dict(f) for p, f in ph.items()} for b, ph in d["fits"].items()}
        ctx = MachineContext({str(k): str(v) for k, v in d["cpu_classes"].items()}, int(d["l2_cache_bytes"]))
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

    def with_crossings(self, rows: Sequence[Mapping[str, Any]],
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
                fits.setdefault(backend, {})[phase] = fit_phase(
                    phase, [(s.workload, r) for s, r in pts], [s.label for s, _ in pts])
            except FitError as e:
                notes.append(f"{backend}: {e}")
    fits = {b: ph for b, ph in fits.items() if ph}
    if not fits:
        raise FitError("; ".join(notes) or "no measured points to fit")
    repack = default_repack() if repack is None else repack  # None: the samples ran with this machine's default
    return MachineFit(cpu_info, gpu_info, build, created, fits, len(samples), tuple(notes),
                      context or MachineContext(), repack=repack, repacked_types=repacked_types)

