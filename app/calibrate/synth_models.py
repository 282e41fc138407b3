"""Small runnable GGUF models for calibration: llama- or gemma-shaped, any common weight type, written directly.

Speed depends on shapes and weight types, not on the weights' values (ggml's kernels take the same path for any
value), so the quantized types are written as all-zero blocks: valid weights of every type (a zero fp16 scale),
without a quantizer (gguf-py cannot write K-quants). F16/F32 tensors hold small random values. Norms are F32, as
llama.cpp writes them. The vocabulary is a SentencePiece one (control tokens, the 256 byte tokens, plain pieces),
which llama.cpp loads for both architectures.

Beside the ladder's plain shapes a shape may be a llama-family mixture of experts (Mixtral's layout), keep its
output matrix (and a tied one's token embedding) in another type, and mix types per tensor as llama.cpp's
``_M``/``_S`` presets do: the held-out shapes a fit is judged on (``benchmarks/fit_beyond_ladder.py``). A float
token embedding and router hold random values, so a mixture routes each token to its own experts, as a real one does.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import gguf
import numpy as np

#: The architectures written here: llama has a separate output matrix, gemma reuses the token embedding.
TIED_OUTPUT = {"llama": False, "gemma": True}
HEAD_DIM = 64
#: The weight types this module writes (the quantized ones as zero blocks; K-quants need widths of 256).
WRITABLE_TYPES: tuple[str, ...] = ("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K",
                                   "F16", "F32")


@dataclass(frozen=True)
class SynthShape:
    """A model's shape and weight type; heads are n_embd / HEAD_DIM, KV heads 1 / ``gqa`` of them (at least one)."""

    n_embd: int
    n_layer: int
    weight_type: str  # ggml type name: F16, Q4_0, Q4_K, Q5_K, Q6_K, Q8_0, ...
    arch: str = "llama"
    n_vocab: int = 1024
    ff_ratio: float = 2.75
    gqa: int = 4
    n_expert: int = 0  # > 0: each layer's feed-forward is this many experts of n_ff rows (llama's MoE layout)
    n_expert_used: int = 0  # experts per token (0: 2)
    output_type: str = ""  # the output matrix's type, a tied embedding's too ("": weight_type)
    embd_type: str = ""  # an untied token embedding's type ("": weight_type)
    #: (regular expression a tensor's name must fully match, ggml type) overrides, first match wins: a quant mix
    mix: tuple[tuple[str, str], ...] = ()
    file_type: str = ""  # general.file_type as llama.cpp names it ("Q4_K_M"; "": the weight type's)

    @property
    def n_head(self) -> int:
        return max(1, self.n_embd // HEAD_DIM)

    @property
    def n_head_kv(self) -> int:
        return max(1, self.n_head // self.gqa)

    @property
    def n_ff(self) -> int:
        return int(self.n_embd * self.ff_ratio) // 256 * 256 or 256

    @property
    def name(self) -> str:
        moe = f"e{self.n_expert}u{self.n_used}" if self.n_expert else ""
        vocab = f"v{self.n_vocab}" if self.n_vocab != 1024 else ""
        shape = f"{self.n_embd}x{self.n_layer}g{self.gqa}{moe}{vocab}"
        return f"calib-{self.arch}-{shape}-{self.file_type or self.weight_type}"

    @property
    def n_used(self) -> int:
        return self.n_expert_used or min(2, self.n_expert)

    def type_of(self, tensor: str) -> str:
        """The ggml type ``tensor`` is written in."""
        for pattern, t in self.mix:
            if re.fullmatch(pattern, tensor):
                return t
        tied = TIED_OUTPUT[self.arch]
        if tensor == "output.weight" or (tensor == "token_embd.weight" and tied):
            return self.output_type or self.weight_type
        if tensor == "token_embd.weight":
            return self.embd_type or self.weight_type
        return self.weight_type


def _tensor_shapes(s: SynthShape) -> dict[str, tuple[int, ...]]:
    """Tensor name -> numpy shape (rows, columns), in llama.cpp's order."""
    q, kv = s.n_head * HEAD_DIM, s.n_head_kv * HEAD_DIM
    shapes: dict[str, tuple[int, ...]] = {"token_embd.weight": (s.n_vocab, s.n_embd)}
    for i in range(s.n_layer):
        shapes.update({
            f"blk.{i}.attn_norm.weight": (s.n_embd,), f"blk.{i}.attn_q.weight": (q, s.n_embd),
            f"blk.{i}.attn_k.weight": (kv, s.n_embd), f"blk.{i}.attn_v.weight": (kv, s.n_embd),
            f"blk.{i}.attn_output.weight": (s.n_embd, q), f"blk.{i}.ffn_norm.weight": (s.n_embd,),
        })
        if s.n_expert:
            shapes.update({
                f"blk.{i}.ffn_gate_inp.weight": (s.n_expert, s.n_embd),
                f"blk.{i}.ffn_gate_exps.weight": (s.n_expert, s.n_ff, s.n_embd),
                f"blk.{i}.ffn_up_exps.weight": (s.n_expert, s.n_ff, s.n_embd),
                f"blk.{i}.ffn_down_exps.weight": (s.n_expert, s.n_embd, s.n_ff),
            })
        else:
            shapes.update({
                f"blk.{i}.ffn_gate.weight": (s.n_ff, s.n_embd), f"blk.{i}.ffn_up.weight": (s.n_ff, s.n_embd),
                f"blk.{i}.ffn_down.weight": (s.n_embd, s.n_ff),
            })
    shapes["output_norm.weight"] = (s.n_embd,)
    if not TIED_OUTPUT[s.arch]:
        shapes["output.weight"] = (s.n_vocab, s.n_embd)
    return shapes


def _metadata(w: gguf.GGUFWriter, s: SynthShape, qtype: gguf.GGMLQuantizationType) -> None:
    a = s.arch
    w.add_name(s.name)
    w.add_block_count(s.n_layer)
    w.add_context_length(8192)
    w.add_embedding_length(s.n_embd)
    w.add_feed_forward_length(s.n_ff)
    w.add_head_count(s.n_head)
    w.add_head_count_kv(s.n_head_kv)
    w.add_key_length(HEAD_DIM)
    w.add_value_length(HEAD_DIM)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(10000.0)
    w.add_uint32(f"{a}.vocab_size", s.n_vocab)
    if s.n_expert:
        w.add_expert_count(s.n_expert)
        w.add_expert_used_count(s.n_used)
    named = getattr(gguf.LlamaFileType, f"MOSTLY_{s.file_type.upper()}", None) if s.file_type else None
    w.add_file_type(int(named) if named is not None else _FILE_TYPE.get(qtype.name, int(gguf.LlamaFileType.GUESSED)))
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    tokens += [f"\u2581t{i}" for i in range(s.n_vocab - len(tokens))]
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL] + [gguf.TokenType.BYTE] * 256
    types += [gguf.TokenType.NORMAL] * (s.n_vocab - len(types))
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores([-float(i) for i in range(s.n_vocab)])
    w.add_token_types([int(t) for t in types])
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)


_FILE_TYPE = {"F32": gguf.LlamaFileType.ALL_F32, "F16": gguf.LlamaFileType.MOSTLY_F16,
              "Q4_0": gguf.LlamaFileType.MOSTLY_Q4_0, "Q4_1": gguf.LlamaFileType.MOSTLY_Q4_1,
              "Q5_0": gguf.LlamaFileType.MOSTLY_Q5_0, "Q5_1": gguf.LlamaFileType.MOSTLY_Q5_1,
              "Q8_0": gguf.LlamaFileType.MOSTLY_Q8_0, "Q4_K": gguf.LlamaFileType.MOSTLY_Q4_K_S,
              "Q2_K": gguf.LlamaFileType.MOSTLY_Q2_K, "Q3_K": gguf.LlamaFileType.MOSTLY_Q3_K_S,
              "Q5_K": gguf.LlamaFileType.MOSTLY_Q5_K_S, "Q6_K": gguf.LlamaFileType.MOSTLY_Q6_K}


def write_synth_model(path: str | Path, shape: SynthShape, seed: int = 0) -> Path:
    """Write ``shape`` as a GGUF file at ``path`` (which must not be read until this returns) and return it."""
    if shape.arch not in TIED_OUTPUT:
        raise ValueError(f"architecture {shape.arch!r} not in {sorted(TIED_OUTPUT)}")
    shapes = _tensor_shapes(shape)
    for name, dims in shapes.items():
        t = shape.type_of(name).upper()
        if t not in WRITABLE_TYPES:
            raise ValueError(f"weight type {t!r} not in {', '.join(WRITABLE_TYPES)}")
        block = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[t]][0]
        if len(dims) > 1 and dims[-1] % max(block, 1):
            raise ValueError(f"{shape.name}: row lengths must be multiples of the {t} block ({block}); "
                             f"{name}'s is {dims[-1]}")
    qtype = gguf.GGMLQuantizationType[shape.weight_type.upper()]
    rng = np.random.default_rng(seed)
    pool = (rng.standard_normal(1 << 20, dtype=np.float32) * 0.02)  # tiled: fast to write
    path = Path(path)
    writer = gguf.GGUFWriter(path, shape.arch)
    _metadata(writer, shape, qtype)
    for name, dims in shapes.items():
        qtype = gguf.GGMLQuantizationType[shape.type_of(name).upper()]
        if len(dims) == 1:
            writer.add_tensor(name, np.ones(dims, dtype=np.float32))
        elif name.endswith("ffn_gate_inp.weight"):  # the router: random, so tokens take different experts
            writer.add_tensor(name, rng.standard_normal(dims, dtype=np.float32))
        elif qtype in (gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16):
            dtype = np.float32 if qtype == gguf.GGMLQuantizationType.F32 else np.float16
            writer.add_tensor(name, np.resize(pool, dims).astype(dtype))
        else:
            raw = np.zeros(gguf.quant_shape_to_byte_shape(dims, qtype), dtype=np.uint8)
            writer.add_tensor(name, raw, raw_dtype=qtype)
    try:
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
    except OSError as e:  # a full disk: numpy's tofile says only "N requested and M written"
        path.unlink(missing_ok=True)
        try:
            free = f"; {shutil.disk_usage(path.parent).free / 2**20:,.1f} MiB free there"
        except OSError:
            free = ""
        raise SynthWriteError(f"{path}: cannot write a ladder model ({e.strerror or e}{free})") from None
    return path


class SynthWriteError(OSError):
    """A synthetic model could not be written (a full disk, no permission); str() names the file and the cause."""
