"""What one test asks of the machine, per token: the regressors of the fitted time models
(app.predict.machine_fit.fitted_model
describes the form), from weight bytes and FLOPs per ggml type, the model's shape and the test's settings."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from app.predict.cpu_kernels import KV_PAD_CELLS

#: ggml weight type -> kernel class. One table: types whose kernels differ get different classes.
KERNEL_CLASS: dict[str, str] = {
    **{t: "q_legacy" for t in ("Q4_0", "Q4_1", "Q5_0", "Q5_1", "IQ4_NL", "IQ4_XS")},
    "Q8_0": "q8_0",
    **{t: "k_quant" for t in ("Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K", "TQ1_0", "TQ2_0",
                             "IQ1_S", "IQ1_M", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S")},
    "F16": "f16",
    "BF16": "bf16",
    "F32": "f32",
}
#: A class with less than this share of the weight bytes is counted in the largest class (norms, biases).
MINOR_SHARE = 0.02

Phase = Literal["decode", "prefill"]
PHASES: tuple[Phase, Phase] = ("decode", "prefill")


def kernel_class(ggml_type: str) -> str:
    """The kernel class of a ggml type name ("Q4_K" -> "k_quant"); unknown types are their own class."""
    return KERNEL_CLASS.get(ggml_type.upper(), ggml_type.lower())


@dataclass(frozen=True)
class Workload:
    """What one test asks of the machine, per token, reduced to the quantities the fitted model uses."""

    class_bytes: Mapping[str, float]  # weight bytes read per generated token, by kernel class
    class_flops: Mapping[str, float]  # matmul FLOPs per prompt token, by kernel class
    n_layer: int
    kv_bytes_read: float  # KV bytes one generated token reads at the generation's average depth
    attn_work: float  # (depth + n_prompt / 2) × n_layer × n_embd_attn, per prompt token
    flash_attn: bool
    n_prompt: int
    n_ubatch: int = 512
    decode_attn_work: float = 0.0  # decode depth × n_layer × n_embd_attn, per generated token
    attn_spill_work: float = 0.0  # the part of attn_work whose KV span does not fit in a core's L2 (fa on)
    decode_attn_split_work: float = 0.0  # the CPU's split-KV path's attention, over its padded view (fa on)
    decode_split_share: float = 0.0  # the share of generated tokens on that path
    decode_attn_split_used_work: float = 0.0  # the part of decode_attn_work those tokens' used cells make
    width_work: float = 0.0  # n_layer × (n_embd + n_ff) per prompt token (0: unknown, no width term)
    #: the share of the weight bytes a token reads from the last-level cache, not memory (:func:`llc_share`)
    llc_share: float = 0.0
    decode_expert_matmuls: float = 0.0  # routed experts' matmuls per generated token (n_moe_layer × 3 × n_used)
    prefill_expert_flops: float = 0.0  # the routed experts' share of class_flops (llama.cpp's mul_mat_id)

    def features(self, phase: Phase) -> dict[str, float]:
        """The fitted model's regressors for ``phase`` (name -> value); zero entries left out."""
        fa = "fa" if self.flash_attn else "nofa"
        if phase == "decode":
            memory = 1.0 - self.llc_share
            feats = {f"bytes:{k}": v * memory for k, v in self.class_bytes.items()}
            feats["bytes_llc"] = sum(self.class_bytes.values()) * self.llc_share
            feats.update({f"kv:{fa}": self.kv_bytes_read, "layer": float(self.n_layer), "fixed": 1.0,
                          "experts": self.decode_expert_matmuls})
            if self.flash_attn:
                feats["attn:fa"] = self.decode_attn_work - self.decode_attn_split_used_work
                feats["attn_view:fa"] = self.decode_attn_split_work
                feats["split:fa"] = self.decode_split_share * self.n_layer
        else:
            ubatches = math.ceil(self.n_prompt / max(self.n_ubatch, 1))
            feats = {f"flops:{k}": v for k, v in self.class_flops.items()}
            feats.update({f"attn:{fa}": self.attn_work, "layer": float(self.n_layer),
                          "layer_ubatch": self.n_layer * ubatches / max(self.n_prompt, 1),
                          "experts": self.prefill_expert_flops})
            total_flops = sum(self.class_flops.values())
            if self.width_work and total_flops > 0:  # each class's share, by its share of the matmul work
                feats.update({f"width:{k}": self.width_work * v / total_flops for k, v in self.class_flops.items()})
            if self.flash_attn:
                feats["attn_spill:fa"] = self.attn_spill_work
        return {k: float(v) for k, v in feats.items() if v}


def _merge_minor(by_class: dict[str, float]) -> dict[str, float]:
    total = sum(by_class.values())
    if not by_class or total <= 0:
        return by_class
    major = max(by_class, key=lambda k: by_class[k])
    out: dict[str, float] = {}
    for k, v in by_class.items():
        key = k if v >= MINOR_SHARE * total else major
        out[key] = out.get(key, 0.0) + v
    return out


def workload_for(
    type_bytes: Mapping[str, float], type_params: Mapping[str, float], *, n_layer: int, n_embd_attn: int,
    kv_bytes_per_token: float, n_prompt: int, n_gen: int, depth: int = 0, flash_attn: bool = True,
    n_ubatch: int = 512, classify: Callable[[str], str] = kernel_class, kv_head_bytes_per_token: float = 0.0,
    cache_bytes: int = 0, split_kv_cells: int = 0, width_per_layer: float = 0.0, llc_share: float = 0.0,
    decode_expert_matmuls: float = 0.0, prefill_expert_flops: float = 0.0,
) -> Workload:
    """A ``Workload`` from weight bytes and matmul parameters per ggml type (the tensors a token really reads:
    without an untied embedding table) and the model's shape; ``classify`` names each type's kernel class.

    Decode reads the KV cache at the generation's average depth, depth + n_prompt + n_gen / 2; prefill attends
    depth + n_prompt / 2 keys on average and walks a span of depth + n_prompt keys of ``kv_head_bytes_per_token``
    (K and V of one KV head) each; the part of that span beyond ``cache_bytes`` (a core's L2) spills. With
    ``split_kv_cells`` (the CPU's), the attention of the generated tokens on the split-KV path is its own term.
    ``width_per_layer`` (n_embd + n_ff; 0: none) gives prefill's width term. ``llc_share`` (:func:`llc_share`) and the
    routed experts' matmuls per generated token and FLOPs per prompt token (a mixture of experts) pass through to
    the workload.
    """
    class_bytes: dict[str, float] = {}
    class_flops: dict[str, float] = {}
    for t, b in type_bytes.items():
        class_bytes[classify(t)] = class_bytes.get(classify(t), 0.0) + float(b)
    for t, p in type_params.items():
        class_flops[classify(t)] = class_flops.get(classify(t), 0.0) + 2.0 * float(p)
    decode_depth = depth + n_prompt + n_gen / 2.0
    attn_work = (depth + n_prompt / 2.0) * n_layer * n_embd_attn
    span_bytes = (depth + n_prompt) * kv_head_bytes_per_token
    spill = max(0.0, 1.0 - cache_bytes / span_bytes) if cache_bytes > 0 and span_bytes > 0 else 0.0
    return Workload(
        class_bytes=_merge_minor(class_bytes), class_flops=_merge_minor(class_flops), n_layer=n_layer,
        kv_bytes_read=kv_bytes_per_token * decode_depth, decode_attn_work=decode_depth * n_layer * n_embd_attn,
        attn_work=attn_work, flash_attn=flash_attn, n_prompt=n_prompt, n_ubatch=n_ubatch,
        attn_spill_work=attn_work * spill, width_work=n_layer * width_per_layer, llc_share=llc_share,
        decode_expert_matmuls=decode_expert_matmuls, prefill_expert_flops=prefill_expert_flops,
        **_split_kv_decode(depth + n_prompt, n_gen, split_kv_cells, n_layer * n_embd_attn),
    )


def llc_share(working_set_bytes: float, llc_bytes: int) -> float:
    """The share of a decoded token's weight reads the last-level cache serves: every token reads the same weights
    (a mixture of experts, over a few tokens, all its experts), so a working set well inside the cache stays there
    and one larger than the cache streams from memory (a cyclic sweep evicts what the next token needs first).
    1 up to half the cache (the rest holds the KV cache, activations and other processes' lines), 0 from the whole
    cache on, linear between; 0 when the size is unknown. Small calibration models (11-17 MB against a 32 MB L3
    here) ran 20-25 % faster per byte than models that stream; without the term the fit read that as a cheaper byte
    and a smaller per-layer cost, and predicted models of other shapes off (issue #41 item 7)."""
    if llc_bytes <= 0 or working_set_bytes <= 0:
        return 0.0
    return min(1.0, max(0.0, (llc_bytes - working_set_bytes) / (llc_bytes / 2.0)))


def _split_kv_decode(first_pos: int, n_gen: int, split_kv_cells: int, work_per_cell: float) -> dict[str, float]:
    """The decode attention work (per generated token, on average) and share of tokens on the split-KV path, for
    tokens at positions ``first_pos`` .. ``first_pos + n_gen - 1``. A token at position p has p + 1 cells in the
    cache, a view of those rounded up to ``KV_PAD_CELLS``, and splits when the view reaches ``split_kv_cells``.
    The split path hands each thread an equal span of the *view*; the cells past the used ones are masked and
    skipped, so the last thread idles and the first one's span, view ÷ threads, sets the time: its work counts the
    view's cells (counted by used cells, shallow points, whose views are up to twice their cells, needed a large
    per-layer split cost and deep decode came out slow). The same tokens' used cells are
    ``decode_attn_split_used_work``, the part of ``decode_attn_work`` the term replaces."""
    if not split_kv_cells or n_gen <= 0:
        return {}
    start = max(first_pos, split_kv_cells - KV_PAD_CELLS)
    end = first_pos + n_gen
    n_split = max(0, end - start)
    used = n_split * (start + (n_split - 1) / 2.0 + 0.5)
    view = 0.0
    pos = start
    while pos < end:  # block by block of the padding: every token in one block has the same view
        block_end = min(end, (pos // KV_PAD_CELLS + 1) * KV_PAD_CELLS)
        view += (block_end - pos) * (pos // KV_PAD_CELLS + 1) * KV_PAD_CELLS
        pos = block_end
    return {"decode_attn_split_work": view * work_per_cell / n_gen, "decode_split_share": n_split / n_gen,
            "decode_attn_split_used_work": used * work_per_cell / n_gen}
