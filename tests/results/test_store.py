"""The SQLite results store (real SQLite, WAL)."""

from __future__ import annotations

import json
import sqlite3

import pytest

from app.results.row_types import ResultRow
from app.results.store import ResultStore, StoreError


def test_rows_are_committed_at_once_and_visible_to_another_connection(tmp_path) -> None:
    path = tmp_path / "r.sqlite3"
    store = ResultStore(path)
    store.begin_run("run-1", sweep_name="quick", tests=[{"n_prompt": 8}], machine={"cpu_model": "X"})
    store.add_result("run-1", ResultRow(test_index=0, status="ok", model_filename="a.gguf", decode_tps=5.0))
    # another process's view: a plain connection, while our connection is still open
    other = sqlite3.connect(path)
    assert other.execute("SELECT COUNT(*) FROM results").fetchone()[0] == 1
    assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    other.close()
    store.finish_run("run-1", "finished")
    assert store.rows("run-1")[0].decode_tps == 5.0
    info = store.run_info("run-1")
    assert info["machine"]["cpu_model"] == "X" and info["status"] == "finished"
    store.close()


def test_history_counts_and_run_id_prefixes(tmp_path) -> None:
    with ResultStore(tmp_path / "r.sqlite3") as store:
        store.begin_run("20260101-aaa")
        store.begin_run("20260102-bbb")
        store.add_result("20260102-bbb", ResultRow(test_index=0, status="ok", model_filename="m.gguf"))
        store.add_result("20260102-bbb", ResultRow(test_index=1, status="failed", model_filename="m.gguf"))
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


def _sweep_row(**more: object) -> ResultRow:
    """A row as a sweep records it: settings, measured figures with their samples, a null, an enum status."""
    from app.results.fields import RowStatus

    return ResultRow(run_id="run-1", test_index=0, status=RowStatus.OK, error="", model_filename="a.gguf",
                     n_prompt=512, n_gen=128, flash_attn=-1, decode_tps=41.25, prefill_tps=1200.5,
                     warmup_ttft_ms=None, samples_ns=[1_000_000, 1_200_000], mem_measured_bytes=96_573_850, **more)


def test_a_row_round_trips_through_the_store_and_csv_unchanged(tmp_path) -> None:
    from app.results import export

    row = _sweep_row()
    with ResultStore(tmp_path / "r.sqlite3") as store:
        store.begin_run("run-1")
        store.add_result("run-1", row)
        (back,) = store.rows("run-1")
        text = store.query("SELECT row_json FROM results")[0][0]
    assert back == row and list(back.to_mapping()) == list(row.to_mapping())  # every key, in its order
    assert back.holds("warmup_ttft_ms") and back.warmup_ttft_ms is None  # a null stays a null
    assert json.loads(text) == json.loads(json.dumps(row.to_mapping()))
    csv_text = export.to_csv([back.to_mapping()])
    assert csv_text == export.to_csv([row.to_mapping()])
    (cells,) = export.read_csv(csv_text)
    assert list(cells) == [c for c in export.columns_for([row.to_mapping()])]
    assert (cells["decode_tps"], cells["samples_ns"], cells["warmup_ttft_ms"], cells["status"]) == (
        "41.25", "1000000 1200000", "", "ok")


def test_an_old_stored_row_with_missing_and_extra_keys_loads(tmp_path) -> None:
    path = tmp_path / "r.sqlite3"
    with ResultStore(path) as store:
        store.begin_run("run-1")
        store.add_result("run-1", _sweep_row())
    old = {"test_index": 0, "status": "ok", "n_prompt": 512, "tok_s": 40.0, "model_size": 12.0}  # an older build's
    db = sqlite3.connect(path)
    db.execute("UPDATE results SET row_json = ?", (json.dumps(old),))
    db.commit()
    db.close()
    with ResultStore.open_read_only(path) as store:
        (row,) = store.rows("run-1")
        assert not store.warnings
    assert (row.n_prompt, row.decode_tps, row.model_size, row.extra) == (512, None, 12, {"tok_s": 40.0})
    assert row.to_mapping() == {**old, "model_size": 12}


def test_a_stored_value_of_the_wrong_type_is_read_as_empty_in_one_line_naming_the_field(tmp_path) -> None:
    """The row keeps what else it measured (issue #54: one line per bad value, nothing else lost)."""
    path = tmp_path / "r.sqlite3"
    with ResultStore(path) as store:
        store.begin_run("run-1")
        for i in range(3):
            store.add_result("run-1", _sweep_row().replace(test_index=i))
    db = sqlite3.connect(path)
    db.execute("UPDATE results SET row_json = json_set(row_json, '$.decode_tps', 'fast') WHERE test_index = 1")
    db.commit()
    db.close()
    messages: list[str] = []
    with ResultStore(path, warn=messages.append) as store:
        rows = store.rows("run-1")
    assert [(r.test_index, r.decode_tps is None) for r in rows] == [(0, False), (1, True), (2, False)]
    assert rows[1].n_prompt == rows[0].n_prompt is not None
    assert messages == [f"{path}: result row field decode_tps: a stored value is str where the field table has "
                        "float ('fast'); read as empty"]
