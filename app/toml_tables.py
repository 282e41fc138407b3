"""One check for the tables of the TOML data files (hardware profiles, the public results table): the keys a table
may and must have and each value's type, in one line naming the file, the table and the key."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from app.shown_text import quoted

Types = type | tuple[type, ...]

_NAMES = {bool: "true or false", int: "an integer", str: "a string", list: "an array", dict: "a table"}


def type_name(types: Types) -> str:
    """What a value of ``types`` is, in words ("a number" where a float is allowed)."""
    kinds = types if isinstance(types, tuple) else (types,)
    return "a number" if float in kinds else _NAMES.get(kinds[0], kinds[0].__name__)


def check_table(table: object, required: Mapping[str, Types], optional: Mapping[str, Types], where: str,
                error: type[Exception]) -> dict[str, Any]:
    """``table`` when it is a table with every key of ``required``, no key outside ``required`` and ``optional``,
    and each value of its key's type (a bool is no number, a float is finite); else ``error`` with one line."""
    if not isinstance(table, dict):
        raise error(f"{where}: must be a table, got {type(table).__name__}")
    unknown = sorted(set(table) - set(required) - set(optional))
    if unknown:
        raise error(f"{where}: unknown key {quoted(unknown[0])} (allowed: {', '.join([*required, *optional])})")
    missing = [k for k in required if k not in table]
    if missing:
        raise error(f"{where}: missing key {missing[0]!r}")
    for key, value in table.items():
        want = required.get(key) or optional[key]
        wants_bool = bool in (want if isinstance(want, tuple) else (want,))
        if (isinstance(value, bool) and not wants_bool) or not isinstance(value, want):
            raise error(f"{where}: {key} must be {type_name(want)}, got {type(value).__name__} {quoted(value)}")
        if isinstance(value, float) and not math.isfinite(value):
            raise error(f"{where}: {key} must be a finite number, got {quoted(value)}")
    return table
