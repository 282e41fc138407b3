"""The remote engine against a server that misbehaves on purpose: each fault is a failed request with its reason."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from engines.openai_http import Endpoint, LoadRun, count_tokens, poisson_arrivals_s, stream_request
from tests.remote.fake_server import N_TOKENS, FakeServer, fake_server

KEY = "sk-test-secret-do-not-leak-1234"


@pytest.fixture(scope="module")
def server() -> Iterator[FakeServer]:
    with fake_server() as s:
        yield s


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _one(server: FakeServer, mode: str, timeout_s: float = 5.0, max_tokens: int = N_TOKENS):
    return stream_request(Endpoint(server.url(mode), "fake", timeout_s=timeout_s), "hello there", max_tokens)


def test_a_good_stream_is_timed_with_the_servers_usage(server: FakeServer) -> None:
    r = _one(server, "usage")
    assert r.ok, r.error
    assert r.completion_tokens == N_TOKENS and r.prompt_tokens == 11 and r.counted_by == "usage"
    assert len(r.chunk_ns) == N_TOKENS
    assert r.start_ns < r.first_token_ns == r.chunk_ns[0] <= r.chunk_ns[-1] <= r.end_ns
    body = server.bodies[-1]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["max_tokens"] == N_TOKENS and body["ignore_eos"] is True and body["min_tokens"] == N_TOKENS


def test_no_usage_counts_chunks_and_says_so(server: FakeServer) -> None:
    r = _one(server, "nousage")
    assert r.ok, r.error
    assert r.completion_tokens is None and r.output_tokens == N_TOKENS and r.counted_by == "chunks"


@pytest.mark.parametrize(("mode", "reason"), [
    ("http500", "HTTP 500"),
    ("http429", "HTTP 429"),
    ("halfway", "stream stopped after 3 chunks without [DONE]"),
    ("badjson", "malformed SSE data"),
    ("badline", "malformed SSE line 'this is not an event stream'"),
])
def test_each_fault_is_a_failed_request_with_its_reason(server: FakeServer, mode: str, reason: str) -> None:
    r = _one(server, mode)
    assert not r.ok
    assert reason in r.error
    assert r.end_ns >= r.start_ns


def test_a_server_that_stops_sending_times_out(server: FakeServer) -> None:
    r = _one(server, "slow", timeout_s=0.3)
    assert r.error == "timed out: the whole request took more than 0.3 s"  # the timeout is the whole request's
    assert (r.end_ns - r.start_ns) / 1e9 < 1.4  # gave up at the timeout, not when the server woke


def test_a_closed_port_is_a_refused_connection() -> None:
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    r = stream_request(Endpoint(url, "fake", timeout_s=2), "hi", 4)
    assert r.error == f"connection refused by {url}"
    assert count_tokens(Endpoint(url, "fake", timeout_s=2), "hi") is None


def test_the_api_key_is_sent_but_never_reported(server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GGUF_BENCH_API_KEY", KEY)
    r = _one(server, "echoauth")
    assert server.auth[-1] == f"Bearer {KEY}"
    assert r.error.startswith("HTTP 401") and KEY not in r.error and "***" in r.error


def test_credentials_in_the_url_are_not_displayed() -> None:
    assert Endpoint("http://user:pw@127.0.0.1:9/v1/?k=x", "m").display == "http://127.0.0.1:9/v1"


def test_load_keeps_at_most_concurrency_requests_in_flight(server: FakeServer) -> None:
    before = server.count
    load = LoadRun(Endpoint(server.url("usage"), "fake"), ["p"] * 12, N_TOKENS, 3, [0.0] * 12)
    results = load.run()
    assert len(results) == 12 and all(r.ok for r in results)
    assert server.count - before == 12
    edges = sorted([(r.start_ns, 1) for r in results] + [(r.end_ns, -1) for r in results])
    in_flight = [sum(d for _, d in edges[: i + 1]) for i in range(len(edges))]
    assert max(in_flight) == 3  # all sent at once: three at a time, never more


def test_poisson_arrivals_are_seeded_and_at_the_rate() -> None:
    a = poisson_arrivals_s(2000, 50.0, seed=3)
    assert a == poisson_arrivals_s(2000, 50.0, seed=3) and a != poisson_arrivals_s(2000, 50.0, seed=4)
    assert a[0] == 0.0 and all(x < y for x, y in zip(a, a[1:], strict=False))
    assert 45 < len(a) / a[-1] < 55  # 2000 exponential gaps of mean 20 ms
    assert poisson_arrivals_s(3, None, seed=0) == [0.0, 0.0, 0.0]


def test_a_rate_spaces_the_sends(server: FakeServer) -> None:
    arrivals = [0.0, 0.2, 0.4]
    load = LoadRun(Endpoint(server.url("usage"), "fake"), ["p"] * 3, 1, 3, arrivals)
    results = load.run()
    offsets_s = [(r.start_ns - load.start_ns) / 1e9 for r in results]
    assert all(o >= a for o, a in zip(offsets_s, arrivals, strict=True))
    assert offsets_s[2] < 0.4 + 0.3


def test_cancel_cuts_the_streams_in_flight(server: FakeServer) -> None:
    import threading
    import time

    load = LoadRun(Endpoint(server.url("slow"), "fake", timeout_s=10), ["p"] * 6, N_TOKENS, 2, [0.0] * 6)
    threading.Timer(0.3, load.cancel).start()
    t0 = time.monotonic()
    results = load.run()
    assert time.monotonic() - t0 < 1.2  # the server sleeps 1.5 s before its first token
    assert len(results) == 2 and [r.error for r in results] == ["cancelled"] * 2  # nothing more was sent


def test_a_tokenize_route_that_lies_cannot_grow_the_prompt(server: FakeServer) -> None:
    """Issue #29 case 5: a /tokenize route answering {"count": 1} made the prompt builder scale the prompt by the
    asked length three times over (512³ words: requests of over 600 MB). A count no tokenizer gives for common words
    is not believed, and a prompt stays within a few words per token asked."""
    from app.remote.session import WORDS_PER_TOKEN_BOUND, PromptMaker

    maker = PromptMaker(Endpoint(server.url("countone"), "fake"))
    words, how = maker.size(512)
    assert words <= 512 * WORDS_PER_TOKEN_BOUND and how == "approximate"
    assert len(maker.text(words, 0)) < 512 * WORDS_PER_TOKEN_BOUND * 16


@pytest.mark.heavy  # waits out a request's deadline
def test_a_server_that_trickles_bytes_is_cut_at_the_requests_deadline(server: FakeServer) -> None:
    """Issue #29 case 8: one byte every 1.5 s kept ``run --url --request-timeout 2`` waiting for ever (each byte
    came before the socket timeout, and no line ever ended). The whole request now has a deadline."""
    import time

    t0 = time.monotonic()
    r = stream_request(Endpoint(server.url("trickle"), "fake", timeout_s=0.5), "p", N_TOKENS)
    took = time.monotonic() - t0
    assert r.error.startswith("timed out: the whole request took more than 0.5 s"), r.error
    assert took < 8, took


def test_a_key_headers_cannot_carry_is_one_reason(server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue #29 ('non-Latin-1 keys'): http.client encodes header values as Latin-1; such a key is a reason."""
    monkeypatch.setenv("GGUF_BENCH_API_KEY", "sk-\u2603-snowman")
    r = _one(server, "usage")
    assert "cannot be sent" in r.error and "\u2603" not in r.error and "snowman" not in r.error
