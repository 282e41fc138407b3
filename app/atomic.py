"""Files written whole or not at all: a temporary file beside the target, then a rename; never over a model.

:func:`replace_refusal` is the one rule of what an output may not replace, checked by every write here and, up front,
by :func:`app.output_guard.check_output_path`: a GGUF model (or a link to one: the rename would drop the model's
name, and with it the only name of its bytes), and anything that is not a regular file (a FIFO would block the
write until a reader comes, a device would take the bytes in place). Nothing is opened to tell this but a regular
file, without blocking, for its first four bytes.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

from app.bounded_read import kind_of

#: The first bytes of every GGUF file (``gguf.h``'s ``GGUF_MAGIC``).
GGUF_MAGIC = b"GGUF"


class RefusedTarget(OSError):
    """The target of a write is a model or not a regular file; str() is the reason, one line."""


def starts_with_gguf_magic(path: str | Path) -> bool:
    """Whether the regular file ``path`` (links followed) begins with the GGUF magic. Opened without blocking, and
    only after ``stat`` says it is a regular file; OSError when it cannot be read."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        return os.read(fd, len(GGUF_MAGIC)) == GGUF_MAGIC
    finally:
        os.close(fd)


def replace_refusal(path: str | Path, *, replace_special: bool = False) -> str | None:
    """Why an output must not be written at ``path``, or None when it may (nothing there, or a regular file that is
    not a model). ``replace_special``: a FIFO, device or socket there may be renamed over (a file the workbench keeps
    in its data dir), never opened. A folder is refused by the callers that know what else they accept."""
    p = Path(path)
    try:
        mode = os.stat(p).st_mode  # follows links: a link to a model is refused as the model is
    except FileNotFoundError:
        return None  # nothing there (or a dangling link, which the rename replaces)
    except OSError as e:
        return f"cannot be checked ({e.strerror or e})"
    link = " (through a symbolic link)" if p.is_symlink() else ""
    if stat.S_ISDIR(mode):
        return f"is a directory{link}, not a file"
    if not stat.S_ISREG(mode):
        return None if replace_special else f"is {kind_of(mode)}{link}, not a regular file"
    try:
        if starts_with_gguf_magic(p):
            return f"is a GGUF model{link}; an output never replaces a model: choose another file"
    except OSError as e:
        return f"cannot be read to check it is not a model ({e.strerror or e})"
    return None


def replace_atomically(path: str | Path, write: Callable[[Path], object], *, own_file: bool = False) -> Path:
    """Have ``write`` fill a temporary file beside ``path``, then rename it over ``path`` (never half a file).

    Refused first (RefusedTarget) where :func:`replace_refusal` says so: a model, a link to one, or something that
    is not a regular file; a FIFO or device is replaced (renamed over, never opened) only for ``own_file`` (a file
    the workbench keeps in its data dir). The new file gets the usual permissions (0666 less the umask). OSError
    from ``write`` or the rename propagates, and the temporary file is removed.
    """
    target = Path(path)
    refusal = replace_refusal(target, replace_special=own_file)
    if refusal:
        raise RefusedTarget(f"{target}: {refusal}")
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
