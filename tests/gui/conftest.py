"""GUI test setup: offscreen Qt, an isolated data dir with a known CPU probe, and a window fixture."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import gc  # noqa: E402
import time  # noqa: E402
from collections.abc import Iterator  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

DATA = Path(__file__).resolve().parent / "data"
RECORDED = DATA / "smollm2_small_sweep.jsonl"
#: The CPU the recorded sweep ran on (its rows' ``cpu_info``; ``hw_profile`` is "CPU: " and this).
RECORDED_CPU = "AMD EPYC"


def recorded_on_this_cpu() -> list:
    """The recorded sweep as if it ran on this machine's CPU: its rows' ``cpu_info`` and CPU ``hw_profile`` say this
    CPU's name (app.telemetry.host.cpu_model, a stand-in's where GGUF_WORKBENCH_CPUINFO names one). For tests that
    mean "rows measured here": on any other CPU than the recording's they would be another machine's rows."""
    from dataclasses import replace

    from app.gui.bridge import read_event_stream
    from app.results.row_types import ResultRow
    from app.telemetry.host import cpu_model

    here = cpu_model()
    mapping = {"cpu_info": {RECORDED_CPU: here}, "hw_profile": {f"CPU: {RECORDED_CPU}": f"CPU: {here}"}}

    def moved(row: ResultRow) -> ResultRow:
        return ResultRow.from_mapping({k: mapping.get(k, {}).get(v, v) if isinstance(v, str) else v
                                       for k, v in row.to_mapping().items()})

    return [replace(e, row=moved(e.row)) if getattr(e, "row", None) else e for e in read_event_stream(RECORDED)]


@pytest.fixture
def gui_data_dir(isolated_data_dir: Path) -> Path:
    """The per-test data dir (GGUF_WORKBENCH_DATA_DIR) with a CPU probe already cached: no 2 s probe per window."""
    from app.telemetry.cpu_probe import CpuProbe, save_probe

    save_probe(CpuProbe(bandwidth_gbps=20.0, gflops_f32=200.0, n_threads=2, measured_at="test fixture"))
    return isolated_data_dir


@pytest.fixture
def window(qtbot, gui_data_dir: Path) -> Iterator[object]:  # noqa: ANN001 - qtbot is pytest-qt's
    """The main window, shown offscreen, once hardware detection and the default model's facts are in."""
    from app.gui.main_window import MainWindow

    win = MainWindow()
    qtbot.addWidget(win)
    win.resize(1400, 900)
    win.show()
    qtbot.waitUntil(lambda: win.hardware.ready and not win.tasks.pending, timeout=30_000)
    yield win
    if win.bridge.running:
        win.bridge.cancel()
        win.bridge.wait(5.0)
    win.close()
    gc.collect()  # on the GUI thread: Qt objects must never be collected from a background thread


def wait_for(predicate, timeout_s: float = 30.0) -> None:  # noqa: ANN001
    """Spin the Qt event loop until ``predicate()`` holds."""
    from PySide6.QtWidgets import QApplication

    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        QApplication.processEvents()
        time.sleep(0.005)


@pytest.fixture
def run() -> object:
    """The recorded sweep (RECORDED) as a finished LiveRun: what the plot tests draw, no model needed."""
    from app.gui.bridge import read_event_stream
    from app.run.live import LiveRun

    s = LiveRun("recorded")
    s.extend(read_event_stream(RECORDED))
    s.mark_finished(cancelled=s.cancelled)
    return s
