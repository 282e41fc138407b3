"""CPU features from /proc/cpuinfo and cpufreq, and the int8 / FMA peaks derived from them, by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.telemetry.cpu_features import CpuFeatures, clock_of, cpuinfo_flags, read_cpu_features
from app.telemetry.cpu_peaks import FMA_PEAK, INT8_DOT_PEAK, MEASURED_ROOFLINE, derive_peaks
from app.telemetry.cpu_report import compute_lines

# recorded from the 2-core AMD EPYC (Zen 3, KVM) dev machine: AVX2 + FMA, no AVX-512, no cpufreq
EPYC_CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC
cpu MHz\t\t: 2445.434
flags\t\t: fpu sse sse2 ssse3 fma sse4_1 sse4_2 avx f16c avx2 bmi2 sha_ni vaes vpclmulqdq

processor\t: 1
cpu MHz\t\t: 2445.434
"""
ARM_CPUINFO = "processor\t: 0\nFeatures\t: fp asimd evtstrm aes crc32 asimdhp asimddp sha512 i8mm bf16\n"


def _epyc(clock_ghz: float | None = 2.445434, source: str = "cpuinfo MHz") -> CpuFeatures:
    return CpuFeatures("x86_64", cpuinfo_flags(EPYC_CPUINFO), 2, clock_ghz, source)


def test_flags_and_clock_from_recorded_cpuinfo(tmp_path: Path) -> None:
    assert cpuinfo_flags(EPYC_CPUINFO) == ("avx", "avx2", "f16c", "fma", "sse2", "ssse3")
    assert cpuinfo_flags(ARM_CPUINFO) == ("asimd", "asimddp", "asimdhp", "bf16", "i8mm")
    assert clock_of(EPYC_CPUINFO, tmp_path) == (pytest.approx(2.445434), "cpuinfo MHz")
    for cpu, khz in (("cpu0", "3500000"), ("cpu1", "3700000")):
        (tmp_path / cpu / "cpufreq").mkdir(parents=True)
        (tmp_path / cpu / "cpufreq" / "cpuinfo_max_freq").write_text(khz + "\n")
    assert clock_of(EPYC_CPUINFO, tmp_path) == (pytest.approx(3.7), "cpufreq max")
    assert clock_of("", tmp_path / "none")[0] is None


@pytest.mark.cpu_identity
def test_this_machines_features_never_raise(tmp_path: Path) -> None:
    features = read_cpu_features()
    assert features.cores >= 1
    missing = read_cpu_features(tmp_path / "no-cpuinfo", tmp_path)
    assert missing.flags == () and missing.clock_ghz is None


def test_avx2_peaks_by_hand_at_a_stated_maximum() -> None:
    peaks = derive_peaks(_epyc(3.7, "cpufreq max"), measured_gflops_f32=190.0)
    assert peaks.int8.kind == INT8_DOT_PEAK and peaks.fma.kind == FMA_PEAK
    assert peaks.int8.tflops == pytest.approx(2 * 3.7e9 * 64 * 2 / 1e12)  # 0.947 TOPS
    assert peaks.fma.tflops == pytest.approx(2 * 3.7e9 * 32 / 1e12)  # 0.237 TFLOPS
    assert peaks.int8.is_ceiling and "cpufreq" in peaks.clock_source


def test_a_matmul_faster_than_the_reported_clock_allows_raises_the_clock() -> None:
    peaks = derive_peaks(_epyc(), measured_gflops_f32=190.2)  # 190 GFLOPS > 2 × 2.45 GHz × 32 = 156.5
    assert peaks.clock_ghz == pytest.approx(190.2 / 64)
    assert peaks.fma.tflops == pytest.approx(0.1902)  # the matmul sits exactly at the FMA peak, never above
    assert peaks.int8.tflops == pytest.approx(4 * 0.1902)  # AVX2: 64 int8 MACs vs 16 f32 FMAs per cycle
    assert "implied by the measured f32 matmul" in peaks.clock_source and "2.45 GHz" in peaks.clock_source
    slow = derive_peaks(_epyc(), measured_gflops_f32=85.9)  # a busy probe never lowers the clock
    assert slow.clock_ghz == pytest.approx(2.445434)


def test_arm_i8mm_and_unknown_cpus() -> None:
    arm = CpuFeatures("aarch64", cpuinfo_flags(ARM_CPUINFO), 8, 3.2, "cpufreq max")
    peaks = derive_peaks(arm, measured_gflops_f32=300.0)
    assert peaks.int8.tflops == pytest.approx(8 * 3.2e9 * 128 * 2 / 1e12)
    assert peaks.fma.tflops == pytest.approx(8 * 3.2e9 * 128 / 1e12)  # bf16 bfmmla is the widest float path
    unknown = derive_peaks(CpuFeatures("riscv64", (), 4, 2.0, "cpufreq max"), measured_gflops_f32=40.0)
    assert unknown.int8.kind == unknown.fma.kind == MEASURED_ROOFLINE
    assert unknown.int8.tflops == pytest.approx(0.04) and not unknown.int8.is_ceiling
    no_clock = derive_peaks(CpuFeatures("x86_64", ("avx2", "fma"), 4, None, "the OS states no clock"), 0.0)
    assert no_clock.fma.kind == MEASURED_ROOFLINE
    assert any("not a ceiling" in line for line in compute_lines(unknown.to_json_dict()))


def test_hw_lines_name_each_figure() -> None:
    lines = "\n".join(compute_lines(derive_peaks(_epyc(), measured_gflops_f32=190.2).to_json_dict()))
    assert "761 GOPS int8 dot peak" in lines and "190 GFLOPS FMA peak" in lines
    assert "AVX2" in lines and "FMA3" in lines
