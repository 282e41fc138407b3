"""Expected figures on this machine learn only from trustworthy stored rows (issue #27): ok, stable, not taken on a
busy machine, at the thread count the prediction is for. A real SQLite results store; no model is loaded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.predict.answer import Machine, _inputs
from app.predict.machine_fit.calibration_fit import MachineFit
from app.predict.machine_fit.store_efficiency import StoreCalibration, efficiency_from_rows, row_threads, threads_for
from app.predict.profiles import cpu_profile
from app.predict.settings import PredictSettings
from app.results.fields import BUSY_OTHER_CPU_PCT, taken_while_busy
from app.results.row_types import ResultRow
from app.results.store import ResultStore
from engines.base import resolve_n_threads

CPU = cpu_profile("CPU: X", bandwidth_gbps=20.0, gflops=100.0, ram_bytes=2**34)


def _row(i: int, frac: float, **kw: Any) -> ResultRow:
    """A stored row of a.gguf on CPU X at 2 threads, its achieved fractions both ``frac``."""
    row = {"test_index": i, "status": "ok", "model_filename": "a.gguf", "cpu_info": "X", "gpu_info": "",
           "backends": "CPU", "n_threads": 2, "n_threads_effective": 2, "unstable": 0, "host_other_cpu_pct": 3.0,
           "decode_achieved_frac": frac, "prefill_achieved_frac": frac}
    row.update(kw)
    return ResultRow.from_mapping(row)


#: quiet and old rows (no business recorded) are learnt from; unstable, busy and other thread counts are not
ROWS = [
    _row(0, 0.5),
    _row(1, 0.7, host_other_cpu_pct=None),  # a row from before the column: unknown, kept
    _row(2, 0.1, unstable=1),
    _row(3, 0.1, host_other_cpu_pct=80.0),  # others kept most of a CPU busy
    _row(4, 0.05, n_threads=1, n_threads_effective=1),
    _row(5, 0.9, status="failed"),
]


def _store(tmp_path: Path, rows: list[ResultRow]) -> ResultStore:
    store = ResultStore(tmp_path / "results.sqlite3")
    store.begin_run("r1")
    for r in rows:
        store.add_result("r1", r)
    return store


def test_unstable_busy_and_other_thread_rows_are_left_out_and_the_source_says_so(tmp_path: Path) -> None:
    with _store(tmp_path, [ResultRow.from_mapping({k: v for k, v in r.to_mapping().items() if v is not None})
                           for r in ROWS]) as store:
        calib = StoreCalibration(store, "X", "")
    eff, source = calib("CPU", "b.gguf", n_threads=2)
    assert eff is not None and eff.decode == pytest.approx(0.6) and eff.prefill == pytest.approx(0.6)
    assert source == ("2 rows (other types) of a.gguf at 2 threads; 2 unstable/busy rows and 1 row at other "
                      "thread counts left out")
    eff, source = calib("CPU", "b.gguf", n_threads=1)  # the -t 1 row alone
    assert eff is not None and eff.decode == pytest.approx(0.05)
    assert source == "1 row (other types) of a.gguf at 1 thread; 2 rows at other thread counts left out"


def test_without_a_usable_row_there_is_no_efficiency_and_the_reason_is_named(tmp_path: Path) -> None:
    with _store(tmp_path, [ROWS[2], ROWS[3]]) as store:
        calib = StoreCalibration(store, "X", "")
    assert calib("CPU", "b.gguf", n_threads=2) == (None, "")
    assert calib.why_none("CPU", "b.gguf", n_threads=2) == (
        "no stable, quiet rows of other models on CPU at 2 threads (2 unstable/busy rows left out)")
    assert calib.why_none("CPU", "b.gguf", n_threads=3).endswith("at 3 threads")  # nothing there at all


def test_same_type_rows_are_still_preferred_among_the_trusted(tmp_path: Path) -> None:
    rows = [*ROWS, _row(6, 0.95, model_filename="c.gguf", model_ftype="Q8_0"),
            _row(7, 0.2, model_filename="c.gguf", model_ftype="Q8_0", unstable=1)]
    with _store(tmp_path, rows) as store:
        eff, source = StoreCalibration(store, "X", "")("CPU", "b.gguf", "Q8_0", n_threads=2)
    assert eff is not None and eff.decode == pytest.approx(0.95)
    assert source == "1 row (same type Q8_0) of c.gguf at 2 threads; 1 unstable/busy row left out"


def test_the_default_thread_count_is_the_engines_for_n_threads_0() -> None:
    """None (and -t 0) mean the count a default run uses; a row's n_threads 0 without n_threads_effective (rows
    from before that column) is that count too, and one with neither setting is taken as a default run."""
    every = resolve_n_threads(0)
    assert threads_for(None) == threads_for(0) == every
    assert row_threads(ResultRow(n_threads=0, n_threads_effective=None)) == every
    assert row_threads(ResultRow(n_threads=3)) == 3 and row_threads(ResultRow(n_threads=0, n_threads_effective=5)) == 5
    assert row_threads(ResultRow()) == every
    old = ResultRow(status="ok", n_threads=0, decode_achieved_frac=0.4, prefill_achieved_frac=0.3)
    eff = efficiency_from_rows([old, old.replace(n_threads=every + 1, decode_achieved_frac=0.9)])
    assert eff is not None and (eff.decode, eff.prefill) == (0.4, 0.3)
    assert efficiency_from_rows([old], n_threads=every + 1) is None


def test_efficiency_from_rows_keeps_only_trustworthy_rows() -> None:
    eff = efficiency_from_rows(ROWS, n_threads=2)
    assert eff is not None and eff.decode == pytest.approx(0.6)


def test_busy_means_over_the_one_threshold_and_unknown_is_not_busy() -> None:
    assert taken_while_busy(ResultRow(host_other_cpu_pct=BUSY_OTHER_CPU_PCT)) is False
    assert taken_while_busy(ResultRow(host_other_cpu_pct=BUSY_OTHER_CPU_PCT + 0.1)) is True
    assert taken_while_busy(ResultRow(host_other_cpu_pct=None)) is None and taken_while_busy(ResultRow()) is None
    assert taken_while_busy(ResultRow(host_other_cpu_pct=float("nan"))) is None


def test_expected_sources_pass_the_thread_count_and_keep_the_fit_to_the_default(tmp_path: Path) -> None:
    """The stored rows are looked up at the thread count asked; this machine's fit (which does not record its
    threads: calibrate runs at the default count) is used at the default count only."""
    with _store(tmp_path, ROWS) as store:
        calib = StoreCalibration(store, "X", "")
    from tests.predict.samples import make_facts

    fit = MachineFit("X", "", "b", "2026-11-30", {"CPU": {}}, n_points=0)
    machine = Machine(cpu=CPU, cpu_model="X", fit=fit, efficiency=calib)
    facts = make_facts(path="/m/b.gguf")

    def inputs(n_threads: int = 0):  # noqa: ANN202 - the answer's chosen sources (answer._inputs)
        return _inputs(machine, CPU, facts, PredictSettings(n_ctx=512, n_threads=n_threads), True)

    one = inputs(1)
    assert one.efficiency is not None and one.efficiency.decode == pytest.approx(0.05)
    assert one.fitted is None and "at 1 thread" in one.efficiency_source
    assert inputs().fitted is not None
    odd = inputs(resolve_n_threads(0) + 7)
    assert odd.efficiency is None and "at " in odd.efficiency_note and odd.fitted is None
