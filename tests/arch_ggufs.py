"""Header-only GGUFs of the architectures people download, with their real shapes, for memory checks.

Each :class:`ArchModel` is one published model's shape (its config's sizes), written the way llama.cpp's
``load_arch_hparams`` and ``load_arch_tensors`` read it (src/models/<arch>.cpp of the llama.cpp vendored by
llama-cpp-python 0.3.36): the keys under the architecture's prefix, every tensor that architecture requires with
the shape it checks, matrices in Q4_K where the row allows it (Q8_0 else, MXFP4 for gpt-oss's experts), norms F32.
The tensor data is a sparse hole of the true size, so a 30 GB model costs a few KB of disk; the tokenizer is
``none`` with ``vocab_size`` (llama.cpp's vocab type NONE adds that many dummy tokens), so llama.cpp loads the
file with ``no_alloc`` and sizes its KV cache, recurrent state and compute buffers as for the real model.
Never to be run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import gguf
import numpy as np

Tensors = dict[str, tuple[str, tuple[int, ...]]]  # name -> (ggml type name, ne: ne0 (the row) first)


def _type(name: str, ne: tuple[int, ...], matrix: str = "Q4_K") -> str:
    if len(ne) == 1 or name.endswith((".bias", "ssm_a", "ssm_d", "ssm_conv1d.weight", "conv.weight")):
        return "F32"
    block, _ = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[matrix]]
    if ne[0] % block == 0:
        return matrix
    return "Q8_0" if ne[0] % 32 == 0 else "F32"


class _Builder:
    """Collects tensors in file order; ``t(name, *ne)`` picks the type from the shape."""

    def __init__(self, matrix: str = "Q4_K") -> None:
        self.tensors: Tensors = {}
        self.matrix = matrix

    def t(self, name: str, *ne: int, kind: str | None = None) -> None:
        self.tensors[name] = (kind or _type(name, ne, self.matrix), tuple(ne))

    def embd(self, E: int, V: int, *, output: bool = True, norm_bias: bool = False) -> None:
        self.t("token_embd.weight", E, V)
        self.t("output_norm.weight", E)
        if norm_bias:
            self.t("output_norm.bias", E)
        if output:
            self.t("output.weight", E, V, kind="Q6_K" if E % 256 == 0 else None)

    def attn(self, i: int, E: int, H: int, KV: int, Dk: int, Dv: int | None = None, *, bias: bool = False,
             qk_norm: bool = False, norm: bool = True, fused: bool = False) -> None:
        Dv = Dv or Dk
        p = f"blk.{i}."
        if norm:
            self.t(p + "attn_norm.weight", E)
        if fused:
            self.t(p + "attn_qkv.weight", E, H * Dk + KV * (Dk + Dv))
        else:
            self.t(p + "attn_q.weight", E, H * Dk)
            self.t(p + "attn_k.weight", E, KV * Dk)
            self.t(p + "attn_v.weight", E, KV * Dv)
        if bias:
            self.t(p + "attn_q.bias", H * Dk)
            self.t(p + "attn_k.bias", KV * Dk)
            self.t(p + "attn_v.bias", KV * Dv)
        self.t(p + "attn_output.weight", H * Dv, E)
        if qk_norm:
            self.t(p + "attn_q_norm.weight", Dk)
            self.t(p + "attn_k_norm.weight", Dk)

    def ffn(self, i: int, E: int, F: int, *, norm: str = "ffn_norm.weight", gate: bool = True) -> None:
        p = f"blk.{i}."
        if norm:
            self.t(p + norm, E)
        if gate:
            self.t(p + "ffn_gate.weight", E, F)
        self.t(p + "ffn_up.weight", E, F)
        self.t(p + "ffn_down.weight", F, E)

    def moe(self, i: int, E: int, Fe: int, n_expert: int, *, shared_F: int = 0, norm: bool = True,
            expert_type: str | None = None) -> None:
        p = f"blk.{i}."
        if norm:
            self.t(p + "ffn_norm.weight", E)
        self.t(p + "ffn_gate_inp.weight", E, n_expert)
        self.t(p + "ffn_gate_exps.weight", E, Fe, n_expert, kind=expert_type)
        self.t(p + "ffn_up_exps.weight", E, Fe, n_expert, kind=expert_type)
        self.t(p + "ffn_down_exps.weight", Fe, E, n_expert, kind=expert_type)
        if shared_F:
            self.t(p + "ffn_gate_shexp.weight", E, shared_F)
            self.t(p + "ffn_up_shexp.weight", E, shared_F)
            self.t(p + "ffn_down_shexp.weight", shared_F, E)

    def mamba2(self, i: int, E: int, d_inner: int, d_state: int, n_group: int, n_head: int, d_conv: int = 4, *,
               conv_bias: bool = True, norm: bool = True) -> None:
        p = f"blk.{i}."
        if norm:
            self.t(p + "attn_norm.weight", E)
        d_conv_ch = d_inner + 2 * n_group * d_state
        self.t(p + "ssm_in.weight", E, 2 * d_inner + 2 * n_group * d_state + n_head)
        self.t(p + "ssm_conv1d.weight", d_conv, d_conv_ch)
        if conv_bias:
            self.t(p + "ssm_conv1d.bias", d_conv_ch)
        self.t(p + "ssm_dt.bias", n_head)
        self.t(p + "ssm_a", 1, n_head)
        self.t(p + "ssm_d", 1, n_head)
        if n_group > 1:
            self.t(p + "ssm_norm.weight", d_inner // n_group, n_group)
        else:
            self.t(p + "ssm_norm.weight", d_inner)
        self.t(p + "ssm_out.weight", d_inner, E)

    def mamba1(self, i: int, E: int, d_inner: int, d_state: int, dt_rank: int, d_conv: int = 4, *,
               bcdt_norm: bool = False) -> None:
        p = f"blk.{i}."
        self.t(p + "attn_norm.weight", E)
        self.t(p + "ssm_in.weight", E, 2 * d_inner)
        self.t(p + "ssm_conv1d.weight", d_conv, d_inner)
        self.t(p + "ssm_conv1d.bias", d_inner)
        self.t(p + "ssm_x.weight", d_inner, dt_rank + 2 * d_state)
        if bcdt_norm:
            self.t(p + "ssm_dt_norm.weight", dt_rank)
        self.t(p + "ssm_dt.weight", dt_rank, d_inner)
        self.t(p + "ssm_dt.bias", d_inner)
        if bcdt_norm:
            self.t(p + "ssm_b_norm.weight", d_state)
            self.t(p + "ssm_c_norm.weight", d_state)
        self.t(p + "ssm_a", d_state, d_inner)
        self.t(p + "ssm_d", d_inner)
        self.t(p + "ssm_out.weight", d_inner, E)


@dataclass(frozen=True)
class ArchModel:
    """One published model's shape as a header-only GGUF: its architecture, keys (without the ``{arch}.`` prefix
    unless they start with ``general.`` or ``tokenizer.``) and tensors; ``kind`` says what it stands for."""

    label: str
    arch: str
    kind: str
    keys: dict[str, object]
    build: Callable[[_Builder], None] = field(repr=False)
    matrix: str = "Q4_K"

    def tensors(self) -> Tensors:
        b = _Builder(self.matrix)
        self.build(b)
        return b.tensors

    def write(self, folder: str | Path) -> Path:
        return write_header_only_gguf(Path(folder) / f"{self.label}.gguf", self.arch, self.keys, self.tensors(),
                                      name=self.label)


def _value(writer: gguf.GGUFWriter, key: str, value: object) -> None:
    if isinstance(value, bool):
        writer.add_key_value(key, value, gguf.GGUFValueType.BOOL)
    elif isinstance(value, int):
        writer.add_key_value(key, value, gguf.GGUFValueType.UINT32)
    elif isinstance(value, float):
        writer.add_key_value(key, value, gguf.GGUFValueType.FLOAT32)
    elif isinstance(value, str):
        writer.add_key_value(key, value, gguf.GGUFValueType.STRING)
    elif isinstance(value, list | tuple):
        values = list(value)
        sub = (gguf.GGUFValueType.STRING if values and all(isinstance(v, str) for v in values) else
               gguf.GGUFValueType.BOOL if all(isinstance(v, bool) for v in values) else
               gguf.GGUFValueType.FLOAT32 if any(isinstance(v, float) for v in values) else gguf.GGUFValueType.INT32)
        writer.add_key_value(key, values, gguf.GGUFValueType.ARRAY, sub_type=sub)
    else:
        raise TypeError(f"{key}: no GGUF type for {value!r}")


def write_header_only_gguf(path: str | Path, arch: str, keys: dict[str, object], tensors: Tensors, *,
                           name: str = "shape", file_type: int = int(gguf.LlamaFileType.MOSTLY_Q4_K_M)) -> Path:
    """A GGUF with ``keys`` (``{arch}.`` added where a key has no ``general.``/``tokenizer.`` prefix) and the
    tensor table of ``tensors``, the data a sparse hole of the right size."""
    path = Path(path)
    writer = gguf.GGUFWriter(path, arch)
    writer.add_name(name)
    writer.add_file_type(file_type)
    writer.add_key_value("general.quantization_version", gguf.GGML_QUANT_VERSION, gguf.GGUFValueType.UINT32)
    for key, value in keys.items():
        _value(writer, key if key.startswith(("general.", "tokenizer.")) else f"{arch}.{key}", value)
    if "tokenizer.ggml.model" not in keys:
        writer.add_key_value("tokenizer.ggml.model", "none", gguf.GGUFValueType.STRING)
    data_bytes = 0
    for tensor_name, (type_name, ne) in tensors.items():
        qtype = gguf.GGMLQuantizationType[type_name]
        block, type_bytes = gguf.GGML_QUANT_SIZES[qtype]
        count = int(np.prod(ne))
        nbytes = count // block * type_bytes
        shape = tuple(reversed(ne))  # numpy order: the row last
        if qtype == gguf.GGMLQuantizationType.F32:
            writer.add_tensor_info(tensor_name, shape, np.dtype(np.float32), nbytes)
        elif qtype == gguf.GGMLQuantizationType.F16:
            writer.add_tensor_info(tensor_name, shape, np.dtype(np.float16), nbytes)
        else:  # the writer takes a quantized tensor's shape in bytes per row
            writer.add_tensor_info(tensor_name, (*shape[:-1], ne[0] // block * type_bytes), np.dtype(np.uint8),
                                   nbytes, raw_dtype=qtype)
        data_bytes += -(-nbytes // 32) * 32
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    writer.close()
    header_bytes = path.stat().st_size
    with path.open("r+b") as f:
        f.truncate(-(-header_bytes // 32) * 32 + data_bytes)
    return path


# --------------------------------------------------------------------------------------------------------------------
# The models (sizes from each model's published config)


def _dense(L: int, E: int, H: int, KV: int, F: int, V: int, Dk: int | None = None, *, bias: bool = False,
           qk_norm: bool = False, output: bool = True, post_norms: bool = False) -> Callable[[_Builder], None]:
    d = Dk or E // H

    def build(b: _Builder) -> None:
        b.embd(E, V, output=output)
        for i in range(L):
            b.attn(i, E, H, KV, d, bias=bias, qk_norm=qk_norm)
            if post_norms:
                b.t(f"blk.{i}.post_attention_norm.weight", E)
            b.ffn(i, E, F)
            if post_norms:
                b.t(f"blk.{i}.post_ffw_norm.weight", E)
    return build


def _attn_keys(L: int, E: int, H: int | list[int], KV: int | list[int], F: int | list[int], V: int, ctx: int,
               Dk: int | None = None, eps: float = 1e-5, **more: object) -> dict[str, object]:
    keys: dict[str, object] = {"block_count": L, "context_length": ctx, "embedding_length": E,
                               "feed_forward_length": F, "attention.head_count": H, "attention.head_count_kv": KV,
                               "attention.layer_norm_rms_epsilon": eps, "vocab_size": V}
    if Dk:
        keys["attention.key_length"] = Dk
        keys["attention.value_length"] = Dk
    keys.update({k.replace("__", "."): v for k, v in more.items()})
    return keys


def _qwen3moe(b: _Builder) -> None:
    E, H, KV, D, n_exp, Fe, V = 2048, 32, 4, 128, 128, 768, 151936
    b.embd(E, V)
    for i in range(48):
        b.attn(i, E, H, KV, D, qk_norm=True)
        b.moe(i, E, Fe, n_exp)


def _gpt_oss(b: _Builder) -> None:
    E, H, KV, D, n_exp, Fe, V = 2880, 64, 8, 64, 32, 2880, 201088
    b.embd(E, V)
    for i in range(24):
        p = f"blk.{i}."
        b.attn(i, E, H, KV, D, bias=True)
        b.t(p + "attn_output.bias", E)
        b.t(p + "attn_sinks.weight", H)
        b.t(p + "post_attention_norm.weight", E)
        b.moe(i, E, Fe, n_exp, norm=False, expert_type="MXFP4")
        b.t(p + "ffn_gate_inp.bias", n_exp)
        for part in ("gate", "up", "down"):
            b.t(p + f"ffn_{part}_exps.bias", Fe if part != "down" else E, n_exp, kind="F32")


def _phi3(b: _Builder) -> None:
    E, H, F, V = 3072, 32, 8192, 32064
    b.embd(E, V, output=True)
    for i in range(32):
        b.attn(i, E, H, H, E // H, fused=True)
        b.t(f"blk.{i}.ffn_norm.weight", E)
        b.t(f"blk.{i}.ffn_up.weight", E, 2 * F)
        b.t(f"blk.{i}.ffn_down.weight", F, E)


def _deepseek2_lite(b: _Builder) -> None:
    E, H, V, kv_lora, rope, k_nope, v_head = 2048, 16, 102400, 512, 64, 128, 128
    b.embd(E, V)
    for i in range(27):
        p = f"blk.{i}."
        b.t(p + "attn_norm.weight", E)
        b.t(p + "attn_q.weight", E, H * (k_nope + rope))
        b.t(p + "attn_kv_a_mqa.weight", E, kv_lora + rope)
        b.t(p + "attn_kv_a_norm.weight", kv_lora)
        b.t(p + "attn_k_b.weight", k_nope, kv_lora, H)
        b.t(p + "attn_v_b.weight", kv_lora, v_head, H)
        b.t(p + "attn_output.weight", H * v_head, E)
        if i < 1:
            b.ffn(i, E, 10944)
        else:
            b.moe(i, E, 1408, 64, shared_F=2 * 1408)


_GRANITE_H_ATTN = (5, 15, 25, 35)


def _granite_h_micro(b: _Builder) -> None:
    E, H, KV, F, V = 2048, 32, 8, 8192, 100352
    b.embd(E, V, output=False)
    for i in range(40):
        if i in _GRANITE_H_ATTN:
            b.attn(i, E, H, KV, E // H)
        else:
            b.mamba2(i, E, 2 * E, 128, 1, 64)
        b.ffn(i, E, F)


def _mamba2(b: _Builder) -> None:
    E, V = 2560, 50288
    b.embd(E, V, output=False)
    for i in range(64):
        b.mamba2(i, E, 2 * E, 128, 1, 80)


def _mamba1(b: _Builder) -> None:
    E, V = 2048, 50280
    b.embd(E, V, output=False)
    for i in range(48):
        b.mamba1(i, E, 2 * E, 16, 128)


def _rwkv7(b: _Builder) -> None:
    E, F, V = 2048, 8192, 65536
    b.t("token_embd.weight", E, V)
    b.t("token_embd_norm.weight", E)
    b.t("token_embd_norm.bias", E)
    b.t("output_norm.weight", E)
    b.t("output_norm.bias", E)
    b.t("output.weight", E, V, kind="Q6_K")
    for i in range(24):
        p = f"blk.{i}."
        for n in ("attn_norm", "attn_norm_2"):
            b.t(p + f"{n}.weight", E)
            b.t(p + f"{n}.bias", E)
        for n, rank in (("w", 96), ("a", 64), ("v", 64), ("g", 256)):
            if n != "g":
                b.t(p + f"time_mix_{n}0.weight", E)
            b.t(p + f"time_mix_{n}1.weight", E, rank)
            b.t(p + f"time_mix_{n}2.weight", rank, E)
        b.t(p + "time_mix_lerp_fused.weight", E, 1, 1, 6, kind="F32")
        for n in ("k_k", "k_a", "r_k"):
            b.t(p + f"time_mix_{n}.weight", E)
        for n in ("key", "value", "receptance", "output"):
            b.t(p + f"time_mix_{n}.weight", E, E)
        b.t(p + "time_mix_ln.weight", E)
        b.t(p + "time_mix_ln.bias", E)
        b.t(p + "channel_mix_lerp_k.weight", E)
        b.t(p + "channel_mix_key.weight", E, F)
        b.t(p + "channel_mix_value.weight", F, E)


_RWKV7_KEYS = {"block_count": 24, "context_length": 1048576, "embedding_length": 2048, "feed_forward_length": 8192,
               "attention.head_count": 0, "wkv.head_size": 64, "attention.decay_lora_rank": 96,
               "attention.iclr_lora_rank": 64, "attention.value_residual_mix_lora_rank": 64,
               "attention.gate_lora_rank": 256, "attention.layer_norm_epsilon": 1e-5, "vocab_size": 65536}
_JAMBA_KV = [2 if i % 8 == 4 else 0 for i in range(16)]


def _jamba(b: _Builder) -> None:
    E, H, F, V = 1024, 8, 4096, 65536
    b.embd(E, V)
    for i in range(16):
        if _JAMBA_KV[i]:
            b.attn(i, E, H, _JAMBA_KV[i], E // H)
        else:
            b.t(f"blk.{i}.attn_norm.weight", E)
            p = f"blk.{i}."
            d_inner, d_state, dt_rank = 2 * E, 16, 64
            b.t(p + "ssm_in.weight", E, 2 * d_inner)
            b.t(p + "ssm_conv1d.weight", 4, d_inner)
            b.t(p + "ssm_conv1d.bias", d_inner)
            b.t(p + "ssm_x.weight", d_inner, dt_rank + 2 * d_state)
            b.t(p + "ssm_dt_norm.weight", dt_rank)
            b.t(p + "ssm_dt.weight", dt_rank, d_inner)
            b.t(p + "ssm_dt.bias", d_inner)
            b.t(p + "ssm_b_norm.weight", d_state)
            b.t(p + "ssm_c_norm.weight", d_state)
            b.t(p + "ssm_a", d_state, d_inner)
            b.t(p + "ssm_d", d_inner)
            b.t(p + "ssm_out.weight", d_inner, E)
        if i % 2 == 1:
            b.moe(i, E, F, 16)
        else:
            b.ffn(i, E, F)


_LFM2_ATTN = (2, 5, 8, 10, 12, 14)


def _lfm2(b: _Builder) -> None:
    E, H, KV, F, V = 2048, 32, 8, 8192, 65536
    b.t("token_embd.weight", E, V)
    b.t("token_embd_norm.weight", E)
    for i in range(16):
        p = f"blk.{i}."
        b.t(p + "attn_norm.weight", E)
        if i in _LFM2_ATTN:
            b.attn(i, E, H, KV, E // H, norm=False, qk_norm=True)
        else:
            b.t(p + "shortconv.conv.weight", 3, E)
            b.t(p + "shortconv.in_proj.weight", E, 3 * E)
            b.t(p + "shortconv.out_proj.weight", E, E)
        b.ffn(i, E, F)


def _falcon_h1(b: _Builder) -> None:
    E, H, KV, D, F, V = 2048, 8, 2, 128, 8192, 65537
    b.embd(E, V)
    for i in range(24):
        p = f"blk.{i}."
        b.mamba2(i, E, 3072, 256, 1, 24, norm=False)
        del b.tensors[p + "ssm_norm.weight"]
        b.attn(i, E, H, KV, D)
        b.t(p + "ffn_norm", E, kind="F32")
        b.ffn(i, E, F, norm="")


#: Nemotron-H 8B's hybrid_override_pattern: M Mamba-2, * attention, - MLP
_NEMOTRON_H = "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-"


def _nemotron_h(b: _Builder) -> None:
    E, H, KV, D, F, V = 4096, 32, 8, 128, 21504, 131072
    b.embd(E, V)
    for i, kind in enumerate(_NEMOTRON_H):
        p = f"blk.{i}."
        if kind == "M":
            b.mamba2(i, E, 8192, 128, 8, 128)
        elif kind == "*":
            b.attn(i, E, H, KV, D)
        else:
            b.t(p + "attn_norm.weight", E)
            b.ffn(i, E, F, norm="", gate=False)


def _qwen3next(b: _Builder) -> None:
    E, H, KV, D, V, n_exp, Fe = 2048, 16, 2, 256, 151936, 512, 512
    d_inner, d_state, n_v_heads, n_k_heads = 4096, 128, 32, 16
    b.embd(E, V)
    for i in range(48):
        p = f"blk.{i}."
        b.t(p + "attn_norm.weight", E)
        if (i + 1) % 4 == 0:
            b.t(p + "attn_q.weight", E, 2 * H * D)
            b.t(p + "attn_k.weight", E, KV * D)
            b.t(p + "attn_v.weight", E, KV * D)
            b.t(p + "attn_output.weight", H * D, E)
            b.t(p + "attn_q_norm.weight", D)
            b.t(p + "attn_k_norm.weight", D)
        else:
            conv_ch = d_inner + 2 * n_k_heads * d_state
            b.t(p + "attn_qkv.weight", E, conv_ch)
            b.t(p + "attn_gate.weight", E, d_inner)
            b.t(p + "ssm_conv1d.weight", 4, conv_ch)
            b.t(p + "ssm_dt.bias", n_v_heads)
            b.t(p + "ssm_a", n_v_heads)
            b.t(p + "ssm_ba.weight", E, 2 * n_v_heads)
            b.t(p + "ssm_norm.weight", d_state)
            b.t(p + "ssm_out.weight", d_inner, E)
        b.t(p + "post_attention_norm.weight", E)
        b.moe(i, E, Fe, n_exp, shared_F=Fe, norm=False)
        b.t(p + "ffn_gate_inp_shexp.weight", E)


MODELS: tuple[ArchModel, ...] = (
    ArchModel("llama-3.1-8b", "llama", "dense", _attn_keys(32, 4096, 32, 8, 14336, 128256, 131072,
                                                            rope__dimension_count=128),
              _dense(32, 4096, 32, 8, 14336, 128256)),
    ArchModel("mistral-nemo-12b", "llama", "dense, head size not n_embd / n_head",
              _attn_keys(40, 5120, 32, 8, 14336, 131072, 1024000, Dk=128, rope__dimension_count=128),
              _dense(40, 5120, 32, 8, 14336, 131072, Dk=128)),
    ArchModel("qwen2.5-7b", "qwen2", "dense, QKV biases", _attn_keys(28, 3584, 28, 4, 18944, 152064, 32768),
              _dense(28, 3584, 28, 4, 18944, 152064, bias=True)),
    ArchModel("qwen3-8b", "qwen3", "dense, QK norms", _attn_keys(36, 4096, 32, 8, 12288, 151936, 40960, Dk=128),
              _dense(36, 4096, 32, 8, 12288, 151936, Dk=128, qk_norm=True)),
    ArchModel("qwen3-30b-a3b", "qwen3moe", "MoE (128 experts, 8 used)",
              _attn_keys(48, 2048, 32, 4, 6144, 151936, 40960, Dk=128, expert_count=128, expert_used_count=8,
                         expert_feed_forward_length=768), _qwen3moe),
    ArchModel("gemma-2-9b", "gemma2", "sliding window 4096 on every other layer",
              _attn_keys(42, 3584, 16, 8, 14336, 256000, 8192, Dk=256, eps=1e-6, attention__sliding_window=4096),
              _dense(42, 3584, 16, 8, 14336, 256000, Dk=256, output=False, post_norms=True)),
    ArchModel("gemma-3-12b", "gemma3", "sliding window 1024 on 5 of 6 layers",
              _attn_keys(48, 3840, 16, 8, 15360, 262208, 131072, Dk=256, eps=1e-6, attention__sliding_window=1024),
              _dense(48, 3840, 16, 8, 15360, 262208, Dk=256, qk_norm=True, output=False, post_norms=True)),
    ArchModel("gpt-oss-20b", "gpt-oss", "MoE, MXFP4 experts, attention sinks, sliding window 128",
              _attn_keys(24, 2880, 64, 8, 2880, 201088, 131072, Dk=64, expert_count=32, expert_used_count=4,
                         expert_feed_forward_length=2880, attention__sliding_window=128), _gpt_oss, matrix="Q8_0"),
    ArchModel("phi-3.5-mini", "phi3", "dense, fused QKV", _attn_keys(32, 3072, 32, 32, 8192, 32064, 131072,
                                                                     rope__dimension_count=96), _phi3),
    ArchModel("deepseek-v2-lite", "deepseek2", "MLA (compressed KV, no V cache), MoE",
              _attn_keys(27, 2048, 16, 1, 10944, 102400, 163840, eps=1e-6, expert_count=64, expert_used_count=6,
                         expert_feed_forward_length=1408, expert_shared_count=2, leading_dense_block_count=1,
                         attention__key_length=576, attention__value_length=512,
                         attention__key_length_mla=192, attention__value_length_mla=128,
                         attention__kv_lora_rank=512, rope__dimension_count=64), _deepseek2_lite),
    ArchModel("granite-4.0-h-micro", "granitehybrid", "hybrid: Mamba-2 and 4 attention layers",
              _attn_keys(40, 2048, 32, [8 if i in _GRANITE_H_ATTN else 0 for i in range(40)], 8192, 100352, 131072,
                         ssm__conv_kernel=4, ssm__inner_size=4096, ssm__state_size=128, ssm__time_step_rank=64,
                         ssm__group_count=1), _granite_h_micro),
    ArchModel("mamba2-2.7b", "mamba2", "recurrent (Mamba-2)",
              {"block_count": 64, "context_length": 1048576, "embedding_length": 2560, "feed_forward_length": 0,
               "attention.head_count": 0, "ssm.conv_kernel": 4, "ssm.inner_size": 5120, "ssm.state_size": 128,
               "ssm.time_step_rank": 80, "ssm.group_count": 1, "attention.layer_norm_rms_epsilon": 1e-5,
               "vocab_size": 50288}, _mamba2),
    ArchModel("mamba-1.4b", "mamba", "recurrent (Mamba)",
              {"block_count": 48, "context_length": 1048576, "embedding_length": 2048, "feed_forward_length": 0,
               "attention.head_count": 0, "ssm.conv_kernel": 4, "ssm.inner_size": 4096, "ssm.state_size": 16,
               "ssm.time_step_rank": 128, "attention.layer_norm_rms_epsilon": 1e-5, "vocab_size": 50280}, _mamba1),
    ArchModel("rwkv7-1.5b", "rwkv7", "recurrent (RWKV-7)", _RWKV7_KEYS, _rwkv7),
    ArchModel("jamba-small", "jamba", "hybrid: Mamba, 1 attention layer in 8, MoE every other layer",
              _attn_keys(16, 1024, 8, _JAMBA_KV, 4096, 65536, 262144, eps=1e-6, expert_count=16,
                         expert_used_count=2, ssm__conv_kernel=4, ssm__inner_size=2048, ssm__state_size=16,
                         ssm__time_step_rank=64), _jamba),
    ArchModel("lfm2-1.2b", "lfm2", "hybrid: short convolutions and 6 attention layers",
              _attn_keys(16, 2048, 32, [8 if i in _LFM2_ATTN else 0 for i in range(16)], 8192, 65536, 128000,
                         shortconv__l_cache=3), _lfm2),
    ArchModel("falcon-h1-1.5b", "falcon-h1", "hybrid: attention and Mamba-2 in every layer",
              _attn_keys(24, 2048, 8, 2, 8192, 65537, 131072, Dk=128, ssm__conv_kernel=4, ssm__inner_size=3072,
                         ssm__state_size=256, ssm__time_step_rank=24, ssm__group_count=1), _falcon_h1),
    ArchModel("nemotron-h-8b", "nemotron_h", "hybrid: Mamba-2, attention and MLP layers",
              _attn_keys(52, 4096, 32, [8 if k == "*" else 0 for k in _NEMOTRON_H],
                         [21504 if k == "-" else 0 for k in _NEMOTRON_H], 131072, 8192, Dk=128,
                         attention__layer_norm_epsilon=1e-5, ssm__conv_kernel=4, ssm__inner_size=8192,
                         ssm__state_size=128, ssm__time_step_rank=128, ssm__group_count=8), _nemotron_h),
    ArchModel("qwen3-next-80b-a3b", "qwen3next", "hybrid: gated delta net and 1 attention layer in 4, MoE",
              _attn_keys(48, 2048, 16, 2, 5120, 151936, 262144, Dk=256, eps=1e-6, expert_count=512,
                         expert_used_count=10, expert_feed_forward_length=512,
                         expert_shared_feed_forward_length=512, ssm__conv_kernel=4, ssm__inner_size=4096,
                         ssm__state_size=128, ssm__time_step_rank=32, ssm__group_count=16, full_attention_interval=4,
                         rope__dimension_count=64), _qwen3next),
)


def by_label(label: str) -> ArchModel:
    return next(m for m in MODELS if m.label == label)


def write_all(folder: str | Path, labels: Iterable[str] | None = None) -> dict[str, Path]:
    """Every model (or those named) written into ``folder``: label -> path."""
    wanted = set(labels) if labels is not None else None
    return {m.label: m.write(folder) for m in MODELS if wanted is None or m.label in wanted}
