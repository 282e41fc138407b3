"""First run: an empty library says where GGUF files come from and where it looked; with the built-in model the
quick sweep is one click away; an NVIDIA GPU (replayed NVML readings) beside this CPU-only build gets the fix."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.telemetry import nvml
from app.telemetry.llama_build import installed_gpu_backends
from tests.gguf_synth import write_synthetic_gguf
from tests.gui.conftest import wait_for
from tests.telemetry.nvml_replay import replay

NO_MODEL = "No GGUF model yet."


@pytest.fixture
def empty_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home folder with no model caches, and no built-in model package."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for var in ("HF_HUB_CACHE", "HF_HOME", "OLLAMA_MODELS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr("app.gui.main_window.default_model_path", lambda: None)
    return home


@pytest.fixture(autouse=True)
def _real_nvml() -> Iterator[None]:
    nvml.set_nvml_module(None)
    yield
    nvml.set_nvml_module(None)


def open_window(qtbot) -> object:  # noqa: ANN001 - pytest-qt's qtbot
    from app.gui.main_window import MainWindow

    win = MainWindow()
    qtbot.addWidget(win)
    win.show()
    qtbot.waitUntil(lambda: win.hardware.ready and not win.tasks.pending, timeout=30_000)
    return win


def close(win) -> None:  # noqa: ANN001
    if win.bridge.running:
        win.bridge.cancel()
        win.bridge.wait(5.0)
    win.close()
    gc.collect()


@pytest.mark.heavy  # the repack probe's child process
def test_without_any_model_the_window_says_where_models_come_from_and_where_it_looked(
        qtbot, gui_data_dir: Path, empty_home: Path) -> None:  # noqa: ANN001
    win = open_window(qtbot)
    try:
        wait_for(lambda: any(m.startswith(NO_MODEL) for m in win.messages.messages()), 10)
        text = next(m for m in win.messages.messages() if m.startswith(NO_MODEL))
        for source in ("Hugging Face", "LM Studio", "Ollama", "huggingface-cli download", "Ctrl+O"):
            assert source in text
        for folder in ("~/.cache/huggingface/hub", "~/.lmstudio/models", "~/.cache/lm-studio/models",
                       "~/.ollama/models"):
            assert f"{folder} (" in text
        assert win.library.paths() == []
    finally:
        close(win)


@pytest.mark.heavy  # the repack probe's child process
def test_a_first_run_finds_what_lm_studio_downloaded(qtbot, gui_data_dir: Path, empty_home: Path) -> None:  # noqa: ANN001
    folder = empty_home / ".lmstudio" / "models" / "someone" / "tiny-GGUF"
    folder.mkdir(parents=True)
    model = write_synthetic_gguf(folder / "tiny.Q8_0.gguf")
    win = open_window(qtbot)
    try:
        wait_for(lambda: win.library.paths() == [str(model.resolve())], 10)
        assert not any(m.startswith(NO_MODEL) for m in win.messages.messages())
    finally:
        close(win)


@pytest.mark.heavy  # the real model and the real window's background jobs
def test_with_the_built_in_model_the_quick_sweep_is_one_click_away(qtbot, window, smollm2_path: Path) -> None:  # noqa: ANN001
    assert window.library.selected_paths() == [str(smollm2_path.resolve())]
    assert window.editor.preset.currentText() == "quick"
    assert not any(m.startswith(NO_MODEL) for m in window.messages.messages())
    window.editor.run_button.click()  # the one click: the quick sweep starts on the built-in model
    assert window.sweeps.busy
    planned = list(window.session.tests.values())
    assert planned and all(t.model_path == str(smollm2_path.resolve()) and t.n_prompt == 128
                           and t.n_gen == 32 and t.repetitions == 3 for t in planned)
    qtbot.waitUntil(lambda: window.bridge.running, timeout=10_000)
    with qtbot.waitSignal(window.sweepFinished, timeout=30_000):
        window.cancel_sweep()


@pytest.mark.heavy  # the repack probe's child process
def test_an_nvidia_gpu_with_a_cpu_only_build_gets_the_install_command(qtbot, gui_data_dir: Path) -> None:  # noqa: ANN001
    assert installed_gpu_backends() == [], "this suite runs on the CPU build of llama-cpp-python"
    nvml.set_nvml_module(replay("rtx4060_laptop_linux"))
    win = open_window(qtbot)
    try:
        notes = [m for m in win.messages.messages() if "CPU-only" in m]
        assert len(notes) == 1
        assert "NVIDIA GeForce RTX 4060 Laptop GPU" in notes[0] and "packaging/install-gpu.sh cuda" in notes[0]
    finally:
        close(win)


@pytest.mark.heavy  # the repack probe's child process
def test_no_gpu_note_without_an_nvidia_gpu(qtbot, gui_data_dir: Path) -> None:  # noqa: ANN001
    nvml.set_nvml_module(replay("rtx4060_laptop_linux", init_error="LibraryNotFound"))
    win = open_window(qtbot)
    try:
        assert not any("CPU-only" in m for m in win.messages.messages())
    finally:
        close(win)


def test_gpu_backends_are_read_from_the_library_names(tmp_path: Path) -> None:
    for name in ("libggml-base.so", "libggml-cpu.so.0", "libllama.so"):
        (tmp_path / name).touch()
    assert installed_gpu_backends(tmp_path) == []
    (tmp_path / "libggml-cuda.so").touch()
    (tmp_path / "libggml-vulkan.so.0").touch()
    (tmp_path / "ggml-hip.dll").touch()
    assert installed_gpu_backends(tmp_path) == ["CUDA", "ROCm", "Vulkan"]
    assert installed_gpu_backends(tmp_path / "absent") is None
