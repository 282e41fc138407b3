"""Where the workbench reads which CPU it runs on: /proc/cpuinfo, or a stand-in named by ``GGUF_WORKBENCH_CPUINFO``.

The CPU's name and flags decide what the workbench calls "this CPU" (rows, fits, profiles), which compute peaks it
derives and which extra buffer types it expects llama.cpp to repack weights into. Developers' machines are of one
kind at a time (an AMD EPYC without AMX, an Intel Xeon with it), so the suite runs the tests that read these facts a
second time as the other kind would see them: ``GGUF_WORKBENCH_CPUINFO`` names a /proc/cpuinfo snapshot of that
CPU (``tests/data/cpuinfo/``). It is a TEST HOOK: only the facts read here change; llama.cpp itself still runs on
the real CPU (a crash only AMX has comes from the crash double, ``GGUF_WORKBENCH_TEST_DOUBLE=amx-crash``).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

#: The environment variable naming a /proc/cpuinfo stand-in (tests only).
CPUINFO_ENV = "GGUF_WORKBENCH_CPUINFO"
PROC_CPUINFO = Path("/proc/cpuinfo")
#: A cpuinfo file is a few KB per CPU; far more is not one.
MAX_CPUINFO_BYTES = 4 * 2**20


def cpuinfo_path() -> Path:
    """The cpuinfo file to read: the stand-in ``GGUF_WORKBENCH_CPUINFO`` names, else /proc/cpuinfo."""
    override = os.environ.get(CPUINFO_ENV, "").strip()
    return Path(override) if override else PROC_CPUINFO


def identity_overridden() -> bool:
    """Whether a stand-in CPU identity is in force (``GGUF_WORKBENCH_CPUINFO`` set)."""
    return bool(os.environ.get(CPUINFO_ENV, "").strip())


def read_cpuinfo(path: Path | None = None) -> str | None:
    """The cpuinfo text (bounded), None when there is none to read (not Linux, or the file is missing)."""
    p = path or cpuinfo_path()
    try:
        if not stat.S_ISREG(os.stat(p).st_mode):  # a FIFO named by the variable would block the open for ever
            return None
        with open(p, "rb") as f:
            return f.read(MAX_CPUINFO_BYTES).decode("utf-8", errors="replace")
    except (OSError, ValueError):  # ValueError: a NUL in the path
        return None
