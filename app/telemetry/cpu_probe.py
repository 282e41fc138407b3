"""Built-in CPU probe: memory bandwidth (multi-threaded numpy copy) and float32 matmul GFLOPS.

Bandwidth: one thread per usable logical CPU, each running ``np.copyto`` on its own slice of two buffers far larger
than the last-level cache (256 MiB in all by default). numpy releases the GIL inside the copy, so the threads run in
parallel. Bytes counted per pass: read + written (2 x the source size), the STREAM "copy" convention; the
write-allocate read a CPU may add is not counted, so this is a floor on what the memory moves. Best of several passes.

Compute: best of several ``float32`` matmuls (2 n^3 flops) through numpy's BLAS, which uses its own threads.

Results are cached as JSON in ``data_dir()/cpu_probe.json``, keyed by CPU model and core/thread counts.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from app.paths import data_dir
from app.telemetry.host import machine_facts, usable_cpu_threads

CACHE_FILE = "cpu_probe.json"
CACHE_SCHEMA = 1
DEFAULT_BUFFER_BYTES = 256 * 2**20  # source + destination together
DEFAULT_MATMUL_N = 2048

_cache_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class CpuProbe:
    """Probed CPU figures: bandwidth in GB/s (10^9 B/s), float32 GFLOPS, threads used, ISO-8601 UTC time."""

    bandwidth_gbps: float
    gflops_f32: float
    n_threads: int
    measured_at: str
    buffer_bytes: int = DEFAULT_BUFFER_BYTES
    matmul_n: int = DEFAULT_MATMUL_N
    cached: bool = False  # True when read back from the cache rather than measured now


def measure_bandwidth_gbps(
    buffer_bytes: int = DEFAULT_BUFFER_BYTES, n_threads: int | None = None, repeats: int = 5
) -> float:
    """Best copy bandwidth in GB/s over ``repeats`` passes, ``n_threads`` threads on disjoint slices."""
    n_threads = n_threads or usable_cpu_threads()
    n_items = max(n_threads * 1024, buffer_bytes // 2 // 8)  # float64 items per buffer
    src = np.ones(n_items, dtype=np.float64)
    dst = np.empty_like(src)
    bounds = np.linspace(0, n_items, n_threads + 1, dtype=np.int64)
    slices = [slice(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]

    def copy(part: slice) -> None:
        np.copyto(dst[part], src[part])

    bytes_per_pass = 2 * src.nbytes
    best_s = float("inf")
    with ThreadPoolExecutor(max_workers=n_threads) as pool:
        list(pool.map(copy, slices))  # warm-up: fault in the destination pages
        for _ in range(repeats):
            t0_ns = time.perf_counter_ns()
            list(pool.map(copy, slices))
            best_s = min(best_s, (time.perf_counter_ns() - t0_ns) / 1e9)
    return bytes_per_pass / best_s / 1e9


def measure_read_bandwidth_gbps(
    buffer_bytes: int = DEFAULT_BUFFER_BYTES, n_threads: int | None = None, repeats: int = 5
) -> float:
    """Best read-only bandwidth in GB/s: threads sum disjoint slices of one large float32 array.

    Decode streams weights without writing them back, so a read probe is the closer ceiling; a copy also
    pays for the destination's write-allocate traffic on many CPUs.
    """
    n_threads = n_threads or usable_cpu_threads()
    src = np.ones(max(n_threads * 1024, buffer_bytes // 4), dtype=np.float32)
    bounds = np.linspace(0, src.size, n_threads + 1, dtype=np.int64)
    slices = [slice(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]

    def read(part: slice) -> float:
        return float(np.add.reduce(src[part]))

    best_s = float("inf")
    with ThreadPoolExecutor(max_workers=n_threads) as pool:
        list(pool.map(read, slices))
        for _ in range(repeats):
            t0_ns = time.perf_counter_ns()
            list(pool.map(read, slices))
            best_s = min(best_s, (time.perf_counter_ns() - t0_ns) / 1e9)
    return src.nbytes / best_s / 1e9


def measure_gflops_f32(n: int = DEFAULT_MATMUL_N, repeats: int = 3) -> float:
    """Best float32 ``n x n`` matmul rate in GFLOPS (2 n^3 flops per product)."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    out = np.empty((n, n), dtype=np.float32)
    np.matmul(a, b, out=out)  # warm-up: BLAS threads, page faults
    best_s = float("inf")
    for _ in range(repeats):
        t0_ns = time.perf_counter_ns()
        np.matmul(a, b, out=out)
        best_s = min(best_s, (time.perf_counter_ns() - t0_ns) / 1e9)
    return 2 * n**3 / best_s / 1e9


def cache_key(facts: dict[str, Any] | None = None) -> str:
    """Cache key for this machine: CPU model, physical cores, logical threads."""
    facts = facts or machine_facts()
    return f"{facts.get('cpu_model')}|{facts.get('cpu_cores_physical')}c|{facts.get('cpu_threads')}t"


def _cache_path() -> Path:
    return data_dir() / CACHE_FILE


def _read_cache(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("schema") != CACHE_SCHEMA or not isinstance(data.get("probes"), dict):
        return {}
    return data


def load_cached_probe(key: str | None = None) -> CpuProbe | None:
    """The cached probe for this machine (or ``key``), or None when absent or unreadable."""
    entry = _read_cache(_cache_path()).get("probes", {}).get(key or cache_key())
    if not isinstance(entry, dict):
        return None
    try:
        return CpuProbe(
            bandwidth_gbps=float(entry["bandwidth_gbps"]),
            gflops_f32=float(entry["gflops_f32"]),
            n_threads=int(entry["n_threads"]),
            measured_at=str(entry["measured_at"]),
            buffer_bytes=int(entry.get("buffer_bytes", DEFAULT_BUFFER_BYTES)),
            matmul_n=int(entry.get("matmul_n", DEFAULT_MATMUL_N)),
            cached=True,
        )
    except (KeyError, TypeError, ValueError):
        return None


def save_probe(probe: CpuProbe, key: str | None = None) -> Path:
    """Store ``probe`` under this machine's key (atomic replace; other machines' entries kept)."""
    path = _cache_path()
    with _cache_lock:
        data = _read_cache(path) or {"schema": CACHE_SCHEMA, "probes": {}}
        entry = asdict(probe)
        entry.pop("cached", None)
        data["probes"][key or cache_key()] = entry
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True), encoding="utf-8")
        tmp.replace(path)
    return path


def probe_cpu(
    cache: bool = True,
    *,
    buffer_bytes: int = DEFAULT_BUFFER_BYTES,
    matmul_n: int = DEFAULT_MATMUL_N,
    n_threads: int | None = None,
    repeats: int = 5,
    refresh: bool = False,
) -> CpuProbe:
    """Probe this CPU's memory bandwidth and float32 GFLOPS (~1-2 s on a 2-core machine at the defaults).

    With ``cache`` the stored result for this machine is returned if there is one, and a fresh one is stored;
    ``refresh`` measures again and keeps, figure by figure, the better of the new and the stored result (a
    busy machine only ever lowers a probe, and a ceiling read low would flatter every measurement against it).
    Without ``cache`` the probe always runs and nothing is read or written.
    """
    key = cache_key() if cache else None
    old = load_cached_probe(key) if key is not None else None
    if old is not None and not refresh:
        return old
    n_threads = n_threads or usable_cpu_threads()
    probe = CpuProbe(
        bandwidth_gbps=max(measure_bandwidth_gbps(buffer_bytes, n_threads, repeats),
                           measure_read_bandwidth_gbps(buffer_bytes, n_threads, repeats)),
        gflops_f32=measure_gflops_f32(matmul_n, max(1, repeats - 2)),
        n_threads=n_threads,
        measured_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        buffer_bytes=buffer_bytes,
        matmul_n=matmul_n,
    )
    if old is not None and (old.bandwidth_gbps > probe.bandwidth_gbps or old.gflops_f32 > probe.gflops_f32):
        probe = replace(probe, bandwidth_gbps=max(old.bandwidth_gbps, probe.bandwidth_gbps),
                        gflops_f32=max(old.gflops_f32, probe.gflops_f32))
    if key is not None:
        try:
            save_probe(probe, key)
        except OSError:
            pass  # an unwritable data dir must not lose the measurement
    return probe
