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
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from app.paths import data_dir
from app.results.pending_rows import PendingRows, Write, apply_write
from app.results.row_types import QualityRow, ResultRow, Row, RowError
from app.results.run_writer import INTERRUPTED, LEGACY_ABORTED, is_abandoned, writer_scope
from app.results.store_repair import StoreError, connect, connect_read_only, open_or_set_aside
from app.results.stored_values import (
    MAX_ROW_JSON_CHARS,
    SKIPPED,
    BadValues,
    FieldChecker,
    checked_count,
    checked_row,
    checked_status,
    checked_text,
    parse_row_json,
)
from app.shown_text import one_line

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
    print(f"warning: {one_line(message)}", file=sys.stderr)


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
        bad = BadValues(self.path, self.warn)
        out = [self._summary(row, bad) for row in cur]
        bad.say()
        return out

    @staticmethod
    def _summary(row: tuple[Any, ...], bad: BadValues) -> RunSummary:
        """One row of :meth:`runs` as a summary, each column checked (a hand-edited store: one warning per field)."""
        run_id, created, finished, status, sweep, n_tests, n_ok, n_failed, models, pid, scope = row
        return RunSummary(
            checked_text("run_id", run_id, bad, required=True), checked_text("created_at", created, bad, required=True),
            checked_text("finished_at", finished, bad) or None,
            _status(checked_status("status", status, bad), pid if isinstance(pid, int) else None,
                    scope if isinstance(scope, str) else None),
            checked_text("sweep_name", sweep, bad) or None, checked_count("n_tests", n_tests, bad),
            checked_count("ok results", n_ok, bad), checked_count("failed results", n_failed, bad),
            checked_text("model_filename", models, bad))

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
            return [str(row[0])] if row else []
        # a prefix as it is: LIKE would read % and _ as wildcards and ignore case
        return [str(r[0]) for r in self._db.execute("SELECT run_id FROM runs WHERE substr(run_id, 1, length(?1)) = ?1",
                                                    (prefix,))]

    def rows(self, run_id: str) -> list[ResultRow]:
        cur = self._db.execute("SELECT row_json FROM results WHERE run_id = ? ORDER BY test_index", (run_id,))
        return self._decode_rows(r[0] for r in cur)

    def row_values(self, run_id: str, names: Sequence[str]) -> Iterator[list[Any]]:
        """The values of the named fields of a run's rows (a list per row, in ``names``' order), in test order,
        streamed: SQLite takes them out of each row's JSON (the rest of the row is never decoded here, and no row is
        kept), and each is checked as :meth:`rows` checks it (one warning per field and problem, once the rows are
        read). What a command reads of a run of any length, in bounded memory."""
        fields = list(names) + ["\u0000"]  # two paths at least: json_extract then gives one array of them all
        paths = ", ".join("'$." + json.dumps(n).replace("'", "''") + "'" for n in fields)
        cur = self._db.execute(
            f"SELECT CASE WHEN readable THEN json_extract(row_json, {paths}) END, "  # noqa: S608 - fixed text
            "CASE WHEN readable THEN NULL ELSE row_json END FROM (SELECT test_index, row_json, "
            f"length(row_json) <= {MAX_ROW_JSON_CHARS} AND json_valid(row_json) AS readable FROM results "
            "WHERE run_id = ?) ORDER BY test_index", (run_id,))
        bad = BadValues(self.path, self.warn)
        label = f"{ResultRow.KIND} row"
        check = FieldChecker(fields[:-1], bad, label)
        loads = json.loads
        try:
            for extracted, unread in cur:
                if extracted is not None:
                    yield check.values(loads(extracted)[:-1])  # SQLite's array of the fields' JSON values
                    continue
                parsed = parse_row_json(unread, bad, label)  # not JSON to SQLite (NaN, too deep, too long)
                if parsed is not None:
                    yield check.values([parsed.get(n) for n in check.names])
        finally:
            bad.say()

    def recent_rows(self, limit: int = 500) -> list[ResultRow]:
        """The newest rows of every run, newest first (for calibration)."""
        cur = self._db.execute("SELECT row_json FROM results ORDER BY rowid DESC LIMIT ?", (limit,))
        return self._decode_rows(r[0] for r in cur)

    def _decode_rows(self, texts: Iterable[str]) -> list[ResultRow]:
        """Typed rows from their JSON (:meth:`ResultRow.from_mapping`: missing and unknown keys are fine); see
        :func:`decode_rows` for a row or value that cannot be read."""
        return decode_rows(ResultRow, texts, self.path, self.warn)

    def run_info(self, run_id: str) -> dict[str, Any]:
        row = self._db.execute(
            "SELECT run_id, created_at, finished_at, status, sweep_name, command, n_tests, machine_json, "
            "software_json, tests_json, writer_pid, writer_scope FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        if row is None:
            raise StoreError(f"{self.path}: no run {run_id!r}")
        bad = BadValues(self.path, self.warn)
        info: dict[str, Any] = {
            "run_id": checked_text("run_id", row[0], bad, required=True),
            "created_at": checked_text("created_at", row[1], bad, required=True),
            "finished_at": checked_text("finished_at", row[2], bad) or None,
            "status": _status(checked_status("status", row[3], bad), row[10] if isinstance(row[10], int) else None,
                              row[11] if isinstance(row[11], str) else None),
            "sweep_name": checked_text("sweep_name", row[4], bad) or None,
            "command": checked_text("command", row[5], bad) or None,
            "n_tests": checked_count("n_tests", row[6], bad)}
        bad.say()
        info["machine"] = _loads(row[7], {})
        info["software"] = _loads(row[8], {})
        info["tests"] = _loads(row[9], [])
        return info


#: A run's machine, software or tests record longer than this is read as empty (10,000 tests take about 2 MB).
MAX_RECORD_JSON_CHARS = 64 << 20


def _loads(text: Any, default: Any) -> Any:
    """A run's stored JSON record, or ``default`` where it is not one (not text, too long, not JSON, too deep)."""
    if not isinstance(text, str | bytes) or len(text) > MAX_RECORD_JSON_CHARS:
        return default
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return default
    return data if isinstance(data, type(default)) else default


R = TypeVar("R", bound=Row)


def decode_rows(kind: type[R], texts: Iterable[Any], where: Path, warn: Callable[[str], None]) -> list[R]:
    """Stored rows of ``kind`` from their JSON texts (:mod:`app.results.stored_values`): a row that cannot be read
    (not JSON, too deep, too long) is skipped, a value that cannot be a figure (of the wrong type, NaN, past 2^63)
    read as empty; one warning per field and problem."""
    rows: list[R] = []
    bad = BadValues(where, warn)
    label = f"{kind.KIND} row"
    for text in texts:
        data = parse_row_json(text, bad, label)
        if data is None:
            continue
        try:
            rows.append(kind.from_mapping(checked_row(data, bad, label, kind.TABLE)))
        except RowError as e:  # what checked_row lets through is of the table's types: not expected, still said
            bad.note(f"{label}s", "is not of the field table", str(e), SKIPPED)
    bad.say()
    return rows
