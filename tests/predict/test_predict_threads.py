"""``gguf-bench predict -t N``: the expected figures come from stored rows at N threads, and the output says which
thread count the figures are for (issue #27)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.results.row_types import ResultRow
from app.results.store import ResultStore
from app.telemetry.machine import ProbeMode, scan_machine
from engines.base import resolve_n_threads
from tests.cli_helpers import gguf_bench

pytestmark = pytest.mark.heavy  # the real model and the CLI in a subprocess


def _stored_rows(path: Path) -> None:
    """Rows of another model on this machine: one quiet at 1 thread, one quiet at the default count."""
    scan = scan_machine(ProbeMode.NONE)
    base: dict[str, Any] = {"status": "ok", "model_filename": "other.gguf", "cpu_info": scan.facts["cpu_model"],
                            "gpu_info": scan.gpu_info(), "backends": "CPU", "unstable": 0, "host_other_cpu_pct": 2.0}
    with ResultStore(path) as store:
        store.begin_run("r1")
        store.add_result("r1", ResultRow.from_mapping({
            **base, "test_index": 0, "n_threads": 1, "n_threads_effective": 1,
            "decode_achieved_frac": 0.2, "prefill_achieved_frac": 0.3}))
        every = resolve_n_threads(0)
        store.add_result("r1", ResultRow.from_mapping({
            **base, "test_index": 1, "n_threads": 0, "n_threads_effective": every,
            "decode_achieved_frac": 0.6, "prefill_achieved_frac": 0.7}))


def test_predict_threads_picks_the_rows_at_that_count(smollm2_path: Path, tmp_path: Path) -> None:
    store = tmp_path / "results.sqlite3"
    _stored_rows(store)
    every = resolve_n_threads(0)
    one = json.loads(gguf_bench("--store", str(store), "predict", "-m", str(smollm2_path), "-t", "1",
                                "--json").stdout)
    default = json.loads(gguf_bench("--store", str(store), "predict", "-m", str(smollm2_path), "--json").stdout)
    assert one["n_threads"] == 1 and default["n_threads"] == every
    said = {k: d["decode"]["source_detail"]["detail"] for k, d in (("one", one), ("default", default))}
    assert one["decode"]["kind"] == default["decode"]["kind"] == "efficiency"
    assert said["one"].startswith("stored runs' achieved ÷ ceiling here, times the ceiling: 1 row (other types) of "
                                  "other.gguf at 1 thread")
    assert f"1 row (other types) of other.gguf at {every} thread" in said["default"]
    if every != 1:
        assert "1 row at other thread counts left out" in said["one"]
        # the ceilings are not scaled by the thread count (1 of 2+ threads would halve them; each call may
        # re-probe the bandwidth when the machine is busy, so they agree within a probe's spread, not exactly),
        # and the expected figure is the ceiling times the efficiency of the rows at that count
        assert abs(one["decode_ceiling_tps"] / default["decode_ceiling_tps"] - 1.0) < 0.25
        ratio = ((one["decode"]["value"] / one["decode_ceiling_tps"])
                 / (default["decode"]["value"] / default["decode_ceiling_tps"]))
        assert abs(ratio - 0.2 / 0.6) < 1e-6
        assert "not scaled to 1" in one["threads_note"]


def test_predict_prints_the_thread_count_and_refuses_a_bad_one(smollm2_path: Path) -> None:
    proc = gguf_bench("predict", "-m", str(smollm2_path), "-t", "1")
    assert proc.returncode == 0, proc.stderr
    assert "  threads           1 thread" in proc.stdout
    bad = gguf_bench("predict", "-m", str(smollm2_path), "-t", "-3")
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.strip().splitlines() == [bad.stderr.strip()] and "-t -3" in bad.stderr
