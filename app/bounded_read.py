"""Reading a file given from outside: a regular file only, and a bounded number of bytes.

A FIFO, a device or a socket where a file is expected would block ``open()`` until a writer comes, or stream without
end (``/dev/zero``); a huge file would be read whole into memory. :func:`read_bounded` checks the path before it is
opened (``stat``: never blocks), opens it without blocking, checks the opened file again (it may have been swapped)
and reads at most ``max_bytes``, so every such read ends in bounded time and memory, or fails with one line.
"""

from __future__ import annotations

import codecs
import errno
import io
import os
import stat
from pathlib import Path

#: TOML presets and profiles, JSON records (probe, fits, verdicts): far above any real one.
MAX_SMALL_FILE_BYTES = 16 << 20


class NotARegularFile(OSError):
    """The path is a FIFO, a device, a socket or a folder where a regular file is expected; str() names it."""


class FileTooLarge(OSError):
    """The file holds more bytes than its reader takes; str() names it and both sizes."""


def kind_of(mode: int) -> str:
    """What a file of ``mode`` is, in words ("a FIFO (named pipe)", "a character device", ...)."""
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def read_bounded(path: str | os.PathLike[str], max_bytes: int = MAX_SMALL_FILE_BYTES) -> bytes:
    """The bytes of the regular file ``path`` (links followed), at most ``max_bytes`` of them.

    Raises NotARegularFile, FileTooLarge, or the OSError of the failed call (FileNotFoundError, PermissionError…).
    """
    p = Path(path)
    mode = os.stat(p).st_mode
    if stat.S_ISDIR(mode):  # the OS's own error, as every reader already words it ("Is a directory")
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(p))
    if not stat.S_ISREG(mode):
        raise NotARegularFile(f"{p}: is {kind_of(mode)}, not a regular file")
    fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # swapped for something else between the two looks
            raise NotARegularFile(f"{p}: is {kind_of(st.st_mode)}, not a regular file")
        if st.st_size > max_bytes:
            raise FileTooLarge(f"{p}: {st.st_size:,} bytes, more than the {max_bytes:,} this reads")
        chunks, total = [], 0
        while total <= max_bytes:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > max_bytes:  # it grew while being read
            raise FileTooLarge(f"{p}: more than the {max_bytes:,} bytes this reads")
        return b"".join(chunks)
    finally:
        os.close(fd)


def open_regular(path: str | os.PathLike[str]) -> io.BufferedReader:
    """The regular file ``path`` (links followed) opened for reading in binary, never blocking on a FIFO or device
    (checked before and after opening, as :func:`read_bounded` does); the caller bounds what it reads. Raises
    NotARegularFile, IsADirectoryError or the OSError of the failed call."""
    p = Path(path)
    mode = os.stat(p).st_mode
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(p))
    if not stat.S_ISREG(mode):
        raise NotARegularFile(f"{p}: is {kind_of(mode)}, not a regular file")
    fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotARegularFile(f"{p}: is {kind_of(st.st_mode)}, not a regular file")
        return open(fd, "rb", closefd=True)  # noqa: SIM115 - the caller closes it
    except BaseException:
        os.close(fd)
        raise


def read_bounded_text(path: str | os.PathLike[str], max_bytes: int = MAX_SMALL_FILE_BYTES) -> str:
    """:func:`read_bounded`, decoded as UTF-8 (UnicodeDecodeError when it is not)."""
    return read_bounded(path, max_bytes).decode("utf-8")


class TomlFileError(ValueError):
    """A TOML file that cannot be read: ``kind`` says why (missing, directory, not_regular, unreadable, invalid,
    nested), ``cause`` the detail; callers put their own file label in front."""

    def __init__(self, kind: str, cause: str) -> None:
        super().__init__(cause)
        self.kind = kind
        self.cause = cause


def read_toml(path: str | os.PathLike[str], max_bytes: int = MAX_SMALL_FILE_BYTES) -> dict[str, object]:
    """The TOML document at ``path``, read as every outside file is (:func:`read_bounded`); TomlFileError else."""
    import tomllib

    p = Path(path)
    try:
        if p.is_dir():
            raise TomlFileError("directory", "is a directory")
        return tomllib.loads(read_bounded_text(p, max_bytes))
    except FileNotFoundError:
        raise TomlFileError("missing", "not found") from None
    except (NotARegularFile, FileTooLarge) as e:
        raise TomlFileError("not_regular", str(e).split(": ", 1)[-1]) from None
    except OSError as e:
        raise TomlFileError("unreadable", str(e.strerror or e)) from None
    except UnicodeDecodeError:
        raise TomlFileError("invalid", "not UTF-8 text") from None
    except tomllib.TOMLDecodeError as e:
        raise TomlFileError("invalid", str(e)) from None
    except TomlFileError:
        raise
    except ValueError as e:  # tomllib's int() of a number past Python's 4,300 digits
        raise TomlFileError("invalid", f"a value it holds cannot be read ({str(e).split(':')[0]})") from None
    except RecursionError:
        raise TomlFileError("nested", "its values are nested too deeply") from None


def read_prefix_text(path: str | os.PathLike[str], max_bytes: int) -> str:
    """The first ``max_bytes`` of the regular file ``path`` as UTF-8 text, a character cut at the end dropped: a
    text of any size costs only what is read (UnicodeDecodeError for an invalid byte within it)."""
    p = Path(path)
    mode = os.stat(p).st_mode
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(p))
    if not stat.S_ISREG(mode):
        raise NotARegularFile(f"{p}: is {kind_of(mode)}, not a regular file")
    fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotARegularFile(f"{p}: not a regular file")
        chunks, total = [], 0
        while total < max_bytes:
            chunk = os.read(fd, min(1 << 20, max_bytes - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    finally:
        os.close(fd)
    return codecs.getincrementaldecoder("utf-8")().decode(b"".join(chunks), final=False)
