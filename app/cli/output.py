"""Output files of ``gguf-bench``: checked before the first test, written atomically, never lost.

``--out``, ``--telemetry`` and ``export --out`` are checked up front (one line, exit 2): a folder, a missing
folder, a place we cannot write, a file the same command reads (a model, a text, a preset: by path or inode, so
a link to one counts too), the results store itself (or its WAL/SHM/journal/pending-rows files), or any file
the workbench keeps in its data dir. They are then
written through a temporary file and a rename. When writing still fails (``/dev/full``, a disk that fills during
the sweep), the results go to stdout instead, with one line saying so.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from app.atomic import replace_atomically, write_text_atomic
from app.cli.errors import UserError, print_error
from app.paths import data_dir

_STORE_SIDE_FILES = ("", "-wal", "-shm", "-journal", ".pending-rows.jsonl")


def _same_file(a: Path, b: Path) -> bool:
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
    """UserError when ``p`` is a file this command reads or the workbench keeps: an input, the store or one of its
    side files (the pending-rows file too), or any file of the data dir."""
    if store_path is not None:
        for suffix in _STORE_SIDE_FILES:
            if _same_file(p, Path(f"{store_path}{suffix}")):
                what = f" {suffix.lstrip('.-').upper()} file" if suffix else ""
                raise UserError(f"{where}: is the results store{what} ({store_path}); choose another file")
    for given in inputs:
        if given and _same_file(p, Path(given).expanduser()):
            raise UserError(f"{where}: is an input of this command ({given}); choose another file")
    if p.exists():
        for own in _data_dir_files():
            if _same_file(p, own):
                raise UserError(f"{where}: is a file of the workbench's data dir ({own}); choose another file")


def check_output_path(path: str, flag: str, store_path: Path | None = None,
                      inputs: Sequence[str | Path] = ()) -> Path:
    """``path`` as given, after checking it can be written and is none of the files the command reads (``inputs``:
    models, texts, presets) or the workbench keeps (the store and its side files, the data dir); UserError (one line
    naming ``flag``) if not."""
    p = Path(path).expanduser()
    where = f"{flag} {path}"
    if p.is_dir():
        raise UserError(f"{where}: is a directory, not a file")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise UserError(f"{where}: folder {parent} does not exist")
    _refuse_inputs(p, where, store_path, inputs)
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
