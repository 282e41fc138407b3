"""Pure work on one file's facts done once: a memo keyed by the identity of the facts (and their tensor tables) and
the value of the other arguments.

A placement search asks the same questions of one file hundreds of times: the chooser's search over layers and
contexts splits the same tensor table at each step, sizes the same KV cache at each context, and counts the same
repacked copies for every cache type. Model facts are read once and never changed after (their dicts are not
hashable, so they are keyed by identity); the memo holds them, so an identity is never reused while its entry
lives. Results must be immutable (frozen dataclasses, tuples, numbers): every caller gets the same object.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

R = TypeVar("R")

#: Entries kept per memoised function (the least recently used go first): a file's whole placement search fits.
MAX_ENTRIES = 4096


def by_identity(n_identity: int, max_entries: int = MAX_ENTRIES) -> Callable[[Callable[..., R]], Callable[..., R]]:
    """Memoise a pure function whose first ``n_identity`` positional arguments are objects never changed once made
    (model facts, their tensor tables; keyed by identity) and whose other arguments are hashable values. Call it
    with positional arguments only. Safe across threads (two threads may both compute a missing entry)."""

    def wrap(fn: Callable[..., R]) -> Callable[..., R]:
        entries: OrderedDict[tuple[Hashable, ...], tuple[tuple[Any, ...], R]] = OrderedDict()
        lock = threading.Lock()

        @functools.wraps(fn)
        def memoised(*args: Any) -> R:
            held = args[:n_identity]
            key = (*(id(a) for a in held), *args[n_identity:])
            with lock:
                hit = entries.get(key)
                if hit is not None:
                    entries.move_to_end(key)
                    return hit[1]
            value = fn(*args)
            with lock:
                entries[key] = (held, value)  # holding the objects keeps their identities from being reused
                while len(entries) > max_entries:
                    entries.popitem(last=False)
            return value

        memoised.cache_clear = entries.clear  # type: ignore[attr-defined]
        return memoised

    return wrap
