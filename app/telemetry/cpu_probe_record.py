"""The CPU probe's record and its per-machine cache: every figure with its source, and when a cached one is stale.

The cache is JSON in ``data_dir()/cpu_probe.json``, keyed by CPU model and core/thread counts. Each entry holds
the probe's figures, each figure's source (measured when, how many passes, busy or not, the load seen, the
spread of the passes) and the best quiet figures ever measured for that key (``best_seen``).

A cached probe is *stale*, and is measured again at the next chance, when it was taken while the machine was
busy, when it was recorded without a load check (schema 1, before passes and load were recorded), or when a
figure is implausibly far below the best seen for this CPU: a busy reading only ever lowers a figure, and a
ceiling read low would flatter every measurement against it.
"""

from __future__ import annotations

import json
import threading
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from app.atomic import write_text_atomic
from app.bounded_read import read_bounded_text
from app.paths import data_dir
from app.telemetry.host import machine_facts

CACHE_FILE = "cpu_probe.json"
CACHE_SCHEMA = 2
READABLE_SCHEMAS = (1, 2)  # schema 1 entries have no sources: they read as not load-checked, hence stale
DEFAULT_BUFFER_BYTES = 256 * 2**20  # source + destination together
DEFAULT_MATMUL_N = 2048
PLAUSIBLE_FRACTION = 0.7  # a cached figure below this share of the best seen for the CPU is measured again
FIGURES = ("bandwidth_gbps", "gflops_f32")

_cache_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class FigureSource:
    """Where one probed figure came from."""

    measured_at: str  # ISO-8601 UTC
    passes: int
    busy: bool | None  # None: recorded without a load check
    others_cpus: float | None = None  # other processes' CPU use during the pass kept (logical CPUs)
    load_1min: float | None = None  # load average when the probe started
    spread_frac: float | None = None  # (best - worst) / best over the passes


@dataclass(frozen=True, slots=True)
class CpuProbe:
    """Probed CPU figures: bandwidth in GB/s (10^9 B/s), float32 GFLOPS, threads used, ISO-8601 UTC time.

    ``busy``: True when a figure was taken while other processes used the CPU, None when nobody checked.
    """

    bandwidth_gbps: float
    gflops_f32: float
    n_threads: int
    measured_at: str
    buffer_bytes: int = DEFAULT_BUFFER_BYTES
    matmul_n: int = DEFAULT_MATMUL_N
    cached: bool = False  # True when read back from the cache rather than measured now
    busy: bool | None = False
    bandwidth_source: FigureSource | None = None
    gflops_source: FigureSource | None = None

    def source(self, figure: str) -> FigureSource | None:
        return self.bandwidth_source if figure == "bandwidth_gbps" else self.gflops_source

    def quiet(self, figure: str) -> bool:
        """True when ``figure`` was measured on a quiet machine."""
        src = self.source(figure)
        return (src.busy is False) if src is not None else self.busy is False


def combined_busy(sources: list[FigureSource | None]) -> bool | None:
    """True if any figure was busy, None if any was not load-checked, else False."""
    flags = [s.busy if s is not None else None for s in sources]
    return True if True in flags else None if None in flags else False


def cache_key(facts: dict[str, Any] | None = None) -> str:
    """Cache key for this machine: CPU model, physical cores, logical threads."""
    facts = facts or machine_facts()
    return f"{facts.get('cpu_model')}|{facts.get('cpu_cores_physical')}c|{facts.get('cpu_threads')}t"


def _cache_path() -> Path:
    return data_dir() / CACHE_FILE


def _read_cache(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(read_bounded_text(path))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("schema") not in READABLE_SCHEMAS or not isinstance(
            data.get("probes"), dict):
        return {}
    return data


def _source(raw: Any) -> FigureSource | None:
    if not isinstance(raw, dict):
        return None
    names = {f.name for f in fields(FigureSource)}
    try:
        return FigureSource(**{k: v for k, v in raw.items() if k in names})
    except TypeError:
        return None


def _probe_from(entry: dict[str, Any]) -> CpuProbe:
    srcs = {k: _source(entry.get(k)) for k in ("bandwidth_source", "gflops_source")}
    return CpuProbe(
        bandwidth_gbps=float(entry["bandwidth_gbps"]), gflops_f32=float(entry["gflops_f32"]),
        n_threads=int(entry["n_threads"]), measured_at=str(entry["measured_at"]),
        buffer_bytes=int(entry.get("buffer_bytes", DEFAULT_BUFFER_BYTES)),
        matmul_n=int(entry.get("matmul_n", DEFAULT_MATMUL_N)), cached=True,
        busy=entry["busy"] if entry.get("busy") in (True, False) else None, **srcs,
    )


def cached_entry(key: str | None = None) -> tuple[CpuProbe | None, dict[str, float]]:
    """(the cached probe or None, the best quiet figures seen) for this machine or ``key``."""
    entry = _read_cache(_cache_path()).get("probes", {}).get(key or cache_key())
    if not isinstance(entry, dict):
        return None, {}
    seen = entry.get("best_seen")
    best = {k: float(v) for k, v in seen.items() if k in FIGURES and isinstance(v, int | float)} \
        if isinstance(seen, dict) else {}
    try:
        return _probe_from(entry), best
    except (KeyError, TypeError, ValueError):
        return None, best


def stale_reason(probe: CpuProbe, best_seen: dict[str, float]) -> str | None:
    """Why ``probe`` should be measured again (busy, not load-checked, far below the best seen), or None."""
    if probe.busy is None:
        return "recorded without a load check"
    if probe.busy:
        seen = [s.others_cpus for s in (probe.bandwidth_source, probe.gflops_source) if s and s.others_cpus]
        return "taken while the machine was busy" + (f" (others used {max(seen):.1f} CPUs)" if seen else "")
    for fig in FIGURES:
        best, value = best_seen.get(fig), getattr(probe, fig)
        if best and value < PLAUSIBLE_FRACTION * best:
            return f"{fig} {value:.1f} is far below the best seen for this CPU ({best:.1f})"
    return None


def load_cached_probe(key: str | None = None, *, include_stale: bool = False) -> CpuProbe | None:
    """The cached probe for this machine (or ``key``); None when absent, unreadable, or stale (unless asked)."""
    probe, best = cached_entry(key)
    if probe is None or include_stale or stale_reason(probe, best) is None:
        return probe
    return None


def save_probe(probe: CpuProbe, key: str | None = None) -> Path:
    """Store ``probe`` under this machine's key (atomic replace; other machines' entries kept); raise the
    key's ``best_seen`` with the probe's quiet figures."""
    path = _cache_path()
    key = key or cache_key()
    with _cache_lock:
        data = _read_cache(path) or {"probes": {}}
        data["schema"] = CACHE_SCHEMA
        old = data["probes"].get(key)
        best = dict(old.get("best_seen") or {}) if isinstance(old, dict) else {}
        for fig in FIGURES:
            if probe.quiet(fig):
                best[fig] = max(float(best.get(fig) or 0.0), getattr(probe, fig))
        entry = asdict(probe)
        entry.pop("cached", None)
        entry["best_seen"] = best
        data["probes"][key] = entry
        write_text_atomic(path, json.dumps(data, indent=2, sort_keys=True), own_file=True)
    return path
