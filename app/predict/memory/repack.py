"""The host memory llama.cpp's weight repacking adds: the copies its CPU extra buffer types hold beside the file.

With repacking on (llama-bench ``--repack 1``, llama.cpp's default; ``use_extra_bufts``), llama.cpp offers every
host-resident weight to the CPU backend's extra buffer types first, in the registry's order
(``ggml_backend_cpu_get_extra_buffer_types``, ggml-cpu/ggml-cpu.cpp: AMX, then KleidiAI, then CPU_REPACK). A weight
one of them takes is copied into it, converted to that kernel's layout, while the mapped file stays mapped: both
count, and llama.cpp logs both (``CPU_Mapped model buffer size`` and ``AMX model buffer size``). A tied output
head (no ``output.weight``: the LM head is ``token_embd`` again, llama-model.cpp ``TENSOR_DUPLICATED``) is a
matmul weight of its own, so it is offered too, though ``token_embd`` itself (a row lookup) never is.

Which weights each buffer type takes, and its size for them, mirror llama-cpp-python 0.3.36's ggml:

- ``AMX`` (ggml-cpu/amx/amx.cpp ``extra_buffer_type::supports_op``; amx/mmq.cpp ``ggml_backend_amx_get_alloc_size``
  and ``get_row_size``; amx/common.h ``qtype_has_amx_kernels``, TILE_N 16, TILE_K 32): 2-D matmul weights of
  Q4_0, Q4_1, Q8_0 (rows a multiple of 32 values), Q4_K, Q5_K, Q6_K, IQ4_XS (of 256) and F16 (of 16), with a
  multiple of 32 output rows. Packed rows add an int32 per block for Q8_0 (its compensation), 4 bytes per block for
  Q4_K and Q5_K and 2 for IQ4_XS; F16 is kept as it is.
- ``CPU_REPACK`` (ggml-cpu/repack.cpp ``ggml_repack_get_optimal_repack_type`` and ``supports_op``): 2-D matmul
  weights and 3-D expert stacks of the types :data:`app.predict.cpu_kernels.REPACKED` lists for this CPU's
  features, with a multiple of 8 output rows (4 for the 4-row ARM layouts); the interleaved blocks take exactly
  the bytes of the plain ones.

A buffer type not known here (``CPU_KLEIDIAI``, ``CPU_RISCV64_SPACEMIT``) is reported as not counted. Pure
functions; no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache

from app.predict.cpu_kernels import repacked_types
from app.predict.memo import by_identity

#: Weights llama.cpp uses in an op other than a matmul (llama-arch.cpp ``LLM_TENSOR_INFOS``): never offered to a
#: matmul buffer type. Matched on the name's last parts (``blk.N.`` stripped).
NOT_MATMUL = ("token_embd.weight", "position_embd.weight", "token_types.weight", "per_layer_token_embd.weight",
              "rope_freqs.weight", "rope_factors_long.weight", "rope_factors_short.weight", "ssm_conv1d.weight",
              "ssm_a", "attn_sinks.weight", "attn_sinks")
#: A tied LM head: token_embd offered again as the output matmul's weight.
TIED_OUTPUT = "output.weight (token_embd, tied)"

#: GGUF block sizes (values per block, bytes per block) of the types the AMX buffer takes.
_AMX_BLOCKS: dict[str, tuple[int, int]] = {
    "Q4_0": (32, 18), "Q4_1": (32, 20), "Q8_0": (32, 34),
    "Q4_K": (256, 144), "Q5_K": (256, 176), "Q6_K": (256, 210), "IQ4_XS": (256, 136),
}
#: Bytes a packed AMX row adds per block (amx/mmq.cpp get_row_size).
_AMX_EXTRA_PER_BLOCK = {"Q8_0": 4, "Q4_K": 4, "Q5_K": 4, "IQ4_XS": 2}
_AMX_TILE_N = 16
_AMX_F16_ALIGN = 16
#: ARM layouts that interleave 4 rows (repack.cpp: q4_0 4x8/4x4, iq4_nl 4x4, mxfp4 4x4, q8_0 4x8/4x4).
_FOUR_ROW_TYPES = frozenset({"Q4_0", "IQ4_NL", "MXFP4", "Q8_0"})
_X86_REPACK_FLAGS = frozenset({"avx2", "avx512f"})


@dataclass(frozen=True)
class RepackedWeights:
    """The extra copies repacking makes: bytes per buffer type, the tensors each took, the buffer types not sized."""

    bytes_by_buffer: dict[str, int] = field(default_factory=dict)
    tensors_by_buffer: dict[str, int] = field(default_factory=dict)
    not_counted: tuple[str, ...] = ()

    @property
    def total_bytes(self) -> int:
        return sum(self.bytes_by_buffer.values())

    def describe(self) -> str:
        """One clause: "AMX 95.3 MiB (211 tensors)" and what was not counted ("" when nothing is repacked)."""
        parts = [f"{b} {n / 2**20:,.1f} MiB ({self.tensors_by_buffer.get(b, 0)} tensors)"
                 for b, n in self.bytes_by_buffer.items() if n]
        if self.not_counted:
            parts.append(f"{', '.join(self.not_counted)} not counted")
        return "; ".join(parts)


@lru_cache(maxsize=1 << 16)
def _is_matmul_weight(name: str) -> bool:
    tail = name.split(".", 2)[2] if name.startswith("blk.") and name.count(".") >= 2 else name
    return not any(tail == n or tail.endswith("." + n) for n in NOT_MATMUL)


def matmul_weights(shapes: Mapping[str, tuple[str, tuple[int, ...]]]) -> dict[str, tuple[str, tuple[int, ...]]]:
    """The weights a matmul reads (2-D, or a 3-D stack of experts), the tied output head added where there is one."""
    out = {n: (t, dims) for n, (t, dims) in shapes.items() if len(dims) in (2, 3) and _is_matmul_weight(n)}
    if "output.weight" not in shapes and "token_embd.weight" in shapes:
        out[TIED_OUTPUT] = shapes["token_embd.weight"]
    return out


def amx_bytes(ggml_type: str, dims: tuple[int, ...]) -> int | None:
    """The AMX buffer's size for one weight, None when that buffer does not take it."""
    if len(dims) != 2:
        return None  # MUL_MAT_ID (experts) is not among AMX's ops
    k, n = dims
    if n % (_AMX_TILE_N * 2):
        return None
    if ggml_type == "F16":
        return 2 * k * n if k % _AMX_F16_ALIGN == 0 else None
    block = _AMX_BLOCKS.get(ggml_type)
    align = 32 if ggml_type in ("Q4_0", "Q4_1", "Q8_0") else 256
    if block is None or k % align:
        return None
    per_block = block[1] + _AMX_EXTRA_PER_BLOCK.get(ggml_type, 0)
    return n * (k // block[0]) * per_block


def cpu_repack_bytes(ggml_type: str, dims: tuple[int, ...], flags: Iterable[str], plain_bytes: int) -> int | None:
    """The CPU_REPACK buffer's size for one weight (its own bytes), None when that buffer does not take it."""
    return _cpu_repack_size(ggml_type, dims, *_cpu_repack_rule(frozenset(flags)), plain_bytes)


@lru_cache(maxsize=64)
def _cpu_repack_rule(flags: frozenset[str]) -> tuple[frozenset[str], bool]:
    """(the types CPU_REPACK takes on a CPU with ``flags``, whether the CPU is x86): asked once per CPU."""
    return frozenset(repacked_types(flags)), bool(flags & _X86_REPACK_FLAGS)


def _cpu_repack_size(ggml_type: str, dims: tuple[int, ...], repacked: frozenset[str], x86: bool,
                     plain_bytes: int) -> int | None:
    if ggml_type not in repacked:
        return None
    rows = dims[1]
    multiple = 4 if (not x86 and ggml_type in _FOUR_ROW_TYPES) else 8
    return plain_bytes if rows % multiple == 0 else None


def repacked_weights(shapes: Mapping[str, tuple[str, tuple[int, ...]]], tensor_bytes: Mapping[str, int],
                     extra_buffers: Iterable[str], cpu_flags: Iterable[str],
                     on_host: Iterable[str] | None = None) -> RepackedWeights:
    """What repacking adds for the weights in host memory (``on_host``: their names, every weight when None) on a CPU
    whose llama.cpp has ``extra_buffers`` (in the registry's order) and ``cpu_flags``. Worked out once per tensor
    table and arguments (every prediction of a file on this CPU asks the same)."""
    return _repacked_weights(shapes, tensor_bytes, tuple(extra_buffers), tuple(cpu_flags),
                             None if on_host is None else frozenset(on_host))


@by_identity(2)
def _repacked_weights(shapes: Mapping[str, tuple[str, tuple[int, ...]]], tensor_bytes: Mapping[str, int],
                      buffers: tuple[str, ...], flags: tuple[str, ...], host: frozenset[str] | None
                      ) -> RepackedWeights:
    by_buffer: dict[str, int] = {}
    count: dict[str, int] = {}
    repacked, x86 = _cpu_repack_rule(frozenset(flags))
    for name, (ggml_type, dims) in matmul_weights(shapes).items():
        source = "token_embd.weight" if name == TIED_OUTPUT else name
        if host is not None and source not in host and name not in host:
            continue
        for buf in buffers:
            if buf == "AMX":
                size = amx_bytes(ggml_type, dims)
            elif buf == "CPU_REPACK":
                size = _cpu_repack_size(ggml_type, dims, repacked, x86, int(tensor_bytes.get(source, 0)))
            else:
                continue
            if size is not None:
                by_buffer[buf] = by_buffer.get(buf, 0) + size
                count[buf] = count.get(buf, 0) + 1
                break
    unknown = tuple(b for b in buffers if b not in ("AMX", "CPU_REPACK"))
    return RepackedWeights(by_buffer, count, unknown)
