"""Small but structurally real GGUF models for tests, and broken files for the error paths.

A synthetic model is llama-shaped: token_embd, per layer attn_norm/attn_q/attn_k/attn_v/attn_output and
ffn_norm/ffn_gate/ffn_up/ffn_down, then output_norm and output, with a tiny SentencePiece-style vocabulary,
so llama.cpp could in principle load it. Norms are always F32 (as llama.cpp writes them); the 2-D weights
use ``tensor_dtype``. Defaults give a file of about 100 KB.

With ``n_expert`` > 0 it is a llama-family mixture of experts (Mixtral's layout, which llama.cpp's llama
architecture loads: src/models/llama.cpp): each layer's FFN is a router ``ffn_gate_inp`` and 3-D expert tensors
``ffn_gate_exps``/``ffn_up_exps``/``ffn_down_exps`` (``n_expert`` experts of ``n_ff`` rows, ``n_expert_used`` per
token). :func:`write_synthetic_moe_gguf` writes one whose experts hold most of the bytes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import gguf
import numpy as np

TENSOR_DTYPES: dict[str, gguf.GGMLQuantizationType] = {
    "F32": gguf.GGMLQuantizationType.F32,
    "F16": gguf.GGMLQuantizationType.F16,
    "Q8_0": gguf.GGMLQuantizationType.Q8_0,
}
FILE_TYPE_FOR_DTYPE: dict[str, int] = {
    "F32": int(gguf.LlamaFileType.ALL_F32),
    "F16": int(gguf.LlamaFileType.MOSTLY_F16),
    "Q8_0": int(gguf.LlamaFileType.MOSTLY_Q8_0),
}

_U32 = gguf.GGUFValueType.UINT32


def _value_type(value: object) -> tuple[gguf.GGUFValueType, gguf.GGUFValueType | None]:
    """(GGUF type, array item type) for a Python value of extra_kv."""

    def scalar_type(v: object) -> gguf.GGUFValueType:
        if isinstance(v, bool):
            return gguf.GGUFValueType.BOOL
        if isinstance(v, int):
            return _U32
        if isinstance(v, float):
            return gguf.GGUFValueType.FLOAT32
        if isinstance(v, str):
            return gguf.GGUFValueType.STRING
        raise TypeError(f"no GGUF type for {v!r}")

    if isinstance(value, list | tuple):
        return gguf.GGUFValueType.ARRAY, scalar_type(value[0])
    return scalar_type(value), None


def _per_layer(value: int | Sequence[int], n_layer: int, what: str) -> list[int]:
    if isinstance(value, int):
        return [value] * n_layer
    values = [int(v) for v in value]
    if len(values) != n_layer:
        raise ValueError(f"{what}: {len(values)} values for {n_layer} layers")
    return values


def synthetic_tensor_shapes(
    *,
    n_layer: int = 2,
    n_embd: int = 64,
    n_head: int | Sequence[int] = 4,
    n_head_kv: int | Sequence[int] = 2,
    n_ff: int | Sequence[int] = 128,
    n_vocab: int = 256,
    key_length: int | None = None,
    value_length: int | None = None,
    n_expert: int = 0,
) -> dict[str, tuple[int, ...]]:
    """Tensor name -> numpy shape (rows, columns; experts first for 3-D expert tensors), in file order."""
    heads = _per_layer(n_head, n_layer, "n_head")
    kv_heads = _per_layer(n_head_kv, n_layer, "n_head_kv")
    ffs = _per_layer(n_ff, n_layer, "n_ff")
    head_dim_default = n_embd // heads[0]
    hd_k = key_length or head_dim_default
    hd_v = value_length or head_dim_default
    shapes: dict[str, tuple[int, ...]] = {"token_embd.weight": (n_vocab, n_embd)}
    for i in range(n_layer):
        shapes[f"blk.{i}.attn_norm.weight"] = (n_embd,)
        shapes[f"blk.{i}.attn_q.weight"] = (heads[i] * hd_k, n_embd)
        shapes[f"blk.{i}.attn_k.weight"] = (kv_heads[i] * hd_k, n_embd)
        shapes[f"blk.{i}.attn_v.weight"] = (kv_heads[i] * hd_v, n_embd)
        shapes[f"blk.{i}.attn_output.weight"] = (n_embd, heads[i] * hd_v)
        shapes[f"blk.{i}.ffn_norm.weight"] = (n_embd,)
        if n_expert:  # llama.cpp's {n_embd, n_ff, n_expert} (ggml order) is numpy's (n_expert, n_ff, n_embd)
            shapes[f"blk.{i}.ffn_gate_inp.weight"] = (n_expert, n_embd)
            shapes[f"blk.{i}.ffn_gate_exps.weight"] = (n_expert, ffs[i], n_embd)
            shapes[f"blk.{i}.ffn_up_exps.weight"] = (n_expert, ffs[i], n_embd)
            shapes[f"blk.{i}.ffn_down_exps.weight"] = (n_expert, n_embd, ffs[i])
            continue
        shapes[f"blk.{i}.ffn_gate.weight"] = (ffs[i], n_embd)
        shapes[f"blk.{i}.ffn_up.weight"] = (ffs[i], n_embd)
        shapes[f"blk.{i}.ffn_down.weight"] = (n_embd, ffs[i])
    shapes["output_norm.weight"] = (n_embd,)
    shapes["output.weight"] = (n_vocab, n_embd)
    return shapes


def _vocab(n_vocab: int) -> tuple[list[str], list[float], list[int]]:
    """A SentencePiece ("llama") vocabulary: <unk>, <s>, </s>, byte tokens, then plain pieces."""
    tokens = ["<unk>", "<s>", "</s>"]
    types = [int(gguf.TokenType.UNKNOWN), int(gguf.TokenType.CONTROL), int(gguf.TokenType.CONTROL)]
    for b in range(min(256, max(0, n_vocab - len(tokens)))):
        tokens.append(f"<0x{b:02X}>")
        types.append(int(gguf.TokenType.BYTE))
    while len(tokens) < n_vocab:
        tokens.append(f"\u2581tok{len(tokens)}")
        types.append(int(gguf.TokenType.NORMAL))
    scores = [-float(i) for i in range(n_vocab)]
    return tokens[:n_vocab], scores, types[:n_vocab]


def write_synthetic_gguf(
    path: str | Path,
    *,
    arch: str = "llama",
    n_layer: int = 2,
    n_embd: int = 64,
    n_head: int | Sequence[int] = 4,
    n_head_kv: int | Sequence[int] = 2,
    n_ff: int | Sequence[int] = 128,
    n_vocab: int = 256,
    n_ctx_train: int = 512,
    key_length: int | None = None,
    value_length: int | None = None,
    sliding_window: int | None = None,
    swa_pattern: int | Sequence[bool] | None = None,
    tensor_dtype: str = "F16",
    name: str | None = "synthetic",
    file_type: int | None = None,
    omit_keys: Iterable[str] = (),
    extra_kv: Mapping[str, object] | None = None,
    seed: int = 0,
    n_expert: int = 0,
    n_expert_used: int = 0,
) -> Path:
    """Write a small llama-shaped GGUF model with random weights and return its path.

    ``n_head``/``n_head_kv``/``n_ff`` may be one value per layer (written as arrays). ``file_type`` None
    derives ``general.file_type`` from ``tensor_dtype``; a negative value leaves the key out. ``omit_keys``
    drops metadata keys, given in full or without the ``{arch}.`` prefix (e.g. "block_count"); ``extra_kv``
    adds or replaces keys (full names; int -> UINT32, float -> FLOAT32, str, bool, lists of those -> arrays).
    ``n_expert`` > 0 makes each layer's FFN ``n_expert`` experts, ``n_expert_used`` (default 2) of them per token.
    """
    if tensor_dtype not in TENSOR_DTYPES:
        raise ValueError(f"tensor_dtype {tensor_dtype!r} not in {sorted(TENSOR_DTYPES)}")
    qtype = TENSOR_DTYPES[tensor_dtype]
    path = Path(path)
    omitted = {k if k.startswith(("general.", "tokenizer.", f"{arch}.")) else f"{arch}.{k}" for k in omit_keys}
    overrides = dict(extra_kv or {})
    rng = np.random.default_rng(seed)

    writer = gguf.GGUFWriter(path, arch)

    def put(key: str, value: object, vtype: gguf.GGUFValueType = _U32, sub: gguf.GGUFValueType | None = None) -> None:
        if key in omitted or key in overrides:
            return
        if isinstance(value, Sequence) and not isinstance(value, str):
            if sub is None:
                sub = gguf.GGUFValueType.BOOL if all(isinstance(v, bool) for v in value) else _U32
            writer.add_key_value(key, list(value), gguf.GGUFValueType.ARRAY, sub_type=sub)
        else:
            writer.add_key_value(key, value, vtype)

    if "general.architecture" in omitted or "general.architecture" in overrides:
        writer.kv_data[0].pop("general.architecture", None)  # the writer adds it on creation
    if name is not None:
        put("general.name", name, gguf.GGUFValueType.STRING)
    ftype = FILE_TYPE_FOR_DTYPE[tensor_dtype] if file_type is None else file_type
    if ftype >= 0:
        put("general.file_type", ftype)
    put(f"{arch}.block_count", n_layer)
    put(f"{arch}.context_length", n_ctx_train)
    put(f"{arch}.embedding_length", n_embd)
    put(f"{arch}.feed_forward_length", n_ff)
    put(f"{arch}.attention.head_count", n_head)
    put(f"{arch}.attention.head_count_kv", n_head_kv)
    put(f"{arch}.attention.layer_norm_rms_epsilon", 1e-5, gguf.GGUFValueType.FLOAT32)
    put(f"{arch}.rope.freq_base", 10000.0, gguf.GGUFValueType.FLOAT32)
    put(f"{arch}.vocab_size", n_vocab)
    if key_length is not None:
        put(f"{arch}.attention.key_length", key_length)
    if value_length is not None:
        put(f"{arch}.attention.value_length", value_length)
    if sliding_window is not None:
        put(f"{arch}.attention.sliding_window", sliding_window)
    if swa_pattern is not None:
        put(f"{arch}.attention.sliding_window_pattern", swa_pattern)
    if n_expert:
        put(f"{arch}.expert_count", n_expert)
        put(f"{arch}.expert_used_count", n_expert_used or min(2, n_expert))
    put("general.quantization_version", gguf.GGML_QUANT_VERSION)
    tokens, scores, token_types = _vocab(n_vocab)
    put("tokenizer.ggml.model", "llama", gguf.GGUFValueType.STRING)
    put("tokenizer.ggml.tokens", tokens, sub=gguf.GGUFValueType.STRING)
    put("tokenizer.ggml.scores", scores, sub=gguf.GGUFValueType.FLOAT32)
    put("tokenizer.ggml.token_type", token_types, sub=gguf.GGUFValueType.INT32)
    put("tokenizer.ggml.unknown_token_id", 0)
    put("tokenizer.ggml.bos_token_id", 1)
    put("tokenizer.ggml.eos_token_id", 2)
    for key, value in overrides.items():
        writer.add_key_value(key, list(value) if isinstance(value, tuple) else value, *_value_type(value))

    shapes = synthetic_tensor_shapes(
        n_layer=n_layer, n_embd=n_embd, n_head=n_head, n_head_kv=n_head_kv, n_ff=n_ff, n_vocab=n_vocab,
        key_length=key_length, value_length=value_length, n_expert=n_expert,
    )
    for tensor_name, shape in shapes.items():
        if len(shape) == 1:
            writer.add_tensor(tensor_name, np.ones(shape, dtype=np.float32))
            continue
        data = (rng.standard_normal(shape) * 0.02).astype(np.float32)
        if qtype == gguf.GGMLQuantizationType.F32:
            writer.add_tensor(tensor_name, data)
        elif qtype == gguf.GGMLQuantizationType.F16:
            writer.add_tensor(tensor_name, data.astype(np.float16))
        else:
            writer.add_tensor(tensor_name, gguf.quants.quantize(data, qtype), raw_dtype=qtype)

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def write_synthetic_moe_gguf(path: str | Path, *, n_layer: int = 4, n_expert: int = 8, n_expert_used: int = 2,
                             n_embd: int = 64, n_ff: int = 128, **kwargs: object) -> Path:
    """A small llama-family mixture of experts llama.cpp runs: ``n_layer`` layers of ``n_expert`` experts (2 used per
    token), the experts about 90 % of the weights at the defaults (F16, about 1.7 MB)."""
    return write_synthetic_gguf(path, n_layer=n_layer, n_expert=n_expert, n_expert_used=n_expert_used,
                                n_embd=n_embd, n_ff=n_ff, **kwargs)  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------------------------------
# Broken files


def write_not_gguf(path: str | Path) -> Path:
    """A text file that is not GGUF."""
    path = Path(path)
    path.write_text("this is not a model\njust some text\n", encoding="utf-8")
    return path


def write_zero_bytes(path: str | Path) -> Path:
    """An empty file."""
    path = Path(path)
    path.write_bytes(b"")
    return path


def write_truncated_gguf(path: str | Path, fraction: float = 0.5, **synth_kwargs: object) -> Path:
    """A real synthetic model cut to ``fraction`` of its bytes (a half-finished download)."""
    path = Path(path)
    write_synthetic_gguf(path, **synth_kwargs)  # type: ignore[arg-type]
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * fraction)])
    return path


def write_unknown_arch_gguf(path: str | Path, arch: str = "nosucharch", **synth_kwargs: object) -> Path:
    """A well-formed model whose architecture no llama.cpp knows; its keys use that architecture's prefix."""
    return write_synthetic_gguf(path, arch=arch, **synth_kwargs)  # type: ignore[arg-type]


def write_bad_metadata_gguf(path: str | Path, **metadata: object) -> Path:
    """A small well-formed model whose metadata says something its tensors contradict or llama.cpp cannot use.

    Keys are given without the ``llama.`` prefix (``block_count=0``, ``attention.head_count_kv=3``); the tensors
    stay those of the default 2-layer, 4-head model.
    """
    return write_synthetic_gguf(path, extra_kv={f"llama.{k}": v for k, v in metadata.items()})


def write_huge_count_gguf(path: str | Path, tensor_count: int = 14987979559889017240) -> Path:
    """A real small model whose header claims ``tensor_count`` tensors (a u64 no file could hold)."""
    path = Path(path)
    write_synthetic_gguf(path)
    data = bytearray(path.read_bytes())
    data[8:16] = tensor_count.to_bytes(8, "little")
    path.write_bytes(bytes(data))
    return path


def small_header_bytes(tmp_dir: str | Path) -> bytes:
    """The bytes of the smallest useful synthetic model (1 layer, 16 wide, 32 tokens): a seed for fuzzing."""
    path = write_synthetic_gguf(Path(tmp_dir) / "seed.gguf", n_layer=1, n_embd=16, n_head=2, n_head_kv=1, n_ff=32,
                                n_vocab=32, tensor_dtype="F32")
    return path.read_bytes()


#: (values, bytes) per block of the types a shape-only file uses (ggml-common.h: block_q4_K, block_q6_K, block_q8_0)
_BLOCKS = {"Q4_K": (256, 144), "Q6_K": (256, 210), "Q8_0": (32, 34)}
#: the general.file_type a shape-only file of each matrix type says
_SHAPE_FILE_TYPES = {"Q4_K": gguf.LlamaFileType.MOSTLY_Q4_K_M, "Q8_0": gguf.LlamaFileType.MOSTLY_Q8_0}


def write_shape_gguf(path: str | Path, *, n_layer: int, n_embd: int, n_head: int, n_head_kv: int, n_ff: int,
                     n_vocab: int, n_ctx_train: int = 32768, key_length: int | None = None, n_expert: int = 0,
                     n_expert_used: int = 0, name: str = "shape", matrix_type: str = "Q4_K") -> Path:
    """A header-only GGUF of a real model's shape (llama family): every matrix ``matrix_type`` (Q4_K, with
    ``output.weight`` Q6_K as Q4_K_M files keep it; or Q8_0 throughout), norms F32, ``general.file_type`` to match;
    its tensor data is a sparse hole of the true size, so a 17 GB model costs a few MB of disk. For predictions and
    the chooser, never to be run."""
    path = Path(path)
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_name(name)
    writer.add_file_type(_SHAPE_FILE_TYPES[matrix_type])
    for key, value in (("block_count", n_layer), ("context_length", n_ctx_train), ("embedding_length", n_embd),
                       ("feed_forward_length", n_ff), ("attention.head_count", n_head),
                       ("attention.head_count_kv", n_head_kv), ("vocab_size", n_vocab)):
        writer.add_key_value(f"llama.{key}", value, _U32)
    if key_length:
        writer.add_key_value("llama.attention.key_length", key_length, _U32)
        writer.add_key_value("llama.attention.value_length", key_length, _U32)
    if n_expert:
        writer.add_key_value("llama.expert_count", n_expert, _U32)
        writer.add_key_value("llama.expert_used_count", n_expert_used or 2, _U32)
    writer.add_key_value("llama.attention.layer_norm_rms_epsilon", 1e-6, gguf.GGUFValueType.FLOAT32)
    writer.add_key_value("general.quantization_version", gguf.GGML_QUANT_VERSION, _U32)
    writer.add_key_value("tokenizer.ggml.model", "llama", gguf.GGUFValueType.STRING)
    shapes = synthetic_tensor_shapes(n_layer=n_layer, n_embd=n_embd, n_head=n_head, n_head_kv=n_head_kv, n_ff=n_ff,
                                     n_vocab=n_vocab, key_length=key_length, value_length=key_length,
                                     n_expert=n_expert)
    data_bytes = 0
    for tensor_name, shape in shapes.items():
        count = int(np.prod(shape))
        if len(shape) == 1:
            writer.add_tensor_info(tensor_name, shape, np.dtype(np.float32), count * 4)
            nbytes = count * 4
        else:  # the writer takes a quantized tensor's shape in bytes per row
            kind = "Q6_K" if tensor_name == "output.weight" and matrix_type == "Q4_K" else matrix_type
            values, block_bytes = _BLOCKS[kind]
            row_bytes = shape[-1] // values * block_bytes
            nbytes = count // shape[-1] * row_bytes
            writer.add_tensor_info(tensor_name, (*shape[:-1], row_bytes), np.dtype(np.uint8), nbytes,
                                   raw_dtype=gguf.GGMLQuantizationType[kind])
        data_bytes += -(-nbytes // 32) * 32
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    writer.close()
    header_bytes = path.stat().st_size
    with path.open("r+b") as f:
        f.truncate(-(-header_bytes // 32) * 32 + data_bytes)
    return path
