"""Each row records how much CPU other processes used while its repetitions were timed (``host_other_cpu_pct``),
and rows taken on a busy machine teach the expected figures nothing (issue #27)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from app.predict.machine_fit.store_efficiency import StoreCalibration
from app.results import export
from app.results.fields import BUSY_OTHER_CPU_PCT, FIELDS
from app.results.store import ResultStore
from app.telemetry.cpu_load import MIN_TEST_WINDOW_S, LoadSources, LoadWindow, others_cpu_pct
from tests.cli_helpers import gguf_bench


def _replay(busy_s: list[float | None], own_s: list[float], wall_s: list[float]) -> LoadSources:
    """Recorded readings, start then stop (a test double for the OS's counters)."""
    it = {"busy": iter(busy_s), "own": iter(own_s), "wall": iter(wall_s)}
    return LoadSources(busy_s=lambda: next(it["busy"]), own_s=lambda: next(it["own"]),
                       wall_s=lambda: next(it["wall"]), load_1min=lambda: 0.0)


def test_others_cpu_is_all_cpus_busy_time_less_the_workers_own_over_the_window() -> None:
    # all CPUs busy 3.0 s over a 2 s window, 2.0 s of it the worker's: others kept half a CPU busy
    reading = LoadWindow(_replay([100.0, 103.0], [10.0, 12.0], [0.0, 2.0])).start().stop()
    assert others_cpu_pct(reading) == pytest.approx(50.0)
    # the worker alone: nothing for others (never negative when the counters' rounding crosses)
    assert others_cpu_pct(LoadWindow(_replay([0.0, 1.99], [0.0, 2.0], [0.0, 1.0])).start().stop()) == 0.0


def test_a_window_too_short_or_without_cpu_times_records_nothing() -> None:
    short = LoadWindow(_replay([0.0, 0.4], [0.0, 0.1], [0.0, MIN_TEST_WINDOW_S / 2])).start().stop()
    assert others_cpu_pct(short) is None
    assert others_cpu_pct(LoadWindow(_replay([None, None], [0.0, 1.0], [0.0, 1.0])).start().stop()) is None


SPIN = "import time\nend = time.monotonic() + 120\nwhile time.monotonic() < end:\n    pass\n"


@pytest.mark.heavy  # the real model in a worker and the CLI in a subprocess
def test_rows_taken_beside_busy_processes_say_so_and_are_not_learnt_from(smollm2_path: Path, tmp_path: Path) -> None:
    """Two spinning processes beside a one-thread run: every row long enough to tell records others' CPU over the
    busy line, and the stored-row efficiency leaves those rows out, saying so."""
    store_path = tmp_path / "results.sqlite3"
    spinners = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(2)]
    try:
        proc = gguf_bench("--store", str(store_path), "run", "-m", str(smollm2_path), "-p", "64", "-n", "48",
                          "-r", "3", "-t", "1", "-o", "csv", "-q")
    finally:
        for p in spinners:
            p.kill()
            p.wait()
    assert proc.returncode == 0, proc.stderr
    header = proc.stdout.splitlines()[0].split(",")
    # appended after n_tensors_overridden (issue #27): every older column keeps its place, newer ones follow it
    assert header == [f for f in FIELDS if f in header] and "host_other_cpu_pct" in header
    assert header.index("host_other_cpu_pct") == header.index("n_tensors_overridden") + 1
    rows = export.read_csv(proc.stdout)
    assert len(rows) == 1 and rows[0]["status"] == "ok"
    assert float(rows[0]["host_other_cpu_pct"]) > BUSY_OTHER_CPU_PCT, rows[0]["host_other_cpu_pct"]
    with ResultStore(store_path) as store:
        stored = store.recent_rows()
        calib = StoreCalibration(store, str(stored[0].cpu_info), stored[0].gpu_info or "")
    assert calib("CPU", "another.gguf", n_threads=1) == (None, "")
    assert "1 unstable/busy row left out" in calib.why_none("CPU", "another.gguf", n_threads=1)
