"""The SQLite results store (real SQLite, WAL)."""

from __future__ import annotations

import sqlite3

import pytest

from app.core.store import ResultStore, StoreError


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
