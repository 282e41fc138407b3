"""Where the workbench may write for the user: one check for every output, before the first byte or test.

Every output path (``run --out``, ``--telemetry``, ``export --out``, ``quality --out``, ``quantize --out`` and
``--table-out``, the window's ``--screenshot`` and saved tables, the results store) goes through
:func:`check_output_path` (a file) or :func:`check_output_folder` (a folder the command fills), and is refused in
one line when it is:

* a GGUF model or a link to one, or anything that is not a regular file (a FIFO, a device, a socket): the rule of
  :func:`app.atomic.replace_refusal`, which every write applies again;
* a file the same command reads (a model, a text, a preset: by path or inode, so a link to one counts too), the
  results store itself or one of its side files, or any file the workbench keeps in its data dir;
* a folder, a missing folder, or a place no file can be created in.

Nothing is opened to tell this but a regular file, without blocking, for its first four bytes: a FIFO given as an
output is refused before anything waits on it.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Sequence
from pathlib import Path

from app.atomic import replace_refusal, starts_with_gguf_magic
from app.bounded_read import kind_of
from app.paths import data_dir

#: The store's own files beside it: the database, its WAL, shared memory and journal, and the pending writes.
STORE_SIDE_FILES = ("", "-wal", "-shm", "-journal", ".pending-rows.jsonl")


class OutputRefused(ValueError):
    """An output path that must not be written; str() is one line naming the flag, the path and why."""


def same_file(a: Path, b: Path) -> bool:
    """Whether two paths name one file: the same resolved path, or (both existing) the same inode (a hard link)."""
    try:
        if a.resolve() == b.resolve():
            return True
        sa, sb = a.stat(), b.stat()
    except (OSError, RuntimeError):  # RuntimeError: a symlink loop
        return False
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def _data_dir_files() -> list[Path]:
    """The workbench's own files in its data dir (caches, probe records, fits, verdicts, logs): never an output."""
    try:
        root = data_dir()
    except OSError:
        return []
    out: list[Path] = []
    for dirpath, _dirnames, filenames in os.walk(root):  # os.walk does not follow links to folders
        out += [Path(dirpath) / name for name in filenames]
        if len(out) > 10_000:  # a data dir this large is not ours alone to guard file by file
            break
    return out


def _refuse_inputs(p: Path, where: str, store_path: Path | None, inputs: Sequence[str | Path]) -> None:
    """OutputRefused when ``p`` is a file this command reads or the workbench keeps: an input, the store or one of
    its side files (the pending-rows file too), or any file of the data dir."""
    if store_path is not None:
        for suffix in STORE_SIDE_FILES:
            if same_file(p, Path(f"{store_path}{suffix}")):
                what = f" {suffix.lstrip('.-').upper()} file" if suffix else ""
                raise OutputRefused(f"{where}: is the results store{what} ({store_path}); choose another file")
    for given in inputs:
        if given and same_file(p, Path(given).expanduser()):
            raise OutputRefused(f"{where}: is an input of this command ({given}); choose another file")
    if os.path.lexists(p):
        for own in _data_dir_files():
            if same_file(p, own):
                raise OutputRefused(f"{where}: is a file of the workbench's data dir ({own}); choose another file")


def check_output_path(path: str | Path, flag: str, store_path: Path | None = None,
                      inputs: Sequence[str | Path] = ()) -> Path:
    """``path`` as given, after checking it may be written (see the module); OutputRefused (one line naming
    ``flag``) if not. ``inputs``: the files the command reads; ``store_path``: the results store it writes."""
    p = Path(path).expanduser()
    where = f"{flag} {path}"
    _refuse_inputs(p, where, store_path, inputs)  # first: the most telling reason for a model the command reads
    refusal = replace_refusal(p)
    if refusal:
        raise OutputRefused(f"{where}: {refusal}")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise OutputRefused(f"{where}: folder {parent} does not exist")
    if p.exists() and not os.access(p, os.W_OK):
        raise OutputRefused(f"{where}: cannot write there (permission denied)")
    try:  # the temporary file the atomic write needs: the one test that also holds for root and read-only mounts
        fd, probe = tempfile.mkstemp(dir=parent, prefix=f".{p.name}.", suffix=".tmp")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise OutputRefused(f"{where}: cannot create a file in {parent} ({e.strerror or e})") from None
    return p


def _what_is(p: Path, mode: int) -> str:
    """What the existing ``p`` (of ``mode``, links followed) is, in words: "a GGUF model", "a FIFO (named pipe)"..."""
    if not stat.S_ISREG(mode):
        return kind_of(mode)
    try:
        return "a GGUF model" if starts_with_gguf_magic(p) else "a regular file"
    except OSError:
        return "a regular file"


def check_output_folder(path: str | Path, flag: str) -> Path:
    """``path`` as given, when it is a folder or nothing yet (the command creates it); OutputRefused (one line naming
    ``flag``) when it is a model, a link to one, a FIFO, a device or any other file."""
    p = Path(path).expanduser()
    try:
        mode = os.stat(p).st_mode  # links followed: a link to a folder is that folder
    except FileNotFoundError:
        return p
    except OSError as e:
        raise OutputRefused(f"{flag} {path}: cannot be checked ({e.strerror or e})") from None
    if not stat.S_ISDIR(mode):
        raise OutputRefused(f"{flag} {path}: is {_what_is(p, mode)}, not a folder")
    return p


def check_store_path(path: str | Path) -> Path:
    """The results store's path, refused (OutputRefused, one line) before SQLite opens it when what is there cannot
    be a store: a GGUF model or a link to one, a FIFO (opening it would wait for a writer), a device, a socket or a
    folder. Nothing there is fine (a store is created, or reads as empty)."""
    p = Path(path)
    try:
        mode = os.stat(p).st_mode
    except FileNotFoundError:
        return p
    except OSError as e:
        raise OutputRefused(f"{p}: cannot open the results store ({e.strerror or e})") from None
    what = _what_is(p, mode)
    if what != "a regular file":
        raise OutputRefused(f"{p}: is {what}, not a results store")
    return p
