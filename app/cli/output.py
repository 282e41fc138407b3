"""Output files of ``gguf-bench``: checked before the first test, written atomically, never lost.

Every output flag is checked up front by :mod:`app.output_guard` (one line, exit 2): a model or a link to one, a
FIFO or device, a folder, a missing folder, a place we cannot write, a file the same command reads, the results
store or its side files, or any file the workbench keeps in its data dir. They are then written through a
temporary file and a rename. When writing still fails (a disk that fills during the sweep), the results go to
stdout instead, with one line saying so.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from app import output_guard
from app.atomic import replace_atomically, write_text_atomic
from app.cli.errors import UserError, print_error
from app.output_guard import OutputRefused


def check_output_path(path: str, flag: str, store_path: Path | None = None,
                      inputs: Sequence[str | Path] = ()) -> Path:
    """``path`` as given, after :func:`app.output_guard.check_output_path` (a model, a link to one, a FIFO or
    device, a file the command reads or the workbench keeps...); UserError (one line naming ``flag``) if not."""
    try:
        return output_guard.check_output_path(path, flag, store_path, inputs)
    except OutputRefused as e:
        raise UserError(str(e)) from None


def check_output_folder(path: str, flag: str) -> Path:
    """``path`` as given, when a folder can be filled there (:func:`app.output_guard.check_output_folder`);
    UserError (one line naming ``flag``) if not."""
    try:
        return output_guard.check_output_folder(path, flag)
    except OutputRefused as e:
        raise UserError(str(e)) from None


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
