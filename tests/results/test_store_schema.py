"""The store's schema version and migrations, against a store written by the code before versioning.

``data/store_v0.sqlite3`` was written by the CLI and ``app.core.store.ResultStore`` of commit bbb0e0d (schema 0):
two finished runs on SmolLM2-135M and a run whose process was killed after one failed test. The
``store_v0.*`` files beside it are what that code read back from it (API calls, ``history``, ``export``).
"""

from __future__ import annotations

import csv
import io
import json
import random
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from app.results import store_schema
from app.results.fields import whole_numbers
from app.results.row_types import ResultRow
from app.results.store import ResultStore, StoreError
from app.results.store_schema import MIGRATIONS, SCHEMA_VERSION, SchemaError, upgrade, user_version
from tests.cli_helpers import gguf_bench

DATA = Path(__file__).parent / "data"
V0_FILE = DATA / "store_v0.sqlite3"
FINISHED_RUN = "20261129T215805Z-8a5b70"


@pytest.fixture
def v0_store(tmp_path: Path) -> Path:
    """A copy of the schema-0 store (opening it changes it)."""
    return Path(shutil.copy(V0_FILE, tmp_path / "results.sqlite3"))


@pytest.fixture(scope="module")
def expected() -> dict[str, Any]:
    return json.loads((DATA / "store_v0.expected.json").read_text(encoding="utf-8"))


def _schema_sql(path: Path) -> list[tuple[str, str, str | None]]:
    with sqlite3.connect(path) as db:
        return db.execute("SELECT type, name, sql FROM sqlite_master ORDER BY type, name").fetchall()


def _columns(db: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in db.execute(f"PRAGMA table_info({table})")]


def _as_read(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows as they were stored, read as typed rows: every key in its order, the byte counts that schema 0 kept as
    floats (llama.cpp's MiB figures: 96573849.6) as the whole numbers of the field table's int fields."""
    return [whole_numbers(dict(r)) for r in rows]


def _assert_holds_v0_data(store: ResultStore, expected: dict[str, Any]) -> None:
    assert [r.__dict__ for r in store.runs()] == expected["runs"]
    for run_id in expected["rows"]:
        assert [r.to_mapping() for r in store.rows(run_id)] == _as_read(expected["rows"][run_id])
        assert store.run_info(run_id) == expected["run_info"][run_id]
    assert [r.to_mapping() for r in store.recent_rows()] == _as_read(expected["recent_rows"])
    assert store.resolve_run_id("last") == expected["last"]


def test_the_test_data_is_a_schema0_store() -> None:
    db = sqlite3.connect(f"file:{V0_FILE}?mode=ro", uri=True)
    assert user_version(db) == 0 and "writer_pid" not in _columns(db, "runs")
    assert db.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 3
    assert db.execute("SELECT COUNT(*) FROM results").fetchone()[0] == 4
    db.close()


def test_a_schema0_store_opens_with_every_run_and_row_intact(v0_store: Path, expected: dict[str, Any]) -> None:
    with ResultStore(v0_store) as store:
        assert user_version(store._db) == SCHEMA_VERSION == 3
        _assert_holds_v0_data(store, expected)
        assert store.run_info("20261129T215900Z-dead01")["status"] == "running"  # no writer recorded: left alone
    db = sqlite3.connect(v0_store)
    assert {"writer_pid", "writer_scope"} <= set(_columns(db, "runs"))
    assert {"model_key", "row_json"} <= set(_columns(db, "quality"))  # version 3: measured quality of files
    plan = " ".join(r[3] for r in db.execute("EXPLAIN QUERY PLAN SELECT run_id FROM runs "
                                             "ORDER BY created_at DESC, rowid DESC LIMIT 1"))
    assert "runs_by_created_at" in plan and "TEMP B-TREE" not in plan
    db.close()


def test_opening_again_is_idempotent_and_new_runs_mix_with_old(v0_store: Path, expected: dict[str, Any]) -> None:
    ResultStore(v0_store).close()
    schema_once = _schema_sql(v0_store)
    with ResultStore(v0_store) as a, ResultStore(v0_store) as b:  # two open at once, as two processes would
        assert _schema_sql(v0_store) == schema_once
        assert user_version(a._db) == user_version(b._db) == SCHEMA_VERSION
        _assert_holds_v0_data(b, expected)
        a.begin_run("20261201-new", sweep_name="quick")
        a.add_result("20261201-new", ResultRow(test_index=0, status="ok", model_filename="m.gguf"))
        a.finish_run("20261201-new", "finished")
        assert b.resolve_run_id("last") == "20261201-new"
        assert [r.run_id for r in b.runs()] == ["20261201-new"] + [r["run_id"] for r in expected["runs"]]
        assert b.runs(limit=2)[1].__dict__ == expected["runs"][0]
        assert b.recent_rows(limit=1)[0].model_filename == "m.gguf"


def test_a_fresh_store_has_the_same_schema_as_an_upgraded_one(tmp_path: Path, v0_store: Path) -> None:
    ResultStore(tmp_path / "fresh.sqlite3").close()
    ResultStore(v0_store).close()
    assert _schema_sql(tmp_path / "fresh.sqlite3") == _schema_sql(v0_store)
    with sqlite3.connect(tmp_path / "fresh.sqlite3") as db:
        assert user_version(db) == SCHEMA_VERSION
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def _half_done_step(db: sqlite3.Connection) -> None:
    db.execute("ALTER TABLE runs ADD COLUMN note TEXT")
    db.execute("UPDATE runs SET note = 'half'")
    db.execute("INSERT INTO no_such_table VALUES (1)")  # fails after two statements took effect


def test_a_migration_failing_half_way_leaves_the_old_version(v0_store: Path, expected: dict[str, Any]) -> None:
    db = sqlite3.connect(v0_store)
    with pytest.raises(SchemaError, match=rf"from version {SCHEMA_VERSION} \(no such table: no_such_table\)"):
        upgrade(db, [*MIGRATIONS, _half_done_step])
    assert user_version(db) == SCHEMA_VERSION  # the good steps committed, the failing one rolled back whole
    assert "note" not in _columns(db, "runs") and not db.in_transaction
    db.close()
    with ResultStore(v0_store) as store:
        _assert_holds_v0_data(store, expected)


def test_a_failing_first_migration_leaves_schema0(v0_store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def failing(db: sqlite3.Connection) -> None:
        MIGRATIONS[0](db)
        raise RuntimeError("bug in a migration")

    before = _schema_sql(v0_store)
    db = sqlite3.connect(v0_store)
    with pytest.raises(RuntimeError, match="bug in a migration"):
        upgrade(db, [failing])
    assert user_version(db) == 0 and "writer_pid" not in _columns(db, "runs")
    db.close()
    assert _schema_sql(v0_store) == before

    monkeypatch.setattr(store_schema, "MIGRATIONS", (_half_done_step,))
    with pytest.raises(StoreError) as err:
        ResultStore(v0_store)
    assert str(err.value) == (f"{v0_store}: cannot upgrade the schema from version 0 "
                              "(no such table: no_such_table)")
    assert _schema_sql(v0_store) == before


@pytest.mark.heavy  # the CLI in a subprocess
def test_a_store_from_a_newer_version_is_refused_in_one_line(v0_store: Path) -> None:
    ResultStore(v0_store).close()
    db = sqlite3.connect(v0_store)
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 4}")
    db.close()
    before = v0_store.read_bytes()
    with pytest.raises(StoreError) as err:
        ResultStore(v0_store)
    assert str(err.value) == (f"{v0_store}: written by a newer gguf-workbench (schema version {SCHEMA_VERSION + 4}; "
                              f"this version reads up to {SCHEMA_VERSION})")
    assert v0_store.read_bytes() == before
    proc = gguf_bench("--store", str(v0_store), "history")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [f"gguf-bench: error: {err.value}"]


@pytest.mark.heavy  # the CLI in a subprocess
@pytest.mark.parametrize("content", [random.Random(7).randbytes(8192), b"not a database\n" * 300])
def test_a_file_that_is_not_sqlite_is_refused_in_one_line(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "results.sqlite3"
    path.write_bytes(content)
    with pytest.raises(StoreError) as err:
        ResultStore(path)
    assert str(err.value) == f"{path}: cannot open the results store (file is not a database)"
    assert path.read_bytes() == content
    for args in (["history"], ["export", "last", "-o", "csv"]):
        proc = gguf_bench("--store", str(path), *args)
        assert proc.returncode == 2 and proc.stdout == ""
        assert proc.stderr.strip().splitlines() == [f"gguf-bench: error: {err.value}"]


def _csv_rows(text: str) -> tuple[list[str], list[dict[str, str]]]:
    reader = csv.DictReader(io.StringIO(text))
    return list(reader.fieldnames or []), list(reader)


@pytest.mark.heavy  # the CLI in a subprocess
def test_the_cli_lists_and_exports_a_schema0_store_as_before(v0_store: Path) -> None:
    proc = gguf_bench("--store", str(v0_store), "history")
    assert (proc.returncode, proc.stderr) == (0, "")
    assert proc.stdout == (DATA / "store_v0.history.txt").read_text(encoding="utf-8")
    for run_id, expected_file in (("last", "store_v0.export_last.csv"), (FINISHED_RUN, "store_v0.export_8a5b70.csv")):
        proc = gguf_bench("--store", str(v0_store), "export", run_id, "-o", "csv")
        assert (proc.returncode, proc.stderr) == (0, "")
        columns, rows = _csv_rows(proc.stdout)
        old_columns, old_rows = _csv_rows((DATA / expected_file).read_text(encoding="utf-8"))
        # the export may grow columns; every column of the old export is there, in order, with its values
        assert [c for c in columns if c in old_columns] == old_columns
        assert len(rows) == len(old_rows)
        for row, old in zip(rows, old_rows, strict=True):
            for c in old_columns:
                if row[c] != old[c]:  # only large numbers changed: written in full now, not to 6 digits (1.28e+08)
                    assert "e+" in old[c] and "e" not in row[c], (c, old[c], row[c])
                    assert float(row[c]) == pytest.approx(float(old[c]), rel=5e-6), c
    assert [row["status"] for row in rows] == ["ok", "ok"] and rows[1]["n_prompt"] == "16"
    with sqlite3.connect(v0_store) as db:  # read through an upgraded copy in memory: the file is as it was
        assert user_version(db) == 0
    ResultStore(v0_store).close()  # a writer's open brings it up to date
    with sqlite3.connect(v0_store) as db:
        assert user_version(db) == SCHEMA_VERSION
