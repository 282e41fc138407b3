"""Runs left 'running' by a process that died are marked 'interrupted' when a store next opens; live ones are not."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from app.results.run_writer import INTERRUPTED, is_abandoned, pid_alive, writer_scope
from app.results.store import ResultStore

pytestmark = pytest.mark.heavy  # a worker and a subprocess

WRITER = """
import sys
from app.results.row_types import ResultRow
from app.results.store import ResultStore
store = ResultStore(sys.argv[1])
store.begin_run("run-child", sweep_name="quick")
store.add_result("run-child", ResultRow(test_index=0, status="ok", model_filename="m.gguf"))
print("begun", flush=True)
sys.stdin.read()  # until the test kills us
"""


def _status(path: Path, run_id: str) -> str:
    with ResultStore(path) as store:
        return str(store.run_info(run_id)["status"])


@pytest.mark.skipif(os.name != "posix", reason="process liveness is only checked on POSIX")
def test_a_killed_writers_run_is_interrupted_and_a_live_ones_is_not(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite3"
    child = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline() == "begun\n"
        assert _status(path, "run-child") == "running"  # its writer is alive: left alone
    finally:
        child.kill()
        child.wait(timeout=30)
    with ResultStore(path) as store:
        store.begin_run("run-mine")  # this process's own run: never touched
        store.begin_run("run-elsewhere")
        store._db.execute("UPDATE runs SET writer_pid = ?, writer_scope = 'other-host||' "
                          "WHERE run_id = 'run-elsewhere'", (child.pid,))
        store._db.commit()
    with ResultStore(path) as store:  # opening reads: the dead writer's run is shown interrupted, stored as it was...
        assert store.run_info("run-child")["status"] == INTERRUPTED
        assert store._db.execute("SELECT status FROM runs WHERE run_id = 'run-child'").fetchone() == ("running",)
    with ResultStore.recover(path) as store:  # ...until recovery, the step whatever writes runs takes first
        info = store.run_info("run-child")
        assert (info["status"], info["finished_at"]) == (INTERRUPTED, None)
        assert store.rows("run-child")[0].model_filename == "m.gguf"  # its committed rows are kept
        assert store.run_info("run-mine")["status"] == "running"
        assert store.run_info("run-elsewhere")["status"] == "running"  # same pid, another host: cannot tell
        assert [r.status for r in store.runs()] == ["running", "running", INTERRUPTED]


def test_only_a_dead_process_of_this_scope_counts_as_abandoned() -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait(timeout=30)
    scope = writer_scope()
    assert scope.split("|")[0] == socket.gethostname()
    assert pid_alive(os.getpid()) and pid_alive(os.getppid())
    if os.name == "posix":
        assert not pid_alive(dead.pid) and is_abandoned(dead.pid, scope)
    assert not is_abandoned(os.getpid(), scope)
    assert not is_abandoned(dead.pid, scope + "x")  # another boot or PID namespace
    assert not is_abandoned(None, scope)  # a run from before writers were recorded
