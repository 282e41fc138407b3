"""The SQLite results store: every finished test is committed the moment its event arrives (WAL).

A crash or kill of the worker, or of this process after the commit, loses no finished test. The schema is
versioned (``PRAGMA user_version``) and brought up to date when a store opens for writing (``store_schema``). A
write the store cannot take (locked too long, disk full) is kept in a side file (``pending_rows``); a stored row
that is not JSON is skipped.

Opening reads: :meth:`ResultStore.open_read_only` changes nothing (``predict``, ``choose`` and the window's figures
read this way), and ``ResultStore(path)`` opens for writing without touching what is there. Recovery is its own
step, taken by whatever writes runs (a sweep, the window at start, ``import``, ``calibrate``, ``quality``):
:meth:`ResultStore.recover` sets a damaged store aside and starts a fresh one (``store_repair``), stores the writes
kept in the side file, and marks 'interrupted' the runs left 'running' by a process that has since died
(``run_writer``).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sqlite3
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from app.paths import data_dir
from app.results.pending_rows import PendingRows, Write, apply_write
from app.results.row_types import QualityRow, ResultRow, Row, RowError
from app.results.run_writer import INTERRUPTED, LEGACY_ABORTED, is_abandoned, writer_scope
from app.results.store_repair import StoreError, connect, connect_read_only, open_or_set_aside

__all__ = ["ResultStore", "RunSummary", "StoreError", "decode_rows", "default_store_path", "new_run_id", "now_iso"]


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


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


def _print_warning(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


def _status(status: str, writer_pid: int | None = None, scope: str | None = None) -> str:
    """A run's status as a reader should see it: stores written before the rename say 'aborted' for an interrupted
    run, and a run still 'running' whose process of this machine no longer exists is interrupted (read as such
    without writing it; the recovery step writes it)."""
    if status == LEGACY_ABORTED:
        return INTERRUPTED
    if status == "running" and writer_pid is not None and is_abandoned(writer_pid, scope):
        return INTERRUPTED
    return status


def new_run_id() -> str:
    return now_iso().replace(":", "").replace("-", "") + "-" + uuid.uuid4().hex[:6]


class ResultStore:
    """Runs and their rows. One connection per store object; safe to open from several processes.

    ``ResultStore(path)`` opens for writing (a damaged store is refused: see :meth:`recover`); a write is retried
    with backoff (``write_attempts`` tries, each waiting up to ``busy_timeout_s`` for a lock); when every try fails
    it goes to the side file, with one warning, and never raises. ``warn`` receives each one-line warning (default:
    printed on stderr). :meth:`open_read_only` reads and writes nothing.
    """

    def __init__(self, path: str | Path | None = None, *, busy_timeout_s: float = 10.0, write_attempts: int = 4,
                 backoff_s: float = 0.25, warn: Callable[[str], None] | None = None,
                 _db: sqlite3.Connection | None = None) -> None:
        self.path = Path(path) if path else default_store_path()
        self.busy_timeout_s = busy_timeout_s
        self.write_attempts = max(1, write_attempts)
        self.backoff_s = backoff_s
        self.warnings: list[str] = []
        self._warn_to = warn or _print_warning
        self.pending = PendingRows(self.path)
        self._pending_now = False  # a write of this object went to the side file: later ones follow it there
        self._unkept_said = False  # the warning that a write could be neither stored nor kept was given
        self.read_only = _db is not None
        self._db = _db if _db is not None else connect(self.path, busy_timeout_s)

    @classmethod
    def open_read_only(cls, path: str | Path | None = None, *, busy_timeout_s: float = 10.0) -> ResultStore:
        """The store for reading: nothing is created, upgraded, repaired or replayed (a store not there reads as
        empty). Raises StoreError when it cannot be read (another schema version, not a store)."""
        where = Path(path) if path else default_store_path()
        return cls(where, busy_timeout_s=busy_timeout_s, _db=connect_read_only(where, busy_timeout_s))

    @classmethod
    def recover(cls, path: str | Path | None = None, **kwargs: Any) -> ResultStore:
        """Open for writing after recovery: a damaged store set aside (one warning) and a fresh one started, the
        writes kept in the side file stored, and runs left 'running' by a process that no longer exists marked
        'interrupted'. The step whatever writes runs takes first (a sweep, the window at start, import...)."""
        where = Path(path) if path else default_store_path()
        found: list[str] = []
        db = open_or_set_aside(where, float(kwargs.get("busy_timeout_s", 10.0)), found.append)
        store = cls(where, _db=db, **kwargs)
        store.read_only = False
        for message in found:
            store.warn(message)
        store._replay_pending()
        store._mark_abandoned_runs()
        return store

    def warn(self, message: str) -> None:
        self.warnings.append(message)
        self._warn_to(message)

    def _mark_abandoned_runs(self) -> None:
        """Mark 'interrupted' the runs left 'running' by a process of this machine that no longer exists.

        Best effort: a store that cannot be written now (locked, read-only) is left as it is.
        """
        try:
            running = self._db.execute(
                "SELECT run_id, writer_pid, writer_scope FROM runs WHERE status = 'running'").fetchall()
            gone = [(INTERRUPTED, run_id, pid) for run_id, pid, scope in running if is_abandoned(pid, scope)]
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
    def begin_run(self, run_id: str, *, sweep_name: str = "", command: str = "", tests: Sequence[dict[str, Any]] = (),
                  machine: dict[str, Any] | None = None, software: dict[str, Any] | None = None) -> None:
        self._write({"op": "begin", "run_id": run_id, "created_at": now_iso(), "sweep_name": sweep_name,
                     "command": command, "tests": list(tests), "machine": machine or {}, "software": software or {},
                     "writer_pid": os.getpid(), "writer_scope": writer_scope()})

    def update_software(self, run_id: str, software: dict[str, Any]) -> None:
        self._write({"op": "software", "run_id": run_id, "software": software})

    def add_result(self, run_id: str, row: ResultRow) -> None:
        """Commit one finished (or failed) test at once (or keep it in the side file: see the class)."""
        self._write({"op": "result", "run_id": run_id, "created_at": now_iso(), "row": row.to_mapping()})

    def finish_run(self, run_id: str, status: str) -> None:
        self._write({"op": "finish", "run_id": run_id, "finished_at": now_iso(), "status": status})

    def add_quality_row(self, row: QualityRow) -> bool:
        """Commit one file's quality row (``quality_store``) with the same retries and side file as a test's; False
        when it was kept in the side file instead."""
        return self._write({"op": "quality", "created_at": row.created_at or now_iso(), "row": row.to_mapping()})

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """The rows of one read-only statement on this store's connection (sqlite3.Error for a damaged table)."""
        return self._db.execute(sql, params).fetchall()

    def _write(self, write: Write) -> bool:
        """Commit ``write`` (True), or keep it in the side file (False)."""
        if self.read_only:
            raise StoreError(f"{self.path}: opened read-only; nothing is written")
        if self._pending_now and not self._replay_pending(quiet=True):
            self._keep_pending(write, None)  # still unwritable: keep the order of the writes
            return False
        error: sqlite3.Error | None = None
        for attempt in range(self.write_attempts):
            if attempt:
                time.sleep(self.backoff_s * 2 ** (attempt - 1))
            try:
                with self._db:
                    apply_write(self._db, write)
                return True
            except sqlite3.Error as e:
                error = e
                if getattr(e, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
                    break  # a full disk: waiting does not free it
        self._keep_pending(write, error)
        return False

    def _keep_pending(self, write: Write, error: sqlite3.Error | None) -> None:
        first = not self._pending_now
        self._pending_now = True
        try:
            self.pending.append(write)
        except OSError as e:
            if not self._unkept_said:  # once: every later result of the run meets the same full disk
                self._unkept_said = True
                self.warn(f"{self.path}: cannot store results ({error or 'store unwritable'}) nor keep them in "
                          f"{self.pending.path} ({e.strerror or e}); from here on they are only in this run's "
                          "output")
            return
        if first:
            self.warn(f"{self.path}: cannot write to the results store ({error}); results are kept in "
                      f"{self.pending.path} and stored the next time the store opens")

    def _replay_pending(self, quiet: bool = False) -> bool:
        """Commit the side file's writes in one transaction; True when nothing is left pending."""
        if not self.pending.exists():
            self._pending_now = False
            return True
        writes, bad = self.pending.take()
        try:
            with self._db:
                for w in writes:
                    apply_write(self._db, w)
        except (sqlite3.Error, KeyError, TypeError, ValueError) as e:
            try:
                self.pending.put_back(writes)
            except OSError:
                pass
            if not quiet:
                self.warn(f"{self.path}: {len(writes)} kept results could not be stored yet ({e}); "
                          f"they stay in {self.pending.path}")
            return False
        self._pending_now = False
        if not quiet or bad:
            n = sum(1 for w in writes if w["op"] in ("result", "quality"))
            self.warn(f"{self.path}: stored {n} results kept in {self.pending.path.name}"
                      + (f"; skipped {bad} unreadable lines" if bad else ""))
        return True

    # --- reading ---------------------------------------------------------------------------------
    def runs(self, limit: int = 50) -> list[RunSummary]:
        cur = self._db.execute(
            "SELECT r.run_id, r.created_at, r.finished_at, r.status, r.sweep_name, r.n_tests, "
            "SUM(x.status = 'ok'), SUM(x.status = 'failed'), GROUP_CONCAT(DISTINCT x.model_filename), "
            "r.writer_pid, r.writer_scope "
            "FROM (SELECT rowid AS n, * FROM runs ORDER BY created_at DESC, rowid DESC LIMIT ?) r "
            "LEFT JOIN results x ON x.run_id = r.run_id "
            "GROUP BY r.run_id ORDER BY r.created_at DESC, r.n DESC",
            (limit,),
        )
        return [RunSummary(a, b, c, _status(d, pid, scope), e, f or 0, g or 0, h or 0, i or "")
                for a, b, c, d, e, f, g, h, i, pid, scope in cur]

    def resolve_run_id(self, prefix: str) -> str:
        """A full run id from a unique prefix (or 'last')."""
        ids = self.run_ids(prefix)
        if not ids:
            raise StoreError(f"{self.path}: no runs stored yet" if prefix == "last" else
                             f"{self.path}: no run {prefix!r} (see `gguf-bench history`)")
        if len(ids) > 1:
            raise StoreError(f"{self.path}: run id {prefix!r} is ambiguous ({len(ids)} runs match)")
        return ids[0]

    def run_ids(self, prefix: str) -> list[str]:
        """The run ids beginning with ``prefix`` ('last': the newest run's)."""
        if prefix == "last":
            row = self._db.execute("SELECT run_id FROM runs ORDER BY created_at DESC, rowid DESC LIMIT 1").fetchone()
            return [row[0]] if row else []
        return [r[0] for r in self._db.execute("SELECT run_id FROM runs WHERE run_id LIKE ? || '%'", (prefix,))]

    def rows(self, run_id: str) -> list[ResultRow]:
        cur = self._db.execute("SELECT row_json FROM results WHERE run_id = ? ORDER BY test_index", (run_id,))
        return self._decode_rows(r[0] for r in cur)

    def recent_rows(self, limit: int = 500) -> list[ResultRow]:
        """The newest rows of every run, newest first (for calibration)."""
        cur = self._db.execute("SELECT row_json FROM results ORDER BY rowid DESC LIMIT ?", (limit,))
        return self._decode_rows(r[0] for r in cur)

    def _decode_rows(self, texts: Iterable[str]) -> list[ResultRow]:
        """Typed rows from their JSON (:meth:`ResultRow.from_mapping`: missing and unknown keys are fine); a row
        that is not a JSON object, or holds a value not of its field's type, is skipped, with one warning per call
        (naming the first such field)."""
        return decode_rows(ResultRow, texts, self.path, self.warn)

    def run_info(self, run_id: str) -> dict[str, Any]:
        row = self._db.execute(
            "SELECT run_id, created_at, finished_at, status, sweep_name, command, n_tests, machine_json, "
            "software_json, tests_json, writer_pid, writer_scope FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        if row is None:
            raise StoreError(f"{self.path}: no run {run_id!r}")
        keys = ("run_id", "created_at", "finished_at", "status", "sweep_name", "command", "n_tests")
        info = dict(zip(keys, row[:7], strict=True))
        info["status"] = _status(info["status"], row[10], row[11])
        info["machine"] = _loads(row[7], {})
        info["software"] = _loads(row[8], {})
        info["tests"] = _loads(row[9], [])
        return info


def _loads(text: Any, default: Any) -> Any:
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return default


R = TypeVar("R", bound=Row)


def decode_rows(kind: type[R], texts: Iterable[str], where: Path, warn: Callable[[str], None]) -> list[R]:
    """Stored rows of ``kind`` from their JSON texts; one that is not a JSON object or not of its field table is
    skipped, and one warning says how many (and why the first typed one was refused)."""
    rows: list[R] = []
    not_json, refused = 0, []
    for text in texts:
        data = _loads(text, None)
        if not isinstance(data, dict):
            not_json += 1
            continue
        try:
            rows.append(kind.from_mapping(data))
        except RowError as e:
            refused.append(str(e))
    if not_json:
        warn(f"{where}: skipped {not_json} stored {kind.KIND} rows that are not valid JSON")
    if refused:
        warn(f"{where}: skipped {len(refused)} stored {kind.KIND} rows of the wrong types ({refused[0]})")
    return rows
