"""What this CPU's vector units can do: its SIMD flags, its cores and its clock, read from the OS (Linux).

These are the facts a compute peak is derived from (:mod:`app.telemetry.cpu_peaks`). Only the flags that
change a peak are kept. Nothing here raises: a fact the OS does not give is None (or empty), with the
reason in ``clock_source``.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass
from pathlib import Path

from app.telemetry.cpu_identity import cpuinfo_path, read_cpuinfo
from app.telemetry.host import machine_facts, usable_cpu_threads

#: /proc/cpuinfo flags that change an int8 or float peak (x86 "flags", arm64 "Features").
PEAK_FLAGS = frozenset({
    "sse2", "ssse3", "avx", "fma", "avx2", "f16c", "avx_vnni", "avx512f", "avx512bw", "avx512_vnni",
    "avx512_bf16", "avx512_fp16", "amx_int8", "amx_bf16", "amx_tile",  # x86
    "asimd", "asimddp", "asimdhp", "i8mm", "bf16", "sve", "sve2", "svei8mm",  # arm64
})
SYS_CPU = Path("/sys/devices/system/cpu")


@dataclass(frozen=True)
class CpuFeatures:
    """Facts a compute peak needs. ``clock_ghz`` is the highest clock the OS states, None when it states none."""

    arch: str  # "x86_64", "aarch64", ... (platform.machine(), lower case)
    flags: tuple[str, ...]  # sorted, only PEAK_FLAGS
    cores: int  # physical cores this process may use: min(physical cores, usable logical CPUs)
    clock_ghz: float | None
    clock_source: str  # "cpufreq max" (a true maximum) | "cpuinfo MHz" (the clock reported now) | why none

    @property
    def clock_is_max(self) -> bool:
        """True when ``clock_ghz`` is the OS's stated maximum (boost included), so a peak from it is a bound."""
        return self.clock_source == "cpufreq max"

    def has(self, *flags: str) -> bool:
        """True when every one of ``flags`` is present."""
        return all(f in self.flags for f in flags)


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def cpuinfo_flags(text: str) -> tuple[str, ...]:
    """The PEAK_FLAGS in /proc/cpuinfo's first ``flags`` (x86) or ``Features`` (arm64) line."""
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip().lower() in ("flags", "features"):
            return tuple(sorted(set(value.split()) & PEAK_FLAGS))
    return ()


def cpuinfo_max_mhz(text: str) -> float | None:
    """The highest ``cpu MHz`` line in /proc/cpuinfo (the clock each CPU runs at now; in a VM, the nominal one)."""
    values = []
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip().lower() == "cpu mhz":
            try:
                values.append(float(value))
            except ValueError:
                continue
    return max(values) if values else None


def cpufreq_max_khz(sys_cpu: Path = SYS_CPU) -> float | None:
    """The highest ``cpufreq/cpuinfo_max_freq`` over the CPUs (kHz, boost included), None without cpufreq."""
    values = []
    for path in sys_cpu.glob("cpu[0-9]*/cpufreq/cpuinfo_max_freq"):
        try:
            values.append(float((_read(path) or "").strip()))
        except ValueError:
            continue
    return max(values) if values else None


def clock_of(cpuinfo_text: str, sys_cpu: Path = SYS_CPU) -> tuple[float | None, str]:
    """(clock in GHz, where it came from): cpufreq's maximum, else /proc/cpuinfo's MHz, else (None, why)."""
    khz = cpufreq_max_khz(sys_cpu)
    if khz:
        return khz / 1e6, "cpufreq max"
    mhz = cpuinfo_max_mhz(cpuinfo_text)
    if mhz:
        return mhz / 1e3, "cpuinfo MHz"
    return None, "the OS states no clock"


def read_cpu_features(cpuinfo: Path | None = None, sys_cpu: Path = SYS_CPU,
                      cores_physical: int | None = None) -> CpuFeatures:
    """This CPU's features (on Linux, or from a stand-in cpuinfo: app.telemetry.cpu_identity; elsewhere no flags and
    no clock, so no peak is derived)."""
    cpuinfo = cpuinfo or cpuinfo_path()
    text = read_cpuinfo(cpuinfo) or ""
    if cores_physical is None:
        cores_physical = machine_facts().get("cpu_cores_physical")
    cores = min(cores_physical or usable_cpu_threads(), usable_cpu_threads())
    clock_ghz, source = clock_of(text, sys_cpu) if text else (None, f"no {cpuinfo}")
    return CpuFeatures(arch=platform.machine().lower(), flags=cpuinfo_flags(text), cores=max(cores, 1),
                       clock_ghz=clock_ghz, clock_source=source)
