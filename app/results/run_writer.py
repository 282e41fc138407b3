"""Which process writes a run, and whether it is still alive: a run left 'running' by a killed process.

A run records its writer's process id and *scope*: the host name plus, on Linux, the boot id and the PID
namespace. A process id means something only within the same scope, so a run is judged only by a process
of the same scope; any doubt (another host, a reboot, a container, Windows) counts as alive.
"""

from __future__ import annotations

import functools
import os
import socket
from pathlib import Path

#: Status of a run whose writer ended without finishing it (killed, or crashed outside the worker).
INTERRUPTED = "interrupted"
#: What stores before schema version 2 called an interrupted run (read as INTERRUPTED; migration 2 renames it).
LEGACY_ABORTED = "aborted"


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return ""


def _pid_namespace() -> str:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


@functools.cache
def writer_scope() -> str:
    """Where this process's id is meaningful: host, boot and PID namespace (the last two on Linux)."""
    return "|".join((socket.gethostname(), _read("/proc/sys/kernel/random/boot_id"), _pid_namespace()))


def pid_alive(pid: int) -> bool:
    """False only when no process ``pid`` exists in this scope; True when alive or when it cannot be told."""
    if os.name != "posix" or pid <= 0:
        return True  # on Windows os.kill(pid, 0) would terminate the process: never guess there
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: alive, another user's
        return True
    return True


def is_abandoned(pid: int | None, scope: str | None) -> bool:
    """A 'running' run's writer is certainly gone: same scope, not this process, and no such process."""
    return pid is not None and scope == writer_scope() and pid != os.getpid() and not pid_alive(pid)
