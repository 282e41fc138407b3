"""One field table → CSV, JSON, JSONL and markdown. Every printer reads app.results.fields."""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from app.json_text import standard_json
from app.results.fields import FIELD_BY_NAME, FIELDS, MD_FIELDS, REMOTE, SUMMARY_FIELDS, Field
from app.shown_text import cell_text, spreadsheet_cell

FORMATS = ("csv", "json", "jsonl", "md", "summary", "csv-all")  # csv-all: the remote columns too, always
MIB = 1024**2


def _cell(value: Any) -> str:
    """CSV/markdown text for one value: lists space-separated, floats without noise, None empty."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return ""
        if abs(value) >= 1e6:  # whole numbers in full (bytes), never 1.28057e+08
            return str(int(value)) if value.is_integer() else f"{value:.1f}"
        return f"{round(value, 4)}"
    if isinstance(value, (list, tuple)):
        return " ".join(_cell(v) for v in value)
    return str(value)


def is_remote_table(table: Mapping[str, Any]) -> bool:
    """Whether a table keyed by column name holds a test against a server (``gguf-bench run --url``), not a local
    model's. The exports write such tables (a row's mapping, or a view's own table such as the chooser's), not
    typed rows: a boundary where rows become CSV, JSON and markdown."""
    return table.get("backends") == "remote" or bool(table.get("endpoint"))


def columns_for(rows: Sequence[dict[str, Any]], all_columns: bool = False) -> list[str]:
    """FIELDS first in their stable order, then any extra keys the rows carry, sorted. Without ``all_columns``,
    the remote servers' columns only where a row is remote: a local run's CSV has none of them."""
    extra = sorted({k for r in rows for k in r} - set(FIELDS))
    remote = all_columns or any(is_remote_table(r) for r in rows)
    return [f for f in FIELDS if remote or FIELD_BY_NAME[f].group != REMOTE] + extra


def csv_text(header: Sequence[str], lines: Iterable[Sequence[str]]) -> str:
    """A CSV of ``header`` and ``lines`` (cells as text), every cell safe to open in a spreadsheet
    (:func:`app.shown_text.spreadsheet_cell`: a cell a spreadsheet would run as a formula is escaped, whatever the
    row came from); the one writer of every CSV the workbench exports."""
    buf = io.StringIO()
    w = csv.writer(buf, quoting=csv.QUOTE_MINIMAL, lineterminator="\n")
    w.writerow([spreadsheet_cell(h) for h in header])
    for line in lines:
        w.writerow([spreadsheet_cell(c) for c in line])
    return buf.getvalue()


def to_csv(rows: Sequence[dict[str, Any]], columns: Sequence[str] | None = None, all_columns: bool = False) -> str:
    cols = list(columns or columns_for(rows, all_columns))
    return csv_text(cols, ([_cell(r.get(c)) for c in cols] for r in rows))


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
    return standard_json([_ordered(r) for r in rows], indent=2, ensure_ascii=False) + "\n"


def to_jsonl(rows: Iterable[dict[str, Any]]) -> str:
    return "".join(standard_json(_ordered(r), ensure_ascii=False, note=False) + "\n" for r in rows)


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


def summary_column(f: Field) -> str:
    """A field's name in the summary CSV: byte counts become MiB (``mem_measured_bytes`` → ``mem_measured_mib``)."""
    if f.unit != "bytes":
        return f.name
    return f.name[: -len("_bytes")] + "_mib" if f.name.endswith("_bytes") else f.name + "_mib"


def summary_columns() -> list[str]:
    """The summary CSV's header: the key columns first (app.results.fields.SUMMARY_FIELDS)."""
    return [summary_column(f) for f in SUMMARY_FIELDS]


def _plain(f: Field, value: Any) -> str:
    """A spreadsheet-friendly cell: MiB for byte counts, fixed decimals (never scientific notation)."""
    if value is None or value == "":
        return ""
    if isinstance(value, bool):
        return str(int(value))
    if f.unit == "bytes" and isinstance(value, (int, float)):
        return f"{value / MIB:.1f}"
    if isinstance(value, float):
        if not math.isfinite(value):
            return ""
        if f.kind == "fraction":
            return f"{value:.3f}"
        digits = re.search(r"\.(\d)f", f.fmt)
        return f"{value:.{int(digits.group(1)) if digits else 2}f}"
    return _cell(value)


def to_summary_csv(rows: Sequence[dict[str, Any]]) -> str:
    """The short CSV for spreadsheets: key columns first, sizes in MiB, plain decimals, no per-repetition samples.
    The full llama-bench-compatible CSV (:func:`to_csv`) keeps everything."""
    def line(r: dict[str, Any]) -> list[str]:
        single = int(r.get("n_repetitions") or 0) == 1  # one repetition has no spread: empty, not a perfect 0
        return ["" if single and f.name.endswith("_stddev") else _plain(f, r.get(f.name)) for f in SUMMARY_FIELDS]

    return csv_text(summary_columns(), (line(r) for r in rows))


def render(rows: Sequence[dict[str, Any]], fmt: str) -> str:
    if fmt in ("csv", "csv-all"):
        return to_csv(rows, all_columns=fmt == "csv-all")
    if fmt == "json":
        return to_json(rows)
    if fmt == "jsonl":
        return to_jsonl(rows)
    if fmt == "md":
        return to_markdown(rows)
    if fmt == "summary":
        return to_summary_csv(rows)
    raise ValueError(f"unknown output format {fmt!r} (valid: {', '.join(FORMATS)})")


def read_csv(text: str) -> list[dict[str, str]]:
    """Parse CSV written by to_csv back into rows of strings (for round-trip checks and re-import), each cell's
    spreadsheet escape undone (:func:`app.shown_text.cell_text`)."""
    return [{cell_text(k): cell_text(v) if isinstance(v, str) else v for k, v in row.items()}
            for row in csv.DictReader(io.StringIO(text))]
