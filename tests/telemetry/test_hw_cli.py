"""``gguf-bench hw``: the probe's sources and the compute figures it names, and a busy cached probe not sticking."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.telemetry import cpu_probe
from app.telemetry.hw_report import format_hw_report
from tests.cli_helpers import gguf_bench

pytestmark = pytest.mark.heavy  # the CLI in a subprocess

# a record as a probe taken during a compile leaves it: busy, and absurdly low (so any new reading is better)
BUSY_RECORD = {"bandwidth_gbps": 0.001, "gflops_f32": 0.001, "n_threads": 2, "measured_at": "2026-01-01T00:00:00+00:00",
               "busy": True, "bandwidth_source": {"measured_at": "2026-01-01T00:00:00+00:00", "passes": 3,
                                                  "busy": True, "others_cpus": 1.6, "load_1min": 3.1}}


def _write_busy_record(data_dir: Path) -> None:
    record = {"schema": cpu_probe.CACHE_SCHEMA, "probes": {cpu_probe.cache_key(): BUSY_RECORD}}
    (data_dir / cpu_probe.CACHE_FILE).write_text(json.dumps(record))


def test_hw_names_each_compute_figure_and_its_source(isolated_data_dir: Path) -> None:
    proc = gguf_bench("hw", "--json")
    assert proc.returncode == 0, proc.stderr
    d = json.loads(proc.stdout)
    src = d["cpu_probe"]["bandwidth_source"]
    assert src["passes"] == 3 and src["busy"] in (True, False) and src["measured_at"] == d["cpu_probe"]["measured_at"]
    compute = d["cpu_compute"]
    assert compute["int8"]["kind"] in ("int8 dot peak", "measured roofline")
    assert compute["fma"]["kind"] in ("FMA peak", "measured roofline")
    assert compute["int8"]["tflops"] >= compute["fma"]["tflops"] > 0
    text = format_hw_report(d)  # the text `gguf-bench hw` prints for this report
    assert "quantized weights:" in text and compute["int8"]["kind"] in text and "best of 3 passes" in text
    assert ("BUSY: others used" in text) == src["busy"]


def test_a_busy_cached_probe_is_measured_again_by_hw(isolated_data_dir: Path) -> None:
    _write_busy_record(isolated_data_dir)
    cached = json.loads(gguf_bench("hw", "--json", "--no-probe").stdout)
    assert cached["cpu_probe"] is None  # --no-probe reads nothing
    d = json.loads(gguf_bench("hw", "--json").stdout)["cpu_probe"]
    assert not d["cached"] and d["measured_at"] != BUSY_RECORD["measured_at"]
    assert d["bandwidth_gbps"] > 0.001 and d["gflops_f32"] > 0.001  # the bad figures were replaced
    _write_busy_record(isolated_data_dir)
    again = json.loads(gguf_bench("hw", "--json", "--reprobe").stdout)["cpu_probe"]
    assert again["bandwidth_gbps"] > 0.001 and again["measured_at"] != BUSY_RECORD["measured_at"]
