"""Text from outside (file names, run names, a server's reply, a recording's reason) made safe to show.

Such text may hold control characters: an escape sequence in a file name clears a terminal or retitles it, and in
the window it is an invisible character or a box. Every control character (C0 but tab and newline, DEL, C1) and
every bidirectional embedding, override or isolate is written escaped (``\\x1b``, ``\\u202e``), so what a name holds
is seen rather than obeyed. The command line's standard streams (``app.cli.terminal``) and the window's messages
(``app.gui``) both escape through :func:`escape_controls`.
"""

from __future__ import annotations

import re

#: Control characters (C0 but tab and newline, DEL, C1) and the bidirectional embeddings, overrides and isolates.
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape_controls(text: str) -> str:
    """``text`` with every control character and bidi override escaped (tab and newline kept)."""
    return UNSAFE.sub(_escaped, text) if UNSAFE.search(text) else text
