"""Run ``gguf-bench`` as a user would: a real subprocess of this interpreter, or in this process for tests that
need pytest's monkeypatch (a test double of the CPU probe) or capsys."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any


def gguf_bench(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app.cli.main", *args], capture_output=True, text=True,
                          timeout=timeout)


def main_json(command: str, argv: list[str], capsys: Any) -> dict[str, Any]:
    """``gguf-bench COMMAND ARGV... --json`` run in this process: its JSON document (the exit status must be 0)."""
    from app.cli.main import main

    rc = main([command, *argv, "--json"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    doc: dict[str, Any] = json.loads(out)
    return doc
