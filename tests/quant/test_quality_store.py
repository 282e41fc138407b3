"""The quality table: rows saved, read back per run, and found per file by size+mtime key or by name."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from app.results import export
from app.results.quality_store import (
    QUALITY_COLUMNS,
    last_quality_run,
    model_key,
    quality_for,
    quality_rows,
    render_quality,
    save_quality_rows,
)
from app.results.row_types import QualityRow, ResultRow
from app.results.store import ResultStore
from app.results.store_schema import SCHEMA_VERSION, user_version
from tests.cli_helpers import gguf_bench


def _row(run_id: str, index: int, path: Path, **more: object) -> QualityRow:
    return QualityRow.from_mapping({"run_id": run_id, "model_index": index, "model_path": str(path),
                                    "model_filename": path.name, "model_key": model_key(path), "status": "ok",
                                    "mean_kld": 0.01 * index, **more})


def test_rows_round_trip_and_lookup(tmp_path: Path) -> None:
    a, b = tmp_path / "a.gguf", tmp_path / "b.gguf"
    a.write_bytes(b"x" * 10)
    b.write_bytes(b"y" * 20)
    with ResultStore(tmp_path / "s.sqlite3") as store:
        assert user_version(store._db) == SCHEMA_VERSION >= 3
        assert quality_for(store, a) is None and last_quality_run(store) is None
        assert save_quality_rows(store, [_row("r1", 0, a), _row("r1", 1, b, status="failed")])
        assert save_quality_rows(store, [_row("r2", 0, a, mean_kld=0.5)])
        assert [r.model_filename for r in quality_rows(store, "r1")] == ["a.gguf", "b.gguf"]
        assert quality_rows(store, "r1")[0] == _row("r1", 0, a)  # as it was saved
        newest = quality_for(store, a)
        assert newest is not None and newest.mean_kld == 0.5  # the newest ok row
        assert quality_for(store, b) is None  # only a failed row
        by_name = quality_for(store, "https://huggingface.co/x/y/resolve/main/a.gguf")
        assert by_name is not None and by_name.run_id in ("r1", "r2")
        os.utime(a, ns=(1, 1))  # the file changed: its old quality no longer applies
        assert quality_for(store, a) is None
        assert last_quality_run(store) in ("r1", "r2")


def test_a_locked_store_keeps_quality_rows_and_stores_them_later(tmp_path: Path) -> None:
    """Issue #25: quality rows had their own sqlite3.connect, outside the store's retries and side file: a store
    locked by another writer lost them. Now they take the speed rows' path: kept, then stored by the next recovery (the
    step a sweep, a quality run or the window takes on opening; a plain open changes nothing)."""
    warnings: list[str] = []
    path = tmp_path / "s.sqlite3"
    with ResultStore(path, warn=warnings.append, write_attempts=1, busy_timeout_s=0.05) as store:
        other = sqlite3.connect(path, timeout=0.05)
        other.execute("BEGIN EXCLUSIVE")  # another program holds the store
        try:
            assert not save_quality_rows(store, [_row("r", 0, tmp_path / "a.gguf")])
        finally:
            other.rollback()
            other.close()
    assert warnings and "kept in" in warnings[0] and store.pending.exists()
    with ResultStore(path, warn=warnings.append) as store:
        assert quality_rows(store, "r") == [] and store.pending.exists()  # opening alone writes nothing
    with ResultStore.recover(path, warn=warnings.append) as store:
        assert [r.run_id for r in quality_rows(store, "r")] == ["r"]
    assert not store.pending.exists()


@pytest.mark.heavy  # the CLI in a subprocess
def test_a_damaged_quality_table_leaves_the_sweeps_listed(tmp_path: Path) -> None:
    with ResultStore(tmp_path / "s.sqlite3") as store, sqlite3.connect(store.path) as db:
        db.execute("DROP TABLE quality")
    proc = gguf_bench("--store", str(tmp_path / "s.sqlite3"), "history")  # the sweeps are still listed
    assert proc.returncode == 0 and "Traceback" not in proc.stderr and "cannot read quality runs" in proc.stderr


def test_render_orders_columns() -> None:
    rows = [QualityRow.from_mapping({"status": "ok", "model_filename": "m.gguf", "run_id": "r", "extra": 1,
                                     "ppl": 12.5})]
    header = render_quality(rows, "csv").splitlines()[0].split(",")
    assert header[: len(QUALITY_COLUMNS)] == list(QUALITY_COLUMNS) and header[-1] == "extra"
    assert "| m.gguf |" in render_quality(rows, "md")
    assert render_quality(rows, "jsonl").startswith('{"run_id": "r", "model_filename": "m.gguf"')


@pytest.mark.heavy  # the CLI in a subprocess and a worker
def test_gguf_bench_exports_and_lists_a_quality_run(tmp_path: Path) -> None:
    a, b = tmp_path / "a.gguf", tmp_path / "b.gguf"
    a.write_bytes(b"x" * 10)
    b.write_bytes(b"y" * 20)
    path = tmp_path / "s.sqlite3"
    with ResultStore(path) as store:
        store.begin_run("20261130T100000-sweep1", sweep_name="quick")
        store.add_result("20261130T100000-sweep1", ResultRow(model_filename="a.gguf", status="ok", decode_tps=9.5))
        store.finish_run("20261130T100000-sweep1", "completed")
        save_quality_rows(store, [_row("20261130T110000-qual1", 0, a, ppl=12.5), _row("20261130T110000-qual1", 1, b)])
    csv_out = gguf_bench("--store", str(path), "export", "20261130T11", "-o", "csv")
    assert csv_out.returncode == 0, csv_out.stderr
    rows = export.read_csv(csv_out.stdout)
    assert [r["model_filename"] for r in rows] == ["a.gguf", "b.gguf"] and rows[0]["ppl"] == "12.5"
    assert list(rows[0])[: len(QUALITY_COLUMNS)] == list(QUALITY_COLUMNS)
    assert "| a.gguf |" in gguf_bench("--store", str(path), "export", "last-quality", "-o", "md").stdout
    # the sweep still exports as before: 'last' is the newest sweep, and its own prefix finds it
    for run in ("last", "20261130T10"):
        sweep = gguf_bench("--store", str(path), "export", run, "-o", "csv")
        assert sweep.returncode == 0 and export.read_csv(sweep.stdout)[0]["decode_tps"] == "9.5", sweep.stderr
    for args, needle in ((["20261130T110000-qual1", "-o", "summary"], "a quality run exports as csv, json, jsonl, md"),
                         (["20261130T1", "-o", "csv"], "ambiguous (a sweep and a quality run match)")):
        refused = gguf_bench("--store", str(path), "export", *args)
        assert refused.returncode == 2 and needle in refused.stderr and len(refused.stderr.splitlines()) == 1
    history = gguf_bench("--store", str(path), "history").stdout
    assert "20261130T100000-sweep1" in history
    assert any(line.startswith("20261130T110000-qual1") and "a.gguf,b.gguf" in line for line in history.splitlines())
