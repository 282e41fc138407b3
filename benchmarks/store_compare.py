"""Store reads on a long run (issue #54 item 2): ``compare`` and ``history`` on a store of 200,000 rows.

1. ``gguf-bench compare last`` on one run of N rows (default 200,000: many llama-bench files imported as one run):
   wall time and peak RSS of the whole command, beside the same compare made from the rows read whole (the way it
   was read before: every row decoded and kept), in child processes taken in turn, each ``--repeat`` times.
   Target: seconds, and a peak RSS that does not grow with the rows.
2. ``gguf-bench history`` on the same store marked as an older schema (version 2): peak RSS beside a copy of the
   store into memory (how an older store was read before). Target: no copy (RSS well under the file's size).

    python benchmarks/store_compare.py [--rows 200000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.bench_import.load import read_bench_files, store_import  # noqa: E402
from app.results.store import ResultStore  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED = ROOT / "tests" / "results" / "data" / "llama_bench" / "smollm2_cpu.json"
WHOLE_ROWS = """
import sys
import app.cli.main  # the command line's start, as the command pays it
from app.compare.entries import load_run
from app.compare.figures import compare_table
from app.results.store import ResultStore
with ResultStore.open_read_only(sys.argv[1]) as store:
    items = load_run(store, store.resolve_run_id("last"))
print(compare_table(items, lambda _p: None).text())
"""
COPY_INTO_MEMORY = """
import sqlite3, sys
import app.cli.main  # the command line's start, as the command pays it
db = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
copy = sqlite3.connect(":memory:")
db.backup(copy)
print(copy.execute("SELECT COUNT(*) FROM results").fetchone()[0])
"""


def make_store(path: Path, n_rows: int) -> None:
    """One imported run, its published rows repeated to ``n_rows`` over four models and five prompt lengths."""
    with ResultStore(path) as store:
        store_import(store, read_bench_files([PUBLISHED]), "published")
    db = sqlite3.connect(path)
    run_id, = db.execute("SELECT run_id FROM runs").fetchone()
    rows = [json.loads(t) for (t,) in db.execute("SELECT row_json FROM results ORDER BY test_index")]
    db.execute("DELETE FROM results")

    def made() -> object:
        for i in range(n_rows):
            row = dict(rows[i % len(rows)], test_index=i, model_filename=f"m{i % 4}.gguf", n_repetitions=3)
            if row.get("n_prompt"):
                row["n_prompt"] = 128 * (1 + i % 5)
            yield run_id, i, "ok", "2026-12-07T00:00:00Z", json.dumps(row)

    db.executemany("INSERT INTO results (run_id, test_index, status, created_at, row_json) VALUES (?, ?, ?, ?, ?)",
                   made())
    db.commit()
    db.close()


def measure(argv: list[str], env: dict[str, str]) -> tuple[float, float, float]:
    """(wall s, peak RSS MiB, CPU s: user + system) of one child process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=ROOT)
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    err = proc.stderr.read().decode() if proc.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {err}")
    return wall, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime  # ru_maxrss: KiB on Linux


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "results.sqlite3"
        env = {**os.environ, "GGUF_WORKBENCH_DATA_DIR": str(Path(tmp) / "data")}
        t0 = time.perf_counter()
        make_store(store, args.rows)
        size_mib = store.stat().st_size / 2**20
        print(f"store: one run of {args.rows:,} rows, {size_mib:,.0f} MiB (made in {time.perf_counter() - t0:.0f} s)")
        cli = [sys.executable, "-m", "app.cli.main", "--store", str(store)]
        cases = {"compare last (streamed fields)": cli + ["compare", "last"],
                 "the same from rows read whole": [sys.executable, "-c", WHOLE_ROWS, str(store)]}
        got: dict[str, list[tuple[float, float, float]]] = {name: [] for name in cases}
        for _ in range(args.repeat):  # in turn: a machine busy for a while slows both alike
            for name, argv in cases.items():
                got[name].append(measure(argv, env))
        table(got, "read")
        new, old = (got[name] for name in cases)
        ratios = [statistics.median(r[k] for r in old) / statistics.median(r[k] for r in new) for k in range(3)]
        print(f"\nratio, whole rows ÷ streamed: wall {ratios[0]:.1f}×, peak RSS {ratios[1]:.1f}×, CPU {ratios[2]:.1f}×")
        print(f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs: wall times grow with it, ratios less)")

        db = sqlite3.connect(store)
        db.execute("PRAGMA user_version = 2")  # an older schema: read through views now, copied into memory before
        db.close()
        older = {"history (older schema, read in place)": cli + ["history"],
                 "a copy of it in memory": [sys.executable, "-c", COPY_INTO_MEMORY, str(store)]}
        got = {name: [measure(argv, env) for _ in range(args.repeat)] for name, argv in older.items()}
        table(got, f"older store ({size_mib:,.0f} MiB)")


def table(got: dict[str, list[tuple[float, float, float]]], what: str) -> None:
    print(f"\n| {what} | wall s | peak RSS MiB | CPU s |\n|---|---:|---:|---:|")
    for name, runs in got.items():
        wall, rss, cpu = (statistics.median(r[k] for r in runs) for k in range(3))
        print(f"| {name} | {wall:.1f} | {rss:,.0f} | {cpu:.1f} |")


if __name__ == "__main__":
    main()
