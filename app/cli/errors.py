"""Exit codes and one-line user errors of ``gguf-bench``."""

from __future__ import annotations

import sys
import time
import traceback

from app.shown_text import one_line

EXIT_OK, EXIT_TESTS_FAILED, EXIT_USAGE, EXIT_CANCELLED = 0, 1, 2, 130
EXIT_INTERNAL = 70  # a bug (sysexits' EX_SOFTWARE): one line on stderr, the traceback in the data dir's logs


class UserError(Exception):
    """A mistake in what the user asked for; printed as one line, exit code 2."""


def print_error(msg: object) -> None:
    """``msg`` as the one line of an error (:func:`app.shown_text.one_line`: a newline in a path or a name cannot
    make it two, and a rejected value of any size is cut)."""
    print(f"gguf-bench: error: {one_line(str(msg))}", file=sys.stderr)


def print_line(msg: str) -> None:
    """A warning or a note on stderr, as one line (:func:`app.shown_text.one_line`)."""
    print(one_line(msg), file=sys.stderr)


def crash_log(error: BaseException) -> str:
    """Write ``error``'s traceback to ``<data dir>/logs/gguf-bench-crash-<time>.log``; " (traceback in PATH)", or ""
    when it cannot be written."""
    from app.paths import logs_dir

    try:
        path = logs_dir() / f"gguf-bench-crash-{time.strftime('%Y%m%dT%H%M%S')}.log"
        path.write_text("".join(traceback.format_exception(error)), encoding="utf-8")
    except Exception:  # noqa: BLE001 - the one line is said anyway
        return ""
    return f" (traceback in {path})"
