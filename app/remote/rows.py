"""A remote test's row from its requests: latency percentiles, per-request and aggregate rates, goodput.

Pure functions of the requests' timestamps (``engines.openai_http.RequestResult``) so they are tested against
hand-computed numbers. TTFT is send → first text chunk; TPOT is (last chunk − first chunk) ÷ (tokens − 1);
ITL pools the gaps between text chunks; end-to-end is send → stream closed. Goodput counts the finished
requests that met every given objective (TTFT and TPOT), per second of the test's wall time.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from app.results import stats
from app.results.fields import RowStatus
from app.results.phases import spread
from engines.openai_http import RequestResult

_QS = (50, 90, 99)


@dataclass(frozen=True)
class Objective:
    """A service-level objective; None: no limit on that metric."""

    ttft_ms: float | None = None
    tpot_ms: float | None = None

    @property
    def given(self) -> bool:
        return self.ttft_ms is not None or self.tpot_ms is not None

    def met(self, ttft_ms: float, tpot_ms: float | None) -> bool:
        if self.ttft_ms is not None and ttft_ms > self.ttft_ms:
            return False
        return self.tpot_ms is None or tpot_ms is None or tpot_ms <= self.tpot_ms


NO_OBJECTIVE = Objective()


def ttft_ms(r: RequestResult) -> float | None:
    return None if r.first_token_ns is None else (r.first_token_ns - r.start_ns) / 1e6


def tpot_ms(r: RequestResult) -> float | None:
    """Decode time per output token after the first; None for fewer than two tokens or chunks."""
    if r.first_token_ns is None or r.output_tokens < 2 or not r.chunk_ns:
        return None
    return (r.chunk_ns[-1] - r.first_token_ns) / 1e6 / (r.output_tokens - 1)


def _percentiles(name: str, xs: Sequence[float]) -> dict[str, float | None]:
    return {f"{name}_p{q}_ms": stats.percentile(xs, q) for q in _QS}


def _error_summary(results: Sequence[RequestResult]) -> str:
    counts = Counter(r.error for r in results if r.error)
    return "; ".join(f"{n}× {reason}" for reason, n in counts.most_common())


def _counted_by(ok: Sequence[RequestResult]) -> str:
    return ", ".join(sorted({r.counted_by for r in ok}))


def _decode_window_s(ok: Sequence[RequestResult]) -> float:
    """Seconds during which at least one request was decoding (first text chunk → last chunk): the union of the
    requests' decode spans, so prefill and idle time do not dilute the aggregate decode rate."""
    spans = sorted((r.first_token_ns, r.chunk_ns[-1]) for r in ok if r.first_token_ns is not None and r.chunk_ns
                   and r.chunk_ns[-1] > r.first_token_ns)
    total, end = 0, None
    for a, b in spans:
        if end is None or a > end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    return total / 1e9


def prefill_tokens(r: RequestResult, loaded: RequestResult | None, estimate: int) -> int:
    """The prompt tokens request ``r`` really processed before its first token: the server's prompt count less
    what it says came from its prefix cache; after a context load (``loaded``) and with no cache count, less the
    load's own prompt count; ``estimate`` when the server counted nothing."""
    if r.prompt_tokens is None:
        return estimate
    if r.cached_tokens is not None:
        return max(r.prompt_tokens - r.cached_tokens, 1)
    if loaded is not None and loaded.ok and loaded.prompt_tokens is not None:
        return max(r.prompt_tokens - loaded.prompt_tokens, 1)
    return r.prompt_tokens


def summarise_requests(results: Sequence[RequestResult], duration_ns: int, prompt_tokens_est: int,
                       objective: Objective = NO_OBJECTIVE,
                       context_results: Sequence[RequestResult | None] | None = None) -> dict[str, Any]:
    """The measured columns of one remote test; ``status`` is ok when at least one request finished.

    ``context_results[i]`` is the context load sent before ``results[i]`` (prefix-cache tests): prefill then
    counts only the tokens after the cached context, and ``ctx_ttft_ms`` is the loads' mean TTFT."""
    for r in results:
        if r.ok and r.first_token_ns is None:
            r.error = "the stream carried no text"
    ok = [r for r in results if r.ok]
    failed = [r for r in results if not r.ok]
    n = len(results)
    duration_s = max(duration_ns, 1) / 1e9
    ttfts = [t for r in ok if (t := ttft_ms(r)) is not None]
    tpots = [t for r in ok if (t := tpot_ms(r)) is not None]
    e2e_ms = [(r.end_ns - r.start_ns) / 1e6 for r in ok]
    itl_ms = [(b - a) / 1e6 for r in ok for a, b in zip(r.chunk_ns, r.chunk_ns[1:], strict=False)]
    loads = list(context_results) if context_results is not None else [None] * len(results)
    loaded = [c for r, c in zip(results, loads, strict=True) if r.ok]
    prompt = [r.prompt_tokens if r.prompt_tokens is not None else prompt_tokens_est for r in ok]
    prefill = [prefill_tokens(r, c, prompt_tokens_est) for r, c in zip(ok, loaded, strict=True)]
    cached = [float(r.cached_tokens) for r in ok if r.cached_tokens is not None]
    ctx_ttfts = [t for c in loads if c is not None and c.ok and (t := ttft_ms(c)) is not None]
    decode_samples = [1e3 / t for t in tpots if t > 0]
    prefill_samples = [p / (t / 1e3) for p, t in zip(prefill, ttfts, strict=True) if t > 0]
    e2e_ts = [(p + r.output_tokens) / (e / 1e3) for p, r, e in zip(prompt, ok, e2e_ms, strict=True) if e > 0]
    decoded = sum(max(r.output_tokens - 1, 0) for r in ok if tpot_ms(r) is not None)  # tokens after the first
    window_s = _decode_window_s(ok)
    request_errors = _error_summary(failed)
    unstable = [name for name, xs in (("ttft_ms", ttfts), ("decode_tps", decode_samples))
                if (c := stats.cv(xs)) is not None and c >= stats.UNSTABLE_CV]  # the local rows' rule
    columns: dict[str, Any] = {
        "n_requests": n, "n_errors": len(failed), "error_rate": len(failed) / n if n else None,
        "request_errors": request_errors, "duration_ms": duration_ns / 1e6,
        "req_per_s": len(ok) / duration_s,
        "goodput_req_per_s": (sum(1 for r in ok if objective.met(ttft_ms(r) or 0.0, tpot_ms(r))) / duration_s
                              if objective.given else None),
        **spread("ttft_ms", ttfts),
        **_percentiles("ttft", ttfts),
        "tpot_ms": stats.mean(tpots), **_percentiles("tpot", tpots),
        **{f"itl_p{q}_ms": stats.percentile(itl_ms, q) for q in _QS},
        **_percentiles("e2e", e2e_ms),
        **spread("prefill_tps", prefill_samples),
        **spread("decode_tps", decode_samples),
        # every request's tokens after its first, over the time any request was decoding (no prefill, no idle)
        "decode_tps_aggregate": decoded / window_s if window_s > 0 else None,
        "avg_ts": stats.mean(e2e_ts), "stddev_ts": stats.stddev(e2e_ts), "samples_ts": e2e_ts,
        "avg_ns": int(stats.mean(e2e_ms) * 1e6) if ok else None,
        "stddev_ns": int(stats.stddev(e2e_ms) * 1e6) if len(e2e_ms) > 1 else None,
        "samples_ns": [int(e * 1e6) for e in e2e_ms],
        "ttft_samples_ms": ttfts,
        "prefill_samples_tps": prefill_samples,
        "decode_samples_tps": decode_samples,
        "prompt_tokens_mean": stats.mean([float(p) for p in prompt]),
        "prefill_tokens_mean": stats.mean([float(p) for p in prefill]),
        "cached_tokens_mean": stats.mean(cached) if cached else None,
        "ctx_ttft_ms": stats.mean(ctx_ttfts) if ctx_ttfts else None,
        "tokens_counted_by": _counted_by(ok),
        "status": RowStatus.OK if ok else RowStatus.FAILED,
        "unstable": int(bool(unstable)),
        "unstable_metrics": ",".join(unstable),
    }
    if not ok:
        columns["error"] = f"all {n} requests failed: {request_errors}" if n else "no request was sent"
    return columns
