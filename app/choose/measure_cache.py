"""The measurements ``choose --measure`` took, kept so the same question is answered at once the next time.

One JSON file in the data dir (``choose/measure-cache.json``). An entry is keyed by everything its figure depends on:
the model file (resolved path, size and modification time: a rewritten file is a new file), the test's settings,
the hardware (CPU model, GPU info, usable CPU threads, as the rows record them) and the llama.cpp build
(llama-cpp-python's version and GPU backends, :func:`app.predict.machine_fit.calibration_store.llama_build`). The file
is written whole through a rename (:mod:`app.atomic`); one that cannot be read counts as empty, with the reason in
:attr:`MeasureCache.problem`, and is replaced on the next write. The results store keeps every measured row as well;
this file is only the index that lets a second search skip the worker.

Two searches at once (two ``choose --measure``, the window's and the command line's) take a lock per key: a key
missing from the cache is claimed by the process that will measure it (a lock file per key under
``choose/locks``), and another process asking the same question waits for that figure instead of measuring the same
file on the same cores at the same time (one file once measured 10.0 and 567.0 tok/s so). The claim ends with the
key's :meth:`MeasureCache.put`, :meth:`MeasureCache.release` or the process; a wait ends after
:data:`CLAIM_WAIT_S`. Writing takes a lock for the whole file, so entries written at once are all kept; a figure
another process kept for the same key meanwhile that differs by more than :data:`AGREE_WITHIN` keeps the faster of
the two, marked unstable, never one of them as if it were stable.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

from app.atomic import write_text_atomic
from app.bounded_read import read_bounded_text
from app.paths import data_dir

CACHE_VERSION = 1
#: Entries kept: the oldest go first beyond this (one entry is about 600 bytes).
MAX_ENTRIES = 4096
MAX_CACHE_BYTES = 8 << 20
CACHE_FILE = "measure-cache.json"
#: The longest a search waits for another process measuring the same key (a measurement is seconds to minutes).
CLAIM_WAIT_S = 600.0
#: Two figures of one key that differ by more than this share of the faster are not one stable figure.
AGREE_WITHIN = 0.25

#: The keys this process has claimed (any MeasureCache of it): another search here does not wait on its own process.
_HELD_HERE: set[str] = set()

try:  # a lock per key and one for writing: POSIX advisory locks (elsewhere the cache is used without them)
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]


def default_cache_path() -> Path:
    """``<data dir>/choose/measure-cache.json``."""
    return data_dir() / "choose" / CACHE_FILE


def file_identity(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A model file as the cache knows it: resolved path, size and modification time (ns). OSError if unreadable."""
    p = Path(path).expanduser().resolve()
    st = p.stat()
    return {"path": str(p), "size_bytes": st.st_size, "mtime_ns": st.st_mtime_ns}


def key_digest(key: dict[str, Any]) -> str:
    """The entry name of a key: a hash of its canonical JSON (sorted keys), so equal questions share one entry."""
    return hashlib.sha256(json.dumps(key, sort_keys=True, separators=(",", ":")).encode("utf-8")).hexdigest()[:32]


@dataclass(frozen=True)
class CachedMeasurement:
    """One measured test: its decode rate (raw, at the depth it ran at) and where its row is."""

    decode_tps: float
    n_depth: int
    prefill_tps: float | None = None
    ttft_ms: float | None = None
    unstable: bool = False
    run_id: str = ""  # the results store's run holding the row
    build_commit: str = ""  # llama.cpp's, as the worker reported it
    measured_at: str = ""  # ISO 8601, local time
    model_filename: str = ""
    #: other processes' CPU use during the test (%), where it was over the busy bound: such a figure is never kept
    busy_other_cpu_pct: float | None = None

    def to_json_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json_dict(cls, d: dict[str, Any]) -> CachedMeasurement:
        """ValueError/TypeError/KeyError for an entry that is not one (the caller skips it)."""
        names = {f.name for f in fields(cls)}
        m = cls(**{k: v for k, v in d.items() if k in names})
        if not isinstance(m.decode_tps, (int, float)) or isinstance(m.decode_tps, bool) or not m.decode_tps > 0:
            raise ValueError("decode_tps is not a positive number")
        if not isinstance(m.n_depth, int) or isinstance(m.n_depth, bool) or m.n_depth < 0:
            raise ValueError("n_depth is not a count")
        return m


class MeasureCache:
    """The cache file, read once when made; :meth:`put` merges with what is on disk now and writes it whole."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path is not None else default_cache_path()
        self.problem: str | None = None  # why the file on disk was not read, when it was not
        self._entries = self._read()
        self._claims: dict[str, int] = {}  # key digest -> the open lock file this process holds for it

    def __len__(self) -> int:
        return len(self._entries)

    def _read(self) -> dict[str, dict[str, Any]]:
        try:
            text = read_bounded_text(self.path, MAX_CACHE_BYTES)
        except FileNotFoundError:
            return {}
        except (OSError, UnicodeDecodeError) as e:
            self.problem = f"{self.path}: not read ({e}); measuring again"
            return {}
        try:
            doc = json.loads(text)
        except ValueError as e:
            self.problem = f"{self.path}: not JSON ({e}); measuring again"
            return {}
        if not isinstance(doc, dict) or doc.get("version") != CACHE_VERSION or not isinstance(doc.get("entries"), dict):
            self.problem = f"{self.path}: not a version {CACHE_VERSION} measurement cache; measuring again"
            return {}
        return {k: v for k, v in doc["entries"].items() if isinstance(v, dict)}

    def get(self, key: dict[str, Any]) -> CachedMeasurement | None:
        """The measurement for exactly this key, or None (a damaged entry counts as none). None claims the key for
        this process (it is expected to measure it and :meth:`put` the figure): when another process holds the
        claim, this waits for it (up to CLAIM_WAIT_S) and reads what it kept."""
        found = self._lookup(key)
        if found is not None or fcntl is None:
            return found
        digest = key_digest(key)
        if digest in self._claims or digest in _HELD_HERE:  # this process measures it already (another search of
            return None  # the window's): no wait on itself; put() reconciles two figures
        for older in list(self._claims)[:-1]:  # a search asks a key or two per file: older claims were not measured
            self._unclaim(older)
        if not self._claim(digest, block=False):  # another process is measuring it: wait, then read its figure
            self.release()  # never wait while holding a claim another process may be waiting for
            self._claim(digest, block=True)
        self._entries = {**self._entries, **MeasureCache(self.path)._entries}  # what others kept since this read
        found = self._lookup(key)
        if found is not None:
            self._unclaim(digest)
        return found

    def _lookup(self, key: dict[str, Any]) -> CachedMeasurement | None:
        entry = self._entries.get(key_digest(key))
        if entry is None or entry.get("key") != key or not isinstance(entry.get("measurement"), dict):
            return None
        try:
            found = CachedMeasurement.from_json_dict(entry["measurement"])
        except (ValueError, TypeError, KeyError):
            return None
        return None if found.busy_other_cpu_pct is not None else found  # taken while busy: never an answer

    def _lock_path(self, name: str) -> Path:
        return self.path.parent / "locks" / f"{name}.lock"

    def _claim(self, digest: str, block: bool) -> bool:
        """Take the key's lock (waiting up to CLAIM_WAIT_S when ``block``); False when it could not be had."""
        try:
            path = self._lock_path(digest)
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:
            return False
        deadline = time.monotonic() + (CLAIM_WAIT_S if block else 0.0)
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                self._claims[digest] = fd
                _HELD_HERE.add(digest)
                return True
            except OSError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    return False
                time.sleep(0.2)

    def _unclaim(self, digest: str) -> None:
        fd = self._claims.pop(digest, None)
        if fd is not None:
            _HELD_HERE.discard(digest)
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def release(self) -> None:
        """End every claim this cache holds (a measurement that failed leaves its key to whoever asks next)."""
        for digest in list(self._claims):
            self._unclaim(digest)

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.release()

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """The whole file's lock, for a read-merge-write (two puts at once keep both entries)."""
        if fcntl is None:
            yield
            return
        path = self._lock_path("write")
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def put(self, key: dict[str, Any], measurement: CachedMeasurement) -> Path:
        """Add (or replace) one entry and write the file whole; OSError if it cannot be written. Entries another
        process wrote since this cache was read are kept (what is on disk wins over this process's older copy); a
        figure of this key another process kept meanwhile that disagrees keeps the faster, marked unstable; beyond
        MAX_ENTRIES the oldest go. Ends this process's claim on the key. ValueError for a figure taken while other
        processes held the cores (never an answer)."""
        if measurement.busy_other_cpu_pct is not None:
            self.release()
            raise ValueError("a figure measured while other processes held the cores is not cached")
        digest = key_digest(key)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self._writing():
                on_disk = MeasureCache(self.path)._entries
                merged = {**self._entries, **on_disk}
                theirs = merged.get(digest)
                if theirs is not None and theirs.get("key") == key and theirs != self._entries.get(digest):
                    measurement = _agreed(measurement, theirs.get("measurement"))
                merged[digest] = {"key": key, "measurement": measurement.to_json_dict()}
                if len(merged) > MAX_ENTRIES:
                    newest = sorted(merged.items(),
                                    key=lambda kv: str(kv[1].get("measurement", {}).get("measured_at", "")))
                    merged = dict(newest[-MAX_ENTRIES:])
                self._entries = merged
                text = json.dumps({"version": CACHE_VERSION, "entries": merged}, indent=1, sort_keys=True)
                return write_text_atomic(self.path, text, own_file=True)
        finally:
            self.release()  # this search's question is answered: any other key it claimed goes to whoever asks


def _agreed(mine: CachedMeasurement, theirs: object) -> CachedMeasurement:
    """One figure for a key two processes measured: the faster (contention only slows a test), unstable when the two
    differ by more than AGREE_WITHIN of it or either was unstable."""
    try:
        other = CachedMeasurement.from_json_dict(theirs) if isinstance(theirs, dict) else None
    except (ValueError, TypeError, KeyError):
        other = None
    if other is None:
        return mine
    faster, slower = (mine, other) if mine.decode_tps >= other.decode_tps else (other, mine)
    disagree = slower.decode_tps < (1 - AGREE_WITHIN) * faster.decode_tps
    unstable = faster.unstable or slower.unstable or disagree
    return replace(faster, unstable=unstable) if unstable != faster.unstable else faster
