"""Files written whole or not at all: a temporary file beside the target, then a rename."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path


def replace_atomically(path: str | Path, write: Callable[[Path], object], *, own_file: bool = False) -> Path:
    """Have ``write`` fill a temporary file beside ``path``, then rename it over ``path`` (never half a file).

    A target that exists but is not a regular file (``/dev/full``, ``/dev/null``) is written in place, unless
    ``own_file`` (a file the workbench keeps: a FIFO or device put there is replaced, never written into). The new
    file gets the usual permissions (0666 less the umask). OSError from ``write`` or the rename propagates, and
    the temporary file is removed.
    """
    target = Path(path)
    if not own_file and target.exists() and not target.is_file():
        write(target)
        return target
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        write(tmp)
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return target


def write_text_atomic(path: str | Path, text: str, *, own_file: bool = False) -> Path:
    """``text`` written to ``path`` through a temporary file and a rename (see :func:`replace_atomically`)."""

    def write(p: Path) -> None:
        with open(p, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()

    return replace_atomically(path, write, own_file=own_file)
