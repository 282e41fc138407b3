"""Exit codes and one-line user errors of ``gguf-bench``."""

from __future__ import annotations

import sys

EXIT_OK, EXIT_TESTS_FAILED, EXIT_USAGE, EXIT_CANCELLED = 0, 1, 2, 130


class UserError(Exception):
    """A mistake in what the user asked for; printed as one line, exit code 2."""


def print_error(msg: str) -> None:
    print(f"gguf-bench: error: {msg}", file=sys.stderr)
