"""Faults of the results store lose nothing: a locked or full store keeps rows in a side file, replayed later;
a damaged store is set aside; a row of bad JSON is skipped with a warning; old 'aborted' runs read as interrupted."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest

from app.results.row_types import ResultRow
from app.results.store import ResultStore, StoreError
from tests.cli_helpers import gguf_bench


def _row(i: int, **extra: object) -> ResultRow:
    return ResultRow.from_mapping({"test_index": i, "status": "ok", "model_filename": "m.gguf", **extra})


QUICK = {"busy_timeout_s": 0.05, "write_attempts": 2, "backoff_s": 0.01}


def _quick(path: Path, **kw: object) -> ResultStore:
    """A store with short lock waits, so a test holding the lock finishes in well under a second."""
    return ResultStore(path, **QUICK, warn=lambda m: None, **kw)  # type: ignore[arg-type]


def _recovered(path: Path) -> ResultStore:
    """The store after recovery (what a sweep opens), with short lock waits."""
    return ResultStore.recover(path, **QUICK, warn=lambda m: None)


def test_rows_written_while_another_process_holds_the_lock_are_kept_and_replayed(tmp_path: Path) -> None:
    path = tmp_path / "results.sqlite3"
    store = _quick(path)
    store.begin_run("run-a", sweep_name="quick")
    store.add_result("run-a", _row(0))
    locker = sqlite3.connect(path, isolation_level=None)
    locker.execute("BEGIN EXCLUSIVE")  # held for longer than the store waits
    store.add_result("run-a", _row(1))  # neither raises nor blocks for long
    store.add_result("run-a", _row(2))
    store.finish_run("run-a", "finished")
    assert len(store.warnings) == 1 and "cannot write to the results store (database is locked)" in store.warnings[0]
    assert store.pending.path.name == "results.sqlite3.pending-rows.jsonl"
    assert len(store.pending.path.read_text().splitlines()) == 3
    locker.execute("ROLLBACK")
    locker.close()
    store.close()
    with _quick(path) as plain:  # opening reads: the side file waits for recovery
        assert [r.test_index for r in plain.rows("run-a")] == [0] and store.pending.path.exists()
    with _recovered(path) as again:  # recovery stores what was kept, in order
        assert [r.test_index for r in again.rows("run-a")] == [0, 1, 2]
        assert again.run_info("run-a")["status"] == "finished"
        assert any("stored 2 results kept in" in w for w in again.warnings)
    assert not store.pending.path.exists()


def test_a_write_after_the_lock_is_released_stores_the_kept_rows_first(tmp_path: Path) -> None:
    path = tmp_path / "results.sqlite3"
    store = _quick(path)
    store.begin_run("run-a")
    locker = sqlite3.connect(path, isolation_level=None)
    locker.execute("BEGIN EXCLUSIVE")
    store.add_result("run-a", _row(0))
    locker.execute("ROLLBACK")
    store.add_result("run-a", _row(1))
    assert [r.test_index for r in store.rows("run-a")] == [0, 1]
    assert not store.pending.path.exists()
    store.close()


def test_a_full_store_keeps_the_row_in_the_side_file(tmp_path: Path) -> None:
    """SQLite's own SQLITE_FULL, raised by capping the file's pages (a real full filesystem needs root to make)."""
    path = tmp_path / "results.sqlite3"
    store = _quick(path)
    store.begin_run("run-a")
    pages = store._db.execute("PRAGMA page_count").fetchone()[0]
    store._db.execute(f"PRAGMA max_page_count = {pages}")
    store.add_result("run-a", _row(0, samples_ns=list(range(20000))))
    assert "database or disk is full" in store.warnings[0]
    store.close()
    with _recovered(path) as again:
        assert (again.rows("run-a")[0].samples_ns or [])[-1] == 19999


def _damage_a_page(path: Path, page: int) -> None:
    data = bytearray(path.read_bytes())
    size = int.from_bytes(data[16:18], "big")
    data[page * size:(page + 1) * size] = random.Random(3).randbytes(size)
    path.write_bytes(bytes(data))


def _store_with_rows(path: Path, n: int) -> None:
    with ResultStore(path) as store:
        store.begin_run("run-a")
        for i in range(n):
            store.add_result("run-a", _row(i, samples_ns=list(range(300))))
        store.finish_run("run-a", "finished")
        store._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def test_a_store_with_a_damaged_page_is_set_aside_and_a_fresh_one_opens(tmp_path: Path) -> None:
    path = tmp_path / "results.sqlite3"
    _store_with_rows(path, 40)
    _damage_a_page(path, 3)
    before = path.read_bytes()
    for reader in (ResultStore, ResultStore.open_read_only):  # opening reads: a damaged store is refused, kept
        with pytest.raises(StoreError, match="the results store is damaged"):
            reader(path)
    assert path.read_bytes() == before and not list(tmp_path.glob("results.sqlite3.damaged-*"))
    messages: list[str] = []
    with ResultStore.recover(path, warn=messages.append) as store:  # recovery sets it aside
        assert store.runs() == []
        store.begin_run("run-b")
    aside = list(tmp_path.glob("results.sqlite3.damaged-*"))
    assert len(aside) == 1 and aside[0].stat().st_size > 40 * 1000
    assert len(messages) == 1 and f"set aside as {aside[0].name}, starting a fresh store" in messages[0]


@pytest.mark.heavy  # the CLI in a subprocess
def test_reading_commands_leave_a_damaged_store_as_it_is_and_say_so_in_one_line(tmp_path: Path) -> None:
    """``history`` and ``predict`` read the store: they never set it aside (that is a sweep's recovery step), and say
    why in one line; ``history`` cannot list anything (exit 2), ``predict`` goes on without stored rows."""
    path = tmp_path / "results.sqlite3"
    _store_with_rows(path, 40)
    _damage_a_page(path, 3)
    before = path.read_bytes()
    history = gguf_bench("--store", str(path), "history")
    assert history.returncode == 2 and "Traceback" not in history.stderr
    assert history.stderr.strip().splitlines() == [history.stderr.strip()] and "damaged" in history.stderr
    predict = gguf_bench("--store", str(path), "predict", "--ctx", "512")
    assert predict.returncode == 0 and "Traceback" not in predict.stderr, predict.stderr
    assert [line for line in predict.stderr.splitlines() if "damaged" in line] == [
        line for line in predict.stderr.splitlines() if line.startswith("warning: ")] != []
    assert path.read_bytes() == before and not list(tmp_path.glob("results.sqlite3.damaged-*"))
    run = gguf_bench("--store", str(path), "run", "-p", "8", "-n", "4", "-r", "1", "--no-predict")
    assert run.returncode == 0, run.stderr  # a sweep recovers the store first: set aside, a fresh one
    assert "set aside as results.sqlite3.damaged-" in run.stderr
    with ResultStore(path) as store:
        assert len(store.runs()) == 1


def _tamper(path: Path, *statements: str) -> None:
    """Change the store behind its back, as another program or a disk fault would."""
    db = sqlite3.connect(path)
    for statement in statements:
        db.execute(statement)
    db.commit()
    db.close()


@pytest.mark.heavy  # the CLI in a subprocess
def test_a_row_of_bad_json_is_skipped_with_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "results.sqlite3"
    _store_with_rows(path, 3)
    _tamper(path, "UPDATE results SET row_json = '{\"test_index\": 1, ' WHERE test_index = 1",
            "UPDATE runs SET machine_json = 'nope'")
    messages: list[str] = []
    with ResultStore(path, warn=messages.append) as store:
        assert [r.test_index for r in store.rows("run-a")] == [0, 2]
        assert [r.test_index for r in store.recent_rows()] == [2, 0]
        assert store.run_info("run-a")["machine"] == {}
    assert messages == [f"{path}: result rows: a stored value is not valid JSON ('{{\"test_index\": 1, '); its row "
                        "skipped"] * 2
    proc = gguf_bench("--store", str(path), "predict", "--ctx", "512")  # calibration reads the recent rows
    assert proc.returncode == 0 and "Traceback" not in proc.stderr


def test_a_file_that_is_not_sqlite_is_still_refused_not_moved(tmp_path: Path) -> None:
    path = tmp_path / "results.sqlite3"
    path.write_bytes(b"x" * 5000)
    with pytest.raises(StoreError, match="file is not a database"):
        ResultStore(path)
    assert path.read_bytes() == b"x" * 5000 and not list(tmp_path.glob("*.damaged-*"))


def test_runs_marked_aborted_by_older_versions_read_as_interrupted(tmp_path: Path) -> None:
    path = tmp_path / "results.sqlite3"
    _store_with_rows(path, 1)
    _tamper(path, "UPDATE runs SET status = 'aborted'", "PRAGMA user_version = 1")
    with ResultStore(path) as store:
        assert [r.status for r in store.runs()] == ["interrupted"]
        assert store.run_info("run-a")["status"] == "interrupted"


def test_calibration_skips_rows_whose_fractions_are_not_numbers() -> None:
    from app.predict.machine_fit.store_efficiency import efficiency_from_rows
    from app.results.row_types import ResultRow, RowError

    good = ResultRow(status="ok", decode_achieved_frac=0.5, prefill_achieved_frac=0.25)
    with pytest.raises(RowError):  # a stored row of other types is skipped where it is read: it never reaches a fit
        ResultRow.from_mapping({"status": "ok", "decode_achieved_frac": "fast", "prefill_achieved_frac": [1]})
    eff = efficiency_from_rows([good, good.replace(decode_achieved_frac=float("nan"))])
    assert eff is not None and (eff.decode, eff.prefill) == (0.5, 0.25)
