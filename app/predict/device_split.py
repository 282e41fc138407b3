"""The predicted split of a loaded model and its context between one GPU device and the host, per kind of buffer.

Pure functions of (model facts, settings); bytes are bytes. Weights follow llama.cpp's layer placement
(ceilings/offload.py), the KV cache each layer's device (memory/buffers.py). The compute buffers follow the
scheduler's graph split (``ggml_backend_sched``, src/llama-context.cpp ``graph_reserve``), see :func:`compute_split`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from app.model.facts import ModelFacts
from app.predict.ceilings.offload import Placement, effective_n_gpu_layers, split_weights
from app.predict.memory.buffers import (
    DEFAULT_N_UBATCH,
    KV_CELL_PAD,
    compute_buffer_bytes_for,
    compute_stages,
    graph_inputs_bytes,
    kv_alloc_bytes_split,
    moe_ff_per_token,
)
from app.results.row_types import ResultRow

if TYPE_CHECKING:
    from app.predict.settings import PredictSettings

MIB = 2**20


@dataclass(frozen=True)
class DeviceSplit:
    """Bytes predicted on the GPU device and on the host for one (model, placement, context)."""

    n_gpu_layers: int  # effective: 0 .. n_layer + 1
    gpu_weights_bytes: float
    cpu_weights_bytes: float
    gpu_kv_bytes: float
    cpu_kv_bytes: float
    gpu_compute_bytes: float
    cpu_compute_bytes: float
    #: the host's weight buffer as llama.cpp logs it (a row's device_buffers) with mmap: the file span from its first
    #: to its last host tensor (offload.WeightSplit.cpu_mapped_bytes); cpu_weights_bytes counts the tensors alone
    cpu_mapped_weights_bytes: float = 0.0

    @property
    def gpu_total_bytes(self) -> float:
        return self.gpu_weights_bytes + self.gpu_kv_bytes + self.gpu_compute_bytes


@dataclass(frozen=True)
class SplitSettings:
    """What the split depends on besides the model: the context and the offload settings."""

    n_ctx: int
    n_gpu_layers: int
    type_k: str = "f16"
    type_v: str | None = None
    n_ubatch: int = DEFAULT_N_UBATCH
    flash_attn: bool = False
    op_offload: bool = True
    n_cpu_moe: int = 0  # -ncmoe: a layer count, -1 all, -2 half
    no_kv_offload: bool = False  # -nkvo 1: the KV cache in host memory
    tensor_buft_overrides: str = "none"  # -ot's canonical text: PATTERN=BUFT;...

    def placement(self, n_layer: int) -> Placement:
        return Placement.from_text(self.n_cpu_moe, n_layer, self.tensor_buft_overrides)


def largest_host_weight_on_gpu_layers(facts: ModelFacts, placement: Placement, ngl: int,
                                      tensor_bytes: Mapping[str, int] | None) -> float:
    """The largest tensor an override keeps in host memory although its layer is on the GPU (0: none)."""
    if placement.is_default or not tensor_bytes:
        return 0.0
    first = facts.n_layer - max(ngl - 1, 0)
    sizes = [n for name, n in tensor_bytes.items()
             if name.startswith("blk.") and name.split(".")[1].isdigit() and int(name.split(".")[1]) >= first
             and placement.host_override(name)]
    return float(max(sizes, default=0))


def compute_split(facts: ModelFacts, s: SplitSettings, ngl: int, output_weights_bytes: float,
                  host_weight_bytes: float = 0.0) -> tuple[float, float]:
    """(GPU, host) compute buffer bytes for a build with a GPU device.

    The device that holds the output layer computes the logits, so it gets the whole graph's buffer (memory/buffers.py);
    with op offload (llama.cpp's default) the scheduler also sends host-resident layers' big ops to the GPU, and at
    -ngl 0 the LM head's weights are copied into the GPU's compute buffer. The host then keeps only the graph inputs;
    without op offload it computes its own layers (their largest stage, no logits), or everything at -ngl 0.
    Calibrated on lavapipe with SmolLM2-135M at -ngl 0, 1, 16, 31 and -nopo 0, 1 (tests/gpu_vulkan).
    A weight that an override (-ncmoe, -ot) keeps in host memory on an offloaded layer is copied into the GPU's
    compute buffer for a prompt's ops (op offload): ``host_weight_bytes``, the largest such tensor, is added once
    (the allocator reuses the space layer after layer; the synthetic MoE on lavapipe, tests/gpu_vulkan).
    """
    logits, attention, ffn = compute_stages(s.n_ubatch, s.n_ctx, facts.n_vocab, facts.n_embd,
                                            facts.n_head, facts.n_ff, s.flash_attn,
                                            moe_ff_per_token=moe_ff_per_token(facts),
                                            n_expert_used=facts.n_expert_used, moe_mask=False,
                                            attention=facts.kv_layers > 0)
    full = max(logits, attention, ffn)
    inputs = graph_inputs_bytes(s.n_ubatch, s.n_ctx, facts.n_embd, s.flash_attn)
    host_layers = ngl < facts.n_layer + 1
    if s.op_offload:
        return full + (output_weights_bytes if ngl == 0 else host_weight_bytes), inputs
    if ngl == 0:  # the host runs the whole graph, its inputs (the KQ mask) among its stages
        return 0.0, compute_buffer_bytes_for(facts, s.n_ctx, s.n_ubatch, s.flash_attn)
    return full, inputs + (max(attention, ffn) if host_layers else 0.0)


def device_split(facts: ModelFacts, s: SplitSettings, tensor_bytes: Mapping[str, int] | None = None) -> DeviceSplit:
    """Weights, KV cache and compute buffer on the GPU and on the host (a CPU-only build: pass n_gpu_layers 0)."""
    ngl = effective_n_gpu_layers(s.n_gpu_layers, facts.n_layer)
    placement = s.placement(facts.n_layer)
    weights = split_weights(facts, ngl, tensor_bytes, placement)
    kv_gpu, kv_cpu = kv_alloc_bytes_split(facts, ngl, s.n_ctx, s.type_k, s.type_v, s.n_ubatch,
                                          offload_kqv=not s.no_kv_offload, flash_attn=s.flash_attn)
    gpu_compute, cpu_compute = compute_split(facts, s, ngl, split_weights(facts, 1, tensor_bytes).gpu_bytes,
                                             largest_host_weight_on_gpu_layers(facts, placement, ngl, tensor_bytes))
    return DeviceSplit(ngl, weights.gpu_bytes, weights.cpu_bytes, kv_gpu, kv_cpu, gpu_compute, cpu_compute,
                       weights.cpu_mapped_bytes)


def host_only_split(facts: ModelFacts, s: SplitSettings, tensor_bytes: Mapping[str, int] | None = None,
                    repacked_bytes: float = 0.0) -> DeviceSplit:
    """A build without a GPU device (or -dev none): every buffer in host memory, one compute buffer for the graph;
    ``repacked_bytes``, the copies weight repacking makes (app.predict.memory.repack), beside the mapped file."""
    kv = sum(kv_alloc_bytes_split(facts, 0, s.n_ctx, s.type_k, s.type_v, s.n_ubatch, flash_attn=s.flash_attn))
    compute = compute_buffer_bytes_for(facts, s.n_ctx, s.n_ubatch, s.flash_attn)
    weights = float(facts.weight_bytes) + repacked_bytes
    return DeviceSplit(0, 0.0, weights, 0.0, kv, 0.0, compute, weights)


def largest_ctx_on_gpu(facts: ModelFacts, limit_bytes: float, s: SplitSettings,
                       tensor_bytes: Mapping[str, int] | None = None, max_ctx: int = 1 << 24) -> int:
    """The largest context (a multiple of 256, llama.cpp's padding) whose GPU share fits ``limit_bytes``; 0: none."""
    def fits(n_ctx: int) -> bool:
        return device_split(facts, _with_ctx(s, n_ctx), tensor_bytes).gpu_total_bytes <= limit_bytes

    lo, hi = 0, max_ctx // KV_CELL_PAD  # in units of 256 cells: fits(lo) holds (or lo == 0), fits(hi + 1) does not
    if not fits(KV_CELL_PAD):
        return 0
    lo = 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid * KV_CELL_PAD):
            lo = mid
        else:
            hi = mid - 1
    return lo * KV_CELL_PAD


def _with_ctx(s: SplitSettings, n_ctx: int) -> SplitSettings:
    return replace(s, n_ctx=n_ctx)


def _has_gpu_device(row: ResultRow) -> bool:
    """Whether the row ran with a GPU device present: layers offloaded, or llama.cpp gave a non-host device buffers."""
    if row.n_gpu_layers_effective:
        return True
    try:
        devices = json.loads(row.device_buffers or "{}")
    except (TypeError, ValueError):
        return False
    return any(name != "CPU" for name in devices)


def device_split_columns(row: ResultRow, facts: ModelFacts, settings: PredictSettings) -> dict[str, Any]:
    """A row's pred_gpu_*_bytes at the -ngl llama.cpp used (0 without a GPU device), and pred_device_max_ctx: the
    largest context predicted to fit its device_mem_limit_mib (empty without a limit or with nothing offloaded)."""
    s = SplitSettings(settings.n_ctx, row.n_gpu_layers_effective or 0, settings.type_k, settings.type_v,
                      settings.n_ubatch, settings.flash_attn, op_offload=not row.no_op_offload,
                      n_cpu_moe=settings.n_cpu_moe, no_kv_offload=settings.no_kv_offload,
                      tensor_buft_overrides=settings.tensor_buft_overrides)
    tensor_bytes = facts.tensor_bytes or None
    split = device_split(facts, s, tensor_bytes) if _has_gpu_device(row) else None
    limit_mib = row.device_mem_limit_mib or 0
    max_ctx = largest_ctx_on_gpu(facts, limit_mib * MIB, s, tensor_bytes) if limit_mib and s.n_gpu_layers else None
    return {"pred_gpu_weights_bytes": round(split.gpu_weights_bytes) if split else 0,
            "pred_gpu_kv_bytes": round(split.gpu_kv_bytes) if split else 0,
            "pred_gpu_compute_bytes": round(split.gpu_compute_bytes) if split else 0,
            "pred_device_max_ctx": max_ctx}
