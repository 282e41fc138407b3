"""The shipped public fit, kept on disk between runs: fitting the training tables (with every leave-one-out refit
the bands need) takes seconds, and every ``predict``, ``choose`` and window start asks for it.

The file is keyed by a hash of everything the fit is made from: the training tables, the hardware profiles, the
code of app/predict, and the Python and numpy versions; any change makes a new key, so a stale fit is never read.
It lives in the user cache folder (``GGUF_WORKBENCH_CACHE_DIR`` overrides it). A cache that cannot be read or
written is passed over silently: the fit is made again, never refused.
"""

from __future__ import annotations

import hashlib
import pickle
import platform
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

from app.atomic import replace_atomically
from app.paths import cache_dir as _cache_folder

_PREDICT_CODE_DIR = Path(__file__).resolve().parent.parent  # app/predict, its subpackages included
T = TypeVar("T")


def cache_dir() -> Path:
    """Where cached fits go: the cache folder (``app.paths.cache_dir``: ``GGUF_WORKBENCH_CACHE_DIR``, else the user
    cache folder of gguf-workbench)."""
    return _cache_folder()


def fit_key(inputs: Iterable[Path]) -> str:
    """A hash of the ``inputs`` files (name and bytes), the code of app/predict, and the Python and numpy versions."""
    import numpy as np  # the fit is made of numpy arrays: its version is part of the key

    h = hashlib.sha256(f"{platform.python_version()} numpy {np.__version__}".encode())
    for path in sorted(inputs):
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    for path in sorted(_PREDICT_CODE_DIR.rglob("*.py")):
        h.update(path.relative_to(_PREDICT_CODE_DIR).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:24]


def cached(kind: str, inputs: Iterable[Path], make: Callable[[], T], expect: type[T]) -> T:
    """``make()``, or the object a previous call with the same inputs saved under ``kind``; the saved object must
    be an ``expect``. A file that cannot be read, unpickled or written is passed over (``make`` runs)."""
    try:
        path = cache_dir() / f"{kind}-{fit_key(inputs)}.pickle"
    except OSError:
        return make()
    try:
        with path.open("rb") as f:
            got = pickle.load(f)  # the user's own cache folder, written only by this function
        if isinstance(got, expect):
            return got
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError, TypeError, ValueError):
        pass
    made = make()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        replace_atomically(path, lambda tmp: tmp.write_bytes(pickle.dumps(made, protocol=pickle.HIGHEST_PROTOCOL)),
                           own_file=True)
    except (OSError, pickle.PicklingError, TypeError, AttributeError):
        pass
    return made
