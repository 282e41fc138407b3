"""Text from outside (file names, run names, a server's reply, a recording's reason) made safe to show.

Such text may hold control characters: an escape sequence in a file name clears a terminal or retitles it, and in
the window it is an invisible character or a box. Every control character (C0 but tab and newline, DEL, C1) and
every bidirectional embedding, override or isolate is written escaped (``\\x1b``, ``\\u202e``), so what a name holds
is seen rather than obeyed. The command line's standard streams (``app.cli.terminal``) and the window's messages
(``app.gui``) both escape through :func:`escape_controls`.
"""

from __future__ import annotations

import re
import reprlib

#: Control characters (C0 but tab and newline, DEL, C1) and the bidirectional embeddings, overrides and isolates.
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape_controls(text: str) -> str:
    """``text`` with every control character and bidi override escaped (tab and newline kept)."""
    return UNSAFE.sub(_escaped, text) if UNSAFE.search(text) else text


#: The most characters of a rejected value an error or warning quotes: enough to recognise it, never the 10 MB.
QUOTED_CHARS = 60


def quoted(value: object, limit: int = QUOTED_CHARS) -> str:
    """``value`` as an error quotes it: its ``repr`` (a number's digits), cut to ``limit`` characters with an
    ellipsis and the whole length said, every control character escaped, and never more than one line."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 3 * limit:
        return f"an integer of about {int(value.bit_length() * 0.30103) + 1:,} digits"  # str() of it is the cost
    if isinstance(value, str) and len(value) > limit:
        return escape_all(f"{value[:limit]!r}… ({len(value):,} characters)")
    text = _SHORT.repr(value)
    return escape_all(text if len(text) <= limit else text[:limit] + "…")


_SHORT = reprlib.Repr()  # containers cut after a few items, without building their whole repr
_SHORT.maxstring = _SHORT.maxother = _SHORT.maxlong = QUOTED_CHARS


def escape_all(text: str) -> str:
    """``text`` with every control character escaped, newline and tab too: a name or path printed inside one line
    (an error, a progress line, a table cell) stays that one line."""
    return LINE_UNSAFE.sub(_escaped, text) if LINE_UNSAFE.search(text) else text


#: :data:`UNSAFE` and the line breaks and tab: what a name inside one line must not hold.
LINE_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


#: What a spreadsheet reads as the start of a formula in a cell (OWASP's CSV injection rule).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_QUOTED_FORMULA = re.compile("'*[=+\\-@\t\r]")  # a formula start behind any single quotes


def spreadsheet_cell(text: str) -> str:
    """A CSV cell as spreadsheets open it safely: text beginning with ``=``, ``+``, ``-``, ``@``, a tab or a
    carriage return gets a single quote in front (a spreadsheet then shows it as text, never runs it as a formula);
    a number stays as it is (``-3.5`` is a number, not a formula). Text that already begins with quotes before such
    a character gets one more, so :func:`cell_text` gives back exactly what was escaped."""
    if text and _QUOTED_FORMULA.match(text) and not _NUMBER.fullmatch(text):
        return "'" + text
    return text


def cell_text(cell: str) -> str:
    """The text of a cell :func:`spreadsheet_cell` wrote (a CSV of ours read back)."""
    return cell[1:] if cell.startswith("'") and _QUOTED_FORMULA.match(cell[1:]) else cell


#: The longest line an error, a warning or a progress line prints: past it the middle is cut (what is refused is
#: named at its start, why at its end).
MAX_LINE_CHARS = 2000


def one_line(text: str, limit: int = MAX_LINE_CHARS) -> str:
    """``text`` as one printed line: every control character escaped, newline and tab too (a name holding a newline
    no longer breaks a one-line error or the progress line in two), and at most ``limit`` characters (the middle
    of a longer one cut, and said)."""
    text = escape_all(text)
    if len(text) > limit:
        keep = limit // 2
        text = f"{text[:keep]}… ({len(text) - 2 * keep:,} characters cut) …{text[-keep:]}"
    return text
