"""Opening the results store, and setting a damaged one aside so that nothing stays blocked by it.

A file that starts with SQLite's header but whose pages are damaged (``SQLITE_CORRUPT``, ``SQLITE_NOTADB`` or a
failing ``PRAGMA quick_check``) is renamed ``<name>.damaged-<UTC time>`` with its WAL, one warning says so, and a
fresh store opens in its place: the damaged file is kept for whoever wants to recover it. A file that is not
SQLite at all (no header) is not ours to move: it is refused in one line, as is a store from a newer version.
"""

from __future__ import annotations

import datetime as dt
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

from app.output_guard import OutputRefused, check_store_path
from app.results.store_schema import (
    SCHEMA_VERSION,
    SchemaError,
    newer_schema,
    read_as_newest,
    upgrade,
    user_version,
)

SQLITE_MAGIC = b"SQLite format 3\x00"
_SQLITE_CORRUPT, _SQLITE_NOTADB = 11, 26
_SQLITE_READONLY, _SQLITE_CANTOPEN = 8, 14


class StoreError(RuntimeError):
    """The store cannot be opened or a run is unknown; str() is one line."""


class DamagedStore(Exception):
    """The store's pages are damaged; str() is the cause, one line."""


def _refuse_non_store(path: Path) -> None:
    """StoreError (one line) before SQLite opens ``path`` when what is there cannot be a store: a model or a link to
    one, a FIFO (the open would wait for a writer), a device (``/dev/zero`` would read as an empty store), a folder."""
    try:
        check_store_path(path)
    except OutputRefused as e:
        raise StoreError(str(e)) from None


def _connect(path: Path, busy_timeout_s: float) -> sqlite3.Connection:
    """Connect, upgrade the schema and check the pages; DamagedStore, StoreError or a connection."""
    _refuse_non_store(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(path, timeout=busy_timeout_s)
    except (OSError, sqlite3.Error) as e:
        raise StoreError(f"{path}: cannot open the results store ({e})") from None
    try:
        upgrade(db)  # refuses a newer schema before anything is written
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        problems = [r[0] for r in db.execute("PRAGMA quick_check(1)").fetchall()]
        if problems != ["ok"]:
            raise DamagedStore(" ".join(str(problems[0]).replace("*", "").split()))
        return db
    except DamagedStore:
        db.close()
        raise
    except (SchemaError, sqlite3.Error) as e:
        db.close()
        cause = e.__cause__ if isinstance(e, SchemaError) else e
        if _is_damage(cause) and _has_sqlite_header(path):
            raise DamagedStore(str(cause)) from None
        if isinstance(e, SchemaError):
            raise StoreError(f"{path}: {e}") from None
        raise StoreError(f"{path}: cannot open the results store ({e})") from None


def _is_damage(error: BaseException | None) -> bool:
    code = getattr(error, "sqlite_errorcode", None)
    return isinstance(error, sqlite3.DatabaseError) and code is not None and code & 0xFF in (_SQLITE_CORRUPT,
                                                                                            _SQLITE_NOTADB)


def _has_sqlite_header(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC
    except OSError:
        return False


def set_aside(path: Path) -> Path:
    """Rename a damaged store (and its WAL) out of the way; the new name of the store file."""
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S")
    target = path.with_name(f"{path.name}.damaged-{stamp}")
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.damaged-{stamp}-{n}")
    os.replace(path, target)
    for suffix in ("-wal", "-shm"):
        side = path.with_name(path.name + suffix)
        if side.exists():
            os.replace(side, target.with_name(target.name + suffix))
    return target


def open_or_set_aside(path: Path, busy_timeout_s: float, warn: Callable[[str], None]) -> sqlite3.Connection:
    """A connection to the store at ``path``; a damaged store is set aside (one warning) and a fresh one opened."""
    try:
        return _connect(path, busy_timeout_s)
    except DamagedStore as e:
        try:
            moved = set_aside(path)
        except OSError as err:
            raise StoreError(f"{path}: the results store is damaged ({e}) and cannot be set aside "
                             f"({err.strerror or err})") from None
        warn(f"{path}: the results store is damaged ({e}); set aside as {moved.name}, starting a fresh store")
    return _connect(path, busy_timeout_s)


def connect(path: Path, busy_timeout_s: float) -> sqlite3.Connection:
    """A connection to the store at ``path`` (created, or its schema brought up to date); a damaged store is refused
    in one line: setting it aside is recovery's, an explicit step (:func:`open_or_set_aside`)."""
    try:
        return _connect(path, busy_timeout_s)
    except DamagedStore as e:
        raise StoreError(f"{path}: the results store is damaged ({e}); the next sweep sets it aside") from None


def _open_unwritable(path: Path, error: sqlite3.Error) -> sqlite3.Connection:
    """A store in WAL mode whose folder this user cannot write (SQLite could not make its shared-memory file), opened
    as an unchanging file: safe when no write-ahead log is left beside it (every write merged into the file, and no
    writer can add one where this user cannot). With a log left, StoreError says why."""
    wal = path.with_name(path.name + "-wal")
    try:
        pending = wal.stat().st_size
    except FileNotFoundError:
        pending = 0
    if pending:
        raise StoreError(f"{path}: cannot be read by this user ({error}): its latest writes are still in {wal.name}, "
                         "which only a user who can write its folder merges; open it once as its owner")
    return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)


def connect_read_only(path: Path, busy_timeout_s: float) -> sqlite3.Connection:
    """A read-only connection to the store at ``path``: nothing on disk is created, upgraded, repaired or written. A
    store that is not there reads as an empty one, an older one as the newest schema (:func:`read_as_newest`), one
    this user cannot write beside as it stands on disk (:func:`_open_unwritable`); a newer one, a damaged one and a
    file that is not a store are refused in one line (and left as they are)."""
    _refuse_non_store(path)
    if not path.exists():
        db = sqlite3.connect(":memory:")
        upgrade(db)
        return db
    try:
        try:
            db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=busy_timeout_s)
            version = user_version(db)
        except sqlite3.OperationalError as e:
            if getattr(e, "sqlite_errorcode", 0) & 0xFF not in (_SQLITE_READONLY, _SQLITE_CANTOPEN):
                raise
            db = _open_unwritable(path, e)
            version = user_version(db)
        problems = [r[0] for r in db.execute("PRAGMA quick_check(1)").fetchall()]
    except sqlite3.Error as e:
        if _is_damage(e) and _has_sqlite_header(path):
            raise StoreError(f"{path}: the results store is damaged ({e}); the next sweep sets it aside") from None
        raise StoreError(f"{path}: cannot open the results store ({e})") from None
    if problems != ["ok"]:
        db.close()
        cause = " ".join(str(problems[0]).replace("*", "").split())
        raise StoreError(f"{path}: the results store is damaged ({cause}); the next sweep sets it aside")
    if version > SCHEMA_VERSION:
        db.close()
        raise StoreError(f"{path}: {newer_schema(version, SCHEMA_VERSION)}")
    if version < SCHEMA_VERSION:  # read as the newest schema through TEMP views: no copy, the file stays as it is
        try:
            read_as_newest(db)
        except sqlite3.Error as e:
            db.close()
            raise StoreError(f"{path}: cannot open the results store ({e})") from None
    return db
