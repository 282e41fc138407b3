"""Built-in CPU probe: memory bandwidth (multi-threaded numpy copy and read) and float32 matmul GFLOPS.

Bandwidth: one thread per usable logical CPU, each running ``np.copyto`` on its own slice of two buffers far larger
than the last-level cache (256 MiB in all by default). numpy releases the GIL inside the copy, so the threads run in
parallel. Bytes counted per copy: read + written (2 x the source size), the STREAM "copy" convention; the
write-allocate read a CPU may add is not counted, so this is a floor on what the memory moves. A read-only pass
(threads summing disjoint slices) is taken too, and the higher of the two kept: decode only reads weights.

Compute: ``float32`` matmuls (2 n^3 flops) through numpy's BLAS, which uses its own threads.

The probe takes several short passes and keeps, per figure, the best pass taken while the machine was quiet
(the best pass of all, marked busy, when none was). Around each pass it measures the other processes' CPU use
(:mod:`app.telemetry.cpu_load`); every figure records its source: when, how many passes, busy or not, the
load, and the spread of the passes. The record and its cache: :mod:`app.telemetry.cpu_probe_record`.
"""

from __future__ import annotations

import datetime as dt
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from app.telemetry.cpu_load import LoadReading, LoadSources, LoadWindow
from app.telemetry.cpu_probe_record import (
    CACHE_FILE,
    CACHE_SCHEMA,
    DEFAULT_BUFFER_BYTES,
    DEFAULT_MATMUL_N,
    CpuProbe,
    FigureSource,
    cache_key,
    cached_entry,
    combined_busy,
    load_cached_probe,
    save_probe,
    stale_reason,
)
from app.telemetry.host import usable_cpu_threads

__all__ = ["CACHE_FILE", "CACHE_SCHEMA", "CpuProbe", "FigureSource", "cache_key", "load_cached_probe",
           "probe_cpu", "save_probe"]

DEFAULT_PASSES = 3


@dataclass(frozen=True)
class PassResult:
    """One pass: best copy/read bandwidth (GB/s), best matmul rate (GFLOPS), and the load while it ran."""

    bandwidth_gbps: float
    gflops_f32: float
    load: LoadReading
    busy: bool


class _Bench:
    """The probe's buffers and threads, allocated once for all passes."""

    def __init__(self, buffer_bytes: int, n_threads: int, matmul_n: int) -> None:
        import numpy as np

        self.n_threads = n_threads
        n_items = max(n_threads * 1024, buffer_bytes // 2 // 8)  # float64 items per copy buffer
        self.src = np.ones(n_items, dtype=np.float64)
        self.dst = np.empty_like(self.src)
        self.slices = self._slices(n_items)
        rng = np.random.default_rng(0)
        self.a = rng.standard_normal((matmul_n, matmul_n), dtype=np.float32)
        self.b = rng.standard_normal((matmul_n, matmul_n), dtype=np.float32)
        self.out = np.empty((matmul_n, matmul_n), dtype=np.float32)
        self.pool = ThreadPoolExecutor(max_workers=n_threads)
        list(self.pool.map(self._copy, self.slices))  # warm-up: fault in the destination pages
        np.matmul(self.a, self.b, out=self.out)  # warm-up: BLAS threads

    def _slices(self, n_items: int) -> list[slice]:
        import numpy as np

        bounds = np.linspace(0, n_items, self.n_threads + 1, dtype=np.int64)
        return [slice(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]

    def _copy(self, part: slice) -> None:
        import numpy as np

        np.copyto(self.dst[part], self.src[part])

    def _read(self, part: slice) -> float:
        import numpy as np

        return float(np.add.reduce(self.src[part]))

    @staticmethod
    def _best_s(run: object, repeats: int) -> float:
        best_s = float("inf")
        for _ in range(repeats):
            t0_ns = time.perf_counter_ns()
            run()  # type: ignore[operator]
            best_s = min(best_s, (time.perf_counter_ns() - t0_ns) / 1e9)
        return best_s

    def bandwidth_gbps(self, repeats: int) -> float:
        """The better of copy (read + write counted) and read-only bandwidth, GB/s."""
        copy_s = self._best_s(lambda: list(self.pool.map(self._copy, self.slices)), repeats)
        read_s = self._best_s(lambda: list(self.pool.map(self._read, self.slices)), repeats)
        return max(2 * self.src.nbytes / copy_s, self.src.nbytes / read_s) / 1e9

    def gflops_f32(self, repeats: int) -> float:
        import numpy as np

        n = self.a.shape[0]
        return float(2 * n**3 / self._best_s(lambda: np.matmul(self.a, self.b, out=self.out), repeats) / 1e9)

    def close(self) -> None:
        self.pool.shutdown()


def run_passes(bench: _Bench, passes: int, repeats: int, load: LoadSources) -> list[PassResult]:
    """``passes`` passes of bandwidth and matmul, each inside its own load window."""
    out = []
    for _ in range(max(1, passes)):
        window = LoadWindow(load).start()
        bw = bench.bandwidth_gbps(repeats)
        gflops = bench.gflops_f32(max(1, repeats - 1))
        reading = window.stop()
        out.append(PassResult(bw, gflops, reading, reading.busy(bench.n_threads)))
    return out


def best_of(results: list[PassResult], figure: str, measured_at: str) -> tuple[float, FigureSource]:
    """The best value of ``figure`` among the quiet passes (all passes, marked busy, when none was quiet)."""
    quiet = [r for r in results if not r.busy]
    pool = quiet or results
    best = max(pool, key=lambda r: getattr(r, figure))
    values = [getattr(r, figure) for r in results]
    top = max(values)
    return getattr(best, figure), FigureSource(
        measured_at=measured_at, passes=len(results), busy=not quiet, others_cpus=best.load.others_cpus,
        load_1min=results[0].load.load_1min, spread_frac=(top - min(values)) / top if top > 0 else None,
    )


def _rank(probe: CpuProbe, figure: str) -> tuple[bool, float]:
    return probe.quiet(figure), getattr(probe, figure)


def _source_of(probe: CpuProbe, figure: str) -> FigureSource:
    """The figure's source; for a record without one, its time and busy flag (passes 0: unknown)."""
    return probe.source(figure) or FigureSource(measured_at=probe.measured_at, passes=0, busy=probe.busy)


def merge(new: CpuProbe, old: CpuProbe | None) -> CpuProbe:
    """Figure by figure, the better of ``new`` and ``old``: a quiet reading beats a busy one, then the higher."""
    if old is None:
        return new
    keep_bw = _rank(old, "bandwidth_gbps") > _rank(new, "bandwidth_gbps")
    keep_gf = _rank(old, "gflops_f32") > _rank(new, "gflops_f32")
    bw_src = _source_of(old, "bandwidth_gbps") if keep_bw else _source_of(new, "bandwidth_gbps")
    gf_src = _source_of(old, "gflops_f32") if keep_gf else _source_of(new, "gflops_f32")
    return CpuProbe(
        bandwidth_gbps=old.bandwidth_gbps if keep_bw else new.bandwidth_gbps,
        gflops_f32=old.gflops_f32 if keep_gf else new.gflops_f32,
        n_threads=new.n_threads, measured_at=new.measured_at, buffer_bytes=new.buffer_bytes,
        matmul_n=new.matmul_n, busy=combined_busy([bw_src, gf_src]), bandwidth_source=bw_src, gflops_source=gf_src,
    )


def measure_probe(*, buffer_bytes: int = DEFAULT_BUFFER_BYTES, matmul_n: int = DEFAULT_MATMUL_N,
                  n_threads: int | None = None, repeats: int = 2, passes: int = DEFAULT_PASSES,
                  load: LoadSources | None = None) -> CpuProbe:
    """Measure now: ``passes`` passes of ``repeats`` timings each; nothing is read from or written to the cache."""
    n_threads = n_threads or usable_cpu_threads()
    measured_at = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    bench = _Bench(buffer_bytes, n_threads, matmul_n)
    try:
        results = run_passes(bench, passes, repeats, load or LoadSources())
    finally:
        bench.close()
    bw, bw_src = best_of(results, "bandwidth_gbps", measured_at)
    gf, gf_src = best_of(results, "gflops_f32", measured_at)
    return CpuProbe(bandwidth_gbps=bw, gflops_f32=gf, n_threads=n_threads, measured_at=measured_at,
                    buffer_bytes=buffer_bytes, matmul_n=matmul_n, busy=combined_busy([bw_src, gf_src]),
                    bandwidth_source=bw_src, gflops_source=gf_src)


def probe_cpu(
    cache: bool = True,
    *,
    buffer_bytes: int = DEFAULT_BUFFER_BYTES,
    matmul_n: int = DEFAULT_MATMUL_N,
    n_threads: int | None = None,
    repeats: int = 2,
    passes: int = DEFAULT_PASSES,
    refresh: bool = False,
    load: LoadSources | None = None,
) -> CpuProbe:
    """Probe this CPU's memory bandwidth and float32 GFLOPS (~1-2 s on a 2-core machine at the defaults).

    With ``cache`` the stored result for this machine is returned when there is one that is not stale (see
    :func:`app.telemetry.cpu_probe_record.stale_reason`: busy, not load-checked, or far below the best seen);
    otherwise, or with ``refresh``, it measures again and keeps, figure by figure, the better of the new and the
    stored figures (:func:`merge`), and stores that. Without ``cache`` the probe always runs and nothing is read
    or written. ``load`` replaces the machine's load readings (tests replay recorded ones).
    """
    key = cache_key() if cache else None
    old, best = cached_entry(key) if key is not None else (None, {})
    if old is not None and not refresh and stale_reason(old, best) is None:
        return old
    probe = merge(measure_probe(buffer_bytes=buffer_bytes, matmul_n=matmul_n, n_threads=n_threads,
                                repeats=repeats, passes=passes, load=load), old)
    if key is not None:
        try:
            save_probe(probe, key)
        except OSError:
            pass  # an unwritable data dir must not lose the measurement
    return probe
