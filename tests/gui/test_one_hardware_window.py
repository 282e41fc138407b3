"""Issue #52 item 2 in the window: its hardware list offers this machine's GPU by the rule ``predict`` and ``choose``
take (:meth:`Machine.profile_for`), first, as the default, and this CPU as the CPU. Before, the window matched a
detected GPU by name only and took an 8 GB RTX 3060 for the 12 GB card.

The NVIDIA GPUs are TEST DOUBLES: NVML's readings replayed from ``tests/telemetry/recorded`` (no GPU here); the
window, its machine scan and its answers are the real ones.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.gui.hardware_profiles import CPU_LABEL
from app.predict.machine import same_hardware
from app.telemetry import nvml
from tests.gui.conftest import wait_for
from tests.telemetry.nvml_replay import replay

pytestmark = pytest.mark.heavy  # the real window's background jobs and the repack probe's child process


@pytest.fixture(autouse=True)
def _real_nvml_after() -> Iterator[None]:
    yield
    nvml.set_nvml_module(None)


@pytest.mark.parametrize(("recording", "gpu_name"), [("rtx3060_8gb_linux", "RTX 3060 8GB"),
                                                      ("nvidia_l4_linux", "NVIDIA L4 (from NVML)")])
def test_the_windows_list_offers_the_gpu_predict_and_choose_take(qtbot, gui_data_dir: Path,  # noqa: ANN001
                                                                 recording: str, gpu_name: str) -> None:
    from app.gui.main_window import MainWindow

    nvml.set_nvml_module(replay(recording))
    win = MainWindow()
    qtbot.addWidget(win)
    win.show()
    try:
        qtbot.waitUntil(lambda: win.hardware.ready and not win.tasks.pending, timeout=30_000)
        wait_for(lambda: win.predictor.expectations.machine.here)  # the window's answers' machine is loaded
        machine = win.predictor.expectations.machine
        combo = win.inspector.profile_combo
        labels = [combo.itemText(i) for i in range(combo.count())]
        detected = [label for label in labels if label.startswith("Detected GPU")]
        assert detected == [f"Detected GPU: {gpu_name}"] and labels[0] == detected[0], labels
        shown = win.inspector.current_profile()  # the default: what "this" (or no --hw) means
        assert shown == machine.profile_for("this") == machine.profile_for(None), (shown, machine.gpu)
        assert machine.is_this(shown)
        assert win.inspector.select_profile(CPU_LABEL)
        assert same_hardware(win.inspector.current_profile(), machine.profile_for("CPU"))
        if recording == "nvidia_l4_linux":  # said once, in the message area
            assert any("its figures are from NVML" in m for m in win.messages.messages())
    finally:
        win.close()
        gc.collect()
