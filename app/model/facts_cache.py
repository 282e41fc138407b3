"""GGUF facts read once per file version: in memory for the process, and on disk for every process (the CLI's
commands and the window share it), keyed by the file's path, size, mtime and ctime (ns) and inode: a changed or
replaced file is read again.

A header with a large vocabulary takes a good fraction of a second to read, and the CLI's commands, the window's
library, inspector, plots, compare view and chooser all ask for the same files. On disk each file has one JSON entry
in ``cache_dir()/gguf-facts``, named by a hash of its path and written whole or not at all (a temporary file and a
rename), so concurrent writers never leave half an entry. An entry that cannot be read, is damaged, was made by
other reader code (a different ``reader`` hash) or for another file is ignored and written again; at most
:data:`MAX_ENTRIES` are kept, the oldest removed first. A file that cannot be read is not cached: it raises its
one-line GGUFFileError each time. Safe across threads.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from app.atomic import write_text_atomic
from app.bounded_read import read_bounded_text
from app.model.facts import ModelFacts, TensorTypeStat
from app.paths import cache_dir

#: The folder under the cache folder that holds the entries.
FOLDER_NAME = "gguf-facts"
FORMAT_VERSION = 1
#: Entries kept on disk (one per file path); past it the least recently written go.
MAX_ENTRIES = 4096
#: The largest entry read back: a header-only file of the largest models lists a few thousand tensors (~1 MB).
MAX_ENTRY_BYTES = 16 << 20
#: A temporary file left by a writer that was killed is removed once it is this old.
STALE_TEMP_S = 3600.0

#: The modules whose code makes the facts: an entry made by other code is read again.
_READER_MODULES = ("facts.py", "gguf_facts.py", "gguf_scan.py", "gguf_constants.py", "gguf_sanity.py",
                   "arch_memory.py", "kv_cache.py", "lineage.py")

#: (size, mtime ns, ctime ns, device, inode) of a file: ctime changes on any rewrite, even one that restores the
#: mtime (cp -p), and a file replaced by another (a rename over it) has another inode.
_Stamp = tuple[int, int, int, int, int]


def read_model_facts(path: str) -> ModelFacts:
    """:func:`app.model.gguf_facts.read_model_facts`, imported when a file is read (an answer from the cache needs
    neither the reader nor gguf's tables)."""
    from app.model.gguf_facts import read_model_facts as read

    return read(path)


def _reader_hash() -> str:
    """A hash of the code that turns a header into facts, and of the gguf tables it uses."""
    from app.model.gguf_constants import constants_source

    h = hashlib.sha256(f"format {FORMAT_VERSION}".encode())
    here = Path(__file__).resolve().parent
    for name in _READER_MODULES:
        try:
            h.update(name.encode() + b"\0" + (here / name).read_bytes() + b"\0")
        except OSError:
            h.update(name.encode() + b"\0unreadable\0")
    source = constants_source()
    try:
        h.update(source.read_bytes() if source else b"no gguf constants")
    except OSError:
        h.update(b"gguf constants unreadable")
    return h.hexdigest()[:24]


def _stamp(path: str) -> _Stamp | None:
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_dev, st.st_ino)


# --- the JSON form of ModelFacts, checked field by field where it is read back --------------------------------------
def facts_to_json(facts: ModelFacts) -> dict[str, Any]:
    """Every field of ``facts`` as JSON values (``dataclasses.asdict`` would deep-copy every tensor's entry)."""
    d = {f.name: getattr(facts, f.name) for f in dataclasses.fields(ModelFacts)}
    d["tensor_types"] = {name: dataclasses.asdict(stat) for name, stat in facts.tensor_types.items()}
    return d


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _int_tuple(value: object) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(_is_int(v) for v in value):
        raise ValueError("not a list of whole numbers")
    return tuple(value)


def _str_dict(value: object) -> dict[str, Any]:
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise ValueError("not an object")
    return value


def _tensor_types(value: object) -> dict[str, TensorTypeStat]:
    out = {}
    for name, stat in _str_dict(value).items():
        stat = _str_dict(stat)
        if set(stat) != {"n_tensors", "n_bytes", "n_elements"} or not all(_is_int(v) for v in stat.values()):
            raise ValueError(f"tensor type {name!r}")
        out[name] = TensorTypeStat(**stat)
    return out


def _tensor_bytes(value: object) -> dict[str, int]:
    out = _str_dict(value)
    if not all(_is_int(v) for v in out.values()):
        raise ValueError("tensor bytes")
    return out


def _tensor_shapes(value: object) -> dict[str, tuple[str, tuple[int, ...]]]:
    out = {}
    for name, shape in _str_dict(value).items():
        if not isinstance(shape, list) or len(shape) != 2 or not isinstance(shape[0], str):
            raise ValueError(f"tensor shape {name!r}")
        out[name] = (shape[0], _int_tuple(shape[1]))
    return out


def _field_checks() -> dict[str, Any]:
    """How each ModelFacts field is read back, by its annotation; a field of a type not listed fails the read."""
    by_annotation: dict[str, Any] = {
        "int": lambda v: v if _is_int(v) else _bad(), "str": lambda v: v if isinstance(v, str) else _bad(),
        "tuple[int, ...]": _int_tuple, "dict[str, TensorTypeStat]": _tensor_types, "dict[str, object]": _str_dict,
        "dict[str, int]": _tensor_bytes, "dict[str, tuple[str, tuple[int, ...]]]": _tensor_shapes}
    return {f.name: by_annotation.get(str(f.type)) for f in dataclasses.fields(ModelFacts)}


def _bad() -> Any:
    raise ValueError("wrong type")


_FIELD_CHECKS = _field_checks()


def facts_from_json(d: object) -> ModelFacts:
    """The inverse of :func:`facts_to_json`; ValueError when any field is missing, unknown or of the wrong type."""
    values = _str_dict(d)
    if set(values) != set(_FIELD_CHECKS):
        raise ValueError("other fields than ModelFacts has")
    checked = {}
    for name, check in _FIELD_CHECKS.items():
        if check is None:
            raise ValueError(f"no check for the field {name}")
        checked[name] = check(values[name])
    return ModelFacts(**checked)


class FactsCache:
    """``get(path)`` reads a file's facts once per file version (see the module doc); a bad file raises
    GGUFFileError each time. ``folder`` is where entries go (default: ``cache_dir()/gguf-facts``, looked up at each
    use); ``persist=False`` keeps them in memory only."""

    def __init__(self, folder: Path | None = None, *, persist: bool = True) -> None:
        self._facts: dict[tuple[str, _Stamp], ModelFacts] = {}
        self._lock = threading.Lock()
        self._folder = folder
        self.persist = persist
        self._reader: str | None = None

    # -- the disk entries --
    def folder(self) -> Path | None:
        if self._folder is not None:
            return self._folder
        try:
            return cache_dir() / FOLDER_NAME
        except OSError:
            return None

    def reader(self) -> str:
        if self._reader is None:
            self._reader = _reader_hash()
        return self._reader

    def entry_path(self, path: str) -> Path | None:
        """Where the entry of ``path`` (made absolute) lives; None without a cache folder."""
        folder = self.folder()
        if folder is None:
            return None
        try:
            absolute = os.path.abspath(path)
        except OSError:
            return None
        return folder / (hashlib.sha256(absolute.encode("utf-8", "surrogateescape")).hexdigest()[:32] + ".json")

    def _load(self, path: str, stamp: _Stamp) -> ModelFacts | None:
        entry_path = self.entry_path(path)
        if entry_path is None:
            return None
        try:
            entry = json.loads(read_bounded_text(entry_path, MAX_ENTRY_BYTES))
            if not (isinstance(entry, dict) and entry.get("format") == FORMAT_VERSION
                    and entry.get("reader") == self.reader() and entry.get("path") == os.path.abspath(path)
                    and entry.get("stamp") == list(stamp)):
                return None  # another version's, another file's, or this file before it changed
            facts = facts_from_json(entry.get("facts"))
        except (OSError, ValueError, TypeError, RecursionError, UnicodeDecodeError):
            return None  # missing, unreadable or damaged: read the file, and write the entry again
        shown = str(Path(path))  # as a fresh read names it
        return facts if facts.path == shown else dataclasses.replace(facts, path=shown)

    def _save(self, path: str, stamp: _Stamp, facts: ModelFacts) -> None:
        entry_path = self.entry_path(path)
        if entry_path is None:
            return
        try:
            entry = {"format": FORMAT_VERSION, "reader": self.reader(), "path": os.path.abspath(path),
                     "stamp": list(stamp), "facts": facts_to_json(facts)}
            text = json.dumps(entry, separators=(",", ":"), allow_nan=False)
            entry_path.parent.mkdir(parents=True, exist_ok=True)
            write_text_atomic(entry_path, text, own_file=True)
            self._prune(entry_path.parent)
        except (OSError, ValueError, TypeError):
            pass  # a cache that cannot be written is no error: the facts were read

    @staticmethod
    def _prune(folder: Path) -> None:
        """Keep at most MAX_ENTRIES entries (the least recently written go) and no old temporary files."""
        try:
            entries = list(os.scandir(folder))
        except OSError:
            return
        if len(entries) <= MAX_ENTRIES:
            return
        now = time.time()
        dated = []
        for e in entries:
            try:
                mtime = e.stat(follow_symlinks=False).st_mtime
            except OSError:
                continue
            if e.name.endswith(".tmp") and now - mtime > STALE_TEMP_S:
                Path(e.path).unlink(missing_ok=True)
            elif e.name.endswith(".json"):
                dated.append((mtime, e.path))
        for _mtime, old in sorted(dated)[: max(0, len(dated) - MAX_ENTRIES * 3 // 4)]:
            try:
                Path(old).unlink(missing_ok=True)
            except OSError:
                continue

    # -- the process's view --
    def get(self, path: str | os.PathLike[str]) -> ModelFacts:
        """The facts of ``path``; raises the one-line GGUFFileError when it cannot be read."""
        path = os.fspath(path)
        stamp = _stamp(path)
        if stamp is None:
            return read_model_facts(path)  # raises the one-line error naming the file
        key = (path, stamp)
        with self._lock:
            cached = self._facts.get(key)
        if cached is not None:
            return cached
        cached = self._load(path, stamp) if self.persist else None
        if cached is None:
            cached = read_model_facts(path)  # outside the lock: another thread may read another file meanwhile
            if self.persist and _stamp(path) == stamp:  # not changed while it was read
                self._save(path, stamp, cached)
        with self._lock:
            self._facts[key] = cached
        return cached

    def put(self, path: str | os.PathLike[str], facts: ModelFacts) -> None:
        """Remember facts already read (so nothing is parsed again while a worker is measuring)."""
        path = os.fspath(path)
        stamp = _stamp(path)
        if stamp is not None:
            with self._lock:
                self._facts[(path, stamp)] = facts

    def clear(self) -> None:
        """Forget what this process holds (the disk entries stay)."""
        with self._lock:
            self._facts.clear()


#: The process-wide cache every caller shares.
FACTS = FactsCache()


def cached_facts(path: str | os.PathLike[str]) -> ModelFacts:
    """:meth:`FactsCache.get` on the process-wide cache."""
    return FACTS.get(path)
