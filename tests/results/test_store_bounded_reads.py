"""Issue #54 item 2: a store read is bounded. ``compare`` of a run of 200,000 rows took 125 s and 3.1 GB: every row
was decoded whole and kept. It now reads only the fields its figures use, streamed from SQLite and summed as they
come, so its memory does not grow with the rows (benchmarks/store_compare.py times the 200,000-row case), and the
figures are those of the rows read whole."""

from __future__ import annotations

import json
import sqlite3
import tracemalloc
import typing
from pathlib import Path

import pytest

from app.bench_import.load import read_bench_files, store_import
from app.cli.compare_cmd import compare_runs
from app.compare.entries import TALLY_FIELDS, TalliedValues, load_run, tally_run
from app.compare.figures import compare_table
from app.results.row_types import ResultRow
from app.results.store import ResultStore

LLAMA_BENCH_JSON = Path(__file__).parent / "data" / "llama_bench" / "smollm2_cpu.json"


def _store(path: Path, n_rows: int) -> Path:
    """One imported run, its rows repeated to ``n_rows`` over four models, prompts and repetitions varied."""
    with ResultStore(path) as store:
        store_import(store, read_bench_files([LLAMA_BENCH_JSON]), "published")
    db = sqlite3.connect(path)
    run_id, = db.execute("SELECT run_id FROM runs").fetchone()
    rows = [json.loads(t) for (t,) in db.execute("SELECT row_json FROM results ORDER BY test_index")]
    db.execute("DELETE FROM results")

    def made() -> object:
        for i in range(n_rows):
            row = dict(rows[i % len(rows)], test_index=i, model_filename=f"m{i % 4}.gguf",
                       n_repetitions=2 + i % 3)
            if row.get("n_prompt"):
                row["n_prompt"] = 16 * (1 + i % 5)
            for key in ("decode_tps", "ttft_ms"):
                if row.get(key) is not None:
                    row[key] = row[key] * (1 + (i % 7) / 10)
                    row[f"{key}_stddev"] = row[key] / 20
            yield run_id, i, "ok", "2026-12-07T00:00:00Z", json.dumps(row)

    db.executemany("INSERT INTO results (run_id, test_index, status, created_at, row_json) VALUES (?, ?, ?, ?, ?)",
                   made())
    db.commit()
    db.close()
    return path


def _peak_bytes(path: Path) -> int:
    with ResultStore.open_read_only(path) as store:
        tracemalloc.start()
        try:
            items = compare_runs(store, ["last"])
            compare_table(items, lambda _path: None)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()


def test_compare_takes_memory_per_model_not_per_row(tmp_path: Path) -> None:
    small = _peak_bytes(_store(tmp_path / "small.sqlite3", 100))
    large = _peak_bytes(_store(tmp_path / "large.sqlite3", 1_000))
    assert large < 1.2 * small + 64 * 1024, (small, large)  # whole rows kept: about 10 × small


@pytest.mark.parametrize("n_rows", [3, 600])
def test_the_streamed_figures_are_those_of_the_rows_read_whole(tmp_path: Path, n_rows: int) -> None:
    path = _store(tmp_path / "r.sqlite3", n_rows)
    with ResultStore.open_read_only(path) as store:
        (run_id,) = store.run_ids("last")
        whole, streamed = load_run(store, run_id), tally_run(store, run_id)
    assert [it.label for it in whole] == [it.label for it in streamed] and len(whole) == min(n_rows, 4)
    assert not streamed[0].rows and whole[0].rows
    a, b = compare_table(whole, lambda _p: None), compare_table(streamed, lambda _p: None)
    assert a.prompt == b.prompt and a.lines() == b.lines()
    assert [r.figures for r in a.rows] == [r.figures for r in b.rows]
    assert any(r.figures.decode_noise_rel for r in b.rows) and any(r.figures.ttft_ms for r in b.rows)


def test_the_streamed_fields_are_typed_as_the_row_types_them() -> None:
    """What compare streams by name from the store is held as :class:`TalliedValues`, each field of ResultRow's
    type (a field renamed or retyped in the table fails here), and a window's row gives the same values by
    attribute."""
    row_hints, tallied = typing.get_type_hints(ResultRow), typing.get_type_hints(TalliedValues)
    assert TALLY_FIELDS == tuple(tallied) and {n: row_hints[n] for n in TALLY_FIELDS} == tallied
    row = ResultRow(status="ok", n_prompt=64, decode_tps=41.5, type_k="q8_0", n_threads=4, model_filename="m.gguf")
    assert TalliedValues.of(row) == tuple(row.value(n) for n in TALLY_FIELDS)
