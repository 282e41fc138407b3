"""Run ``gguf-bench`` as a user would: a real subprocess of this interpreter."""

from __future__ import annotations

import subprocess
import sys


def gguf_bench(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app.cli.main", *args], capture_output=True, text=True,
                          timeout=timeout)
