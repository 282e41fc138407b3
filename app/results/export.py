"""One field table → CSV, JSON, JSONL and markdown. Every printer reads app.results.fields."""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterable, Sequence
from typing import Any

from app.results.fields import FIELDS, MD_FIELDS

FORMATS = ("csv", "json", "jsonl", "md")


def _cell(value: Any) -> str:
    """CSV/markdown text for one value: lists space-separated, floats without noise, None empty."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return ""
        return f"{value:.6g}" if abs(value) >= 1e6 else f"{round(value, 4)}"
    if isinstance(value, (list, tuple)):
        return " ".join(_cell(v) for v in value)
    return str(value)


def columns_for(rows: Sequence[dict[str, Any]]) -> list[str]:
    """FIELDS first in their stable order, then any extra keys the rows carry, sorted."""
    extra = sorted({k for r in rows for k in r} - set(FIELDS))
    return list(FIELDS) + extra


def to_csv(rows: Sequence[dict[str, Any]], columns: Sequence[str] | None = None) -> str:
    cols = list(columns or columns_for(rows))
    buf = io.StringIO()
    w = csv.writer(buf, quoting=csv.QUOTE_MINIMAL, lineterminator="\n")
    w.writerow(cols)
    for r in rows:
        w.writerow([_cell(r.get(c)) for c in cols])
    return buf.getvalue()


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


def _ordered(row: dict[str, Any]) -> dict[str, Any]:
    keys = [k for k in FIELDS if k in row] + sorted(set(row) - set(FIELDS))
    return {k: _json_safe(row[k]) for k in keys}


def to_json(rows: Sequence[dict[str, Any]]) -> str:
    return json.dumps([_ordered(r) for r in rows], indent=2, ensure_ascii=False) + "\n"


def to_jsonl(rows: Iterable[dict[str, Any]]) -> str:
    return "".join(json.dumps(_ordered(r), ensure_ascii=False) + "\n" for r in rows)


def to_markdown(rows: Sequence[dict[str, Any]], columns: Sequence[str] = MD_FIELDS) -> str:
    def esc(s: str) -> str:
        return s.replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    for r in rows:
        cells = []
        for c in columns:
            v = r.get(c)
            cells.append(esc(f"{v:.2f}" if isinstance(v, float) else _cell(v)))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def render(rows: Sequence[dict[str, Any]], fmt: str) -> str:
    if fmt == "csv":
        return to_csv(rows)
    if fmt == "json":
        return to_json(rows)
    if fmt == "jsonl":
        return to_jsonl(rows)
    if fmt == "md":
        return to_markdown(rows)
    raise ValueError(f"unknown output format {fmt!r} (valid: {', '.join(FORMATS)})")


def read_csv(text: str) -> list[dict[str, str]]:
    """Parse CSV written by to_csv back into rows of strings (for round-trip checks and re-import)."""
    return list(csv.DictReader(io.StringIO(text)))
