"""This CPU's compute peaks for the kernels llama.cpp runs: int8 dot products and float FMA. Pure functions.

ggml multiplies quantized weights (Q4_0 … Q8_0, the K-quants, the IQ types) against activations quantized to
Q8_0 / Q8_1 / Q8_K, with int8 dot products (x86: ``vpmaddubsw`` / ``vpdpbusd``; arm64: ``sdot`` / ``smmla``); see
``type_traits_cpu[].vec_dot_type`` in ggml-cpu.c. F32/F16/BF16 weights run float FMAs (x86 converts F16 to F32).
A peak is cores × clock × operations per cycle per core for the widest instructions the flags allow, counting
one int8 multiply-add as 2 operations, as a float FMA counts 2 FLOPs; so it compares with 2 × parameters per
token. Every other instruction of the kernel (widening, scaling, loads) shares the same ports, so the peak is a
true upper bound when the clock is the CPU's stated maximum.

The clock: cpufreq's maximum where the OS gives one; otherwise the reported clock, raised to the clock the
measured f32 matmul implies when that is higher (a matmul cannot beat the FMA peak, so the measured GFLOPS ÷
(cores × f32 FLOP per cycle) is a clock the CPU reached). Without flags or a clock no peak can be derived, and
the measured f32 matmul stands in for both, labelled a "measured roofline": measurements may exceed it.
There is no int8 probe: numpy has no int8 dot-product kernel, so a Python int8 matmul would measure numpy's
loops, not the CPU.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from app.telemetry.cpu_features import CpuFeatures

INT8_DOT_PEAK = "int8 dot peak"
FMA_PEAK = "FMA peak"
MEASURED_ROOFLINE = "measured roofline"

# (flags that must all be present, int8 MACs per cycle per core, what it is) — best first. AMX tiles are apart
# (_X86_AMX): ggml runs them only for weights repacked into its AMX buffer (llama-bench --repack 1, on a build
# compiled with AMX), never for weights as they are in the file.
_X86_AMX = (("amx_int8",), 1024, "AMX-INT8 tiles, 1024 int8 MACs/cycle")
_X86_INT8: tuple[tuple[tuple[str, ...], int, str], ...] = (
    (("avx512bw",), 128, "AVX-512 vpmaddubsw/vpdpbusd, 64 int8 MACs x 2 ports"),
    (("avx2",), 64, "AVX2 vpmaddubsw, 32 int8 MACs x 2 ports"),
    (("ssse3",), 32, "SSSE3 pmaddubsw, 16 int8 MACs x 2 ports"),
)
# (flags, f32 FLOP per cycle per core, widest float FLOP per cycle per core, what it is)
_X86_FLOAT: tuple[tuple[tuple[str, ...], int, int, str], ...] = (
    (("avx512f", "avx512_fp16"), 64, 128, "AVX-512 FP16 FMA, 32 lanes x 2 ports x 2"),
    (("avx512f", "avx512_bf16"), 64, 128, "AVX-512 vdpbf16ps, 32 bf16 pairs x 2 ports x 2"),
    (("avx512f",), 64, 64, "AVX-512 FMA, 16 f32 lanes x 2 ports x 2"),
    (("fma",), 32, 32, "FMA3, 8 f32 lanes x 2 ports x 2"),
    (("avx",), 16, 16, "AVX, 8-lane multiply + 8-lane add ports"),
    (("sse2",), 8, 8, "SSE2, 4-lane multiply + 4-lane add ports"),
)
# arm64: four 128-bit pipes, the most any core has (Apple M, Neoverse V2); wider SVE is not counted
_ARM_INT8 = (
    (("i8mm",), 128, "i8mm smmla, 32 int8 MACs x 4 pipes"),
    (("asimddp",), 64, "dotprod sdot, 16 int8 MACs x 4 pipes"),
    (("asimd",), 32, "NEON smlal, 8 int8 MACs x 4 pipes"),
)
_ARM_FLOAT = (
    (("asimd", "bf16"), 32, 128, "bfmmla, 16 bf16 MACs x 4 pipes x 2"),
    (("asimd", "asimdhp"), 32, 64, "NEON FP16 FMA, 8 lanes x 4 pipes x 2"),
    (("asimd",), 32, 32, "NEON FMA, 4 f32 lanes x 4 pipes x 2"),
)


@dataclass(frozen=True)
class ComputeFigure:
    """One compute figure in TFLOPS (1e12 operations/s; an int8 multiply-add counts 2) and what it is."""

    tflops: float
    kind: str  # INT8_DOT_PEAK | FMA_PEAK | MEASURED_ROOFLINE
    source: str  # how it was derived or measured, in words

    @property
    def is_ceiling(self) -> bool:
        """True for a derived peak (an upper bound); a measured roofline may be exceeded."""
        return self.kind != MEASURED_ROOFLINE


@dataclass(frozen=True)
class CpuPeaks:
    """The figure for quantized weights (``int8``) and for float weights (``fma``), and the clock behind them."""

    int8: ComputeFigure
    fma: ComputeFigure
    clock_ghz: float | None
    clock_source: str
    amx: ComputeFigure | None = None  # AMX-INT8 tiles: weights in llama.cpp's AMX buffer only; None without AMX

    def to_json_dict(self) -> dict[str, object]:
        return {"int8": asdict(self.int8), "fma": asdict(self.fma), "clock_ghz": self.clock_ghz,
                "clock_source": self.clock_source, "amx": asdict(self.amx) if self.amx else None}


def _first(table: tuple[Any, ...], features: CpuFeatures) -> Any:
    return next((row for row in table if features.has(*row[0])), None)


def simd_rates(features: CpuFeatures) -> tuple[tuple[int, str], tuple[int, int, str]] | None:
    """((int8 MACs/cycle/core, ISA), (f32 FLOP/cycle/core, widest float FLOP/cycle/core, ISA)); None if unknown."""
    if features.arch in ("x86_64", "amd64", "x86", "i686"):
        int8, flt = _first(_X86_INT8, features), _first(_X86_FLOAT, features)
    elif features.arch in ("aarch64", "arm64"):
        int8, flt = _first(_ARM_INT8, features), _first(_ARM_FLOAT, features)
    else:
        return None
    if int8 is None or flt is None:
        return None
    return (int8[1], int8[2]), (flt[1], flt[2], flt[3])


def _clock(features: CpuFeatures, f32_per_cycle: int, measured_gflops_f32: float) -> tuple[float | None, str]:
    """The clock a peak is derived at, and its source (see the module docstring)."""
    implied_ghz = measured_gflops_f32 / (features.cores * f32_per_cycle) if measured_gflops_f32 > 0 else 0.0
    stated = features.clock_ghz
    if stated is not None and features.clock_is_max and stated >= implied_ghz:
        return stated, f"{stated:.2f} GHz, the CPU's stated maximum (cpufreq)"
    if implied_ghz and (stated is None or implied_ghz > stated):
        said = f"the OS states {stated:.2f} GHz ({features.clock_source})" if stated else "the OS states no clock"
        return implied_ghz, (f"{implied_ghz:.2f} GHz, implied by the measured f32 matmul "
                             f"({measured_gflops_f32:.0f} GFLOPS at the FMA peak); {said}")
    if stated is None:
        return None, features.clock_source
    return stated, (f"{stated:.2f} GHz reported ({features.clock_source}; no stated maximum; "
                    f"the f32 matmul implies at least {implied_ghz:.2f} GHz)")


def derive_peaks(features: CpuFeatures, measured_gflops_f32: float,
                 measured_note: str = "f32 matmul probe") -> CpuPeaks:
    """The int8 and FMA peaks of ``features``; a measured roofline (the f32 matmul) where none can be derived."""
    rates = simd_rates(features)
    clock_ghz, clock_source = (_clock(features, rates[1][0], measured_gflops_f32) if rates
                               else (features.clock_ghz, features.clock_source))
    if rates is None or clock_ghz is None:
        why = "no SIMD flags known for this CPU" if rates is None else clock_source
        roof = ComputeFigure(measured_gflops_f32 / 1e3, MEASURED_ROOFLINE, f"{measured_note} ({why})")
        return CpuPeaks(int8=roof, fma=roof, clock_ghz=clock_ghz, clock_source=clock_source)
    (int8_macs, int8_isa), (_f32, float_flops, float_isa) = rates
    n = features.cores
    int8 = ComputeFigure(n * clock_ghz * int8_macs * 2 / 1e3, INT8_DOT_PEAK,
                         f"{n} cores x {clock_ghz:.2f} GHz x {int8_macs} int8 MACs/cycle x 2 ({int8_isa})")
    fma = ComputeFigure(n * clock_ghz * float_flops / 1e3, FMA_PEAK,
                        f"{n} cores x {clock_ghz:.2f} GHz x {float_flops} FLOP/cycle ({float_isa})")
    amx = None
    if features.arch in ("x86_64", "amd64") and features.has(*_X86_AMX[0]):
        amx = ComputeFigure(n * clock_ghz * _X86_AMX[1] * 2 / 1e3, INT8_DOT_PEAK,
                            f"{n} cores x {clock_ghz:.2f} GHz x {_X86_AMX[1]} int8 MACs/cycle x 2 ({_X86_AMX[2]}; "
                            "weights repacked into llama.cpp's AMX buffer)")
    return CpuPeaks(int8=int8, fma=fma, clock_ghz=clock_ghz, clock_source=clock_source, amx=amx)
