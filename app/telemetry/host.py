"""Host (CPU, RAM, process) facts and readings (the only module that imports ``psutil``).

Readings that cannot be taken (process gone, access denied) are None; nothing here raises after construction.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil

from app.telemetry.cpu_identity import identity_overridden, read_cpuinfo

HOST_SAMPLE_KEYS: tuple[str, ...] = ("rss_bytes", "cpu_pct", "sys_ram_used_bytes", "sys_ram_total_bytes")


def _cpu_model_linux(cpuinfo: Path | None = None) -> str | None:
    """``model name`` from /proc/cpuinfo (x86; or its stand-in, app.telemetry.cpu_identity); ARM kernels may give
    ``Hardware`` or ``Model`` instead."""
    text = read_cpuinfo(cpuinfo)
    if text is None:
        return None
    found: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        key, value = key.strip().lower(), value.strip()
        if sep and value and key in ("model name", "hardware", "model") and key not in found:
            found[key] = value
    return found.get("model name") or found.get("hardware") or found.get("model")


def _cpu_model_macos() -> str | None:
    try:
        out = subprocess.run(
            ["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True, text=True, timeout=2, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def _cpu_model_windows() -> str | None:
    if sys.platform != "win32":  # winreg is Windows only (and a type checker elsewhere knows none of it)
        return None
    try:
        import winreg

        key = winreg.OpenKey(winreg.HKEY_LOCAL_MACHINE, r"HARDWARE\DESCRIPTION\System\CentralProcessor\0")
        value, _ = winreg.QueryValueEx(key, "ProcessorNameString")
        return str(value).strip() or None
    except (ImportError, OSError):
        return None


def cpu_model() -> str:
    """Human-readable CPU model name, with platform fallbacks; never empty."""
    model: str | None = None
    if identity_overridden() or sys.platform.startswith("linux"):
        model = _cpu_model_linux()
    elif sys.platform == "darwin":
        model = _cpu_model_macos()
    elif sys.platform == "win32":
        model = _cpu_model_windows()
    return model or platform.processor() or platform.machine() or "unknown CPU"


def usable_cpu_threads() -> int:
    """Logical CPUs this process may run on (affinity / container limits where the OS tells), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def machine_facts() -> dict[str, Any]:
    """CPU model, core/thread counts, total RAM, OS and Python version; a count the OS hides is None."""
    try:
        cores_physical = psutil.cpu_count(logical=False)
    except Exception:
        cores_physical = None
    try:
        ram_total_bytes: int | None = int(psutil.virtual_memory().total)
    except Exception:
        ram_total_bytes = None
    return {
        "cpu_model": cpu_model(),
        "cpu_cores_physical": cores_physical,
        "cpu_threads": psutil.cpu_count(logical=True) or os.cpu_count(),
        "cpu_threads_usable": usable_cpu_threads(),
        "ram_total_bytes": ram_total_bytes,
        "os": platform.platform(),
        "python": platform.python_version(),
    }


def cpu_busy_seconds() -> float | None:
    """CPU time all logical CPUs spent busy since boot, in seconds (user, system, irq and time stolen by the
    hypervisor; not idle or I/O wait; guest time is inside user). None when the OS does not say."""
    try:
        t = psutil.cpu_times()
    except Exception:
        return None
    return float(sum(getattr(t, k, 0.0) for k in ("user", "nice", "system", "irq", "softirq", "steal")))


def parent_cpu_seconds() -> float:
    """CPU seconds (user + system) the parent process has used: for the worker, the window or CLI that started it
    (the workbench itself, not another program); 0.0 when the OS does not say."""
    try:
        parent = psutil.Process().parent()
        if parent is None:
            return 0.0
        t = parent.cpu_times()
    except Exception:
        return 0.0
    return float(t.user + t.system)


def power_source() -> str | None:
    """What powers the machine now: "ac" (plugged in) or "battery"; None where the OS reports no battery (a desktop,
    a VM) or cannot say. A laptop on battery runs its CPU and GPU at lower power limits, so a row records it."""
    try:
        battery = psutil.sensors_battery()
    except Exception:
        return None
    if battery is None or battery.power_plugged is None:
        return None
    return "ac" if battery.power_plugged else "battery"


def system_ram() -> tuple[int | None, int | None]:
    """(used, total) system RAM in bytes; used = total - available (what other programs cannot get back)."""
    try:
        vm = psutil.virtual_memory()
    except Exception:
        return None, None
    return int(vm.total - vm.available), int(vm.total)


class ProcessProbe:
    """Reads one process's RSS and CPU use plus system RAM. ``pid=None`` reads the system figures only.

    ``cpu_pct`` is the process's CPU time over wall time since the previous read, in percent of one logical CPU
    (so 2 busy threads read ~200); the first read after construction covers the time since construction.
    """

    def __init__(self, pid: int | None) -> None:
        self.pid = pid
        self._proc: psutil.Process | None = None
        if pid is not None:
            try:
                self._proc = psutil.Process(pid)
                self._proc.cpu_percent(interval=None)  # prime: the next call measures from here
            except Exception:
                self._proc = None

    def read(self) -> dict[str, float | None]:
        """One reading; keys are :data:`HOST_SAMPLE_KEYS`, each None when it cannot be read. Never raises."""
        rss_bytes: float | None = None
        cpu_pct: float | None = None
        proc = self._proc
        if proc is not None:
            try:
                with proc.oneshot():
                    rss_bytes = float(proc.memory_info().rss)
                    cpu_pct = float(proc.cpu_percent(interval=None))
            except Exception:  # NoSuchProcess, AccessDenied, ZombieProcess
                rss_bytes = cpu_pct = None
        used, total = system_ram()
        return {
            "rss_bytes": rss_bytes,
            "cpu_pct": cpu_pct,
            "sys_ram_used_bytes": float(used) if used is not None else None,
            "sys_ram_total_bytes": float(total) if total is not None else None,
        }
