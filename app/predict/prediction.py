"""The physics of one prediction: ceilings, memory and fit for (model facts, hardware profile, settings).

``predict`` puts the decode, prefill, memory, fit and scenario modules together: what the hardware allows, never
what it is expected to reach (that is :func:`app.predict.answer.answer`, over this). Pure functions; no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from app.model.facts import ModelFacts
from app.predict.ceilings.decode import DEFAULT_CPU_BANDWIDTH_GBPS, decode_bytes, decode_ceiling_offload_tps
from app.predict.ceilings.offload import WeightSplit
from app.predict.ceilings.op_offload import offload_traffic, offloaded_tokens, pcie_link, transfer_seconds
from app.predict.ceilings.prefill import matmul_params, prefill_ceiling_tps, prefill_compute_note, prefill_tflops
from app.predict.device_split import DeviceSplit, SplitSettings, device_split, host_only_split
from app.predict.memory.buffers import compute_buffer_bytes_for, kv_alloc_bytes
from app.predict.memory.fit import FitResult, fit_check
from app.predict.memory.repack import RepackedWeights, repacked_weights
from app.predict.profiles import HardwareProfile
from app.predict.scenario import Scenario, scenario_time
from app.predict.settings import PredictSettings, placed_weights


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
    kv_bytes: int  # allocated at n_ctx: the KV cache and the recurrent state (llama.cpp's context memory)
    kv_bytes_per_token: float
    compute_buffer_bytes: int
    decode_ceiling_tps: float  # at the average depth of the generation (n_prompt + n_gen / 2)
    decode_ceiling_empty_tps: float  # from an empty cache, as llama-bench's tg128 reads it (depth 64 on average)
    prefill_ceiling_tps: float  # for an n_prompt-token prompt from an empty cache
    gpu_bandwidth_gbps: float
    cpu_bandwidth_gbps: float | None
    tflops: float
    fit: FitResult
    scenario: Scenario
    notes: tuple[str, ...] = field(default_factory=tuple)
    #: weights, KV cache and compute buffer per device (llama.cpp's device_buffers): "gpu" the device, "host" RAM
    device_memory: DeviceSplit | None = None
    n_cpu_moe: int = 0  # resolved layer count
    no_kv_offload: bool = False
    tensor_buft_overrides: str = "none"
    decode_gpu_read_bytes: float = 0.0  # bytes one token reads at the generation's average depth, per side
    decode_host_read_bytes: float = 0.0
    decode_extra_crossings: int = 0  # device crossings per token beyond the input's first (ceilings/decode.py)
    depth: int = 0  # tokens in the KV cache before the prompt (llama-bench -d)
    #: host memory weight repacking adds beside the mapped file (this machine's CPU, repack 1): llama.cpp's extra
    #: buffer types' copies (app.predict.memory.repack); counted in cpu_weight_bytes, the fit and the host's buffers
    repacked_weight_bytes: int = 0
    repack: int = 1  # the weight repacking the prediction is for (llama-bench --repack: 1 on, 0 off)
    #: the placement splits the model between the device and the host (partial -ngl, -ncmoe, -ot, -nkvo)
    split: bool = False
    #: of kv_bytes, the recurrent state (Mamba, RWKV, a hybrid's recurrent layers): the same at any context
    state_bytes: int = 0
    #: llama.cpp's op offload (-nopo 0): a prompt's micro-batch moves host-held weights to the GPU
    op_offload: bool = True
    #: bytes one full micro-batch of the prompt moves to the GPU with op offload (0: nothing, or -nopo 1)
    prefill_offload_bytes: float = 0.0

    @property
    def decode_depth(self) -> float:
        """The KV depth ``decode_ceiling_tps`` is for: the prompt and half the generated tokens."""
        return self.n_prompt + self.n_gen / 2.0 + self.depth

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
    def ttft_ms(self) -> float:
        return self.scenario.ttft_s * 1000.0

    def to_json_dict(self) -> dict[str, object]:
        """Flat headline keys plus the nested fit and scenario documents."""
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
            "fit": self.fit.to_json_dict(), "scenario": self.scenario.to_json_dict(), "notes": list(self.notes),
            "n_cpu_moe": self.n_cpu_moe, "no_kv_offload": int(self.no_kv_offload),
            "tensor_buft_overrides": self.tensor_buft_overrides, "memory_per_device": self.memory_per_device(),
            "decode_gpu_read_bytes": self.decode_gpu_read_bytes, "decode_host_read_bytes": self.decode_host_read_bytes,
            "decode_extra_crossings": self.decode_extra_crossings,
            "repacked_weight_bytes": self.repacked_weight_bytes, "repack": self.repack, "split": self.split,
            "state_bytes": self.state_bytes, "no_op_offload": int(not self.op_offload),
            "prefill_offload_bytes": self.prefill_offload_bytes,
        }


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
        facts.kv_layers, n_embd_attn, s.depth, n_swa, facts.swa_window,  # attention: the layers with a KV cache
    )


def _prefill_with_link(facts: ModelFacts, profile: HardwareProfile, split: WeightSplit, s: PredictSettings,
                       prefill_tps: float, offload_kqv: bool, notes: list[str]) -> tuple[float, float]:
    """(the prefill ceiling of a split placement, the bytes a full micro-batch moves): with op offload each
    micro-batch moves the host-held weights over the GPU's PCIe link (app/predict/ceilings/op_offload.py), counted
    here at the link's full rate where the profile gives the link; -nopo 1 or an unknown link: compute only."""
    if s.no_op_offload:
        notes.append("-nopo 1: host-held weights' ops run on the CPU; the prefill ceiling takes the GPU's compute for "
                     "every layer (a bound, not the CPU's rate)")
        return prefill_tps, 0.0
    traffic = offload_traffic(facts, split, s.type_k, s.type_v or s.type_k, kv_on_gpu=offload_kqv)
    ub = min(max(s.n_ubatch, 1), max(s.n_prompt, 1))
    moved = traffic.bytes_for(ub, s.depth + ub)
    link = pcie_link(profile)
    if not traffic.moves_anything or not s.n_prompt or not offloaded_tokens(s.n_prompt, s.n_ubatch):
        return prefill_tps, moved if traffic.moves_anything else 0.0
    if link.assumed:
        notes.append("partial offload: prefill ceiling ignores copying host-held weights to the GPU (the profile "
                     "gives no PCIe link)")
        return prefill_tps, moved
    least = transfer_seconds(traffic, s.n_prompt, s.n_ubatch, s.depth, link.raw_gbps, least=True)
    seconds = s.n_prompt / prefill_tps + least
    notes.append(f"partial offload: prefill ceiling counts each micro-batch of up to {s.n_ubatch} tokens moving at "
                 f"least {traffic.bytes_for(ub, s.depth + ub, least=True) / 1e9:,.2f} GB of host-held weights over "
                 f"{link.describe()} at the link's full rate")
    return s.n_prompt / seconds, moved


def host_repacked(facts: ModelFacts, profile: HardwareProfile, s: PredictSettings) -> RepackedWeights | None:
    """What weight repacking adds in host memory for a run of ``s`` on this machine's CPU (None: repacking off, a
    profile that is not this CPU, or a file read without its tensor table)."""
    if profile.kind != "cpu" or s.repack != 1 or not profile.repack_buffers or not facts.tensor_shapes:
        return None
    return repacked_weights(facts.tensor_shapes, facts.tensor_bytes, profile.repack_buffers, profile.cpu_flags)


def predict(
    facts: ModelFacts, profile: HardwareProfile, settings: PredictSettings, *, cpu_bandwidth_gbps: float | None = None,
    tensor_bytes: Mapping[str, int] | None = None, chars_per_token: float = 4.0, host_ram_bytes: int | None = None,
) -> Prediction:
    """Ceilings, memory, fit and an (n_prompt, n_gen) request's times at the ceilings for ``facts`` on ``profile``.

    Decode: weights read per token (split GPU/CPU by ``n_gpu_layers``) plus KV read at the generation's average depth,
    each side at its bandwidth (``decode_ceiling_split_tps``). The CPU side uses ``cpu_bandwidth_gbps``: for unified
    memory the profile's bandwidth when not given, for a discrete GPU DEFAULT_CPU_BANDWIDTH_GBPS with a note.
    Prefill: the profile's TFLOPS over ``prefill_flops_per_token`` with the matmul parameters; with a partial offload
    llama.cpp still runs large-batch matmuls on the GPU, copying CPU-held weights over PCIe, which is not counted.
    A profile of kind "cpu" runs everything on the host (n_gpu_layers is ignored).
    ``settings.depth`` tokens already in the KV cache (llama-bench ``-d``) add to the KV read and the attention work.
    ``settings.repack`` auto (-1) is taken as llama.cpp's default, 1: a machine's own default is the answer's to
    resolve (:meth:`PredictSettings.resolved`). ``host_ram_bytes``: the system RAM the host side may use (a CPU's
    whole budget; a discrete GPU's host share is checked against it; None: not checked).
    """
    s = settings.resolved(1)
    type_k, type_v = s.type_k, s.type_v or s.type_k
    notes: list[str] = []
    is_cpu = profile.kind == "cpu"
    if facts.extra.get("memory_rule_known") is False:  # one line, never a refusal (app.model.arch_memory)
        notes.append(f"memory: architecture '{facts.architecture}' is not one this workbench knows "
                     f"({facts.extra.get('memory_rule', 'counted as plain attention')}); where the installed llama.cpp "
                     "loads it, its dry run (--dry-run) gives the memory")
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
                     f"ceiling takes each as 4 × n_embd bytes over PCIe (assumed 16 GB/s) + 10 µs")
    prefill_tps = _prefill_tps(facts, profile, split, s, tensor_bytes)
    # which CPU figure, and its source
    notes += [n for n in (prefill_compute_note(profile, facts.file_type, s.repack),) if n]
    offload_bytes = 0.0
    if not is_cpu and (split.n_gpu_layers < facts.n_layer + 1 or split.n_tensors_overridden):
        prefill_tps, offload_bytes = _prefill_with_link(facts, profile, split, s, prefill_tps, offload_kqv, notes)
    cpu_share = min(host_ram_bytes / profile.vram_bytes, 1.0) if host_ram_bytes and profile.vram_bytes else 1.0
    fit = fit_check(
        facts, profile.vram_bytes, s.n_ctx, type_k, type_v, ngl, n_ubatch=s.n_ubatch, flash_attn=s.flash_attn,
        swa_full=s.swa_full, unified=profile.is_unified, usable_fraction=cpu_share if is_cpu else None,
        host_ram_bytes=None if profile.is_unified else host_ram_bytes, tensor_bytes=tensor_bytes,
        placement=placement, offload_kqv=offload_kqv, host_repacked_bytes=repacked_bytes,
        margin_bytes=0 if is_cpu or profile.is_unified else s.device_margin_bytes,
    )
    split_settings = SplitSettings(s.n_ctx, ngl, type_k, type_v, s.n_ubatch, s.flash_attn,
                                   op_offload=not s.no_op_offload, n_cpu_moe=placement.n_cpu_moe,
                                   no_kv_offload=not offload_kqv,
                                   tensor_buft_overrides=s.tensor_buft_overrides if not is_cpu else "none")
    memory = (host_only_split(facts, split_settings, tensor_bytes, repacked_bytes) if is_cpu
              else device_split(facts, split_settings, tensor_bytes))
    return Prediction(
        profile=profile.name, model=facts.name, kind=profile.kind, n_ctx=s.n_ctx, n_gpu_layers=ngl, type_k=type_k,
        type_v=type_v, n_prompt=s.n_prompt, n_gen=s.n_gen, weight_bytes=facts.weight_bytes,
        gpu_weight_bytes=0 if is_cpu else split.gpu_bytes,
        cpu_weight_bytes=facts.weight_bytes + repacked_bytes if is_cpu else split.cpu_bytes,
        kv_bytes=round(kv_alloc_bytes(facts, s.n_ctx, type_k, type_v, s.n_ubatch, s.swa_full, s.flash_attn)),
        state_bytes=facts.state_bytes,
        kv_bytes_per_token=facts.kv_bytes_per_token(type_k, type_v),
        compute_buffer_bytes=round(compute_buffer_bytes_for(facts, s.n_ctx, s.n_ubatch, s.flash_attn)),
        decode_ceiling_tps=decode_tps, decode_ceiling_empty_tps=decode_at(s.empty_cache().decode_depth),
        prefill_ceiling_tps=prefill_tps,
        gpu_bandwidth_gbps=0.0 if is_cpu else profile.peak_bandwidth_gbps, cpu_bandwidth_gbps=cpu_bw,
        tflops=prefill_tflops(profile, facts.file_type, s.repack), fit=fit,
        scenario=scenario_time(s.n_prompt, s.n_gen, prefill_tps, decode_tps, chars_per_token),
        notes=tuple(notes), device_memory=memory, n_cpu_moe=placement.n_cpu_moe, no_kv_offload=not offload_kqv,
        tensor_buft_overrides=split_settings.tensor_buft_overrides, decode_gpu_read_bytes=read.gpu_bytes,
        decode_host_read_bytes=read.host_bytes, decode_extra_crossings=read.extra_crossings, depth=s.depth,
        repacked_weight_bytes=repacked_bytes, repack=s.repack, op_offload=not s.no_op_offload,
        prefill_offload_bytes=offload_bytes,
        split=not is_cpu and (ngl < facts.n_layer + 1 or not placement.is_default or not offload_kqv),
    )
