"""The inspector's GPU line shows the doctor's facts: llama.cpp's backends and devices, the GPUs seen, the fix.

The first test runs the real doctor on this machine (CPU build); the second replays an RTX 4060's NVML readings
(a TEST DOUBLE: this machine has no NVIDIA GPU) beside this CPU-only build.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from html import escape
from pathlib import Path

import pytest

from app.doctor.report import install_command
from app.gui.panels.gpu_facts import CHECKING
from app.telemetry import nvml
from app.telemetry.llama_build import installed_gpu_backends
from tests.telemetry.nvml_replay import replay

pytestmark = pytest.mark.heavy  # the repack probe's child process


@pytest.fixture(autouse=True)
def _real_nvml() -> Iterator[None]:
    nvml.set_nvml_module(None)
    yield
    nvml.set_nvml_module(None)


def opened(qtbot) -> object:  # noqa: ANN001 - pytest-qt's qtbot
    from app.gui.main_window import MainWindow

    win = MainWindow()
    qtbot.addWidget(win)
    # the doctor runs on the hardware task thread: nothing is shown before its result is delivered
    assert win.hardware.gpu_facts.text() == CHECKING and win.hardware.doctor is None
    win.show()
    qtbot.waitUntil(lambda: win.hardware.ready and not win.tasks.pending, timeout=30_000)
    return win


def close(win) -> None:  # noqa: ANN001
    win.close()
    gc.collect()


def test_the_gpu_line_shows_this_machine(qtbot, gui_data_dir: Path) -> None:  # noqa: ANN001
    win = opened(qtbot)
    try:
        facts, report = win.hardware.gpu_facts, win.hardware.doctor
        assert report is not None and "CPU" in report.llama.backends
        assert facts.isVisible() and facts.parent() is win.inspector
        text = facts.text()
        assert "llama.cpp: " + ", ".join(report.llama.backends) in text and "GPUs: " in text
        assert "ggml backend registry" in facts.toolTip() and "GPUs on this machine" in facts.toolTip()
        if installed_gpu_backends() == [] and not report.gpus.nvidia:
            assert "install-gpu.sh" not in text
            assert not any("rebuild llama-cpp-python" in m for m in win.messages.messages())
    finally:
        close(win)


def test_an_nvidia_gpu_beside_a_cpu_build_shows_the_fix(qtbot, gui_data_dir: Path) -> None:  # noqa: ANN001
    if "CUDA" in (installed_gpu_backends() or []):
        pytest.skip("this llama.cpp has CUDA")
    nvml.set_nvml_module(replay("rtx4060_laptop_linux"))
    win = opened(qtbot)
    try:
        text = win.hardware.gpu_facts.text()
        assert "GPUs: NVIDIA GeForce RTX 4060 Laptop GPU" in text
        assert f"<code>{escape(install_command('cuda'))}</code>" in text  # selectable, to copy
        notes = [m for m in win.messages.messages() if "rebuild llama-cpp-python with cuda" in m]
        assert len(notes) == 1 and "install-gpu.sh cuda" in notes[0]
    finally:
        close(win)
