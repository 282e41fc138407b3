"""The chooser's long work: "Make variants…" (``gguf-bench quantize``), "Measure quality…" (``gguf-bench
quality``) and "Measure toward floor…" (``gguf-bench choose --measure``) from its window.

Each dialog checks its inputs through the feature's own plan (app.quantize.plan, app.quality.plan) and shows the
plan's one-line refusal; the feature's session then runs on a plain thread that never touches a widget. Its
events become a label and a share done in Qt-free trackers (:class:`QuantizeProgress`, :class:`QualityProgress`),
sent to a progress dialog through a signal. Cancel kills the worker: finished outputs and stored scores stay,
the output under way is removed by the quantize session.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.choose.chooser import ChooseReport
from app.choose.measure_search import (
    MeasuredAnswer,
    Measurer,
    Step,
    measure_toward_floor,
    notice,
    quality_order,
    step_line,
)
from app.choose.verdicts import DEFAULT_N_GEN, FileChoice
from app.gui.long_work import PROGRESS_STEPS, LongWork, long_work_dialog
from app.gui.theme import set_role
from app.model.gguf_http import is_url
from app.model.lineage import UNQUANTIZED
from app.quality.plan import DEFAULT_N_CTX, DEFAULT_N_TOKENS, MAX_N_TOKENS, QualityPlan, QualitySetupError, plan_quality
from app.quality.session import QualitySession
from app.quantize.plan import QUANT_TYPE_NAMES, QuantizeItem, QuantizeSetupError, output_name, plan_quantize
from app.quantize.session import QuantizeSession
from app.results.fields import RowStatus
from app.results.row_types import QualityRow, QuantizeRow
from app.results.store import ResultStore
from app.run.events import Event, JobProgress, Notice, RepetitionStarted, TestFailed, TestFinished, TestStarted
from app.run.job_client import new_job_log
from app.telemetry.machine import scan_machine

Clock = Callable[[], float]
#: a job's rows: a quality run's, or a quantize run's
Rows = Sequence[QualityRow | QuantizeRow]
#: The types ticked when the dialog opens: one near-lossless, two everyday sizes (the CLI's default list has 7).
GUI_DEFAULT_TYPES: tuple[str, ...] = ("q8_0", "q5_k_m", "q4_k_m")
#: Before this share is done, a time left is a guess from too little: none is shown.
MIN_SHARE_FOR_TIME_LEFT = 0.03


def local_files(choices: Sequence[FileChoice]) -> list[str]:
    """The chooser's files that are on this machine (a URL cannot be quantized or scored here)."""
    return [c.source for c in choices if not is_url(c.source)]


def default_source(choices: Sequence[FileChoice]) -> str | None:
    """The file to quantize from: the local one with the most bits per weight, the largest on a tie."""
    local = [c for c in choices if not is_url(c.source)]
    if not local:
        return None
    return max(local, key=lambda c: (c.bits_per_weight, c.size_bytes)).source


def time_left_text(left_s: float | None) -> str:
    """", about 40 s left" / ", about 3 min left"; empty while unknown."""
    if left_s is None:
        return ""
    if left_s < 90:
        return f", about {max(round(left_s), 1)} s left"
    return f", about {round(left_s / 60)} min left"


class _Pace:
    """Time left at the pace so far: elapsed × (1 − share) / share, from the first event on."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.started_s: float | None = None

    def start(self) -> None:
        if self.started_s is None:
            self.started_s = self.clock()

    def left_s(self, share: float) -> float | None:
        if self.started_s is None or share < MIN_SHARE_FOR_TIME_LEFT:
            return None
        elapsed = self.clock() - self.started_s
        return max(elapsed / share - elapsed, 0.0)


class QuantizeProgress:
    """Where a quantize run is, from its events: the output being written, its tensor, the share done of all
    outputs (tensors of the current one counted evenly) and the time left."""

    def __init__(self, items: Sequence[QuantizeItem], clock: Clock = time.monotonic) -> None:
        self.items = list(items)
        self.pace = _Pace(clock)
        self.index = 0
        self.tensor = 0
        self.n_tensors = 0
        self.tensor_name = ""

    def read(self, event: Event) -> bool:
        """Take one event; True when the text or share changed."""
        if isinstance(event, TestStarted):
            self.pace.start()
            self.index, self.tensor, self.n_tensors, self.tensor_name = event.test_index, 0, 0, ""
        elif isinstance(event, JobProgress):
            self.pace.start()
            self.index, self.tensor, self.n_tensors = event.item_index, event.done, event.total
            self.tensor_name = event.label
        elif isinstance(event, (TestFinished, TestFailed)):
            self.index, self.tensor, self.n_tensors = event.test_index + 1, 0, 0
        else:
            return False
        return True

    def fraction(self) -> float:
        if not self.items:
            return 1.0
        within = self.tensor / self.n_tensors if self.n_tensors else 0.0
        return min((self.index + within) / len(self.items), 1.0)

    def text(self) -> str:
        share = self.fraction()
        head = f"Making variants… {share:.0%}{time_left_text(self.pace.left_s(share))}"
        if self.index >= len(self.items):
            return f"{head}\nfinishing"
        item = self.items[self.index]
        where = (f"writing {Path(item.dst).name} ({item.type_name.upper()}), file {self.index + 1} of "
                 f"{len(self.items)}")
        tensor = (f"tensor {self.tensor}/{self.n_tensors}: {self.tensor_name}" if self.n_tensors
                  else "starting")
        return f"{head}\n{where}\n{tensor}"


class QualityProgress:
    """Where a quality run is, from its events: the file being scored (the reference first), its chunk, the share
    done of all files and the time left."""

    def __init__(self, plan: QualityPlan, clock: Clock = time.monotonic) -> None:
        self.plan = plan
        self.pace = _Pace(clock)
        self.n_done = 0
        self.index = plan.reference_index
        self.chunk = 0
        self.n_chunks = 0

    def read(self, event: Event) -> bool:
        if isinstance(event, TestStarted):
            self.pace.start()
            self.index, self.chunk, self.n_chunks = event.test_index, 0, 0
        elif isinstance(event, JobProgress):
            self.pace.start()
            self.index, self.chunk, self.n_chunks = event.item_index, event.done, event.total
        elif isinstance(event, (TestFinished, TestFailed)):
            self.n_done, self.chunk, self.n_chunks = self.n_done + 1, 0, 0
        else:
            return False
        return True

    def fraction(self) -> float:
        n = len(self.plan.models)
        within = self.chunk / self.n_chunks if self.n_chunks else 0.0
        return min((self.n_done + within) / n, 1.0) if n else 1.0

    def text(self) -> str:
        share = self.fraction()
        head = f"Measuring quality… {share:.0%}{time_left_text(self.pace.left_s(share))}"
        n = len(self.plan.models)
        if self.n_done >= n:
            return f"{head}\nfinishing"
        name = Path(self.plan.models[self.index]).name
        role = ("the reference" if self.index == self.plan.reference_index
                else f"against {Path(self.plan.reference).name}")
        chunk = f"chunk {self.chunk}/{self.n_chunks}" if self.n_chunks else "loading"
        return f"{head}\nscoring {name} ({role}), file {self.n_done + 1} of {n}\n{chunk}"


class MeasureProgress:
    """Where a measured search is, from its lines (Notice events) and the steps it reports: the files dealt with of
    those it may measure (it stops early, so the share jumps to the end), the test under way and the last result."""

    def __init__(self, n_files: int, min_decode_tps: float) -> None:
        self.n_files = n_files
        self.min_decode_tps = min_decode_tps
        self.sources: set[str] = set()
        self.now = "starting"
        self.last = ""
        self.rep = ""

    def step(self, step: Step) -> None:
        """A search step (on the job's thread, before its line arrives as a Notice)."""
        self.sources.add(step.candidate.source)

    def read(self, event: Event) -> bool:
        if isinstance(event, Notice):
            text = event.message.strip()
            if text.startswith("measuring "):
                self.now, self.rep = text, ""
            else:
                self.last = text
            return True
        if isinstance(event, RepetitionStarted):
            self.rep = f"repetition {event.rep + 1}" if event.rep >= 0 else "warmup"
            return True
        return False

    def fraction(self) -> float:
        return min(len(self.sources) / self.n_files, 1.0) if self.n_files else 1.0

    def text(self) -> str:
        head = (f"Measuring toward {self.min_decode_tps:g} tok/s… file {min(len(self.sources) + 1, self.n_files)} "
                f"of at most {self.n_files}")
        now = self.now + (f" ({self.rep})" if self.rep else "")
        return "\n".join(line for line in (head, now, self.last) if line)


# ------------------------------------------------------------------------------------------------ dialogs
def _ok_cancel(dialog: QDialog, ok_text: str) -> QDialogButtonBox:
    """OK (named ``ok_text``, with its mnemonic) and Cancel, wired to the dialog's accept and reject."""
    buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel, dialog)
    buttons.button(QDialogButtonBox.StandardButton.Ok).setText(ok_text)
    buttons.accepted.connect(dialog.accept)
    buttons.rejected.connect(dialog.reject)
    return buttons


def _error_label(parent: QWidget) -> QLabel:
    label = QLabel("", parent)
    label.setWordWrap(True)
    set_role(label, "bad")
    return label


class VariantsDialog(QDialog):
    """Source, target types, output folder; OK plans the outputs (``items``) or shows the plan's refusal."""

    def __init__(self, choices: Sequence[FileChoice], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Make variants")
        self.items: list[QuantizeItem] = []
        self._types = {c.source: c.file_type for c in choices}
        self.source = QComboBox(self)
        files = local_files(choices)
        self.source.addItems(files)
        default = default_source(choices)
        if default is not None:
            self.source.setCurrentIndex(files.index(default))
        self.types = QListWidget(self)
        for name in QUANT_TYPE_NAMES:
            item = QListWidgetItem(name.upper(), self.types)
            item.setData(Qt.ItemDataRole.UserRole, name)
            item.setCheckState(Qt.CheckState.Checked if name in GUI_DEFAULT_TYPES else Qt.CheckState.Unchecked)
        self.types.setMinimumHeight(200)
        self.out_dir = QLineEdit(self)
        browse = QPushButton("&Browse…", self)
        browse.clicked.connect(self.ask_out_dir)
        out_row = QHBoxLayout()
        out_row.addWidget(self.out_dir, 1)
        out_row.addWidget(browse)
        self.allow_requantize = QCheckBox("Allow requantizing an already quantized source (--allow-requantize: "
                                          "its loss adds to the source's)", self)
        self.error = _error_label(self)
        self.buttons = _ok_cancel(self, "&Write")
        form = QFormLayout()
        form.addRow("&Source", self.source)
        form.addRow("&Types", self.types)
        out_label = QLabel("&Output folder", self)
        out_label.setBuddy(self.out_dir)
        form.addRow(out_label, out_row)
        lay = QVBoxLayout(self)
        lay.addWidget(QLabel("Writes each type with llama.cpp's quantizer in a worker process. An output that "
                             "already exists is never overwritten.", self))
        lay.addLayout(form)
        lay.addWidget(self.allow_requantize)
        lay.addWidget(self.error)
        lay.addWidget(self.buttons)
        self.source.currentTextChanged.connect(self._source_changed)
        self.out_dir.textChanged.connect(self.mark_existing)
        self._source_changed(self.source.currentText())
        self.resize(560, 520)

    def _source_changed(self, src: str) -> None:
        self.out_dir.setText(str(Path(src).expanduser().parent) if src else "")
        file_type = self._types.get(src, "")
        self.allow_requantize.setChecked(False)
        self.allow_requantize.setVisible(bool(file_type) and file_type not in UNQUANTIZED)
        self.mark_existing()

    def mark_existing(self) -> None:
        """Types whose output already exists, or would be the source itself, are shown so and cannot be ticked."""
        src, file_type = self.source.currentText(), self._types.get(self.source.currentText(), "")
        out = Path(self.out_dir.text()).expanduser()
        for row in range(self.types.count()):
            item = self.types.item(row)
            name = item.data(Qt.ItemDataRole.UserRole)
            dst = out / output_name(Path(src), file_type, name) if src and file_type else None
            why = ""
            if dst is not None and dst.exists():
                why = "the source itself" if dst.resolve() == Path(src).expanduser().resolve() else "already exists"
            item.setText(f"{name.upper()}  → {dst.name if dst else ''}" + (f"  ({why})" if why else ""))
            flags = item.flags()
            if why:
                item.setCheckState(Qt.CheckState.Unchecked)
                item.setFlags(flags & ~Qt.ItemFlag.ItemIsEnabled)
            else:
                item.setFlags(flags | Qt.ItemFlag.ItemIsEnabled)

    def ask_out_dir(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Folder for the variants", self.out_dir.text())
        if folder:
            self.out_dir.setText(folder)

    def checked_types(self) -> list[str]:
        return [self.types.item(r).data(Qt.ItemDataRole.UserRole) for r in range(self.types.count())
                if self.types.item(r).checkState() == Qt.CheckState.Checked]

    def set_types(self, names: Sequence[str]) -> None:
        for r in range(self.types.count()):
            item = self.types.item(r)
            on = item.data(Qt.ItemDataRole.UserRole) in names and bool(item.flags() & Qt.ItemFlag.ItemIsEnabled)
            item.setCheckState(Qt.CheckState.Checked if on else Qt.CheckState.Unchecked)

    def accept(self) -> None:
        """Plan the outputs (never overwriting one) or say in one line why not, and stay open."""
        types = self.checked_types()
        if not self.source.currentText():
            self.error.setText("No local file to quantize (the chooser's inputs are URLs).")
            return
        if not types:
            self.error.setText("Tick at least one target type.")
            return
        if not self.out_dir.text().strip():
            self.error.setText("Name an output folder.")
            return
        try:
            self.items = plan_quantize(self.source.currentText(), types, self.out_dir.text().strip(),
                                       allow_requantize=self.allow_requantize.isChecked(), force=False)
        except QuantizeSetupError as e:
            self.error.setText(str(e))
            return
        super().accept()


class QualityDialog(QDialog):
    """The files to score, the reference the quality feature picks and the token budget; OK makes ``plan``."""

    def __init__(self, files: Sequence[str], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Measure quality")
        self.files = list(files)
        self.plan: QualityPlan | None = None
        self.tokens = QSpinBox(self)
        self.tokens.setRange(DEFAULT_N_CTX, MAX_N_TOKENS)
        self.tokens.setSingleStep(DEFAULT_N_CTX)
        self.tokens.setValue(DEFAULT_N_TOKENS)
        self.tokens.setSuffix(" tokens")
        self.summary = QLabel("", self)
        self.summary.setWordWrap(True)
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.error = _error_label(self)
        self.buttons = _ok_cancel(self, "&Measure")
        form = QFormLayout()
        form.addRow("&Budget per file", self.tokens)
        lay = QVBoxLayout(self)
        lay.addWidget(self.summary)
        lay.addLayout(form)
        lay.addWidget(self.error)
        lay.addWidget(self.buttons)
        self.tokens.valueChanged.connect(lambda _v: self.make_plan())
        self.make_plan()
        self.setMinimumWidth(560)
        self.adjustSize()

    def make_plan(self) -> QualityPlan | None:
        """The quality feature's plan for these files (its reference, its text); the refusal in one line if none."""
        self.plan = None
        ok = self.buttons.button(QDialogButtonBox.StandardButton.Ok)
        try:
            self.plan = plan_quality(self.files, n_tokens=self.tokens.value(), n_ctx=DEFAULT_N_CTX)
        except QualitySetupError as e:
            self.error.setText(str(e))
            self.summary.setText(f"{len(self.files)} file(s).")
            ok.setEnabled(False)
            return None
        ref = self.plan.facts[self.plan.reference_index]
        names = ", ".join(Path(m).name for m in self.plan.models)
        self.summary.setText(
            f"Scores perplexity and KL divergence of {len(self.plan.models)} file(s): {names}.\n"
            f"Reference: {Path(ref.path).name} ({ref.file_type}, {ref.bits_per_weight:.2f} bits/weight), the file "
            f"with the most bits per weight.\nText: {self.plan.text_source}; "
            f"{self.plan.n_tokens // self.plan.n_ctx} chunks of {self.plan.n_ctx} tokens per file.")
        self.error.setText("")
        ok.setEnabled(True)
        return self.plan

    def accept(self) -> None:
        if self.make_plan() is not None:
            super().accept()


# ------------------------------------------------------------------------------------------------ runner
class _Tracker(Protocol):
    def read(self, event: Event) -> bool: ...
    def fraction(self) -> float: ...
    def text(self) -> str: ...


class JobRunner(LongWork):
    """One long job with its progress dialog: ``work(on_event)`` runs on a thread, the tracker turns events into
    the dialog's text and share (sent by signal), Cancel calls ``cancel``; ``finished(rows, error)`` on the GUI
    thread at the end, however it ends."""

    progress = Signal(str, float)
    finished = Signal(object, object)  # rows | None, BaseException | None

    def __init__(self, parent: QWidget, title: str, tracker: _Tracker, work: Callable[[Callable[[Event], None]], Any],
                 cancel: Callable[[], None]) -> None:
        super().__init__(parent)
        self._parent = parent
        self.title = title
        self.tracker = tracker
        self._work_fn = work
        self._cancel_fn = cancel
        self.cancelled = False
        self.progress.connect(self._on_progress)
        self.finished.connect(self._on_finished)

    def start(self) -> None:
        self.dialog = long_work_dialog(self._parent, self.title, self.tracker.text(), self.cancel)
        self.start_thread(self._work, f"chooser-{self.title}")

    def cancel(self) -> None:
        """Kill the worker (safe when none runs); what finished is kept."""
        if self.running and not self.cancelled:
            self.cancelled = True
            self._cancel_fn()


    def _work(self) -> None:
        def on_event(event: Event) -> None:  # on this thread: no widget, only the tracker and a signal
            if self.tracker.read(event):
                self.progress.emit(self.tracker.text(), self.tracker.fraction())

        try:
            rows = self._work_fn(on_event)
        except BaseException as e:  # noqa: BLE001 - every failure is shown in the window
            self.finished.emit(None, e)
            return
        self.finished.emit(rows, None)

    def _on_progress(self, text: str, share: float) -> None:
        dialog = self.dialog
        if dialog is None or self.cancelled:
            return
        dialog.setLabelText(text)
        dialog.setValue(int(share * PROGRESS_STEPS))  # last: a modal dialog's setValue spins the event loop

    def _on_finished(self, _rows: Rows | None, _error: BaseException | None) -> None:
        self.close_dialog()


def quantize_runner(parent: QWidget, items: list[QuantizeItem]) -> tuple[JobRunner, QuantizeSession]:
    """The quantize session for ``items`` in a runner (not started)."""
    run_id, log_path = new_job_log()
    session = QuantizeSession(items, run_id, log_path=log_path)
    runner = JobRunner(parent, "Make variants", QuantizeProgress(items), session.run, session.cancel)
    return runner, session


def quality_runner(parent: QWidget, plan: QualityPlan,
                   store_path: str | Path | None) -> tuple[JobRunner, QualitySession]:
    """The quality session for ``plan`` in a runner (not started); its rows go to the results store as each file
    finishes (the store opened on the job's thread: a SQLite connection belongs to the thread that opens it)."""
    run_id, log_path = new_job_log()
    session = QualitySession(plan, run_id, log_path=log_path)

    def work(on_event: Callable[[Event], None]) -> Rows:
        with ResultStore.recover(store_path) as store:
            session.store = store
            try:
                return session.run(on_event)
            finally:
                session.store = None

    runner = JobRunner(parent, "Measure quality", QualityProgress(plan), work, session.cancel)
    return runner, session


def measure_runner(parent: QWidget, report: ChooseReport, min_decode_tps: float, max_kld: float | None,
                   store_path: str | Path | None) -> tuple[JobRunner, Measurer]:
    """The measured search over ``report``'s files (this machine's) in a runner (not started); it ends with a
    MeasuredAnswer, each test's row stored in the results store and its figure in the measurement cache."""
    n_prompt = max(1, report.n_ctx - DEFAULT_N_GEN)  # the chooser's TTFT prompt (no -p in the window)
    measurer = Measurer(report.n_ctx, scan_machine().run_facts(), ttft_prompt_tokens=n_prompt,
                        store_path=None if store_path is None else str(store_path), command="chooser window")
    tracker = MeasureProgress(len(quality_order(report.choices, max_kld)), min_decode_tps)

    def work(on_event: Callable[[Event], None]) -> MeasuredAnswer:
        def line(text: str) -> None:
            on_event(notice(text))

        def step(s: Step) -> None:
            tracker.step(s)
            line(step_line(s))

        measurer.progress, measurer.on_event = line, on_event
        return measure_toward_floor(report.choices, min_decode_tps, measurer, max_kld=max_kld,
                                    profile_kind=report.profile.kind, on_step=step)

    return JobRunner(parent, "Measure toward floor", tracker, work, measurer.cancel), measurer


def measure_summary(answer: MeasuredAnswer) -> str:
    """The search in a few lines: what it measured, the pick and its command (or why there is none)."""
    text = f"Measured: {answer.counts}. {answer.sentence}"
    return text + (f" Command: {answer.command}" if answer.command else "")


def quantize_summary(rows: Rows, cancelled: bool) -> str:
    """One line: what was written, what failed and why, whether it was cancelled."""
    written = [r.model_filename or "" for r in rows if r.status == RowStatus.OK]
    failed = [f"{r.model_filename}: {r.error}" for r in rows if r.status not in (RowStatus.OK, RowStatus.CANCELLED)]
    parts = [f"wrote {', '.join(written)}" if written else "wrote nothing"]
    if failed:
        parts.append("failed " + "; ".join(failed))
    return ("Cancelled; " if cancelled else "") + "; ".join(parts) + "."


def quality_summary(rows: Rows, plan: QualityPlan, cancelled: bool) -> str:
    scored = sum(r.status == RowStatus.OK for r in rows)
    failed = [f"{r.model_filename}: {r.error}" for r in rows if r.status not in (RowStatus.OK, RowStatus.CANCELLED)]
    text = f"scored {scored} of {len(rows)} file(s) against {Path(plan.reference).name}"
    if failed:
        text += "; failed " + "; ".join(failed)
    return ("Cancelled; " if cancelled else "Quality: ") + text + (" (kept)." if cancelled else ".")
