"""Issue #54 item 2: a store a user edited by hand (or another program wrote) is read value by value: each bad value
is one warning line naming the field, and the commands go on (exit 0), never a traceback (exit 70 before for a NULL
created_at in history, 10^400 in compare and a row nested 100,000 deep in export). Also: run id prefixes are not
SQL LIKE patterns, an older store is read without a copy in memory, and a store this user cannot write is read."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.cli.main import main
from app.results.store import ResultStore
from tests.results.test_store_schema import V0_FILE

LLAMA_BENCH_CSV = Path(__file__).parent / "data" / "llama_bench" / "smollm2_cpu.csv"


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """A store with two imported runs of three rows each (the newest is ``last``)."""
    path = tmp_path / "r.sqlite3"
    for _ in range(2):
        assert main(["--store", str(path), "import", str(LLAMA_BENCH_CSV)]) == 0
    return path


def _edit(path: Path, *statements: str, loosen: bool = False) -> None:
    """Change the store behind its back; ``loosen``: drop the NOT NULL of runs.created_at first, as a hand-made
    table might lack it."""
    db = sqlite3.connect(path)
    if loosen:
        db.execute("PRAGMA writable_schema = ON")
        db.execute("UPDATE sqlite_master SET sql = replace(sql, 'created_at TEXT NOT NULL', 'created_at TEXT') "
                   "WHERE name = 'runs'")
        db.commit()
        db.close()
        db = sqlite3.connect(path)
    for statement in statements:
        db.execute(statement)
    db.commit()
    db.close()


def _edit_rows(path: Path, change: str, indexes: tuple[int, ...] = (0, 1, 2)) -> None:
    """Rewrite the newest run's rows (those of ``indexes``) as JSON text whose ``decode_tps`` is ``change``."""
    db = sqlite3.connect(path)
    rows = db.execute("SELECT run_id, test_index, row_json FROM results WHERE run_id = "
                      "(SELECT run_id FROM runs ORDER BY created_at DESC, rowid DESC LIMIT 1)").fetchall()
    for run_id, index, text in rows:
        if index not in indexes:
            continue
        data = json.loads(text)
        data["decode_tps"] = 1.0
        db.execute("UPDATE results SET row_json = ? WHERE run_id = ? AND test_index = ?",
                   (json.dumps(data).replace('"decode_tps": 1.0', f'"decode_tps": {change}'), run_id, index))
    db.commit()
    db.close()


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, list[str]]:
    rc = main(argv)
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "internal error" not in err, err
    return rc, out, err.strip().splitlines()


@pytest.mark.parametrize(("statements", "loosen", "says"), [
    (["UPDATE runs SET n_tests = 'abc'"], False, "n_tests: 2 stored values are not a count (the first: 'abc'); "
                                                 "read as 0"),
    (["UPDATE runs SET status = 'weird'"], False, "status: 2 stored values are not a status this program writes "
                                                  "(the first: 'weird'); read as 'unknown'"),
    (["UPDATE runs SET created_at = '2026' || char(0) || '-12'"], False,
     "created_at: 2 stored values hold control characters (the first: '2026\\x00-12'); shown escaped"),
    (["UPDATE runs SET created_at = NULL"], True, "created_at: 2 stored values are NULL; read as empty"),
])
def test_a_hand_edited_runs_table_is_one_line_per_bad_value(store: Path, statements: list[str], loosen: bool,
                                                             says: str, capsys: pytest.CaptureFixture[str]) -> None:
    _edit(store, *statements, loosen=loosen)
    for command in (["history"], ["history", "--json"]):
        rc, out, err = _run(["--store", str(store), *command], capsys)
        assert rc == 0 and err == [f"warning: {store}: {says}"], err
        assert out.count("import: smollm2_cpu.csv") == 2
    rc, out, _err = _run(["--store", str(store), "compare", "last"], capsys)
    assert rc == 0 and "SmolLM2" in out


def test_an_unknown_row_status_is_said_and_read_as_empty(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _edit(store, "UPDATE results SET row_json = json_set(row_json, '$.status', 'weird')")
    rc, out, err = _run(["--store", str(store), "export", "last", "-o", "csv"], capsys)
    assert rc == 0 and err == [f"warning: {store}: result row field status: 3 stored values are not a status this "
                               "program writes (the first: 'weird'); read as empty"]
    assert len(out.splitlines()) == 4  # the header and the three rows: none lost


@pytest.mark.parametrize(("change", "says"), [
    ("1" + "0" * 400, "are past any figure a run records (the first: an integer of about 401 digits)"),
    ("1e400", "are not a finite number (the first: inf)"),
    ("NaN", "are not a finite number (the first: nan)"),
])
def test_a_stored_number_no_run_measures_is_read_as_empty(store: Path, change: str, says: str,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    _edit_rows(store, change)
    line = f"warning: {store}: result row field decode_tps: 3 stored values {says}; read as empty"
    for command in (["compare", "last"], ["compare", "last", "--json"], ["export", "last", "-o", "json"]):
        rc, out, err = _run(["--store", str(store), *command], capsys)
        assert rc == 0 and err == [line], err
        assert "NaN" not in out and "Infinity" not in out


def test_a_row_nested_100000_deep_is_skipped_in_one_line(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _edit_rows(store, "[" * 100_000 + "]" * 100_000 + ', "x": 1', indexes=(1,))
    for command in (["export", "last", "-o", "csv"], ["compare", "last"]):
        rc, out, err = _run(["--store", str(store), *command], capsys)
        assert rc == 0 and len(err) == 1 and "result rows: a stored value is nested too deeply to read" in err[0]
        assert err[0].endswith("its row skipped") and len(err[0]) < 400, err
    rc, out, _err = _run(["--store", str(store), "export", "last", "-o", "csv"], capsys)
    assert len(out.splitlines()) == 3  # the header and the two rows that can be read


def test_run_id_prefixes_are_not_like_patterns(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for pattern in ("%", "_", "2026%", "____"):
        rc, out, err = _run(["--store", str(store), "export", pattern], capsys)
        assert rc == 2 and out == "" and err == [f"gguf-bench: error: {store}: no run {pattern!r} (see `gguf-bench "
                                                 "history`)"], err
    with ResultStore.open_read_only(store) as opened:
        (newest,) = opened.run_ids("last")
        assert opened.run_ids(newest) == [newest] and opened.run_ids(newest[:-1] + "%") == []


def test_an_older_store_is_read_in_place_not_copied_into_memory(tmp_path: Path) -> None:
    """Schema 0 read as the newest schema through TEMP views: the connection reads the file itself."""
    path = tmp_path / "results.sqlite3"
    for suffix in ("", "-wal", "-shm"):
        shutil.copy(f"{V0_FILE}{suffix}", f"{path}{suffix}")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with ResultStore.open_read_only(path) as opened:
        files = {name: file for _seq, name, file in opened.query("PRAGMA database_list")}
        assert Path(files["main"]) == path.resolve()  # a copy in memory has no file
        runs = opened.runs()
        assert [r.status for r in runs] == ["interrupted" if r.status == "interrupted" else r.status for r in runs]
        assert len(runs) == 3 and opened.query("SELECT COUNT(*) FROM quality") == [(0,)]
        assert opened.rows(runs[1].run_id)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


@pytest.fixture
def unwritable_store() -> Iterator[Path]:
    """A store (WAL mode, merged: no log beside it) in a folder others can read but not write (not under pytest's
    own tmp folder, which only its owner can enter)."""
    folder = Path(tempfile.mkdtemp(prefix="gguf-ro-"))
    try:
        path = folder / "r.sqlite3"
        with ResultStore(path) as made:
            made.begin_run("run-1", sweep_name="mine")
            made.finish_run("run-1", "finished")
        assert not Path(f"{path}-wal").exists()
        path.chmod(0o644)
        folder.chmod(0o755)
        yield path
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.heavy  # a child process under another user
def test_a_store_this_user_cannot_write_is_still_read(unwritable_store: Path) -> None:
    """As root the child drops to nobody; as anyone else the folder is made read-only. It said 'attempt to write a
    readonly database'."""
    folder = str(unwritable_store.parent)
    drop = "os.setgid(65534); os.setuid(65534)" if os.geteuid() == 0 else f"os.chmod({folder!r}, 0o555)"
    code = ("import os, sys\nfrom app.cli.main import main\nimport app.cli.read_cmds, app.results.store\n"
            f"{drop}\nsys.exit(main(['--store', {str(unwritable_store)!r}, 'history']))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "GGUF_WORKBENCH_DATA_DIR": str(unwritable_store.parent / "data")})
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert "run-1" in proc.stdout and "mine" in proc.stdout
    assert sorted(p.name for p in unwritable_store.parent.iterdir()) == ["r.sqlite3"]


def test_a_pending_line_nested_too_deeply_is_skipped(tmp_path: Path) -> None:
    """The side file of kept writes is replayed when the store opens for writing: a line nested 100,000 deep is
    counted unreadable, not a RecursionError out of the sweep's start."""
    path = tmp_path / "r.sqlite3"
    Path(f"{path}.pending-rows.jsonl").write_text("[" * 100_000 + "]" * 100_000 + "\n")
    messages: list[str] = []
    with ResultStore.recover(path, warn=messages.append) as store:
        assert store.runs() == []
    assert messages == [f"{path}: stored 0 results kept in r.sqlite3.pending-rows.jsonl; skipped 1 unreadable lines"]
