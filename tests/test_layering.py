"""The layer rules of ../shared/ARCHITECTURE.md, checked by import-linter, and the code kept ruff-clean."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.heavy  # a subprocess

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def test_import_contracts_hold() -> None:
    """The layers, the features' independence, no Qt below the GUI, engines stand alone, one module per native
    library (llama_cpp, pynvml, psutil): every contract in pyproject.toml is checked and kept."""
    import tomllib

    n_contracts = len(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"])
    proc = subprocess.run([str(BIN / "lint-imports")], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert n_contracts >= 9 and f"{n_contracts} kept, 0 broken" in proc.stdout


def test_ruff_clean() -> None:
    proc = subprocess.run([str(BIN / "ruff"), "check", "app", "engines", "tests", "benchmarks"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
