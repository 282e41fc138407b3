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
    assert [(r["n_prompt"], r["n_parallel"]) for r in stored] == [(8, 1), (8, 2), (16, 1), (16, 2)]
    assert [r["ttft_p50_ms"] for r in stored] == [r["ttft_p50_ms"] for r in outcome.rows]


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
    assert 2 <= len(outcome.rows) < 7 and all(r["status"] == "ok" for r in outcome.rows)


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
    assert row["status"] == "ok" and row["tokens_counted_by"] == "tokenize", row
    assert row["decode_tps"] > 0 and row["tpot_ms"] > 0
    (plain,) = chunks.rows
    assert plain["tokens_counted_by"] == "chunks"  # no tokenize route there: chunks, and it says so
