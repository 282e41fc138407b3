"""One cache of GGUF facts for the process, keyed by (path, size, mtime): a file that changes is read again.

Reading a header with a large vocabulary takes a good fraction of a second, and the CLI's row predictions,
the window's library, inspector, plots and compare view all ask for the same files. Safe across threads.
"""

from __future__ import annotations

import os
import threading

from app.model.facts import ModelFacts
from app.model.gguf_facts import read_model_facts

_Key = tuple[str, int, int]


class FactsCache:
    """``get(path)`` reads a file's facts once per (path, size, mtime); a bad file raises GGUFFileError each time."""

    def __init__(self) -> None:
        self._facts: dict[_Key, ModelFacts] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _key(path: str) -> _Key | None:
        try:
            st = os.stat(path)
        except OSError:
            return None
        return (path, st.st_size, st.st_mtime_ns)

    def get(self, path: str | os.PathLike[str]) -> ModelFacts:
        """The facts of ``path``; raises the one-line GGUFFileError when it cannot be read."""
        path = os.fspath(path)
        key = self._key(path)
        if key is None:
            return read_model_facts(path)  # raises the one-line error naming the file
        with self._lock:
            cached = self._facts.get(key)
        if cached is None:
            cached = read_model_facts(path)  # outside the lock: another thread may read another file meanwhile
            with self._lock:
                self._facts[key] = cached
        return cached

    def put(self, path: str | os.PathLike[str], facts: ModelFacts) -> None:
        """Remember facts already read (so nothing is parsed again while a worker is measuring)."""
        key = self._key(os.fspath(path))
        if key is not None:
            with self._lock:
                self._facts[key] = facts

    def clear(self) -> None:
        with self._lock:
            self._facts.clear()


#: The process-wide cache every caller shares.
FACTS = FactsCache()


def cached_facts(path: str | os.PathLike[str]) -> ModelFacts:
    """:meth:`FactsCache.get` on the process-wide cache."""
    return FACTS.get(path)
