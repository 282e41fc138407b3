"""Processes a test starts and kills: the workers a ``gguf-bench`` started, whether one has ended, waiting."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path


def workers_of(parent_pid: int) -> list[int]:
    """The worker processes ``parent_pid`` started (Linux's /proc: their parent and command line)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_bytes().rsplit(b")", 1)[1].split()[1])
            cmdline = (entry / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if ppid == parent_pid and b"app.worker.main" in cmdline:
            found.append(int(entry.name))
    return found


def gone(pid: int) -> bool:
    """Whether process ``pid`` has ended (a zombie, dead but not yet reaped by PID 1, counts as ended)."""
    try:
        return (Path("/proc") / str(pid) / "stat").read_bytes().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X")
    except OSError:
        return True


def wait_for(found: Callable[[], object], timeout_s: float) -> bool:
    """Whether ``found()`` came true within ``timeout_s`` (asked every 50 ms)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if found():
            return True
        time.sleep(0.05)
    return False
