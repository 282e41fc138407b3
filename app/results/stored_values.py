"""Values read back from the results store, checked where they enter: a store is a file a user can edit.

A hand-edited (or damaged) store may hold anything SQLite can: text where a count belongs, NULL where a date
belongs, 10^400, NaN, a row nested 100,000 deep, a status no version wrote. A row that cannot be read at all is
skipped; a value that cannot be a run's figure or record is read as empty (or as the word ``unknown`` for a run's
status). Each problem is said once per read, one line per field and kind of problem, quoting a short prefix of the
first such value: never a traceback, never a figure no run measured.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from app.results.fields import FIELD_BY_NAME, Field, RowStatus
from app.shown_text import LINE_UNSAFE, escape_all, quoted

#: A stored row's JSON text longer than this is not parsed (a real row is a few KB, with its samples a few tens).
MAX_ROW_JSON_CHARS = 1 << 20
#: No count, size or time a run records passes a signed 64-bit integer (SQLite's own integers stop there too).
MAX_STORED_MAGNITUDE = 2**63
#: Every status a run of the store has been written with ('aborted': stores from before 'interrupted').
RUN_STATUSES = frozenset({"running", "finished", "cancelled", "crashed", "interrupted", "aborted"})
UNKNOWN_STATUS = "unknown"
#: Every status a row is written with ('partial': a test cancelled mid-way keeps the repetitions it timed).
ROW_STATUSES = frozenset({*RowStatus, "partial"})
SKIPPED = "its row skipped"


class BadValues:
    """The unreadable values met in one read of the store, said once each (:meth:`say`) through ``warn``."""

    def __init__(self, where: Path | str, warn: Callable[[str], None]) -> None:
        self.where = where
        self.warn = warn
        self._seen: dict[tuple[str, str, str], list[Any]] = {}  # (what, problem, outcome) -> [count, first value]

    def note(self, what: str, problem: str, value: Any, outcome: str = "read as empty") -> None:
        seen = self._seen.setdefault((what, problem, outcome), [0, value])
        seen[0] += 1

    def say(self) -> None:
        """One warning per field and problem, then forget them (a reader may say again after its next read)."""
        for (what, problem, outcome), (n, first) in self._seen.items():
            if n > 1:  # "is ..." said of one value, "are ..." of several
                verb, rest = problem.split(" ", 1)
                problem = f"{ {'is': 'are', 'holds': 'hold'}.get(verb, verb)} {rest}"
            shown = "" if first is None else f" (the first: {quoted(first)})" if n > 1 else f" ({quoted(first)})"
            many = f"{n:,} stored values" if n > 1 else "a stored value"
            self.warn(f"{self.where}: {what}: {many} {problem}{shown}; {outcome}")
        self._seen.clear()


def bad_number(value: Any) -> str | None:
    """Why the number ``value`` is no figure a run records (NaN, infinite, past 2^63), or None (a good number or no
    number at all)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else "is not a finite number"
    return None if -MAX_STORED_MAGNITUDE < value < MAX_STORED_MAGNITUDE else "is past any figure a run records"


def checked_value(name: str, value: Any, bad: BadValues, kind: str = "result row",
                  table: Mapping[str, Field] = FIELD_BY_NAME) -> Any:
    """A stored row's ``value`` of field ``name``, or None (noted in ``bad``) where it cannot be a figure: a number
    out of range, a list holding one, or a value not of ``table``'s type (a key it does not know: numbers only)."""
    if value is None:
        return None
    problem = bad_number(value)
    if problem is None and isinstance(value, list):
        problem = next((f"holds a number that {p.removeprefix('is ')}" for p in map(bad_number, value) if p), None)
    if problem is None and name == "status" and isinstance(value, str) and value not in ROW_STATUSES:
        problem = "is not a status this program writes"
    field: Field | None = table.get(name)
    if problem is None and field is not None:
        want = (int, float) if field.type in (int, float) else field.type  # an int field's float: rounded on decode
        if not isinstance(value, want) or (field.type in (int, float) and isinstance(value, bool)):
            problem = f"is {type(value).__name__} where the field table has {field.type.__name__}"
    if problem is None:
        return value
    bad.note(f"{kind} field {name}", problem, value)
    return None


def checked_row(data: Mapping[str, Any], bad: BadValues, kind: str = "result row",
                table: Mapping[str, Field] = FIELD_BY_NAME) -> dict[str, Any]:
    """A stored row's table with each value :func:`checked_value` (an unknown key's too: its numbers only)."""
    return {name: checked_value(name, value, bad, kind, table) for name, value in data.items()}


def parse_row_json(text: Any, bad: BadValues, kind: str = "result row") -> dict[str, Any] | None:
    """A stored row's JSON as a table, or None (noted in ``bad``) when it is not one: not text, larger than
    MAX_ROW_JSON_CHARS, not JSON, nested too deeply to parse, or not an object."""
    if not isinstance(text, str):
        bad.note(f"{kind}s", "is not JSON text", text, SKIPPED)
        return None
    if len(text) > MAX_ROW_JSON_CHARS:
        bad.note(f"{kind}s", f"is longer than the {MAX_ROW_JSON_CHARS:,} characters a row may take", text,
                 SKIPPED)
        return None
    try:
        data = json.loads(text)
    except RecursionError:
        bad.note(f"{kind}s", "is nested too deeply to read", text, SKIPPED)
        return None
    except ValueError:
        bad.note(f"{kind}s", "is not valid JSON", text, SKIPPED)
        return None
    if not isinstance(data, dict):
        bad.note(f"{kind}s", "is not a JSON object", text, SKIPPED)
        return None
    return data


def checked_text(what: str, value: Any, bad: BadValues, *, required: bool = False) -> str:
    """A stored text column (a date, a name, a run id) as one line: NULL as "" (noted when ``required``), a number
    as its digits, a control character (a NUL in a date) noted and escaped."""
    if value is None:
        if required:
            bad.note(what, "is NULL", value)
        return ""
    if isinstance(value, str):
        text = value
    elif isinstance(value, int | float) and not isinstance(value, bool) and bad_number(value) is None:
        text = str(value)
    else:
        bad.note(what, "is not text", value)
        return ""
    if LINE_UNSAFE.search(text):
        bad.note(what, "holds control characters", text, "shown escaped")
        text = escape_all(text)
    return text


def checked_count(what: str, value: Any, bad: BadValues) -> int:
    """A stored count (a run's ``n_tests``): a whole number from 0 to 2^63, else 0 (noted)."""
    if value is None:
        return 0
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < MAX_STORED_MAGNITUDE:
        return value
    if isinstance(value, float) and value.is_integer() and 0 <= value < MAX_STORED_MAGNITUDE:
        return int(value)
    bad.note(what, "is not a count", value, "read as 0")
    return 0


def checked_status(what: str, value: Any, bad: BadValues) -> str:
    """A run's stored status: one this program writes, else ``unknown`` (noted)."""
    if isinstance(value, str) and value in RUN_STATUSES:
        return value
    bad.note(what, "is not a status this program writes", value, f"read as {UNKNOWN_STATUS!r}")
    return UNKNOWN_STATUS


class FieldChecker:
    """:func:`checked_value` for a fixed list of fields, fast where a value is plainly good (a string of a text
    field, a finite number in range of a number field): what a read of every row of a long run does per value."""

    def __init__(self, names: list[str], bad: BadValues, kind: str = "result row",
                 table: Mapping[str, Field] = FIELD_BY_NAME) -> None:
        self.names = names
        self.bad = bad
        self.kind = kind
        self.table = table
        self._numeric = [name in table and table[name].type in (int, float) for name in names]
        self._text = [name in table and table[name].type is str and name != "status" for name in names]

    def values(self, values: list[Any]) -> list[Any]:
        """The fields' ``values`` (in ``names``' order), each checked (in place: a bad one becomes None)."""
        for i, (value, numeric, text) in enumerate(zip(values, self._numeric, self._text, strict=False)):
            kind = type(value)
            if value is None or (kind is str and text) or (numeric and (
                    (kind is float and value - value == 0.0)  # finite: inf - inf and nan are nan
                    or (kind is int and -MAX_STORED_MAGNITUDE < value < MAX_STORED_MAGNITUDE))):
                continue
            values[i] = checked_value(self.names[i], value, self.bad, self.kind, self.table)
        return values
