"""Output files of ``gguf-bench``: checked before the first test, written atomically, never lost.

``--out``, ``--telemetry`` and ``export --out`` are checked up front (one line, exit 2): a folder, a missing
folder, a place we cannot write, or the results store itself (or its WAL/SHM/journal files). They are then
written through a temporary file and a rename. When writing still fails (``/dev/full``, a disk that fills during
the sweep), the results go to stdout instead, with one line saying so.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from app.atomic import replace_atomically, write_text_atomic
from app.cli.errors import UserError, print_error

_STORE_SIDE_FILES = ("", "-wal", "-shm", "-journal")


def check_output_path(path: str, flag: str, store_path: Path | None = None) -> Path:
    """``path`` as given, after checking it can be written; UserError (one line naming ``flag``) if not."""
    p = Path(path).expanduser()
    where = f"{flag} {path}"
    if p.is_dir():
        raise UserError(f"{where}: is a directory, not a file")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise UserError(f"{where}: folder {parent} does not exist")
    if store_path is not None:
        resolved = p.resolve()
        for suffix in _STORE_SIDE_FILES:
            if resolved == Path(f"{store_path}{suffix}").resolve():
                raise UserError(f"{where}: is the results store{' ' + suffix[1:].upper() + ' file' if suffix else ''}"
                                f" ({store_path}); choose another file")
    if p.exists():
        if not os.access(p, os.W_OK):
            raise UserError(f"{where}: cannot write there (permission denied)")
        if p.is_char_device():
            return p  # a device such as /dev/null or /dev/full is written in place
        if not p.is_file():
            raise UserError(f"{where}: not a regular file")
    try:  # the temporary file the atomic write needs: the one test that also holds for root and read-only mounts
        fd, probe = tempfile.mkstemp(dir=parent, prefix=f".{p.name}.", suffix=".tmp")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise UserError(f"{where}: cannot create a file in {parent} ({e.strerror or e})") from None
    return p


def write_results(text: str, path: str | None, flag: str = "--out") -> bool:
    """``text`` to ``path`` atomically, or to stdout when ``path`` is None or cannot be written (said on stderr).

    Returns False when the file could not be written (the text then went to stdout).
    """
    if path:
        try:
            write_text_atomic(path, text)
            return True
        except OSError as e:
            print_error(f"{flag} {path}: cannot write ({e.strerror or e}); the results follow on stdout instead")
    sys.stdout.write(text)
    sys.stdout.flush()
    return not path


def write_file(path: str, write: Callable[[Path], object], flag: str) -> bool:
    """A file written by ``write`` (e.g. the telemetry trace) atomically; one error line and False if it fails."""
    try:
        replace_atomically(path, write)
        return True
    except OSError as e:
        print_error(f"{flag} {path}: cannot write ({e.strerror or e})")
        return False
