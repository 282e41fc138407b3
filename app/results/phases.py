"""Phase figures from per-repetition timestamps: TTFT, prefill and decode rates, inter-token latency."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any, Protocol

from app.results import stats
from app.results.row_types import ResultRow


class TestShape(Protocol):
    """What the statistics need to know of a test (a TestSpec has these)."""

    __test__: bool = False  # not a pytest class

    @property
    def n_prompt(self) -> int: ...

    @property
    def n_gen(self) -> int: ...

    @property
    def n_parallel(self) -> int: ...


def spread(name: str, xs: list[float]) -> dict[str, float | None]:
    """``name`` (the mean), ``name_median`` and ``name_stddev`` of one metric's per-repetition values."""
    return {name: stats.mean(xs), f"{name}_median": stats.median(xs), f"{name}_stddev": stats.stddev(xs)}


def row_rate(row: ResultRow, key: str) -> float | None:
    """A row's rate ``key`` (e.g. ``decode_tps``): the median over its repetitions (a repetition slowed by another
    process moves it least; the benchmarks judge medians too), else its mean; None when neither is a positive
    number."""
    for value in (getattr(row, f"{key}_median"), getattr(row, key)):  # the rate named by the caller
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            return float(value)
    return None


def summarise_phases(
    test: TestShape,
    start_ns: Sequence[int],
    prefill_end_ns: Sequence[int],
    token_ns: Sequence[Sequence[int]],
) -> dict[str, Any]:
    """Phase figures from per-repetition timestamps (warmups excluded by the caller).

    TTFT is request start → first token available; prefill tok/s counts every sequence's prompt;
    decode tok/s is per sequence (N steps ÷ decode time), ``decode_tps_aggregate`` multiplies by
    the number of sequences; inter-token latencies pool every step of every repetition.
    """
    n_seq = test.n_parallel
    ttft_ms: list[float] = []
    prefill_tps: list[float] = []
    decode_tps: list[float] = []
    itl_ms: list[float] = []
    total_ns: list[int] = []
    for s, p, toks in zip(start_ns, prefill_end_ns, token_ns, strict=True):
        if test.n_prompt > 0:
            ttft_ms.append((p - s) / 1e6)
            prefill_tps.append(test.n_prompt * n_seq / ((p - s) / 1e9))
        if toks:
            decode_tps.append(len(toks) / ((toks[-1] - p) / 1e9))
            prev = p
            for t in toks:
                itl_ms.append((t - prev) / 1e6)
                prev = t
        total_ns.append((toks[-1] if toks else p) - s)
    n_tokens = (test.n_prompt + test.n_gen) * n_seq
    samples_ts = [n_tokens / (t / 1e9) for t in total_ns if t > 0]
    unstable = [name for name, xs in (("ttft_ms", ttft_ms), ("decode_tps", decode_tps))
                if (c := stats.cv(xs)) is not None and c >= stats.UNSTABLE_CV]
    return {
        "avg_ns": round(stats.mean(total_ns) or 0),
        "stddev_ns": round(stats.stddev(total_ns) or 0),
        "avg_ts": stats.mean(samples_ts),
        "stddev_ts": stats.stddev(samples_ts),
        "samples_ns": list(total_ns),
        "samples_ts": samples_ts,
        **spread("ttft_ms", ttft_ms),
        **spread("prefill_tps", prefill_tps),
        **spread("decode_tps", decode_tps),
        "decode_tps_aggregate": (stats.mean(decode_tps) or 0) * n_seq if decode_tps else None,
        "tpot_ms": 1000.0 / statistics.fmean(decode_tps) if decode_tps else None,
        **{f"itl_p{q}_ms": stats.percentile(itl_ms, q) for q in (50, 90, 99)},
        "ttft_samples_ms": ttft_ms,
        "prefill_samples_tps": prefill_tps,
        "decode_samples_tps": decode_tps,
        "unstable": int(bool(unstable)),
        "unstable_metrics": ",".join(unstable),
    }
