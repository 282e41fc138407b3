"""JSON written for someone else to read (every ``--json`` through ``app.cli.json_docs``, ``-o json``,
``-o jsonl``): standard JSON only.

Python's ``json`` writes ``NaN`` and ``Infinity`` for floats that are not finite: tokens JSON does not have, which a
strict reader (``jq``, JavaScript's ``JSON.parse``) refuses. :func:`standard_json` writes each such value as
``null`` and, in a document that is an object, says where under :data:`NOT_FINITE_KEY`; ``allow_nan=False`` then
makes sure none is left.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

#: The key a JSON object gets when values in it were not finite numbers: why they are null, and where.
NOT_FINITE_KEY = "not_finite"
NOT_FINITE_WHY = "JSON has no NaN or Infinity: these values were not finite numbers and are written as null"


def finite_copy(value: Any, path: str = "$", found: list[str] | None = None) -> Any:
    """``value`` with every float that is not finite (in dicts, lists and tuples, at any depth) replaced by None;
    the JSON paths of those replaced appended to ``found``."""
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        if found is not None:
            found.append(path)
        return None
    if isinstance(value, dict):
        return {k: finite_copy(v, f"{path}.{k}", found) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite_copy(v, f"{path}[{i}]", found) for i, v in enumerate(value)]
    return value


def standard_json(doc: Any, *, indent: int | None = None, ensure_ascii: bool = True,
                  default: Callable[[Any], Any] | None = None, note: bool = True) -> str:
    """``doc`` as standard JSON (``json.dumps``'s defaults otherwise): a value that is not a finite number is
    ``null`` and, where ``doc`` is an object and ``note``, listed under :data:`NOT_FINITE_KEY` with why."""
    found: list[str] = []
    clean = finite_copy(doc, "$", found)
    if found and note and isinstance(clean, dict):
        clean[NOT_FINITE_KEY] = {"why": NOT_FINITE_WHY, "paths": found[:100], "count": len(found)}
    return json.dumps(clean, indent=indent, ensure_ascii=ensure_ascii, default=default, allow_nan=False)
