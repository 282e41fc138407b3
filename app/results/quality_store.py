"""Measured quality of model files (``gguf-bench quality``) in the results store, and its export columns.

One row per model file per quality run, in the ``quality`` table (schema version 3, ``store_schema._v3_quality``),
written through :class:`ResultStore`'s own write path (retries, the side file of writes it could not take).
A row is a :class:`~app.results.row_types.QualityRow`; ``quality_for`` finds the newest measured row for a file (the
chooser reads it). Rows are matched by ``model_key`` (size and modification time), so a file replaced under the same
name is measured anew rather than given an old file's quality.
"""

from __future__ import annotations

import math
import os
import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from app.json_text import standard_json
from app.results import export
from app.results.fields import QUALITY_TABLE
from app.results.row_types import QualityRow
from app.results.store import ResultStore, decode_rows
from app.results.stored_values import BadValues, checked_count, checked_text

#: A quality row's columns, in CSV/JSON order (the field table's quality group: ``fields.QUALITY_TABLE``).
QUALITY_COLUMNS: tuple[str, ...] = tuple(f.name for f in QUALITY_TABLE)
#: The compact markdown table.
QUALITY_MD_COLUMNS: tuple[str, ...] = (
    "model_filename", "file_type", "bits_per_weight", "ppl", "ppl_err", "mean_kld", "mean_kld_err", "kld_p99",
    "same_top_rate", "n_tokens", "tokens_per_s", "requantized_from", "status",
)


def model_key(path: str | os.PathLike[str]) -> str | None:
    """The identity a quality row is kept under: ``"<size>:<mtime_ns>"`` of the file; None when it cannot be read."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return f"{st.st_size}:{st.st_mtime_ns}"


def ordered(row: QualityRow) -> QualityRow:
    """``row`` with its keys in :data:`QUALITY_COLUMNS` order (others after, sorted)."""
    values = row.to_mapping()
    keys = [k for k in QUALITY_COLUMNS if k in values] + sorted(set(values) - set(QUALITY_COLUMNS))
    return QualityRow.from_mapping({k: values[k] for k in keys})


def save_quality_rows(store: ResultStore, rows: Iterable[QualityRow]) -> bool:
    """Commit quality rows (replacing a row of the same run and index) through the store's own write path: retried,
    and kept in its side file to be stored later when the store cannot take them (with one warning). True when
    every row was committed now."""
    committed = True
    for r in rows:
        if r.run_id is None or r.model_index is None:
            raise ValueError("a quality row needs run_id and model_index")
        committed = store.add_quality_row(ordered(r)) and committed
    return committed


def _decode(store: ResultStore, texts: Iterable[str]) -> list[QualityRow]:
    return decode_rows(QualityRow, texts, store.path, store.warn)


def quality_rows(store: ResultStore, run_id: str) -> list[QualityRow]:
    """The rows of one quality run, in the order the files were given."""
    return _decode(store, (r[0] for r in store.query(
        "SELECT row_json FROM quality WHERE run_id = ? ORDER BY model_index", (run_id,))))


def last_quality_run(store: ResultStore) -> str | None:
    """The newest quality run's id, or None when none is stored."""
    rows = store.query("SELECT run_id FROM quality ORDER BY created_at DESC, rowid DESC LIMIT 1")
    return rows[0][0] if rows else None


def quality_run_ids(store: ResultStore, prefix: str) -> list[str]:
    """The quality runs whose id begins with ``prefix`` ("last-quality": the newest one)."""
    if prefix == "last-quality":
        last = last_quality_run(store)
        return [last] if last else []
    rows = _read_or_warn(store, "SELECT DISTINCT run_id FROM quality WHERE substr(run_id, 1, length(?1)) = ?1",
                         (prefix,))
    return [r[0] for r in rows]


def quality_runs(store: ResultStore, limit: int = 50) -> list[tuple[str, str, int, int, str]]:
    """The newest quality runs: (run_id, created_at, files, files scored ok, file names), newest first."""
    rows = _read_or_warn(store, "SELECT run_id, MIN(created_at), COUNT(*), SUM(status = 'ok'), "
                         "GROUP_CONCAT(model_filename) FROM quality GROUP BY run_id "
                         "ORDER BY MIN(created_at) DESC, MIN(rowid) DESC LIMIT ?", (limit,))
    bad = BadValues(store.path, store.warn)  # a hand-edited store: one warning per field and problem
    out = [(checked_text("quality run_id", a, bad, required=True), checked_text("quality created_at", b, bad,
                                                                                required=True),
            checked_count("quality files", c, bad), checked_count("quality files ok", d, bad),
            checked_text("quality model_filename", e, bad)) for a, b, c, d, e in rows]
    bad.say()
    return out


def _read_or_warn(store: ResultStore, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    """``sql``'s rows from the quality table; none, with a warning, when the table is damaged (the sweeps are still
    there)."""
    try:
        return store.query(sql, params)
    except sqlite3.Error as e:
        store.warn(f"{store.path}: cannot read quality runs ({e})")
        return []


def quality_for(store: ResultStore, model: str | os.PathLike[str]) -> QualityRow | None:
    """The newest measured (status ok) quality row for a model file, or None.

    A local file is matched by ``model_key`` (its size and modification time). A name that is not a local file
    (an https URL, a file not downloaded yet) is matched by its file name, the newest row of that name.
    """
    text = os.fspath(model)
    key = model_key(text) if not text.startswith(("http://", "https://")) else None
    if key is not None:
        where, arg = "model_key = ?", key
    else:
        name = Path(urlparse(text).path if "://" in text else text).name
        where, arg = "model_filename = ?", name
    rows = _decode(store, (r[0] for r in store.query(
        f"SELECT row_json FROM quality WHERE {where} AND status = 'ok' "  # noqa: S608 - fixed text
        "ORDER BY created_at DESC, rowid DESC LIMIT 1", (arg,))))
    return rows[0] if rows else None


def quality_columns_for(rows: Sequence[QualityRow]) -> list[str]:
    """:data:`QUALITY_COLUMNS`, then any extra keys the rows carry, sorted."""
    return list(QUALITY_COLUMNS) + sorted({k for r in rows for k in r.extra} - set(QUALITY_COLUMNS))


QUALITY_FORMATS = ("csv", "json", "jsonl", "md")


def render_quality(rows: Sequence[QualityRow], fmt: str) -> str:
    """Quality rows as csv, json, jsonl or md (the same cell rules as the speed rows' export)."""
    if fmt == "csv":
        return export.to_csv([r.to_mapping() for r in rows], quality_columns_for(rows))
    if fmt == "md":  # KLDs are small: significant digits, not the speed table's two decimals
        shown = [{k: f"{v:.4g}" if isinstance(v, float) and math.isfinite(v) else v for k, v in r.to_mapping().items()}
                 for r in rows]
        return export.to_markdown(shown, QUALITY_MD_COLUMNS)
    if fmt == "json":
        return standard_json([ordered(r).to_mapping() for r in rows], indent=2, ensure_ascii=False) + "\n"
    if fmt == "jsonl":
        return "".join(standard_json(ordered(r).to_mapping(), ensure_ascii=False, note=False) + "\n" for r in rows)
    raise ValueError(f"unknown output format {fmt!r} (valid: {', '.join(QUALITY_FORMATS)})")
