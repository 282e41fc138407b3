"""llama.cpp's dry run as the memory of an answer on this machine's CPU, and the formulas' cross-check against it.

Where llama.cpp here could size a context of the file (app.model.dry_run: ``no_alloc``, a child process), its KV
cache, recurrent state and compute and output buffers are the figures for this machine's CPU: :func:`with_dry_run`
puts them in a prediction (the fit follows). The formulas (memory/buffers.py) stay for what the dry run cannot give
(another backend's compute buffers, a GPU not owned, the split between devices) and are checked against it here
(:func:`memory_check`): weights within 1 %, KV cache and recurrent state within 2 %, compute buffers within
:data:`COMPUTE_TOLERANCE`. Pure functions.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from app.model.dry_run import ContextMemory, DryRunSettings
from app.model.facts import ModelFacts
from app.predict.memory.buffers import compute_buffer_bytes_for, kv_alloc_bytes
from app.predict.prediction import Prediction
from app.predict.settings import PredictSettings

WEIGHTS_TOLERANCE = 0.01
CONTEXT_TOLERANCE = 0.02
#: The compute buffer formula reads ggml-alloc's peak from the graph's stages; where the allocator leaves a hole the
#: logits do not fit in (a few contexts of a few models) llama.cpp's buffer is up to ~12 % larger (memory/buffers.py).
COMPUTE_TOLERANCE = 0.15
MIB = 2**20


def dry_run_settings(s: PredictSettings) -> DryRunSettings:
    """The context llama.cpp's dry run sizes for a prediction's settings (llama-bench's n_batch, 2048)."""
    return DryRunSettings(n_ctx=s.n_ctx, type_k=s.type_k, type_v=s.type_v or s.type_k, flash_attn=int(s.flash_attn),
                          n_ubatch=s.n_ubatch, swa_full=s.swa_full)


def _dev(ours: float, theirs: float) -> float:
    return ours / theirs - 1.0 if theirs else (0.0 if not ours else float("inf"))


@dataclass(frozen=True)
class MemoryCheck:
    """Our formulas beside llama.cpp's dry run for one context (bytes)."""

    n_ctx: int
    weights: float
    weights_llama: float | None
    context: float  # KV cache + recurrent state
    context_llama: float
    state: float
    state_llama: float
    compute: float
    compute_llama: float

    @property
    def weights_dev(self) -> float | None:
        return _dev(self.weights, self.weights_llama) if self.weights_llama else None

    @property
    def context_dev(self) -> float:
        return _dev(self.context, self.context_llama)

    @property
    def compute_dev(self) -> float:
        return _dev(self.compute, self.compute_llama)

    @property
    def agrees(self) -> bool:
        w = self.weights_dev
        return ((w is None or abs(w) <= WEIGHTS_TOLERANCE) and abs(self.context_dev) <= CONTEXT_TOLERANCE
                and abs(self.compute_dev) <= COMPUTE_TOLERANCE)

    def text(self) -> str:
        """One line: llama.cpp's figures and how far ours are from them."""
        w, w_llama = self.weights_dev, self.weights_llama
        weights = f"weights {w_llama / MIB:,.1f} MiB ({w:+.1%})" if w is not None and w_llama is not None else ""
        state = f" (state {self.state_llama / MIB:,.1f})" if self.state_llama else ""
        parts = [p for p in (weights, f"KV {self.context_llama / MIB:,.1f} MiB{state} ({self.context_dev:+.1%})",
                             f"compute {self.compute_llama / MIB:,.1f} MiB ({self.compute_dev:+.1%})") if p]
        verdict = "the formulas agree" if self.agrees else "the formulas DISAGREE; llama.cpp's figures are used here"
        return (f"llama.cpp's dry run at {self.n_ctx:,} tokens: {', '.join(parts)} (ours beside it in brackets); "
                f"{verdict}")


def memory_check(facts: ModelFacts, s: PredictSettings, ctx: ContextMemory, size_bytes: int | None) -> MemoryCheck:
    """Our weights, KV + state and compute buffer for ``s`` beside llama.cpp's dry run of the same context."""
    type_v = s.type_v or s.type_k
    return MemoryCheck(
        n_ctx=s.n_ctx, weights=float(facts.weight_bytes), weights_llama=float(size_bytes) if size_bytes else None,
        context=kv_alloc_bytes(facts, s.n_ctx, s.type_k, type_v, s.n_ubatch, s.swa_full, s.flash_attn),
        context_llama=ctx.context_bytes, state=float(facts.state_bytes), state_llama=ctx.state_bytes,
        compute=compute_buffer_bytes_for(facts, s.n_ctx, s.n_ubatch, s.flash_attn), compute_llama=ctx.compute_bytes,
    )


def with_dry_run(pred: Prediction, facts: ModelFacts, s: PredictSettings, ctx: ContextMemory,
                 size_bytes: int | None) -> Prediction:
    """``pred`` (this machine's CPU) with llama.cpp's context memory and buffers: its KV cache and recurrent state,
    its compute and output buffers, the fit's need from them, and a note with the formulas' cross-check."""
    if pred.kind != "cpu":
        return pred
    check = memory_check(facts, s, ctx, size_bytes)
    kv, compute = round(ctx.context_bytes), round(ctx.compute_bytes + ctx.output_bytes)
    fit = pred.fit
    needed = fit.weight_bytes + kv + compute + fit.overhead_bytes
    fits = needed <= fit.budget_bytes and fit.cpu_needed_bytes <= (getattr(fit, "host_budget_bytes", None) or
                                                                    float("inf"))
    changes: dict[str, object] = {"needed_bytes": needed, "kv_bytes": kv, "compute_buffer_bytes": compute,
                                  "fits": fits, "status": "fits" if fits else "does_not_fit"}
    if hasattr(fit, "device_fits"):  # which memory ran out, where the fit says
        changes.update(device_fits=needed <= fit.budget_bytes,
                       ran_out="" if needed <= fit.budget_bytes else "memory")
    memory = pred.device_memory
    if memory is not None:
        memory = replace(memory, cpu_kv_bytes=float(kv), cpu_compute_bytes=float(compute))
    note = check.text() + " (output buffer included in compute)" if ctx.output_bytes else check.text()
    return replace(pred, kv_bytes=kv, state_bytes=round(ctx.state_bytes), compute_buffer_bytes=compute,
                   fit=replace(fit, **changes), device_memory=memory, notes=(*pred.notes, note))  # type: ignore[arg-type]
