"""Fit check: does a configuration fit in device memory, with how many layers offloaded, up to which context.

Pure functions; bytes are bytes. Device need = offloaded weights + their layers' KV cache + compute buffer +
an overhead allowance; the host holds the rest.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass

from app.model.facts import ModelFacts
from app.predict.ceilings.offload import Placement, effective_n_gpu_layers, split_weights
from app.predict.memory.buffers import (
    DEFAULT_N_UBATCH,
    KV_CELL_PAD,
    MIB,
    compute_buffer_bytes_for,
    kv_alloc_bytes_per_layer,
)

#: CUDA context, cuBLAS workspace and memory pools on a discrete GPU: a rough allowance, not measured here.
DEFAULT_GPU_OVERHEAD_BYTES = 512 * MIB
#: Device memory a placement leaves free on a discrete GPU, as llama.cpp's own fitting does (``--fit-target``, 1 GiB
#: per device by default: common/common.h ``fit_params_target``): a pick that fills the card to the last MiB fails to
#: load, or on Windows spills into shared memory (NVIDIA's sysmem fallback) and runs at a fraction of the speed.
DEFAULT_DEVICE_MARGIN_BYTES = 1024 * MIB
#: Share of unified memory the GPU may wire by default on macOS (recommendedMaxWorkingSetSize is ~65–75 %).
UNIFIED_USABLE_FRACTION = 0.75
FIT_STATUSES: tuple[str, ...] = ("fits", "partial", "does_not_fit")


@dataclass(frozen=True)
class FitResult:
    """Whether a configuration fits in device memory.

    status: "fits" (everything on the GPU), "partial" (the request fits with layers on the CPU, or does not fit as
    asked but ``max_ngl`` ≥ 1 layers would), "does_not_fit" (not even one layer, or for unified memory/CPU the total
    exceeds the usable memory, or the CPU side exceeds ``host_ram_bytes``).
    """

    status: str
    fits: bool  # the request fits as asked
    n_gpu_layers: int  # effective requested value
    max_ngl: int  # most layers that fit at this n_ctx (n_layer + 1 = all)
    max_ctx: int  # largest n_ctx (multiple of 256, up to max(n_ctx_train, n_ctx)) that fits at the requested ngl
    budget_bytes: int  # usable device memory
    needed_bytes: int  # device memory the request needs
    weight_bytes: int  # weights on the device
    kv_bytes: int  # KV cache on the device
    compute_buffer_bytes: int
    overhead_bytes: int
    cpu_weight_bytes: int
    cpu_kv_bytes: int
    cpu_needed_bytes: int
    host_budget_bytes: int | None = None  # system RAM the host side may use (None: not checked)
    device_fits: bool = True  # the device's share fits its memory
    host_fits: bool = True  # the host's share fits host_budget_bytes
    #: which memory a request that does not fit ran out of: "GPU memory", "system RAM", both, or "" when it fits
    ran_out: str = ""
    #: device memory kept free beside ``budget_bytes`` (the device's usable memory less this is the budget)
    margin_bytes: int = 0

    def to_json_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True)
class _Need:
    weights: int
    kv: int
    compute: int
    overhead: int
    cpu_weights: int
    cpu_kv: int
    cpu_compute: int

    @property
    def device(self) -> int:
        return self.weights + self.kv + self.compute + self.overhead

    @property
    def cpu(self) -> int:
        return self.cpu_weights + self.cpu_kv + self.cpu_compute


def _need(
    facts: ModelFacts, ngl: int, n_ctx: int, type_k: str, type_v: str | None, n_ubatch: int, flash_attn: bool,
    swa_full: bool, overhead_bytes: int, unified: bool, tensor_bytes: Mapping[str, int] | None,
    placement: Placement | None = None, offload_kqv: bool = True, host_repacked_bytes: int = 0,
) -> _Need:
    """Memory one configuration needs on the device and on the host (``placement``: -ot/-ncmoe; ``offload_kqv``
    false: the KV cache in host memory; ``host_repacked_bytes``: the copies weight repacking adds in host memory,
    app.predict.memory.repack)."""
    kv_layers = kv_alloc_bytes_per_layer(facts, n_ctx, type_k, type_v, n_ubatch, swa_full, flash_attn)
    compute = round(compute_buffer_bytes_for(facts, n_ctx, n_ubatch, flash_attn))
    if unified:  # one pool holds everything; a tied embedding is mapped from the file once
        return _Need(facts.weight_bytes + host_repacked_bytes, round(sum(kv_layers)), compute, overhead_bytes,
                     0, 0, 0)
    split = split_weights(facts, ngl, tensor_bytes, placement)
    first = split.first_gpu_layer if offload_kqv else facts.n_layer
    on_gpu = split.n_gpu_layers > 0
    all_on_gpu = split.n_gpu_layers == facts.n_layer + 1
    return _Need(
        weights=split.gpu_bytes, kv=round(sum(kv_layers[first:])),
        compute=compute if on_gpu else 0, overhead=overhead_bytes if on_gpu else 0,
        cpu_weights=split.cpu_bytes + host_repacked_bytes, cpu_kv=round(sum(kv_layers[:first])),
        cpu_compute=0 if all_on_gpu else compute,
    )


def _largest(lo: int, hi: int, ok: Callable[[int], bool]) -> int:
    """Largest x in [lo, hi] with ok(x), for ok monotone decreasing; lo - 1 when none."""
    if hi < lo or not ok(lo):
        return lo - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def fit_check(
    facts: ModelFacts, profile_vram_bytes: int, n_ctx: int, type_k: str = "f16", type_v: str | None = None,
    n_gpu_layers: int = 999, *, n_ubatch: int = DEFAULT_N_UBATCH, flash_attn: bool = False, swa_full: bool = False,
    overhead_bytes: int | None = None, unified: bool = False, usable_fraction: float | None = None,
    host_ram_bytes: int | None = None, tensor_bytes: Mapping[str, int] | None = None,
    placement: Placement | None = None, offload_kqv: bool = True, host_repacked_bytes: int = 0,
    margin_bytes: int = 0,
) -> FitResult:
    """Does (model, n_ctx, cache types, n_gpu_layers) fit in ``profile_vram_bytes``?

    Device need = offloaded weights + their layers' KV cache + compute buffer + ``overhead_bytes`` (default
    DEFAULT_GPU_OVERHEAD_BYTES on a discrete GPU, 0 on unified memory). Unified memory (Apple silicon, or the CPU
    itself) is one pool: everything counts, against ``usable_fraction`` of it (default UNIFIED_USABLE_FRACTION for
    unified, 1.0 otherwise), and offloading fewer layers does not help.
    """
    n_all = facts.n_layer + 1
    ngl = effective_n_gpu_layers(n_gpu_layers, facts.n_layer)
    if overhead_bytes is None:
        overhead_bytes = 0 if unified else DEFAULT_GPU_OVERHEAD_BYTES
    fraction = usable_fraction if usable_fraction is not None else (UNIFIED_USABLE_FRACTION if unified else 1.0)
    margin_bytes = max(int(margin_bytes), 0)
    budget = max(int(profile_vram_bytes * fraction) - margin_bytes, 0)

    def need(layers: int, ctx: int) -> _Need:
        return _need(facts, layers, ctx, type_k, type_v, n_ubatch, flash_attn, swa_full, overhead_bytes, unified,
                     tensor_bytes, placement, offload_kqv, host_repacked_bytes)

    def ram_ok(n: _Need) -> bool:
        return host_ram_bytes is None or n.cpu <= host_ram_bytes

    req = need(ngl, n_ctx)
    device_fits, host_fits = req.device <= budget, ram_ok(req)
    fits = device_fits and host_fits
    short = [] if device_fits else ["memory" if unified else "GPU memory"]
    short += [] if host_fits else ["system RAM"]
    if unified:
        max_ngl = n_all if req.device <= budget else 0
    else:
        max_ngl = _largest(0, n_all, lambda k: need(k, n_ctx).device <= budget)
    ctx_cap = max(facts.n_ctx_train, n_ctx, KV_CELL_PAD)
    max_ctx = KV_CELL_PAD * _largest(
        1, ctx_cap // KV_CELL_PAD, lambda k: need(ngl, k * KV_CELL_PAD).device <= budget
    )
    max_ctx = max(max_ctx, 0)

    if unified:
        status = "fits" if fits else "does_not_fit"
    elif fits:
        status = "fits" if ngl == n_all else "partial"
    elif max_ngl >= 1 and ram_ok(need(max_ngl, n_ctx)):
        status = "partial"
    else:
        status = "does_not_fit"
    return FitResult(
        status=status, fits=fits, n_gpu_layers=ngl, max_ngl=max_ngl, max_ctx=max_ctx, budget_bytes=budget,
        needed_bytes=req.device, weight_bytes=req.weights, kv_bytes=req.kv, compute_buffer_bytes=req.compute,
        overhead_bytes=req.overhead, cpu_weight_bytes=req.cpu_weights, cpu_kv_bytes=req.cpu_kv,
        cpu_needed_bytes=req.cpu, host_budget_bytes=host_ram_bytes, device_fits=device_fits, host_fits=host_fits,
        ran_out=" and ".join(short), margin_bytes=margin_bytes,
    )
