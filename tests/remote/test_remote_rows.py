"""A remote test's row from hand-made request timestamps: percentiles, rates, goodput and error rate."""

from __future__ import annotations

import pytest

from app.remote.rows import Objective, prefill_tokens, summarise_requests, tpot_ms, ttft_ms
from engines.openai_http import Endpoint, RequestResult, request_body

MS = 1_000_000


def _req(start_ms: float, chunks_ms: list[float], end_ms: float, *, completion: int | None = None,
         prompt: int | None = None, error: str = "") -> RequestResult:
    chunk_ns = [int(c * MS) for c in chunks_ms]
    return RequestResult(start_ns=int(start_ms * MS), end_ns=int(end_ms * MS),
                         first_token_ns=chunk_ns[0] if chunk_ns else None, chunk_ns=chunk_ns,
                         prompt_tokens=prompt, completion_tokens=completion, error=error)


def test_latencies_rates_and_goodput_by_hand() -> None:
    a = _req(0, [100, 120, 140, 160, 180], 190, completion=5, prompt=50)  # TTFT 100, TPOT 20
    b = _req(0, [300, 340, 380, 420, 460], 470, completion=5, prompt=50)  # TTFT 300, TPOT 40
    bad = _req(0, [], 50, error="HTTP 500 Internal Server Error: boom")
    row = summarise_requests([a, b, bad], duration_ns=500 * MS, prompt_tokens_est=64,
                             objective=Objective(ttft_ms=200, tpot_ms=30))
    assert ttft_ms(a) == 100 and tpot_ms(a) == 20 and tpot_ms(b) == 40
    assert row["status"] == "ok" and row["n_requests"] == 3 and row["n_errors"] == 1
    assert row["error_rate"] == pytest.approx(1 / 3)
    assert row["request_errors"] == "1× HTTP 500 Internal Server Error: boom"
    assert row["ttft_ms"] == pytest.approx(200) and row["ttft_p50_ms"] == pytest.approx(200)
    assert row["ttft_p99_ms"] == pytest.approx(100 + 200 * 0.99)
    assert row["tpot_ms"] == pytest.approx(30) and row["tpot_p90_ms"] == pytest.approx(20 + 20 * 0.9)
    assert row["itl_p50_ms"] == pytest.approx(30)  # four gaps of 20 and four of 40
    assert row["e2e_p50_ms"] == pytest.approx(330)
    assert row["req_per_s"] == pytest.approx(2 / 0.5)
    assert row["goodput_req_per_s"] == pytest.approx(1 / 0.5)  # only a meets both objectives
    # 4 tokens after the first in each, over the time one of them was decoding (100-180 and 300-460 ms)
    assert row["decode_tps_aggregate"] == pytest.approx(8 / 0.240)
    assert row["decode_tps"] == pytest.approx((50 + 25) / 2)  # per request: 1000 / TPOT
    assert row["prefill_tps"] == pytest.approx((500 + 50 / 0.3) / 2)
    assert row["prompt_tokens_mean"] == 50 and row["tokens_counted_by"] == "usage"
    assert row["samples_ns"] == [190 * MS, 470 * MS]


def test_no_usage_counts_chunks_and_no_objective_means_no_goodput() -> None:
    r = _req(0, [10, 20, 30], 35)
    row = summarise_requests([r], duration_ns=35 * MS, prompt_tokens_est=64)
    assert row["tokens_counted_by"] == "chunks" and row["goodput_req_per_s"] is None
    assert row["tpot_ms"] == pytest.approx(10) and row["prompt_tokens_mean"] == 64


def test_all_requests_failed_is_a_failed_row_with_the_reasons() -> None:
    reqs = [_req(0, [], 5, error="connection refused by http://127.0.0.1:9/v1") for _ in range(2)]
    reqs.append(_req(0, [], 5))  # a stream that finished without any text
    row = summarise_requests(reqs, duration_ns=5 * MS, prompt_tokens_est=8)
    assert row["status"] == "failed" and row["error_rate"] == 1.0 and row["decode_tps_aggregate"] is None
    assert row["error"] == ("all 3 requests failed: 2× connection refused by http://127.0.0.1:9/v1; "
                            "1× the stream carried no text")


def test_remote_rows_have_the_local_rows_statistics() -> None:
    """Issue #29: remote rows never set ``unstable`` and left decode's spread and samples empty (1.25 tok/s with an
    inter-token p99 of 7.6 s looked normal), and the aggregate decode rate counted prefill time (8.9 tok/s at
    concurrency 1 beside 35.5 per request)."""
    steady = [_req(i * 1000, [i * 1000 + 200 + 28 * k for k in range(9)], i * 1000 + 500, completion=9, prompt=8)
              for i in range(4)]  # one at a time: TTFT 200 ms, 28 ms per token
    row = summarise_requests(steady, duration_ns=4000 * MS, prompt_tokens_est=8)
    assert row["decode_tps_aggregate"] == pytest.approx(row["decode_tps"], rel=1e-6)  # concurrency 1: the same
    assert row["decode_tps_stddev"] == pytest.approx(0, abs=1e-9) and len(row["decode_samples_tps"]) == 4
    assert row["unstable"] == 0 and row["unstable_metrics"] == ""
    uneven = [_req(0, [200 + 28 * k for k in range(9)], 500, completion=9),
              _req(1000, [1200 + 800 * k for k in range(9)], 8000, completion=9)]  # one stalls between tokens
    row = summarise_requests(uneven, duration_ns=8000 * MS, prompt_tokens_est=8)
    assert row["unstable"] == 1 and "decode_tps" in row["unstable_metrics"]
    assert row["decode_tps_stddev"] > 0 and row["prefill_samples_tps"] and row["samples_ts"]


def test_a_depths_context_goes_first_in_both_apis() -> None:

    plain, chat = Endpoint("http://h/v1", "m"), Endpoint("http://h/v1", "m", chat=True)
    assert request_body(plain, "question", 4, "context words")["prompt"] == "context words question"
    assert request_body(plain, "", 1, "context words")["prompt"] == "context words"  # the context load
    assert request_body(chat, "question", 4, "context words")["messages"] == [
        {"role": "system", "content": "context words"}, {"role": "user", "content": "question"}]
    assert request_body(chat, "question", 4)["messages"] == [{"role": "user", "content": "question"}]


def test_prefill_counts_only_what_the_server_did_not_take_from_its_cache() -> None:

    r = RequestResult(start_ns=0, prompt_tokens=520, cached_tokens=512)
    assert prefill_tokens(r, None, 99) == 8
    load = RequestResult(start_ns=0, prompt_tokens=500)
    assert prefill_tokens(RequestResult(start_ns=0, prompt_tokens=520), load, 99) == 20  # less the load's count
    assert prefill_tokens(RequestResult(start_ns=0), load, 99) == 99  # nothing counted: the estimate
