"""Sweep → Calibrate this machine…: runs off the GUI thread with progress, saves the fit, and cancels cleanly."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication, QMessageBox, QPushButton, QWidget

from app.calibrate.ladder import CalibrateOptions, ladder_models
from app.gui.calibrate_action import CalibrateAction
from app.predict.machine_fit.calibration_store import load_fit
from app.telemetry.machine import scan_machine

pytestmark = pytest.mark.heavy  # the real window's background jobs and the repack probe's child process

TINY = dataclasses.replace(CalibrateOptions.quick(), types=("F16",))


def _answer_the_question(button: QMessageBox.StandardButton) -> None:
    """Press ``button`` on the confirmation box once it shows, as a user would."""
    def press() -> None:
        box = QApplication.activeModalWidget()
        if isinstance(box, QMessageBox):
            box.button(button).click()
        else:
            QTimer.singleShot(50, press)

    QTimer.singleShot(50, press)


def _action(qtbot, notes: list[tuple[str, str]], calibrated: list[bool]) -> CalibrateAction:  # noqa: ANN001
    parent = QWidget()
    qtbot.addWidget(parent)
    parent.show()
    return CalibrateAction(parent, lambda text, level: notes.append((text, level)), options=TINY,
                           on_calibrated=lambda: calibrated.append(True))


@pytest.mark.slow
def test_calibrate_shows_progress_and_saves_the_fit(qtbot, gui_data_dir: Path) -> None:  # noqa: ANN001
    notes: list[tuple[str, str]] = []
    calibrated: list[bool] = []
    action = _action(qtbot, notes, calibrated)
    labels: list[str] = []
    action.progress.connect(labels.append)
    _answer_the_question(QMessageBox.StandardButton.No)
    action.action.trigger()  # the menu asks first: No starts nothing
    assert not action.running and action.dialog is None
    _answer_the_question(QMessageBox.StandardButton.Yes)
    action.action.trigger()
    assert action.running and action.dialog is not None and not action.action.isEnabled()
    qtbot.waitUntil(lambda: bool(notes), timeout=240_000)
    assert action.wait(10)
    n_tests = sum(len(m.tests) for m in ladder_models(TINY))
    assert notes[-1][1] == "info" and notes[-1][0].startswith(f"Calibrated on {n_tests} ladder points"), notes
    assert "CPU decode median error" in notes[-1][0] and calibrated == [True]
    assert any(t.startswith(f"test 1/{n_tests}") for t in labels) and any(t.startswith("writing model") for t in labels)
    assert action._progress.fraction() > 0.5  # the bar moved with the tests
    assert action.dialog is None and action.action.isEnabled()
    scan = scan_machine()
    assert load_fit(scan.cpu_model, scan.gpu_info()) is not None


def test_cancel_keeps_the_previous_fit(qtbot, gui_data_dir: Path) -> None:  # noqa: ANN001
    notes: list[tuple[str, str]] = []
    calibrated: list[bool] = []
    action = _action(qtbot, notes, calibrated)
    def press_cancel(text: str) -> None:  # the dialog's Cancel button, as a user would, once the tests run
        if text.startswith("test ") and action.dialog is not None:
            action.dialog.findChild(QPushButton).click()

    action.progress.connect(press_cancel)
    action.start()
    qtbot.waitUntil(lambda: bool(notes), timeout=120_000)
    assert action.wait(10)
    assert notes == [("Calibration cancelled; the previous fit is unchanged.", "warning")] and calibrated == []
    scan = scan_machine()
    assert load_fit(scan.cpu_model, scan.gpu_info()) is None


def test_the_window_has_the_action_in_the_sweep_menu(window) -> None:  # noqa: ANN001
    menus = {m.title(): m for m in (a.menu() for a in window.menuBar().actions()) if m is not None}
    assert window.calibrate.action in menus["&Sweep"].actions()
    assert window.calibrate.action.text() == "Calibrate this machine…" and not window.calibrate.running
