"""What ``gguf-bench`` writes to its standard streams is safe to show and never stops the work.

* Text from outside (file names, run names, a server's model name, a recording's reason) may hold terminal control
  characters: an escape sequence in a file name would clear the screen or retitle the terminal. Every character that
  is a control (C0 but tab and newline, DEL, C1) or a bidirectional override is written escaped
  (:func:`app.shown_text.escape_controls`, which the window uses too); the one sequence this program writes itself,
  the progress line's ``\\r\\x1b[K``, is kept.
* A terminal or pipe whose encoding cannot hold a character (``PYTHONIOENCODING=ascii``, a C locale) gets it escaped
  (``\\xe9``) instead of a UnicodeEncodeError that loses the results table.
* A standard stream closed at the start (``>&-``) is pointed at the null device, so no file the command opens later
  takes its descriptor (a store or a model written into by a stray print); a stream that fails while the command runs
  (a closed pipe, a full disk) is said once on stderr and dropped, and the work (a sweep, a quantize) goes on.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Iterator
from typing import Any, TextIO

from app import shown_text
from app.shown_text import UNSAFE

#: The sequence the progress lines write themselves: return to the line's start and erase it.
PROGRESS_ERASE = "\r\033[K"


def escape_controls(text: str) -> str:
    """``text`` with every control character and bidi override escaped, the progress line's erase kept."""
    if not UNSAFE.search(text):
        return text
    return PROGRESS_ERASE.join(shown_text.escape_controls(part) for part in text.split(PROGRESS_ERASE))


def encodable(text: str, encoding: str | None) -> str:
    """``text`` with the characters ``encoding`` cannot hold written as backslash escapes."""
    if not encoding:
        return text
    try:
        text.encode(encoding)
        return text
    except UnicodeEncodeError:
        return text.encode(encoding, "backslashreplace").decode(encoding)
    except LookupError:
        return text


class GuardedStream(io.TextIOBase):
    """A standard stream that escapes what it writes (:func:`escape_controls`, :func:`encodable`) and, when the
    stream fails (closed pipe, full disk, closed file), says so once through ``on_lost`` and drops the rest."""

    def __init__(self, raw: TextIO, name: str, on_lost: Any = None) -> None:
        super().__init__()
        self.raw = raw
        self.name = name
        self.lost = ""  # why the stream failed; "" while it works
        self._on_lost = on_lost

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.raw, "encoding", None) or "utf-8"

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        try:
            return bool(self.raw.isatty()) and not self.lost
        except (OSError, ValueError):
            return False

    def fileno(self) -> int:
        return self.raw.fileno()

    def write(self, text: str) -> int:
        if self.lost or not text:
            return len(text)
        try:
            self.raw.write(encodable(escape_controls(text), getattr(self.raw, "encoding", None)))
            self.raw.flush()
        except (OSError, ValueError) as e:  # BrokenPipeError, ENOSPC, EBADF; ValueError: I/O on a closed file
            self._fail(e)
        return len(text)

    def flush(self) -> None:
        if self.lost:
            return
        try:
            self.raw.flush()
        except (OSError, ValueError) as e:
            self._fail(e)

    def _fail(self, error: Exception) -> None:
        self.lost = (error.strerror if isinstance(error, OSError) and error.strerror else str(error)) or "closed"
        _to_null(self.raw)
        if self._on_lost is not None:
            self._on_lost(self)


def _to_null(stream: TextIO) -> None:
    """Point the descriptor of a failed standard stream at the null device: what is still buffered in it (and the
    interpreter's flush at exit) goes nowhere instead of raising again."""
    try:
        fd = stream.fileno()
    except (OSError, ValueError, io.UnsupportedOperation):
        return
    if fd not in (1, 2):
        return
    try:
        null = os.open(os.devnull, os.O_WRONLY)
    except OSError:
        return
    try:
        os.dup2(null, fd)
    except OSError:
        pass
    finally:
        os.close(null)


def _reopen_closed_descriptors() -> list[str]:
    """Standard descriptors closed at the start, each pointed at the null device (so a file opened later cannot take
    its number); the names of those that were closed."""
    closed = []
    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        try:
            os.fstat(fd)
            continue
        except OSError:
            pass
        try:
            null = os.open(os.devnull, os.O_RDWR)
        except OSError:
            continue
        if null != fd:
            os.dup2(null, fd)
            os.close(null)
        closed.append(name)
    return closed


class Output:
    """The guarded standard streams of one command: whether stdout was lost, and how to say it."""

    def __init__(self, prog: str) -> None:
        self.prog = prog
        self.stdout_lost = ""

    def lost(self, stream: GuardedStream) -> None:
        if stream.name == "stdout" and not self.stdout_lost:
            self.stdout_lost = stream.lost
            print(f"{self.prog}: cannot write to stdout ({stream.lost}): the rest of the output there is dropped; "
                  "what was measured is kept in the store (or --out)", file=sys.stderr)


@contextlib.contextmanager
def guarded_output(prog: str = "gguf-bench") -> Iterator[Output]:
    """sys.stdout and sys.stderr guarded (see the module) for the block, then put back."""
    out = Output(prog)
    closed = _reopen_closed_descriptors()
    old_out, old_err = sys.stdout, sys.stderr
    raw_out = old_out if old_out is not None else open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
    raw_err = old_err if old_err is not None else open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
    sys.stderr = GuardedStream(raw_err, "stderr")
    sys.stdout = GuardedStream(raw_out, "stdout", out.lost)
    if "stdout" in closed:
        out.stdout_lost = "closed"
        print(f"{prog}: stdout is closed: nothing is printed there; what is measured is kept in the store (or --out)",
              file=sys.stderr)
    try:
        yield out
    finally:
        for guarded in (sys.stdout, sys.stderr):
            if isinstance(guarded, GuardedStream):
                guarded.flush()
        sys.stdout, sys.stderr = old_out, old_err
