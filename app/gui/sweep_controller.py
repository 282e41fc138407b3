"""The running sweep: start and cancel through the SweepBridge, fold its events into the LiveRun on one 5 Hz timer,
bring the plots up to date, show progress and the time left, and announce notices and failures in plain words.

The sweep thread never touches a widget: it queues events, and :meth:`SweepController.tick` (GUI thread) takes them.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtWidgets import QWidget

from app.gui import theme
from app.gui.bridge import SweepBridge
from app.gui.contention import ContentionWatch
from app.gui.panels.messages import RUN_KEY
from app.gui.panels.sweep_editor import SweepEditor
from app.gui.plots import LivePlots
from app.gui.predictions import PredictionService
from app.gui.qt_compat import settle_heap
from app.results.fields import RowStatus
from app.run.events import Event, FailureKind, ModelLoaded, Notice, TestFailed, WorkerError
from app.run.live import LiveRun, test_label
from app.run.plan import TestSpec
from app.run.session import SweepOutcome

#: The one timer's period: each tick takes the queued events and the plots draw what they brought. New data is drawn
#: within about this plus the worker's 50 ms batching; 5 Hz rather than 10 halves what drawing takes from the
#: measurement on a small machine (a tick's setData and painting of the growing plots, about 3 ms on two cores).
REDRAW_MS = 200
#: After a sweep, the window's full garbage collection (50-80 ms) waits this long, and is skipped if a sweep runs.
IDLE_HEAP_S = 2

#: What a failure means and what to try, by its typed kind (see FailureKind); ``{reason}`` is the message.
FAILURE_ADVICE: dict[str, str] = {
    FailureKind.WORKER_KILLED: ("The benchmark process was killed, probably out of memory ({reason}). The window is "
                                "fine and finished results are kept; try a smaller context or model."),
    FailureKind.OUT_OF_MEMORY: ("Out of memory: {reason}. Try a smaller context, a quantized KV cache (q8_0) or fewer "
                                "GPU layers."),
    FailureKind.LOAD_ERROR: "The model could not be loaded: {reason}",
    FailureKind.WORKER_DIED: "The benchmark process crashed ({reason}). The window is fine; finished results are kept.",
    FailureKind.WORKER_START: "The benchmark process could not start: {reason}",
    FailureKind.STALLED: ("The benchmark process stopped answering, so it was stopped ({reason}). The sweep goes on "
                          "with a fresh one; finished results are kept."),
}

_OUTCOME_WORDS = {"finished": "Sweep finished", "cancelled": "Sweep cancelled", "crashed": "Sweep stopped"}


CONTENTION_EVERY_S = 3.0
PREVIEW_TITLE = "preview"


def plain_reason(reason: str, kind: str = "") -> str:
    """A worker or engine error in plain words, with what to try, chosen by its typed kind."""
    return FAILURE_ADVICE.get(kind, "{reason}").format(reason=reason)


class SweepController(QObject):
    """One sweep at a time, and the session the window shows (a live sweep, a past run or a replay)."""

    finished = Signal(object)  # SweepOutcome, or a str when the sweep could not run
    rowsChanged = Signal(list)  # the session's rows in test order, whenever they change
    cleared = Signal()  # a new session replaced the old one: its rows are gone
    message = Signal(str, str)  # (text, level): level "error" | "warning" | "info"
    keyedMessage = Signal(str, str, str)  # (text, level, key): replaces the shown message of that key
    status = Signal(str)  # a status-bar line
    titleChanged = Signal(str)  # what the results show, e.g. "run 20250101-… (finished)"
    runChanged = Signal()  # another run starts or is shown: the messages about the last one go

    def __init__(self, view: QWidget, plots: LivePlots, editor: SweepEditor, predictor: PredictionService,
                 store_path: str | Path | None = None) -> None:
        super().__init__(view)
        self.view = view
        self.plots = plots
        self.editor = editor
        self.predictor = predictor
        self.session = LiveRun()
        self.selected: set[int] = set()  # test indices highlighted in the plots
        self.bridge = SweepBridge(self, store_path=store_path)
        self.bridge.finished.connect(self._finished)
        self._starting = False  # between start() and the sweep thread's start (plots drawn first)
        self._rows_seen = -1
        self._last_progress: tuple[Any, ...] | None = None
        self._shown_eta: float | None = None
        self.contention = ContentionWatch()
        self._contention_at = 0.0
        self._failed_by_reason: dict[str, list[int]] = {}  # this session's failed tests (numbers) per reason
        self.timer = QTimer(self)
        self.timer.setInterval(REDRAW_MS)
        self.timer.timeout.connect(self.tick)
        self.timer.start()

    @property
    def busy(self) -> bool:
        """A sweep is running or about to start."""
        return self.bridge.running or self._starting

    # --- start and stop ---------------------------------------------------------------------------
    def start(self, tests: list[TestSpec], name: str = "custom") -> str | None:
        """Start a sweep of exactly these tests; returns why nothing started, or None."""
        if self.busy:
            return "a sweep is already running"
        if not tests:
            return "the sweep has no tests"
        self._starting = True
        self.session = LiveRun(name)
        self.session.plan(tests)
        self._reset_view()
        self.runChanged.emit()
        self.titleChanged.emit(f"{name} (running…)")
        self.editor.set_running(True)
        self.editor.progress.setValue(0)
        self.editor.progress.setFormat("starting…")
        theme.set_bar_role(self.editor.progress, None)
        QTimer.singleShot(0, self, lambda: self._launch(tests, name))  # once the empty plots are drawn
        return None

    def preview(self, tests: list[TestSpec]) -> None:
        """Before any run: the plots show the predicted curves of the sweep the editor would run (a session with
        its plan and no results). A live, re-opened or replayed run is never replaced."""
        s = self.session
        if self.busy or s.started or s.rows or s.title not in ("", PREVIEW_TITLE):
            return
        session = LiveRun(PREVIEW_TITLE)
        session.plan(tests)
        self.session = session
        self._reset_view()

    def _launch(self, tests: list[TestSpec], name: str) -> None:
        """Draw the empty plots (which queue their predicted curves), then start the sweep thread: it waits for
        queued background work before the worker starts, so no prediction runs beside a measurement."""
        self.plots.refresh(self.session, self.predictor, self.selected, force=True)
        self._starting = False
        self.bridge.start(tests, sweep_name=name, command="gguf-workbench", facts=dict(self.predictor.facts))

    def cancel(self) -> None:
        if self.bridge.running:
            self.bridge.cancel()
            self.status.emit("Cancelling: the worker is stopped, finished tests are kept…")

    def stop(self, timeout_s: float = 3.0) -> None:
        """On close: cancel a running sweep, wait for its thread a little, stop the timer."""
        if self.bridge.running:
            self.bridge.cancel()
            self.bridge.wait(timeout_s)
        self.timer.stop()

    def _finished(self, outcome: SweepOutcome | str) -> None:
        """The sweep thread ended: its last events, rows and plots, then the window's state; the sweep's end is
        announced with every plot showing all of it."""
        self.tick(force=True)
        self.editor.set_running(False)
        bar = self.editor.progress
        if isinstance(outcome, str):
            self.session.mark_finished()
            self._say(plain_reason(outcome, FailureKind.WORKER_START), "error", "could-not-run")
            bar.setValue(0)
            bar.setFormat("could not run")
            theme.set_bar_role(bar, "bad")
        else:
            self.session.mark_finished(cancelled=outcome.status == "cancelled")
            n_ok = sum(1 for r in outcome.rows if r.status == RowStatus.OK)
            self.status.emit(f"{_OUTCOME_WORDS.get(outcome.status, outcome.status)}: {n_ok} ok, "
                             f"{outcome.n_failed} failed — run {outcome.run_id} saved.")
            self.titleChanged.emit(f"run {outcome.run_id} ({outcome.status})")
            n_tests = max(self.session.n_tests, len(outcome.rows), 1)
            if self.session.cancelled:  # where it stopped, in the warning colour, and said: never a full "done" bar
                bar.setValue(int(1000 * n_ok / n_tests))
                bar.setFormat(f"cancelled after {n_ok} of {n_tests} tests")
                theme.set_bar_role(bar, "warn")
                self._say(f"Sweep cancelled after {n_ok} of {n_tests} tests; the finished ones are kept "
                          f"(run {outcome.run_id}).", "warning", "cancelled")
            else:
                bar.setValue(1000)
                bar.setFormat("done" if outcome.status == "finished" else outcome.status)
                theme.set_bar_role(bar, None if outcome.status == "finished" else "bad")
        self.editor.status.setText("")
        self.finished.emit(outcome)
        QTimer.singleShot(IDLE_HEAP_S * 1000, self, self._settle_heap_if_idle)

    def _settle_heap_if_idle(self) -> None:
        """A full garbage collection once the window has been idle a while after a sweep (not if another runs)."""
        if not self.busy:
            settle_heap()

    # --- what is shown ----------------------------------------------------------------------------
    def show_session(self, session: LiveRun, title: str = "") -> None:
        """Replace what the window shows (a past run, a replayed recording), titled ``title``."""
        self.session = session
        self._reset_view()
        self.runChanged.emit()
        self.tick(force=True)
        if title:
            self.titleChanged.emit(title)

    def highlight(self, test_indices: set[int]) -> None:
        """Highlight these tests in the plots (the table's selection)."""
        self.selected = set(test_indices)
        self.plots.refresh(self.session, self.predictor, self.selected, force=True)

    def _reset_view(self) -> None:
        self._shown_eta = None
        self.selected.clear()
        self._failed_by_reason = {}
        self.plots.reset()
        self._rows_seen = -1
        self.cleared.emit()

    # --- the timer --------------------------------------------------------------------------------
    def tick(self, force: bool = False) -> None:
        """Take the queued events; update the messages, rows, progress and the plots whose inputs changed (every
        plot with ``force``)."""
        events = self.bridge.drain()
        if events:
            self.session.extend(events)
            said = [e for e in events if isinstance(e, _SAID_KINDS)]
            if said:
                self.announce(said)
        if self.session.rows_version != self._rows_seen:
            self._emit_rows()
        if self.bridge.running:
            self._update_progress()
            self._check_contention()
        if force or (self.view.isVisible() and not self._starting):  # starting: _launch draws
            self.plots.refresh(self.session, self.predictor, self.selected, force=force)

    def _emit_rows(self) -> None:
        if self.session.rows_version != self._rows_seen:
            self._rows_seen = self.session.rows_version
            self.rowsChanged.emit(self.session.ordered_rows())

    def announce(self, events: list[Event]) -> None:
        """Notices and failures as messages, in plain words; a model load on the status bar (``_SAYS``)."""
        for e in events:
            for kind, say in _SAYS.items():
                if isinstance(e, kind):
                    say(self, e)
                    break

    def _say(self, text: str, level: str, key: str) -> None:
        """A message about the run shown now: it goes when another run starts or is shown."""
        self.keyedMessage.emit(text, level, f"{RUN_KEY}{key}")

    def _say_notice(self, e: Notice) -> None:
        self._say(e.message, "warning" if e.level != "info" else "info", f"notice:{e.message}")

    def _say_failed(self, e: TestFailed) -> None:
        """One message per reason: tests that fail for the same reason join it ("Tests 1, 2 and 3 failed. …")."""
        reason = plain_reason(e.reason, e.kind)
        numbers = self._failed_by_reason.setdefault(reason, [])
        if e.test_index + 1 not in numbers:
            numbers.append(e.test_index + 1)
        self._say(f"{_tests_phrase(numbers)} failed. {reason}", "error", f"failed:{id(self.session)}:{reason}")

    def _say_worker_error(self, e: WorkerError) -> None:
        if e.kind != FailureKind.CANCELLED:
            self._say(plain_reason(e.message, e.kind), "error", f"worker:{e.message}")

    def _say_loaded(self, e: ModelLoaded) -> None:
        self.status.emit(f"Loaded {os.path.basename(e.model_path)} in {e.load_ms:.0f} ms ({e.backends}).")

    def _check_contention(self) -> None:
        """Every few seconds of a run: warn (once per run) when other processes compete for the CPU or GPU."""
        now = time.monotonic()
        if now - self._contention_at < CONTENTION_EVERY_S:
            return
        self._contention_at = now
        for kind, text in self.contention.check(self.session):
            self._say(text, "warning", f"contention:{kind}")  # a newer warning replaces an older one

    def _update_progress(self) -> None:
        if not self.bridge.running:  # posted by a tick before the sweep ended: the final state stays ("done")
            return
        s = self.session
        frac = s.progress()
        eta = s.eta_s(time.perf_counter_ns())
        # a repaint only when the bar moves a visible step or the estimate a few seconds (each is CPU taken from the
        # measurement on a small machine)
        key = (round(frac, 2), s.current, s.current_rep, None if eta is None else round(eta / 5))
        if key == self._last_progress:
            return
        self._last_progress = key
        bar = self.editor.progress
        bar.setUpdatesEnabled(False)  # QProgressBar.setValue repaints at once (the whole window's dirty region, 6 ms)
        bar.setValue(int(frac * 1000))
        left = "estimating time left" if eta is None else f"~{_duration(eta)} left"
        if eta is not None and self._shown_eta is not None and eta > 1.2 * self._shown_eta + 5:
            left += " (up: the last tests ran slower than the ones before)"  # never a silent jump
        self._shown_eta = eta
        bar.setFormat(f"{s.n_done}/{s.n_tests or '?'} tests — {left}")
        bar.setUpdatesEnabled(True)  # an ordinary update, painted with the rest of the frame
        if s.current is not None and s.current in s.tests:
            t = s.tests[s.current]
            reps = t.repetitions if isinstance(t, TestSpec) else 1
            rep = "warmup" if s.current_rep < 0 else f"rep {s.current_rep + 1}/{reps}"
            self.editor.status.setText(f"test {s.current + 1}: {test_label(t)} — {rep}")


#: The events :meth:`SweepController.announce` shows, and how: one place, so the filter and the wording agree.
_SAYS: dict[type, Callable[[SweepController, Any], None]] = {
    Notice: SweepController._say_notice, TestFailed: SweepController._say_failed,
    WorkerError: SweepController._say_worker_error, ModelLoaded: SweepController._say_loaded,
}
_SAID_KINDS = tuple(_SAYS)  # for isinstance, once: the tick drains events ten times a second


def _tests_phrase(numbers: list[int]) -> str:
    """"Test 3", "Tests 1 and 2", "Tests 1, 2 and 5", "Tests 1, 2, 3 … and 9 (12 tests)"."""
    if len(numbers) == 1:
        return f"Test {numbers[0]}"
    shown = [str(n) for n in numbers]
    if len(shown) > 6:
        return f"Tests {', '.join(shown[:3])} … and {shown[-1]} ({len(shown)} tests)"
    return f"Tests {', '.join(shown[:-1])} and {shown[-1]}"


def _duration(seconds: float) -> str:
    """"45 s", "3 min 20 s", "1 h 05 min"."""
    s = int(round(seconds))
    if s < 90:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"
