"""Faults around the worker lose nothing and hang nothing: real workers on the real small model (-p 8 -n 4 -r 1
-t 1), each test ending with a look at the store."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from app.results import export
from app.results.row_types import Row
from app.results.store import ResultStore
from app.run.events import Event, FailureKind, RepetitionStarted, TestFinished, TestStarted
from app.run.plan import SweepSpec, TestSpec
from app.run.session import SweepSession
from tests.cli_helpers import gguf_bench
from tests.gguf_synth import write_synthetic_gguf

pytestmark = [pytest.mark.heavy,  # the real model in a worker and the CLI in a subprocess
              pytest.mark.skipif(os.name != "posix", reason="signals and process control are POSIX")]


def _tests(model: Path, prompts: list[int]) -> list[TestSpec]:
    spec = SweepSpec(models=[str(model)], n_prompt=prompts, n_gen=[4], n_threads=[1], repetitions=1)
    return spec.tests()


def _session(tests: list[TestSpec], store: ResultStore, **kw: Any) -> SweepSession:
    return SweepSession(tests, store=store, machine={"cpu_model": "test-cpu"}, token_ticks=False, **kw)


def test_a_worker_that_cannot_start_says_why_in_one_line_and_exits_non_zero(
        smollm2_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLAMA_CPP_LIB_PATH", str(tmp_path / "nonexistent"))
    store_path = tmp_path / "r.sqlite3"
    proc = gguf_bench("--store", str(store_path), "run", "-m", str(smollm2_path), "-p", "8", "-n", "4", "-r", "1",
                      "-t", "1", "--no-predict", "-o", "csv", "-q")
    assert proc.returncode == 1, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("gguf-bench: error:")]
    assert len(errors) == 1 and "worker cannot start: llama-cpp-python is not usable" in errors[0], proc.stderr
    assert "Traceback" not in proc.stderr
    with ResultStore(store_path) as store:
        run = store.runs()[0]
        assert (run.status, run.n_ok, run.n_failed) == ("crashed", 0, 0)


def test_a_stopped_worker_is_killed_by_the_watchdog_and_the_sweep_goes_on(smollm2_path: Path, tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "r.sqlite3")
    session = _session(_tests(smollm2_path, [8, 16]), store, stall_timeout_s=2.0)
    stopped: list[int] = []

    def on_event(ev: Event) -> None:
        if isinstance(ev, TestStarted) and not stopped and session.worker_pid:
            stopped.append(session.worker_pid)
            os.kill(session.worker_pid, signal.SIGSTOP)

    t0 = time.monotonic()
    try:
        outcome = session.run(on_event)
        gone = not Path(f"/proc/{stopped[0]}").exists()  # killed and reaped by the watchdog, not left behind
    finally:
        for pid in stopped:  # never leave a stopped process behind, whatever happened
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    assert time.monotonic() - t0 < 60 and gone
    kinds = sorted(str(r.error_kind or r.status) for r in outcome.rows)
    assert kinds == ["ok", FailureKind.STALLED], outcome.rows
    stalled = next(r for r in outcome.rows if r.status == "failed")
    assert stalled.error.startswith("stalled: no event from the worker for 2 s")
    store.close()
    with ResultStore(tmp_path / "r.sqlite3") as again:
        assert [r.status for r in again.rows(outcome.run_id)] == [r.status for r in outcome.rows]
        assert again.run_info(outcome.run_id)["status"] == "finished"


def test_a_model_that_crashes_the_worker_while_loading_fails_with_the_cause_once(
        smollm2_path: Path, tmp_path: Path) -> None:
    bad = write_synthetic_gguf(tmp_path / "layers.gguf", extra_kv={"llama.block_count": 100000})
    tests = _tests(bad, [8, 16]) + _tests(smollm2_path, [8])
    store = ResultStore(tmp_path / "r.sqlite3")
    session = _session(tests, store)
    outcome = session.run()
    store.close()
    first, second, good = outcome.rows
    assert first.status == second.status == "failed" and good.status == "ok"
    assert first.error_kind == second.error_kind == FailureKind.WORKER_DIED
    assert first.error.startswith("worker process was killed by SIGABRT: llama-model.cpp:")
    assert "GGML_ASSERT(hparams.n_layer_all > 0" in first.error
    assert second.error == first.error  # the same cause, without crashing a second worker
    assert session.log_path.read_text(errors="replace").count("GGML_ASSERT(hparams.n_layer_all") == 1
    with ResultStore(tmp_path / "r.sqlite3") as again:
        assert [r.error for r in again.rows(outcome.run_id)] == [first.error, first.error, ""]


def test_a_store_locked_mid_sweep_keeps_every_row(smollm2_path: Path, tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite3"
    store = ResultStore(path, busy_timeout_s=0.1, write_attempts=2, backoff_s=0.01, warn=lambda m: None)
    session = _session(_tests(smollm2_path, [8, 16]), store)
    locker = sqlite3.connect(path, isolation_level=None)
    seen: list[Row] = []

    def on_event(ev: Event) -> None:
        if isinstance(ev, TestStarted) and not locker.in_transaction:
            locker.execute("BEGIN EXCLUSIVE")  # held until the sweep is over
        if isinstance(ev, TestFinished):
            seen.append(ev.row)

    outcome = session.run(on_event)
    assert [r.status for r in seen] == ["ok", "ok"]  # every row still reached the listener (stdout)
    assert store.pending.path.exists() and "database is locked" in store.warnings[0]
    locker.execute("ROLLBACK")
    locker.close()
    store.close()
    with ResultStore.recover(path, warn=lambda m: None) as again:  # the next sweep's or the window's first step
        assert [r.n_prompt for r in again.rows(outcome.run_id)] == [8, 16]
        assert again.run_info(outcome.run_id)["status"] == "finished"
    assert not store.pending.path.exists()


def test_a_killed_cli_leaves_an_interrupted_run_with_its_finished_rows(smollm2_path: Path, tmp_path: Path) -> None:
    store_path = tmp_path / "r.sqlite3"
    cmd = [sys.executable, "-m", "app.cli.main", "--store", str(store_path), "run", "-m", str(smollm2_path),
           "-p", "8,16,24,32,40,48", "-n", "4", "-r", "1", "-t", "1", "--no-predict", "-o", "jsonl", "-q"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        first = json.loads(proc.stdout.readline())  # one finished row streamed: mid-sweep now
        proc.kill()
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    hist = gguf_bench("--store", str(store_path), "history")
    assert hist.returncode == 0, hist.stderr
    line = next(x for x in hist.stdout.splitlines() if x.startswith(first["run_id"]))
    assert line.split()[2] == "interrupted", hist.stdout
    with ResultStore(store_path) as store:
        assert store.run_info(first["run_id"])["status"] == "interrupted"
        rows = store.rows(first["run_id"])
        assert rows[0].n_prompt == 8 and rows[0].status == "ok"
        assert len(rows) < 6


def test_cancelling_many_repetitions_keeps_those_done_as_a_partial_row(smollm2_path: Path, tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "r.sqlite3")
    spec = SweepSpec(models=[str(smollm2_path)], n_prompt=[8], n_gen=[4], n_threads=[1], repetitions=1000)
    session = _session(spec.tests(), store)
    cancelled_at: list[float] = []

    def on_event(ev: Event) -> None:
        if isinstance(ev, RepetitionStarted) and ev.rep >= 3 and not cancelled_at:
            cancelled_at.append(time.monotonic())
            session.cancel()

    outcome = session.run(on_event)
    assert time.monotonic() - cancelled_at[0] < 1.5
    assert outcome.status == "cancelled"
    (row,) = outcome.rows
    done = row.n_repetitions
    assert row.status == "partial" and row.error_kind == FailureKind.CANCELLED
    assert 3 <= done < 1000 and row.error == f"cancelled after {done} of 1000 repetitions"
    assert len(row.samples_ns) == done and row.decode_tps > 0 and row.ttft_ms > 0
    store.close()
    with ResultStore(tmp_path / "r.sqlite3") as again:
        assert [r.status for r in again.rows(outcome.run_id)] == ["partial"]
        assert again.run_info(outcome.run_id)["status"] == "cancelled"


def test_ctrl_c_on_the_cli_keeps_the_partial_row_with_the_usual_columns(smollm2_path: Path, tmp_path: Path) -> None:
    store_path = tmp_path / "r.sqlite3"
    full = gguf_bench("--store", str(store_path), "run", "-m", str(smollm2_path), "-p", "8", "-n", "4", "-r", "1",
                      "-t", "1", "--no-predict", "-o", "csv", "-q")
    proc = subprocess.Popen([sys.executable, "-m", "app.cli.main", "--store", str(store_path), "run", "-m",
                             str(smollm2_path), "-p", "8", "-n", "4", "-r", "1000", "-t", "1", "--no-predict",
                             "-o", "csv"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    for line in proc.stderr:  # the model is loaded: seconds later, repetitions are done (~20 ms each when idle)
        if line.startswith("loaded "):
            break
    time.sleep(4.0)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert out.splitlines()[0] == full.stdout.splitlines()[0]  # the same CSV columns
    (row,) = export.read_csv(out)
    assert row["status"] == "partial" and row["error"].startswith("cancelled after ")
    with ResultStore(store_path) as store:
        assert store.rows(store.resolve_run_id("last"))[0].status == "partial"
