"""The results store's schema and its migrations, versioned with ``PRAGMA user_version``.

A store written before versioning has ``user_version`` 0: that is schema 0 (``SCHEMA_V0``). ``MIGRATIONS[i]``
takes a database from version ``i`` to ``i + 1``; each runs in its own transaction together with the new
``user_version``, so a migration that fails leaves the database whole at the version before it. Append new
steps; never edit one that has shipped.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence

Migration = Callable[[sqlite3.Connection], None]

#: The tables as the first store (before versioning) created them; a fresh database starts from these.
SCHEMA_V0: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    created_at TEXT NOT NULL,
    finished_at TEXT,
    status TEXT NOT NULL,
    sweep_name TEXT,
    command TEXT,
    n_tests INTEGER NOT NULL DEFAULT 0,
    machine_json TEXT NOT NULL DEFAULT '{}',
    software_json TEXT NOT NULL DEFAULT '{}',
    tests_json TEXT NOT NULL DEFAULT '[]'
)""",
    """CREATE TABLE IF NOT EXISTS results (
    run_id TEXT NOT NULL REFERENCES runs(run_id),
    test_index INTEGER NOT NULL,
    status TEXT NOT NULL,
    model_filename TEXT,
    created_at TEXT NOT NULL,
    row_json TEXT NOT NULL,
    PRIMARY KEY (run_id, test_index)
)""",
)


class SchemaError(Exception):
    """The database cannot be brought to this code's schema; str() is one line without the file name."""


def newer_schema(found: int, known: int) -> str:
    """Why a store of schema ``found`` is not read by a version that knows up to ``known``, in one line."""
    return f"written by a newer gguf-workbench (schema version {found}; this version reads up to {known})"


def _newer(found: int, known: int) -> SchemaError:
    return SchemaError(newer_schema(found, known))


def _v1_run_order_and_writer(db: sqlite3.Connection) -> None:
    """Index runs by creation time (history, 'last'); record which process writes a run.

    ``writer_pid`` and ``writer_scope`` (host, boot and PID namespace) let a later process tell a run whose
    writer died from one still being written. Runs from before this step have neither and stay as they are.
    """
    for statement in SCHEMA_V0:
        db.execute(statement)
    db.execute("CREATE INDEX IF NOT EXISTS runs_by_created_at ON runs (created_at)")
    db.execute("ALTER TABLE runs ADD COLUMN writer_pid INTEGER")
    db.execute("ALTER TABLE runs ADD COLUMN writer_scope TEXT")


def _v2_interrupted_runs(db: sqlite3.Connection) -> None:
    """A run whose writer died is called 'interrupted' (it was 'aborted')."""
    db.execute("UPDATE runs SET status = 'interrupted' WHERE status = 'aborted'")


def _v3_quality(db: sqlite3.Connection) -> None:
    """Measured quality of model files (``gguf-bench quality``): one row per file per quality run.

    ``model_key`` is size and modification time (``app.results.quality_store.model_key``): a file replaced under
    the same name no longer matches. ``row_json`` holds the row's fields (``quality_store.QUALITY_COLUMNS``).
    """
    db.execute("""CREATE TABLE IF NOT EXISTS quality (
    run_id TEXT NOT NULL,
    model_index INTEGER NOT NULL,
    created_at TEXT NOT NULL,
    model_path TEXT NOT NULL,
    model_filename TEXT NOT NULL,
    model_key TEXT NOT NULL,
    status TEXT NOT NULL,
    row_json TEXT NOT NULL,
    PRIMARY KEY (run_id, model_index)
)""")
    db.execute("CREATE INDEX IF NOT EXISTS quality_by_model_key ON quality (model_key)")
    db.execute("CREATE INDEX IF NOT EXISTS quality_by_filename ON quality (model_filename)")


MIGRATIONS: tuple[Migration, ...] = (_v1_run_order_and_writer, _v2_interrupted_runs, _v3_quality)
SCHEMA_VERSION = len(MIGRATIONS)


def user_version(db: sqlite3.Connection) -> int:
    return int(db.execute("PRAGMA user_version").fetchone()[0])


def read_as_newest(db: sqlite3.Connection) -> None:
    """Let a read-only connection to an older store read it as the newest schema, without copying or changing it:
    a table it lacks is an empty TEMP table, a table lacking columns a TEMP view adding them as NULL (SQLite looks
    in TEMP first). What a migration changes in the data (``aborted`` to ``interrupted``) its readers read both ways.
    Raises sqlite3.Error when the file cannot be read."""
    newest = sqlite3.connect(":memory:")
    try:
        upgrade(newest)
        tables = newest.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'").fetchall()
        for name, sql in tables:
            want = [r[1] for r in newest.execute(f"PRAGMA table_info({name})")]
            have = {r[1] for r in db.execute(f"PRAGMA main.table_info({name})")}
            if not have:
                db.execute(sql.replace("CREATE TABLE IF NOT EXISTS", "CREATE TEMP TABLE", 1)
                           .replace("CREATE TABLE", "CREATE TEMP TABLE", 1))
            elif set(want) - have:
                columns = ", ".join(f'"{c}"' if c in have else f'NULL AS "{c}"' for c in want)
                db.execute(f"CREATE TEMP VIEW {name} AS SELECT rowid AS rowid, {columns} FROM main.{name}")
    finally:
        newest.close()


def upgrade(db: sqlite3.Connection, migrations: Sequence[Migration] | None = None) -> int:
    """Apply the migrations from the database's version to the newest, one transaction each; the new version.

    Safe against another process upgrading the same file at once: each step takes the write lock
    (``BEGIN IMMEDIATE``) and re-reads the version before it runs. Raises ``SchemaError`` when the database is
    newer than ``migrations`` know or a step fails (that step is rolled back).
    """
    steps = MIGRATIONS if migrations is None else migrations
    target = len(steps)
    version = user_version(db)
    if version > target:
        raise _newer(version, target)
    saved_isolation = db.isolation_level
    db.isolation_level = None  # explicit transactions: DDL and the version change commit together
    try:
        while version < target:
            version = _step(db, steps, target)
    finally:
        db.isolation_level = saved_isolation
    return version


def _step(db: sqlite3.Connection, steps: Sequence[Migration], target: int) -> int:
    """One migration in one transaction (or none, if another process got there first); the version after it."""
    db.execute("BEGIN IMMEDIATE")
    version = -1
    try:
        version = user_version(db)
        if version > target:
            raise _newer(version, target)
        if version < target:
            steps[version](db)
            db.execute(f"PRAGMA user_version = {version + 1:d}")
        db.execute("COMMIT")
    except BaseException as e:
        if db.in_transaction:
            db.execute("ROLLBACK")
        if isinstance(e, sqlite3.Error):
            raise SchemaError(f"cannot upgrade the schema from version {version} ({e})") from e
        raise
    return min(version + 1, target)
