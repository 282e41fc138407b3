"""The SQLite results store: every finished test is committed the moment its event arrives (WAL).

A crash or kill of the worker, or of this process after the commit, loses no finished test. The schema is
versioned (``PRAGMA user_version``) and brought up to date when a store opens (``store_schema``); a run left
'running' by a process that has since died is marked 'aborted' then (``run_writer``).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sqlite3
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.paths import data_dir
from app.results.run_writer import ABORTED, is_abandoned, writer_scope
from app.results.store_schema import SchemaError, upgrade


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


class StoreError(RuntimeError):
    """The store cannot be opened or a run is unknown; str() is one line."""


@dataclass(frozen=True)
class RunSummary:
    run_id: str
    created_at: str
    finished_at: str | None
    status: str
    sweep_name: str | None
    n_tests: int
    n_ok: int
    n_failed: int
    models: str


def default_store_path() -> Path:
    return data_dir() / "results.sqlite3"


def new_run_id() -> str:
    return now_iso().replace(":", "").replace("-", "") + "-" + uuid.uuid4().hex[:6]


class ResultStore:
    """Runs and their rows. One connection per store object; safe to open from several processes."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path else default_store_path()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, timeout=10.0)
        except (OSError, sqlite3.Error) as e:
            raise StoreError(f"{self.path}: cannot open the results store ({e})") from None
        try:
            upgrade(self._db)  # refuses a newer schema before anything is written
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
        except SchemaError as e:
            self._db.close()
            raise StoreError(f"{self.path}: {e}") from None
        except sqlite3.Error as e:
            self._db.close()
            raise StoreError(f"{self.path}: cannot open the results store ({e})") from None
        self._mark_abandoned_runs()

    def _mark_abandoned_runs(self) -> None:
        """Mark 'aborted' the runs left 'running' by a process of this machine that no longer exists.

        Best effort: a store that cannot be written now (locked, read-only) is left as it is.
        """
        try:
            running = self._db.execute(
                "SELECT run_id, writer_pid, writer_scope FROM runs WHERE status = 'running'").fetchall()
            gone = [(ABORTED, run_id, pid) for run_id, pid, scope in running if is_abandoned(pid, scope)]
            if gone:
                with self._db:
                    self._db.executemany("UPDATE runs SET status = ? WHERE run_id = ? AND status = 'running' "
                                         "AND writer_pid = ?", gone)
        except sqlite3.Error:
            pass

    def close(self) -> None:
        self._db.close()

    def event_log_path(self, run_id: str) -> Path:
        """Where a run's whole event stream (token ticks, telemetry) is kept beside the store: gzip JSONL."""
        return self.path.parent / "runs" / f"{run_id}.events.jsonl.gz"

    def __enter__(self) -> ResultStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- writing ---------------------------------------------------------------------------------
    def begin_run(self, run_id: str, *, sweep_name: str = "", command: str = "", tests: list[dict[str, Any]] = (),
                  machine: dict[str, Any] | None = None, software: dict[str, Any] | None = None) -> None:
        with self._db:
            self._db.execute(
                "INSERT INTO runs (run_id, created_at, status, sweep_name, command, n_tests, machine_json, "
                "software_json, tests_json, writer_pid, writer_scope) VALUES (?, ?, 'running', ?, ?, ?, ?, ?, ?, ?, ?)",
                (run_id, now_iso(), sweep_name, command, len(tests), json.dumps(machine or {}),
                 json.dumps(software or {}), json.dumps(list(tests)), os.getpid(), writer_scope()),
            )

    def update_software(self, run_id: str, software: dict[str, Any]) -> None:
        with self._db:
            self._db.execute("UPDATE runs SET software_json = ? WHERE run_id = ?", (json.dumps(software), run_id))

    def add_result(self, run_id: str, row: dict[str, Any]) -> None:
        """Commit one finished (or failed) test at once."""
        with self._db:
            self._db.execute(
                "INSERT OR REPLACE INTO results (run_id, test_index, status, model_filename, created_at, row_json) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (run_id, int(row.get("test_index", -1)), str(row.get("status", "")), row.get("model_filename"),
                 now_iso(), json.dumps(row, ensure_ascii=False)),
            )

    def finish_run(self, run_id: str, status: str) -> None:
        with self._db:
            self._db.execute("UPDATE runs SET finished_at = ?, status = ? WHERE run_id = ?",
                             (now_iso(), status, run_id))

    # --- reading ---------------------------------------------------------------------------------
    def runs(self, limit: int = 50) -> list[RunSummary]:
        cur = self._db.execute(
            "SELECT r.run_id, r.created_at, r.finished_at, r.status, r.sweep_name, r.n_tests, "
            "SUM(x.status = 'ok'), SUM(x.status = 'failed'), GROUP_CONCAT(DISTINCT x.model_filename) "
            "FROM (SELECT rowid AS n, * FROM runs ORDER BY created_at DESC, rowid DESC LIMIT ?) r "
            "LEFT JOIN results x ON x.run_id = r.run_id "
            "GROUP BY r.run_id ORDER BY r.created_at DESC, r.n DESC",
            (limit,),
        )
        return [RunSummary(a, b, c, d, e, f or 0, g or 0, h or 0, i or "") for a, b, c, d, e, f, g, h, i in cur]

    def resolve_run_id(self, prefix: str) -> str:
        """A full run id from a unique prefix (or 'last')."""
        if prefix == "last":
            row = self._db.execute("SELECT run_id FROM runs ORDER BY created_at DESC, rowid DESC LIMIT 1").fetchone()
            if row is None:
                raise StoreError(f"{self.path}: no runs stored yet")
            return row[0]
        rows = self._db.execute("SELECT run_id FROM runs WHERE run_id LIKE ? || '%'", (prefix,)).fetchall()
        if not rows:
            raise StoreError(f"{self.path}: no run {prefix!r} (see `gguf-bench history`)")
        if len(rows) > 1:
            raise StoreError(f"{self.path}: run id {prefix!r} is ambiguous ({len(rows)} runs match)")
        return rows[0][0]

    def rows(self, run_id: str) -> list[dict[str, Any]]:
        cur = self._db.execute("SELECT row_json FROM results WHERE run_id = ? ORDER BY test_index", (run_id,))
        return [json.loads(r[0]) for r in cur]

    def recent_rows(self, limit: int = 500) -> list[dict[str, Any]]:
        """The newest rows of every run, newest first (for calibration)."""
        cur = self._db.execute("SELECT row_json FROM results ORDER BY rowid DESC LIMIT ?", (limit,))
        return [json.loads(r[0]) for r in cur]

    def run_info(self, run_id: str) -> dict[str, Any]:
        row = self._db.execute(
            "SELECT run_id, created_at, finished_at, status, sweep_name, command, n_tests, machine_json, "
            "software_json, tests_json FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        if row is None:
            raise StoreError(f"{self.path}: no run {run_id!r}")
        keys = ("run_id", "created_at", "finished_at", "status", "sweep_name", "command", "n_tests")
        info = dict(zip(keys, row[:7], strict=True))
        info["machine"] = json.loads(row[7])
        info["software"] = json.loads(row[8])
        info["tests"] = json.loads(row[9])
        return info
