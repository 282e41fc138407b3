"""Sweep → Calibrate this machine…: ``gguf-bench calibrate`` from the window, off the GUI thread.

The calibration (synthetic ladder through the worker, the store's runs, the fit) runs on a plain thread that never
touches a widget; its progress lines reach a progress dialog through a signal, and the dialog's Cancel stops the
worker (nothing is saved). The outcome is one line in the window's message area and the calibration result window
(:mod:`app.gui.calibration_view`), which Sweep → Last calibration… opens again later from the saved fit.
"""

from __future__ import annotations

import math
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QMessageBox, QWidget

from app.gui.long_work import PROGRESS_STEPS, LongWork, long_work_dialog
from app.results.store import ResultStore

if TYPE_CHECKING:  # the calibration machinery (the ladder writes GGUFs with gguf, numpy) is imported when used
    from app.calibrate import MachineFit
    from app.calibrate.ladder import CalibrateOptions, Calibration, CalibrationResult
    from app.gui.calibration_view import CalibrationView

Notify = Callable[[str, str], None]  # (text, level "info" | "warning" | "error")
#: where the window remembers how long its last calibration took (seconds): the next one's honest estimate
LAST_WALL_KEY = "calibrate/last_wall_s"
#: a load average beyond the CPUs' count by this much: the machine is busy, a calibration takes longer
BUSY_LOAD_MARGIN = 0.5


def result_line(result: CalibrationResult) -> str:
    """"Calibrated: decode median error 3.1% (band ±8%), prefill ...; expected figures now come from this fit"."""
    parts = [f"{backend} {phase} median error {pf.median_error * 100:.1f}% (band ±{pf.band_frac * 100:.0f}%)"
             for backend, phases in result.fit.fits.items() for phase, pf in phases.items()]
    return (f"Calibrated on {result.n_ladder_points} ladder points and {result.n_store_points} stored runs: "
            f"{'; '.join(parts)}. Expected figures for this machine now come from this fit.")


_TEST = re.compile(r"^test (\d+)/(\d+)")
_PASS = re.compile(r"^pass (\d+) of (\d+)")
_AGAIN = re.compile(r"^measuring (\d+) disturbed tests again")


@dataclass
class CalibrationProgress:
    """Where a calibration is, from its progress lines: the pass over the ladder, the test in it, the second look
    at disturbed tests; the share done (the ladder's passes count 95 %, the second look the rest) and the time
    left at the pace so far."""

    passes: int = 1
    pass_no: int = 1
    test: int = 0
    n_tests: int = 0
    second_look: bool = False
    started_s: float = 0.0

    def read(self, line: str) -> None:
        if m := _PASS.match(line):
            self.pass_no, self.passes, self.test = int(m.group(1)), int(m.group(2)), 0
        elif m := _AGAIN.match(line):
            self.second_look, self.test, self.n_tests = True, 0, int(m.group(1))
        elif m := _TEST.match(line):
            self.test, self.n_tests = int(m.group(1)), int(m.group(2))
            if not self.started_s:
                self.started_s = time.monotonic()

    def fraction(self) -> float:
        if not self.n_tests:
            return 0.0
        if self.second_look:
            return 0.95 + 0.05 * (self.test - 1) / self.n_tests
        return 0.95 * ((self.pass_no - 1) * self.n_tests + self.test - 1) / (self.passes * self.n_tests)

    def percent(self) -> int:
        """The share done in whole percent, as the bar shows it (Qt's bar rounds down): the title says the same."""
        return math.floor(self.fraction() * 100 + 1e-9)

    def bar_value(self, steps: int) -> int:
        """The bar's value out of ``steps`` (its text is value × 100 ÷ steps, rounded down: :meth:`percent`)."""
        return min(math.floor(self.fraction() * steps + 1e-9), steps)

    def left_s(self, now_s: float | None = None) -> float | None:
        frac = self.fraction()
        if frac < 0.03 or not self.started_s:
            return None
        elapsed = (now_s or time.monotonic()) - self.started_s
        return max(elapsed / frac - elapsed, 0.0)

    def text(self, line: str) -> str:
        """The dialog's label: what runs, the share done and the time left."""
        if not self.n_tests:
            return f"Calibrating this machine…\n{line}"
        where = (f"second look at {self.n_tests} disturbed tests: {self.test}/{self.n_tests}" if self.second_look
                 else f"pass {self.pass_no} of {self.passes} over the ladder: test {self.test}/{self.n_tests}")
        left = self.left_s()
        eta = "" if left is None else f", about {max(round(left / 60), 1)} min left at the pace so far"
        return f"Calibrating this machine… {self.percent()} %{eta}\n{where}\n{line}"


class CalibrateAction(LongWork):
    """The menu actions (calibrate; show the last calibration), the progress dialog, the calibration thread and
    the result window."""

    progress = Signal(str)
    done = Signal(object, object)  # CalibrationResult | None, BaseException | None
    loaded = Signal(object)  # saved_calibration()'s (fit | None, path, problem | None), or the exception it raised

    def __init__(self, parent: QWidget, notify: Notify, *, options: CalibrateOptions | None = None,
                 store_path: str | Path | None = None, on_calibrated: Callable[[], None] | None = None,
                 settings: Any = None) -> None:
        super().__init__(parent)
        self._parent = parent
        self._notify = notify
        self._options = options
        self.store_path = store_path
        self.on_calibrated = on_calibrated
        self.settings = settings  # a gui Settings: how long the last calibration took here
        self.action = QAction("Calibrate this machine…", parent)
        self.action.setStatusTip("Fit this machine's decode and prefill speeds from small synthetic models (minutes; "
                                 "longer on a busy machine), for expected figures of any model")
        self.action.triggered.connect(lambda _checked=False: self.start(confirm=True))
        self.last_action = QAction("Last calibration…", parent)
        self.last_action.setStatusTip("This machine's calibration: each backend and phase's error, and how far the "
                                      "fit is from each point it was fitted on")
        self.last_action.triggered.connect(lambda _checked=False: self.show_last())
        self.last_result: CalibrationResult | None = None  # this session's last calibration
        self.view: CalibrationView | None = None
        self._progress = CalibrationProgress()
        self._calibration: Calibration | None = None
        self.progress.connect(self._on_progress)
        self.done.connect(self._on_done)
        self.loaded.connect(self._on_loaded)

    @property
    def options(self) -> CalibrateOptions:
        """The ladder's options (the defaults unless given): made when first asked, so that the window's start does
        not import the calibration machinery."""
        if self._options is None:
            from app.calibrate.ladder import CalibrateOptions

            self._options = CalibrateOptions()
        return self._options

    def start(self, confirm: bool = False) -> None:
        """Open the progress dialog and start calibrating (a second start while one runs does nothing); with
        ``confirm`` (the menu), ask first: it keeps the machine busy for minutes."""
        if self.running:
            return
        if confirm and QMessageBox.question(
                self._parent, "Calibrate this machine",
                f"Calibrating measures small synthetic models through llama.cpp. {self.duration_text()} Close other "
                "programs for figures you can trust. Your stored results are kept, and Cancel leaves the previous "
                "fit as it was.\n\nStart now?") != QMessageBox.StandardButton.Yes:
            return
        from app.calibrate.ladder import Calibration

        self._calibration = Calibration(self.options, progress=self.progress.emit)
        self._progress = CalibrationProgress(passes=self.options.passes)
        self.dialog = long_work_dialog(self._parent, "Calibrate", "Calibrating this machine…", self.cancel)
        self.action.setEnabled(False)
        self.start_thread(self._work, "calibrate", self._calibration)

    def duration_text(self, load_1min: float | None = None, n_cpus: int | None = None) -> str:
        """How long it will take, honestly: the last calibration's time here where the window remembers one (no
        figure otherwise: it depends on the machine), and whether the machine is busy now (its load average beyond
        its CPUs), which makes it longer; the progress window gives the time left at the pace it sees."""
        last = None
        if self.settings is not None:
            try:
                last = float(self.settings.value(LAST_WALL_KEY, 0) or 0) or None
            except (TypeError, ValueError):
                last = None
        text = (f"The last calibration here took {max(round(last / 60), 1)} min." if last else
                "It takes minutes: how many depends on this machine and on what else runs on it.")
        if load_1min is None:
            try:
                load_1min = os.getloadavg()[0]
            except (AttributeError, OSError):  # no load average (Windows)
                load_1min = None
        n_cpus = n_cpus or os.cpu_count() or 1
        if load_1min is not None and load_1min > n_cpus + BUSY_LOAD_MARGIN:
            text += (f" This machine is busy now (load {load_1min:.1f} on {n_cpus} CPU threads): it will take "
                     "longer, and its figures may be slower than the machine is.")
        return text + " The progress window estimates the time left as it goes."

    def cancel(self) -> None:
        """Stop the calibration (safe when none runs); the previous fit stays."""
        if self._calibration is not None:
            self._calibration.cancel()


    def _work(self, calibration: Calibration) -> None:
        try:
            with ResultStore.recover(self.store_path) as store:  # a connection belongs to the thread opening it
                calibration.store = store
                result = calibration.run()
        except BaseException as e:  # noqa: BLE001 - every failure is shown in the window
            self.done.emit(None, e)
            return
        self.done.emit(result, None)

    def _on_progress(self, text: str) -> None:
        self._progress.read(text)
        if self.dialog is not None:
            self.dialog.setLabelText(self._progress.text(text))
            self.dialog.setValue(self._progress.bar_value(PROGRESS_STEPS))
            self.dialog.adjustSize()

    def _on_done(self, result: CalibrationResult | None, error: BaseException | None) -> None:
        self.close_dialog()
        self.action.setEnabled(True)
        self._calibration = None
        from app.calibrate.ladder import CalibrationCancelled

        if isinstance(error, CalibrationCancelled):
            self._notify("Calibration cancelled; the previous fit is unchanged.", "warning")
        elif error is not None:
            self._notify(f"Calibration failed: {error}", "error")
        elif result is not None:
            if self.settings is not None:
                self.settings.set_value(LAST_WALL_KEY, round(result.wall_s, 1))
            self._notify(result_line(result), "info")
            self.last_result = result
            self.show_result(result)
            if self.on_calibrated is not None:
                self.on_calibrated()

    def _result_view(self) -> CalibrationView:
        if self.view is None:
            from app.gui.calibration_view import CalibrationView

            self.view = CalibrationView(self._parent)
        return self.view

    def show_result(self, result: CalibrationResult) -> CalibrationView:
        """The result window with a calibration that has just run."""
        view = self._result_view()
        view.show_fit(result.fit, result.path, f"Calibrated on {result.n_ladder_points} ladder points and "
                      f"{result.n_store_points} stored runs in {result.wall_s:.0f} s.")
        return view

    def show_last(self) -> None:
        """Sweep → Last calibration…: this session's calibration, else the saved fit (read off the GUI thread: the
        machine scan that names it may ask the GPU driver), else one line saying there is none."""
        if self.last_result is not None:
            self.show_result(self.last_result)
            return

        def read() -> None:
            from app.calibrate.ladder import saved_calibration

            try:
                found: tuple[MachineFit | None, Path, str | None] | Exception = saved_calibration()
            except Exception as e:  # noqa: BLE001 - shown as one line
                found = e
            self.loaded.emit(found)

        threading.Thread(target=read, name="last-calibration", daemon=True).start()

    def _on_loaded(self, found: tuple[MachineFit | None, Path, str | None] | BaseException) -> None:
        if isinstance(found, BaseException):
            self._notify(f"The saved calibration cannot be read: {found}", "error")
            return
        fit, path, problem = found
        if problem is not None:
            self._notify(problem, "warning")
        elif fit is None:
            self._notify("Not calibrated yet: Sweep → Calibrate this machine… fits this machine's speeds "
                         "(a few minutes).", "info")
        else:
            self._result_view().show_fit(fit, path)
