"""A models folder as a laptop user has one: header-only GGUFs of the models people download, in the quantizations
they download, at their true sizes (issue #51's folder). Never to be run: for the chooser, ``predict`` and the
window's screenshots.

The files: Llama-3.1-8B in Q4_K_M and Q8_0, Qwen3-8B, Qwen3-30B-A3B, gpt-oss-20b (MXFP4 experts), granite-4.0-h-tiny
(a hybrid Mamba-2/attention MoE), Mamba-2 2.7B, Qwen2.5-14B and Gemma-3-12B, each Q4_K_M but gpt-oss. A Q4_K_M file
follows llama.cpp's mix (src/llama-quant.cpp, ``use_more_bits``): Q6_K for ``attn_v`` and ``ffn_down`` in the first
and last eighth of the layers and every third layer between, Q6_K for the output matrix, Q4_K elsewhere; so its bits
per weight are a published Q4_K_M file's (4.89 for Llama-3.1-8B), not a pure Q4_K's.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import gguf

from tests.arch_ggufs import (
    _GRANITE_H_ATTN,
    ArchModel,
    Tensors,
    _attn_keys,
    _Builder,
    _dense,
    by_label,
    write_header_only_gguf,
)

_LAYER = re.compile(r"^blk\.(\d+)\.")


def _use_more_bits(i: int, n: int) -> bool:
    """llama.cpp's rule for which layers of a _M mix keep more bits (src/llama-quant.cpp)."""
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def q4_k_m_mix(tensors: Tensors, n_layer: int) -> Tensors:
    """``tensors`` (every matrix Q4_K) in llama.cpp's Q4_K_M mix: Q6_K for ``attn_v``/``ffn_down`` (and their fused
    or expert forms) in the layers :func:`_use_more_bits` picks."""
    out: Tensors = {}
    for name, (kind, ne) in tensors.items():
        m = _LAYER.match(name)
        more = m is not None and _use_more_bits(int(m.group(1)), n_layer)
        wide = name.endswith(("attn_v.weight", "ffn_down.weight", "ffn_down_exps.weight", "ffn_down_shexp.weight"))
        if kind == "Q4_K" and more and wide and ne[0] % 256 == 0:
            kind = "Q6_K"
        out[name] = (kind, ne)
    return out


def _granite_h_tiny(b: _Builder) -> None:
    """granite-4.0-h-tiny's shape (7B, about 1B active; ibm-granite/granite-4.0-h-tiny's model card and config):
    40 layers, attention in 4 (5, 15, 25, 35) and Mamba-2 elsewhere, 64 experts of which 6 are used, a shared
    expert; the sizes are the config's as published and approximate where the card does not give them."""
    E, H, KV, D, V, n_exp, Fe, shared = 1536, 12, 4, 128, 100352, 64, 512, 1024
    b.embd(E, V, output=False)
    for i in range(40):
        if i in _GRANITE_H_ATTN:
            b.attn(i, E, H, KV, D)
        else:
            b.mamba2(i, E, 2 * E, 128, 1, 48)
        b.moe(i, E, Fe, n_exp, shared_F=shared)


GRANITE_H_TINY = ArchModel(
    "granite-4.0-h-tiny", "granitehybrid", "hybrid: Mamba-2 and 4 attention layers, MoE (64 experts, 6 used)",
    _attn_keys(40, 1536, 12, [4 if i in _GRANITE_H_ATTN else 0 for i in range(40)], 512, 100352, 131072, Dk=128,
               expert_count=64, expert_used_count=6, expert_feed_forward_length=512,
               expert_shared_feed_forward_length=1024, ssm__conv_kernel=4, ssm__inner_size=3072,
               ssm__state_size=128, ssm__time_step_rank=48, ssm__group_count=1), _granite_h_tiny)

QWEN25_14B = ArchModel("qwen2.5-14b", "qwen2", "dense, QKV biases",
                       _attn_keys(48, 5120, 40, 8, 13824, 152064, 32768),
                       _dense(48, 5120, 40, 8, 13824, 152064, bias=True))

#: (file name, model, matrix type, GGUF file type, display name in the header)
LAPTOP_FILES: tuple[tuple[str, ArchModel, str, gguf.LlamaFileType, str], ...] = (
    ("Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf", by_label("llama-3.1-8b"), "Q4_K_M",
     gguf.LlamaFileType.MOSTLY_Q4_K_M, "Meta Llama 3.1 8B Instruct"),
    ("Meta-Llama-3.1-8B-Instruct-Q8_0.gguf", by_label("llama-3.1-8b"), "Q8_0",
     gguf.LlamaFileType.MOSTLY_Q8_0, "Meta Llama 3.1 8B Instruct"),
    ("Qwen3-8B-Q4_K_M.gguf", by_label("qwen3-8b"), "Q4_K_M", gguf.LlamaFileType.MOSTLY_Q4_K_M, "Qwen3 8B"),
    ("Qwen3-30B-A3B-Q4_K_M.gguf", by_label("qwen3-30b-a3b"), "Q4_K_M", gguf.LlamaFileType.MOSTLY_Q4_K_M,
     "Qwen3 30B A3B"),
    ("gpt-oss-20b-MXFP4.gguf", by_label("gpt-oss-20b"), "Q8_0", gguf.LlamaFileType.MOSTLY_MXFP4_MOE, "gpt-oss-20b"),
    ("granite-4.0-h-tiny-Q4_K_M.gguf", GRANITE_H_TINY, "Q4_K_M", gguf.LlamaFileType.MOSTLY_Q4_K_M,
     "Granite 4.0 H Tiny"),
    ("mamba2-2.7b-Q4_K_M.gguf", by_label("mamba2-2.7b"), "Q4_K_M", gguf.LlamaFileType.MOSTLY_Q4_K_M, "Mamba-2 2.7B"),
    ("Qwen2.5-14B-Instruct-Q4_K_M.gguf", QWEN25_14B, "Q4_K_M", gguf.LlamaFileType.MOSTLY_Q4_K_M,
     "Qwen2.5 14B Instruct"),
    ("gemma-3-12b-it-Q4_K_M.gguf", by_label("gemma-3-12b"), "Q4_K_M", gguf.LlamaFileType.MOSTLY_Q4_K_M,
     "Gemma 3 12B IT"),
)


def write_model(folder: str | Path, filename: str, model: ArchModel, quant: str, file_type: gguf.LlamaFileType,
                name: str) -> Path:
    """One header-only file of ``model`` in ``quant`` ("Q4_K_M": llama.cpp's mix; else one matrix type)."""
    n_layer = int(model.keys.get("block_count", 0))  # type: ignore[call-overload]
    if quant == "Q4_K_M":
        tensors = q4_k_m_mix(replace(model, matrix="Q4_K").tensors(), n_layer)
    else:
        tensors = replace(model, matrix=quant).tensors()
    return write_header_only_gguf(Path(folder) / filename, model.arch, model.keys, tensors, name=name,
                                  file_type=int(file_type))


def write_laptop_folder(folder: str | Path) -> list[Path]:
    """Every file of :data:`LAPTOP_FILES` written into ``folder``; a few KB of disk each (sparse)."""
    Path(folder).mkdir(parents=True, exist_ok=True)
    return [write_model(folder, *spec) for spec in LAPTOP_FILES]
