"""The remote session: the same events as a local sweep, each row stored at once, cancel keeps what finished."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from app.remote.session import RemoteSession, build_remote_spec
from app.results.store import ResultStore
from app.run.events import Event, SweepFinished, SweepStarted, TestFinished, TestStarted
from app.run.params import PlanError
from tests.remote.fake_server import fake_server


def test_events_rows_and_store(tmp_path: Path) -> None:
    seen: list[Event] = []
    with fake_server() as server, ResultStore(tmp_path / "r.sqlite3") as store:
        spec = build_remote_spec(server.url("usage"), "fake", n_prompt="8,16", n_gen="2", concurrency="1,2",
                                 n_requests=2)
        outcome = RemoteSession(spec, store=store).run(seen.append)
        stored = store.rows(outcome.run_id)
        run = store.runs()[0]
    kinds = [type(e) for e in seen]
    assert kinds == [SweepStarted] + [TestStarted, TestFinished] * 4 + [SweepFinished]
    assert outcome.status == "finished" and run.status == "finished" and run.n_tests == 4
    assert [(r.n_prompt, r.n_parallel) for r in stored] == [(8, 1), (8, 2), (16, 1), (16, 2)]
    assert [r.ttft_p50_ms for r in stored] == [r.ttft_p50_ms for r in outcome.rows]


def test_cancel_keeps_the_finished_tests(tmp_path: Path) -> None:
    with fake_server() as server, ResultStore(tmp_path / "r.sqlite3") as store:
        spec = build_remote_spec(server.url("usage"), "fake", n_prompt="8", n_gen="2", concurrency="1-64*2",
                                 n_requests=4)
        session = RemoteSession(spec, store=store)

        def on_event(ev: Event) -> None:
            if isinstance(ev, TestFinished) and ev.test_index == 1:
                threading.Thread(target=session.cancel).start()

        outcome = session.run(on_event)
        run = store.runs()[0]
    assert outcome.status == "cancelled" and run.status == "cancelled"
    assert 2 <= len(outcome.rows) < 7 and all(r.status == "ok" for r in outcome.rows)


def test_the_served_model_is_asked_when_not_given() -> None:
    """Issue #29: ``--served-model`` was required even when the server's /v1/models lists one model."""
    with fake_server() as server:
        assert build_remote_spec(server.url("usage"), "").endpoint.model == "fake"
        with pytest.raises(PlanError, match="serves 2 models \\(a, b\\): choose one with --served-model"):
            build_remote_spec(server.url("twomodels"), "")
        with pytest.raises(PlanError, match="did not list its models"):
            build_remote_spec(server.url("http500"), "")
        assert build_remote_spec(server.url("twomodels"), "b").endpoint.model == "b"


def test_output_tokens_are_recounted_with_the_servers_tokenizer(tmp_path: Path) -> None:
    """Issue #29: with no usage reported, decode was counted from stream chunks, about 20 % above a re-tokenized
    count on a real server (a chunk may carry several tokens). Where the server has a tokenize route, it counts."""
    with fake_server() as server:
        spec = build_remote_spec(server.url("multitoken"), "fake", n_prompt="8", n_gen="12", n_requests=2)
        outcome = RemoteSession(spec).run()
        spec = build_remote_spec(server.url("nousage"), "fake", n_prompt="8", n_gen="4", n_requests=2)
        chunks = RemoteSession(spec).run()
    (row,) = outcome.rows
    assert row.status == "ok" and row.tokens_counted_by == "tokenize", row
    assert row.decode_tps > 0 and row.tpot_ms > 0
    (plain,) = chunks.rows
    assert plain.tokens_counted_by == "chunks"  # no tokenize route there: chunks, and it says so


def test_depth_puts_each_requests_own_context_before_its_prompt() -> None:
    """Issue #29: ``-d`` was refused for servers. Without --prefix-cache every request carries a context of its
    own (no cache can serve one request's context to the next), and the prefill counts context and prompt."""
    with fake_server() as server:
        spec = build_remote_spec(server.url("prefix"), "fake", n_prompt="8", n_gen="2", n_depth="0,200",
                                 n_requests=3)
        outcome = RemoteSession(spec).run()
        bodies = [b for b in server.bodies if b.get("max_tokens") == 2]
    plain, deep = outcome.rows
    assert (plain.n_depth, deep.n_depth) == (0, 200) and plain.prefix_cache == deep.prefix_cache == 0
    assert plain.prompt_tokens_mean == 8 and deep.prompt_tokens_mean == 208  # a word is a token here
    assert deep.prefill_tokens_mean == 208 and deep.cached_tokens_mean == 0
    assert deep.ctx_ttft_ms is None
    contexts = [" ".join(b["prompt"].split()[:200]) for b in bodies[-3:]]
    assert len(set(contexts)) == 3  # three requests, three contexts
    assert deep.ttft_p50_ms > plain.ttft_p50_ms


def test_prefix_cache_loads_the_context_then_times_the_prompt_over_it() -> None:
    """llama-benchy's --enable-prefix-caching: a context load (the context alone, one token), then the timed
    request with the same context and its prompt. Prefill counts only the uncached tokens the server reports."""
    with fake_server() as server:
        spec = build_remote_spec(server.url("prefix"), "fake", n_prompt="8", n_gen="2", n_depth="400",
                                 n_requests=3, prefix_cache=True)
        outcome = RemoteSession(spec).run()
        sent = list(server.bodies)
    (row,) = outcome.rows
    assert row.status == "ok" and row.prefix_cache == 1 and row.n_depth == 400
    assert row.cached_tokens_mean == 400 and row.prefill_tokens_mean == 8
    assert row.prompt_tokens_mean == 408
    assert row.ctx_ttft_ms > 2 * row.ttft_p50_ms  # 400 words at 0.5 ms each against 8
    timed = [i for i, b in enumerate(sent) if b.get("max_tokens") == 2 and len(b["prompt"].split()) == 408]
    assert len(timed) == 3
    for i in timed:  # each timed request right after the load of its own context
        load = sent[i - 1]
        assert load["max_tokens"] == 1 and sent[i]["prompt"].startswith(load["prompt"] + " ")
    assert row.prefill_tps == pytest.approx(8 / (row.ttft_ms / 1e3), rel=0.5)


def test_prefix_cache_without_a_depth_is_refused() -> None:
    with pytest.raises(PlanError, match="--prefix-cache needs a context to cache: give -d a depth above 0"):
        build_remote_spec("http://127.0.0.1:1/v1", "m", n_depth="0", prefix_cache=True)
    with pytest.raises(PlanError, match="-d: -4 is outside"):
        build_remote_spec("http://127.0.0.1:1/v1", "m", n_depth="-4")
