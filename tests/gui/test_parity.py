"""The same sweep from the CLI and from the window (offscreen) gives the same rows, column for column.

Both set the sweep up through app.run.sweep_setup: the same machine record, the same predicted columns, and
a failed row for every test of a model whose GGUF header cannot be read. Only what a measurement or the clock
decides may differ (timings, rates, memory readings, the run id).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.results.store import ResultStore
from app.run.plan import SweepSpec
from tests.cli_helpers import gguf_bench
from tests.gguf_synth import write_not_gguf

pytestmark = pytest.mark.heavy  # the real model, the real window's background jobs and the CLI in a subprocess

#: Columns a measurement or the clock decides: they differ between any two runs of the same sweep.
MEASURED_PREFIXES = (
    "avg_", "stddev_", "samples_", "ttft_", "prefill_", "decode_", "tpot_", "itl_", "llama_prefill", "llama_decode",
    "warmup_", "mem_", "vram_", "power_", "energy_", "effective_bandwidth", "unstable",
)
MEASURED = {"run_id", "test_time", "load_ms", "decode_achieved_frac", "prefill_achieved_frac"}


def _comparable(row: dict[str, object]) -> dict[str, object]:
    return {k: v for k, v in row.items() if k not in MEASURED and not k.startswith(MEASURED_PREFIXES)}


def test_cli_and_window_give_the_same_rows(window, qtbot, smollm2_path: Path, tmp_path: Path) -> None:
    bad = write_not_gguf(tmp_path / "broken.gguf")
    models = [str(smollm2_path), str(bad)]
    cli_store = tmp_path / "cli.sqlite3"
    proc = gguf_bench("--store", str(cli_store), "run", "-m", models[0], "-m", models[1], "-p", "16", "-n", "4",
                      "-t", "1", "-r", "1", "-o", "json", "-q", timeout=300)
    assert proc.returncode == 1, proc.stderr  # 1: some tests failed (the unreadable model's)
    cli_rows = json.loads(proc.stdout)
    with ResultStore(cli_store) as store:
        stored = [r.to_mapping() for r in store.rows(store.resolve_run_id("last"))]
    assert stored == cli_rows, "the CLI prints what it stores"

    tests = SweepSpec(models=models, n_prompt=[16], n_gen=[4], n_threads=[1], repetitions=1).tests()
    with qtbot.waitSignal(window.sweepFinished, timeout=300_000) as blocker:
        window.start_tests(tests, "custom")
    outcome = blocker.args[0]
    with ResultStore(window.bridge.store_path) as store:
        gui_rows = [r.to_mapping() for r in store.rows(outcome.run_id)]

    assert [r["status"] for r in cli_rows] == ["ok", "failed"]
    assert [r["status"] for r in gui_rows] == ["ok", "failed"]
    assert gui_rows[1]["error"] == cli_rows[1]["error"] and str(bad) in cli_rows[1]["error"]
    assert gui_rows[1]["error_kind"] == cli_rows[1]["error_kind"] == "load_error"
    for cli_row, gui_row in zip(cli_rows, gui_rows, strict=True):
        assert sorted(cli_row) == sorted(gui_row), "the same columns"
        assert _comparable(gui_row) == _comparable(cli_row)
    assert cli_rows[0]["pred_decode_ceiling_tps"] == gui_rows[0]["pred_decode_ceiling_tps"] is not None
