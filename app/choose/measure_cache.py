"""The measurements ``choose --measure`` took, kept so the same question is answered at once the next time.

One JSON file in the data dir (``choose/measure-cache.json``). An entry is keyed by everything its figure depends on:
the model file (resolved path, size and modification time: a rewritten file is a new file), the test's settings,
the hardware (CPU model, GPU info, usable CPU threads, as the rows record them) and the llama.cpp build
(llama-cpp-python's version and GPU backends, :func:`app.predict.calibration_store.llama_build`). The file is
written whole through a rename (:mod:`app.atomic`); one that cannot be read counts as empty, with the reason in
:attr:`MeasureCache.problem`, and is replaced on the next write. The results store keeps every measured row as well;
this file is only the index that lets a second search skip the worker.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, fields
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
        """The measurement for exactly this key, or None (a damaged entry counts as none)."""
        entry = self._entries.get(key_digest(key))
        if entry is None or entry.get("key") != key or not isinstance(entry.get("measurement"), dict):
            return None
        try:
            return CachedMeasurement.from_json_dict(entry["measurement"])
        except (ValueError, TypeError, KeyError):
            return None

    def put(self, key: dict[str, Any], measurement: CachedMeasurement) -> Path:
        """Add (or replace) one entry and write the file whole; OSError if it cannot be written. Entries another
        process wrote since this cache was read are kept; beyond MAX_ENTRIES the oldest go."""
        on_disk = MeasureCache(self.path)._entries
        merged = {**on_disk, **self._entries}
        merged[key_digest(key)] = {"key": key, "measurement": measurement.to_json_dict()}
        if len(merged) > MAX_ENTRIES:
            newest = sorted(merged.items(), key=lambda kv: str(kv[1].get("measurement", {}).get("measured_at", "")))
            merged = dict(newest[-MAX_ENTRIES:])
        self._entries = merged
        self.path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps({"version": CACHE_VERSION, "entries": merged}, indent=1, sort_keys=True)
        return write_text_atomic(self.path, text, own_file=True)
