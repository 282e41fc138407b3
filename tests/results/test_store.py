"""The SQLite results store (real SQLite, WAL)."""

from __future__ import annotations

import sqlite3

import pytest

from app.results.store import ResultStore, StoreError


def test_rows_are_committed_at_once_and_visible_to_another_connection(tmp_path) -> None:
    path = tmp_path / "r.sqlite3"
    store = ResultStore(path)
    store.begin_run("run-1", sweep_name="quick", tests=[{"n_prompt": 8}], machine={"cpu_model": "X"})
    store.add_result("run-1", {"test_index": 0, "status": "ok", "model_filename": "a.gguf", "decode_tps": 5.0})
    # another process's view: a plain connection, while our connection is still open
    other = sqlite3.connect(path)
    assert other.execute("SELECT COUNT(*) FROM results").fetchone()[0] == 1
    assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    other.close()
    store.finish_run("run-1", "finished")
    assert store.rows("run-1")[0]["decode_tps"] == 5.0
    info = store.run_info("run-1")
    assert info["machine"]["cpu_model"] == "X" and info["status"] == "finished"
    store.close()


def test_history_counts_and_run_id_prefixes(tmp_path) -> None:
    with ResultStore(tmp_path / "r.sqlite3") as store:
        store.begin_run("20260101-aaa")
        store.begin_run("20260102-bbb")
        store.add_result("20260102-bbb", {"test_index": 0, "status": "ok", "model_filename": "m.gguf"})
        store.add_result("20260102-bbb", {"test_index": 1, "status": "failed", "model_filename": "m.gguf"})
        runs = {r.run_id: r for r in store.runs()}
        assert (runs["20260102-bbb"].n_ok, runs["20260102-bbb"].n_failed) == (1, 1)
        assert store.resolve_run_id("20260101") == "20260101-aaa"
        assert store.resolve_run_id("last") == "20260102-bbb"
        with pytest.raises(StoreError, match="ambiguous"):
            store.resolve_run_id("2026")
        with pytest.raises(StoreError, match="no run"):
            store.resolve_run_id("1999")


@pytest.mark.heavy  # the real model in a worker
def test_a_run_keeps_its_event_stream_beside_the_store(smollm2_path) -> None:
    from app.run.events import TestFinished, TokenTick, event_from_json
    from app.run.plan import SweepSpec
    from app.run.session import SweepSession

    store = ResultStore()
    tests = SweepSpec(models=[str(smollm2_path)], n_prompt=[8], n_gen=[4], repetitions=1).tests()
    outcome = SweepSession(tests, store=store, machine={}).run()
    import gzip

    with gzip.open(store.event_log_path(outcome.run_id), "rt", encoding="utf-8") as f:
        events = [event_from_json(line) for line in f]
    assert sum(isinstance(e, TokenTick) for e in events) == 4 * 2  # warmup + 1 repetition, 4 steps each
    finished = [e for e in events if isinstance(e, TestFinished)]
    assert finished[0].row == store.rows(outcome.run_id)[0]  # the log holds the stored row, not the raw one
    store.close()
