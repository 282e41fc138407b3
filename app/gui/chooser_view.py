"""View → Which quantization…: the chooser (``gguf-bench choose``) in a window.

Files, folders or URLs, a GPU profile (or this machine) and a context; the evaluation runs on a pool thread
(:class:`app.gui.tasks.Tasks`) and comes back as a ChooseReport: a Pareto plot of quality loss against decode
speed, a memory bar per file against the device, each with a line saying what its marks mean, the table (CSV
export; the placement as llama.cpp's flags, decode at the context and from an empty cache, what kind of figure each
is, the lineage), and the recommendation with its llama-server command (copyable, the placement's flags in it).
"Make variants…" quantizes one of the files and "Measure quality…" scores them against a reference
(app.gui.chooser_jobs, off the GUI thread with a progress dialog); either evaluates again when it ends, so new files
and KLD/PPL appear. "Measure toward floor…"
runs ``choose --measure`` on this machine (the same job pattern) and evaluates again with the measured rows.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, Qt, QTimer
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QDialog,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QSplitter,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.atomic import write_text_atomic
from app.choose.choice_text import measured_text, placement_flags, quality_text
from app.choose.chooser import (
    DEFAULT_MARGIN_MIB,
    MARGIN_MIB_RANGE,
    RAM_GIB_RANGE,
    ChooseCancelled,
    ChooseReport,
    ChooseRequest,
    run_choose,
)
from app.choose.verdicts import (
    CHOICE_COLUMNS,
    DEFAULT_N_GEN,
    NOT_MEASURED,
    Figure,
    FileChoice,
    below_floors,
    choice_row,
)
from app.gui.chooser_jobs import (
    JobRunner,
    QualityDialog,
    Rows,
    VariantsDialog,
    local_files,
    measure_runner,
    measure_summary,
    quality_runner,
    quality_summary,
    quantize_runner,
    quantize_summary,
)
from app.gui.plots.pareto import MemoryBars, ParetoPlot, memory_explanation, pareto_explanation
from app.gui.power_fields import PowerFields
from app.gui.profile_order import sorted_names
from app.gui.tasks import Tasks
from app.gui.theme import set_role
from app.gui.top_level import add_close_keys, fit_to_screen
from app.paths import DataDirError
from app.predict.expected_quality import EXCHANGE_KLD, PREFERENCES
from app.predict.profiles import HardwareProfile, load_profiles
from app.predict.questions import DEFAULT_N_CTX
from app.quality.plan import QualityPlan
from app.quantize.plan import QuantizeItem
from app.results.export import to_csv
from app.results.fields import RowStatus

THIS_MACHINE_LABEL = "This machine"
#: The table shows these columns of CHOICE_COLUMNS (the CSV has them all).
TABLE_KEYS: tuple[str, ...] = ("filename", "file_type", "bits_per_weight", "size_mib", "status", "placement",
                               "kv_types_fitting", "memory_mib", "ttft_ms", "decode_tps", "decode_empty_tps",
                               "decode_kind", "expected_kld", "measured_decode_tps", "mean_kld", "ppl",
                               "same_top_rate", "requantized_from")
#: Each column's header (two lines, the unit below: narrow columns keep the table inside a laptop's screen) and its
#: tooltip. "{prompt}" and "{depth}" are filled from the report.
TABLE_HEADERS: dict[str, tuple[str, str]] = {
    "filename": ("file", "The GGUF file; its path or URL is in the cell's tooltip"),
    "file_type": ("type", "The file's weight type (its header's general.file_type)"),
    "bits_per_weight": ("bits/\nweight", "Bits per weight over the whole file: the quality proxy where no KLD is "
                                          "measured (the ranking counts each tensor up to Q8_0's 8.5 bits, past "
                                          "which llama.cpp measures no loss)"),
    "size_mib": ("size\n(MiB)", "The file's size"),
    "status": ("fit", "fits: every layer on the device (a mixture of experts may keep some experts in system RAM: "
                      "-ncmoe in the placement); partial: some layers stay on the CPU; does not fit: not even with a "
                      "q4_0 KV cache and fewer layers. Grey rows fail a floor (the cell's tooltip says which)"),
    "placement": ("placement", "Where the chosen configuration puts the model, as llama.cpp's flags: -ngl N layers "
                               "offloaded (of the model's layers and its output), -ncmoe N the experts of the first "
                               "N layers kept in system RAM (a mixture of experts), then the KV-cache type (-ctk and "
                               "-ctv). The cell's tooltip says it in words and lists every configuration tried"),
    "kv_types_fitting": ("KV types\nthat fit", "KV-cache types with which everything fits on the device (none: "
                                               "only a partial or expert offload fits)"),
    "memory_mib": ("memory\n(MiB)", "Device memory the chosen configuration needs at the context: the weights on "
                                    "the device, the KV cache, compute buffers and the GPU allowance"),
    "ttft_ms": ("TTFT @{prompt}\n(ms)", "Time to first token for a prompt of {prompt} tokens (the context less the "
                                        "generated tokens); its kind in brackets where it differs from decode's, "
                                        "its band in the cell's tooltip"),
    "decode_tps": ("decode @{depth}\n(tok/s)", "Decode with the KV cache {depth} tokens deep (the prompt and half "
                                               "the generated tokens): the speed with the context full; the band "
                                               "in brackets where there is one"),
    "decode_empty_tps": ("decode, empty\n(tok/s)", "Decode from an empty cache: llama-bench's tg128 figure, one per "
                                                   "file and placement whatever the context (faster than at the "
                                                   "context, whose attention reads the whole cache); its band in the "
                                                   "cell's tooltip"),
    "decode_kind": ("speed\nis", "measured: measured on this machine at this placement (scaled to the context); "
                                 "fit, split, efficiency, public: expected, learned from measurements (this machine's "
                                 "fit, its two sides composed for a split, its stable stored runs, or public "
                                 "llama-bench results); ceiling: the memory-bandwidth bound, nothing "
                                 "measured to learn from"),
    "measured_decode_tps": ("measured\n(tok/s)", "Decode as measured here, at the settings it ran with (the "
                                                 "cell's tooltip), before scaling to the context"),
    "expected_kld": ("expected\nKLD", "The configuration's expected loss against the full-precision model (mean KL "
                                     "divergence, lower is better): measured here, else llama.cpp's published "
                                     "figure for the file's type, else from its bits per weight; a quantized KV "
                                     "cache's loss added. The pick weighs it against decode speed"),
    "mean_kld": ("KLD", "Mean KL divergence of the next-token distribution against the reference, as measured here "
                        "(gguf-bench quality): lower is closer to the original"),
    "ppl": ("PPL", "Perplexity on the quality text"),
    "same_top_rate": ("same\ntop", "How often the most likely next token is the reference's"),
    "requantized_from": ("made\nfrom", "Requantized from: the quantized type this file was made from (its header's "
                                       "lineage); its quality is no better than that file's"),
}
#: The widest a column opens (px), and the narrowest it gives way to when the table is wider than its view; the
#: rest of a cell's text is elided and whole in its tooltip.
MAX_COLUMN_PX: dict[str, int] = {"filename": 220, "status": 160, "mean_kld": 96, "expected_kld": 110}
MIN_COLUMN_PX: dict[str, int] = {"status": 64, "kv_types_fitting": 72, "filename": 150}
#: Columns hidden while no file has anything in them (nothing measured here, no lineage): room on a laptop's screen.
OPTIONAL_KEYS: tuple[str, ...] = ("measured_decode_tps", "mean_kld", "ppl", "same_top_rate", "requantized_from")
_STATUS = {"fits": "fits", "partial": "partial", "does_not_fit": "does not fit"}
#: The plots and the table never get less than this (the answer scrolls in its own box instead)
MIN_PLOT_PX = 180
MIN_TABLE_ROWS = 3
MEASURE_TIP = ("Measure the files on this machine, best quality first, until one meets the min decode tok/s (short "
               "tests in a worker, stored and cached; files the prediction rules out are not run)")


def _cell(key: str, value: object) -> str:
    if value is None or value == "":
        return "none" if key == "kv_types_fitting" else ""
    if key == "status":
        return _STATUS.get(str(value), str(value))
    if key == "same_top_rate" and isinstance(value, float):
        return f"{value * 100:.1f} %"
    if key == "mean_kld" and isinstance(value, float):
        return f"{value:.4f}"
    if isinstance(value, float):
        return f"{value:,.2f}" if value < 100 else f"{value:,.0f}"
    return str(value)


def _figure_cell(fig: Figure | None, decode_kind: str = "", band: bool = False) -> str:
    """A speed or time figure, "45" or with its ``band`` "45 (40–50)", and its kind in brackets ("812 (ceiling)")
    where it is not decode's (which the "speed is" column gives)."""
    if fig is None:
        return ""
    digits = "{:,.0f}" if abs(fig.value) >= 10 else "{:,.1f}"
    text = digits.format(fig.value)
    if band and fig.low is not None and fig.high:
        text += f" ({digits.format(fig.low)}–{digits.format(fig.high)})"
    return text + (f" ({fig.kind})" if decode_kind and fig.kind != decode_kind else "")


def _figure_tip(fig: Figure | None, unit: str) -> str:
    """"6,831 (4,372–7,886, expected) tok/s: <its source>"."""
    return f"{fig.text('{:,.1f}')} {unit}: {fig.source}" if fig is not None else ""


def choice_cells(c: FileChoice) -> dict[str, tuple[str, str]]:
    """Each table column's (text, tooltip) for one file: the row of CHOICE_COLUMNS, with the placement as
    llama.cpp's flags (:func:`placement_flags`, as the command line's table) and the figures with their bands."""
    row = choice_row(c)
    cells = {k: (_cell(k, row[k]), "") for k in TABLE_KEYS}
    kind = c.decode_tps.kind
    tried = "\n".join(f"  {line}" for line in c.placements)
    cells["filename"] = (c.filename, c.source)
    cells["placement"] = ((placement_flags(c), c.placement + (f"\nConfigurations tried, best first:\n{tried}"
                                                              if tried else "")) if c.usable else ("", ""))
    cells["decode_tps"] = (_figure_cell(c.decode_tps, band=True), _figure_tip(c.decode_tps, "tok/s"))
    cells["decode_empty_tps"] = (_figure_cell(c.decode_empty_tps, kind), _figure_tip(c.decode_empty_tps, "tok/s"))
    cells["ttft_ms"] = (_figure_cell(c.ttft_ms, kind), _figure_tip(c.ttft_ms, "ms"))
    cells["decode_kind"] = (kind, c.decode_tps.source.text())
    q = c.total_quality
    cells["expected_kld"] = ((f"{q.kld:.4f}" + ("" if q.kind == "published" else f" {q.kind}"),
                              f"{q.text()}: {q.source}") if q is not None else ("", NOT_MEASURED))
    cells["kv_types_fitting"] = (cells["kv_types_fitting"][0], cells["kv_types_fitting"][0])  # whole where cut
    cells["measured_decode_tps"] = (cells["measured_decode_tps"][0], measured_text(c))
    cells["mean_kld"] = (cells["mean_kld"][0], quality_text(c) + (f" against {c.quality.reference}"
                                                                  if c.quality and c.quality.reference else ""))
    if c.requantized_from:
        cells["requantized_from"] = (c.requantized_from, f"made from a {c.requantized_from} file: its quality is no "
                                                         f"better than that file's")
    return cells


class _MiddleElide(QStyledItemDelegate):
    """Elides in the middle (two files of one model differ at their ends); the table elides the rest at the
    right."""

    def initStyleOption(self, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex) -> None:
        super().initStyleOption(option, index)
        option.textElideMode = Qt.TextElideMode.ElideMiddle


class ChooserView(QDialog):
    """Inputs on top; the Pareto plot and memory bars, the table, the recommendation and the command below."""

    def __init__(self, parent: QWidget | None = None, store_path: str | Path | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Which quantization for this GPU?")
        self.store_path = None if store_path is None else str(store_path)
        self.tasks = Tasks(self)
        self.report: ChooseReport | None = None
        self.job: JobRunner | None = None  # a quantize or quality run under way
        self.job_dialog: VariantsDialog | QualityDialog | None = None
        self.job_note = ""  # the last job's outcome, shown with the report that follows it
        self._evaluating = False
        self._stale = False
        self._stop = threading.Event()
        self._progress_text = ""
        self._progress_timer = QTimer(self)
        self._progress_timer.setInterval(200)  # the count read so far, five times a second
        self._progress_timer.timeout.connect(self._show_progress)
        self._build_inputs()
        self.pareto = ParetoPlot(self)
        self.bars = MemoryBars(self)
        self.pareto_note = self._note(pareto_explanation())
        self.bars_note = self._note("")
        plots = QSplitter(Qt.Orientation.Horizontal, self)
        for plot, note in ((self.pareto, self.pareto_note), (self.bars, self.bars_note)):
            pane = QWidget(self)
            pane_lay = QVBoxLayout(pane)
            pane_lay.setContentsMargins(0, 0, 0, 0)
            pane_lay.addWidget(plot, 1)
            pane_lay.addWidget(note)
            plots.addWidget(pane)
        plots.setSizes([600, 600])  # half each: the notes' wrapped text must not squeeze the memory bars
        self.table = QTableWidget(0, len(TABLE_KEYS), self)
        self.table.setTextElideMode(Qt.TextElideMode.ElideRight)
        self._elide_middle = _MiddleElide(self.table)
        self.table.setItemDelegateForColumn(TABLE_KEYS.index("filename"), self._elide_middle)
        self._set_headers(self.ctx.value() - DEFAULT_N_GEN, self.ctx.value() - DEFAULT_N_GEN // 2)  # until a report
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setWordWrap(False)
        self.table.verticalHeader().setVisible(False)  # row numbers say nothing here; the file is the first column
        self.table.itemSelectionChanged.connect(self._command_for_selection)
        self.recommendation = QLabel("Add files, folders or URLs, pick a GPU and a context, then Choose.", self)
        self.recommendation.setWordWrap(True)
        self.recommendation.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.recommendation.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        # the answer scrolls in a box of its own: a long answer (nine models, one line each) never squeezes the
        # plots and the table below a usable height (it took them to 30 px and one row at 1366x768)
        self.answer_box = QScrollArea(self)
        self.answer_box.setWidgetResizable(True)
        self.answer_box.setFrameShape(QScrollArea.Shape.NoFrame)
        self.answer_box.setWidget(self.recommendation)
        self.answer_box.setMinimumHeight(3 * self.fontMetrics().lineSpacing())
        self.command = QLineEdit(self)
        self.command.setReadOnly(True)
        self.copy_button = QPushButton("Copy command", self)
        self.copy_button.clicked.connect(self.copy_command)
        self.export_button = QPushButton("Export CSV…", self)
        self.export_button.clicked.connect(self.ask_export_csv)
        cmd_row = QHBoxLayout()
        cmd_row.addWidget(self.command, 1)
        cmd_row.addWidget(self.copy_button)
        cmd_row.addWidget(self.export_button)
        row_px = self.table.verticalHeader().defaultSectionSize()
        plots.setMinimumHeight(MIN_PLOT_PX)
        self.table.setMinimumHeight(self.table.horizontalHeader().sizeHint().height() + MIN_TABLE_ROWS * row_px)
        split = QSplitter(Qt.Orientation.Vertical, self)
        split.addWidget(plots)
        split.addWidget(self.table)
        split.addWidget(self.answer_box)
        split.setChildrenCollapsible(False)
        split.setSizes([340, 200, 120])
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        split.setStretchFactor(2, 1)
        self.split = split
        lay = QVBoxLayout(self)
        lay.addLayout(self.form)
        lay.addWidget(split, 1)
        lay.addLayout(cmd_row)
        self._enable_outputs(False)
        self._enable_jobs()
        fit_to_screen(self, 1280, 860)
        add_close_keys(self)

    def _note(self, text: str) -> QLabel:
        label = QLabel(text, self)
        label.setWordWrap(True)
        set_role(label, "muted")
        return label

    # ------------------------------------------------------------------------------------------ inputs
    def _build_inputs(self) -> None:
        self.sources = QPlainTextEdit(self)
        self.sources.setPlaceholderText("one GGUF file, folder or https URL per line")
        self.sources.setFixedHeight(64)
        add_files = QPushButton("Files…", self)
        add_files.clicked.connect(self.ask_files)
        add_folder = QPushButton("Folder…", self)
        add_folder.clicked.connect(self.ask_folder)
        self.hw = QComboBox(self)
        self.hw.addItem(THIS_MACHINE_LABEL)
        self._profiles: dict[str, HardwareProfile] = {}
        try:
            self._profiles = {p.name: p for p in load_profiles()}
            self.hw.addItems(sorted_names(self._profiles))  # as a person looks for a GPU
        except ValueError:  # a broken user profile file: this machine still works
            pass
        self.ctx = QSpinBox(self)
        self.ctx.setRange(256, 1 << 20)
        self.ctx.setSingleStep(1024)
        self.ctx.setValue(DEFAULT_N_CTX)
        self.min_tps = QDoubleSpinBox(self)
        self.min_tps.setRange(0, 100_000)
        self.min_tps.setSpecialValueText("none")
        self.max_kld = QDoubleSpinBox(self)
        self.max_kld.setDecimals(4)
        self.max_kld.setRange(0, 100)
        self.max_kld.setSingleStep(0.01)
        self.max_kld.setSpecialValueText("none")
        self.ram = QDoubleSpinBox(self)  # choose --ram: the system RAM around the GPU
        self.ram.setDecimals(0)
        self.ram.setRange(0, RAM_GIB_RANGE[1])
        self.ram.setSingleStep(8)
        self.ram.setSpecialValueText("auto")
        self.ram.setToolTip("System RAM (GiB) of the machine around the GPU, for placements that keep layers or "
                            "experts in it. auto: this machine's for its own hardware; for a GPU profile 16 GiB beside "
                            "a laptop GPU, 32 beside a desktop one (the answer says it assumed so). The OS's share is "
                            "held back.")
        self.prefer = QComboBox(self)
        self.prefer.addItems(list(PREFERENCES))
        self.prefer.setToolTip("How the pick weighs expected quality against speed: 1.5x of decode speed is worth "
                               + ", ".join(f"{v:g} KLD ({k})" for k, v in EXCHANGE_KLD.items())
                               + " (choose --prefer)")
        self.margin = QDoubleSpinBox(self)
        self.margin.setDecimals(0)
        self.margin.setRange(*MARGIN_MIB_RANGE)
        self.margin.setSingleStep(256)
        self.margin.setValue(DEFAULT_MARGIN_MIB)
        self.margin.setToolTip("GPU memory (MiB) every placement leaves free, as llama.cpp's --fit-target (default "
                               "1024): a card filled to the last MiB fails to load or spills into shared memory "
                               "(choose --margin)")
        # choose --power-limit, --on-battery: for a GPU named (this machine's GPU is at the state NVML and psutil read)
        self.power_fields = PowerFields(self, self.mark_stale)
        self.choose_button = QPushButton("Choose", self)
        self.choose_button.setDefault(True)
        self.choose_button.clicked.connect(self.start_or_cancel)
        self.variants_button = QPushButton("&Make variants…", self)
        self.variants_button.setToolTip("Quantize one of the chooser's files to other types (llama.cpp's quantizer), "
                                        "then choose again with the new files")
        self.variants_button.clicked.connect(self.ask_variants)
        self.quality_button = QPushButton("Measure &quality…", self)
        self.quality_button.setToolTip("Score the chooser's files against a reference (KL divergence, perplexity), "
                                       "then choose again with the KLD filled in")
        self.quality_button.clicked.connect(self.ask_quality)
        self.measure_button = QPushButton("Measure &toward floor…", self)
        self.measure_button.clicked.connect(self.measure_toward_floor)
        self.min_tps.valueChanged.connect(lambda _v: self._enable_jobs())
        self.hw.currentTextChanged.connect(lambda _t: self._enable_jobs())
        self.hw.currentTextChanged.connect(lambda t: self.ram.setEnabled(t != THIS_MACHINE_LABEL))
        self.ram.setEnabled(self.hw.currentText() != THIS_MACHINE_LABEL)
        self.hw.currentTextChanged.connect(lambda t: self.power_fields.sync(self._profiles.get(t)))
        self.status = QLabel("", self)
        self.status.setWordWrap(True)
        src_row = QHBoxLayout()
        src_row.addWidget(self.sources, 1)
        # the files' buttons, then the jobs on them, beside the list (in the row of the inputs they made the window
        # wider than a laptop's screen; in a row of their own, the table lost a row's height)
        buttons = QGridLayout()
        for i, b in enumerate((add_files, add_folder, self.variants_button, self.quality_button,
                               self.measure_button)):
            buttons.addWidget(b, i % 2, i // 2)
        src_row.addLayout(buttons)
        # the hardware (the GPU, its power state, the RAM beside it, the memory kept free), then what is asked of it:
        # two rows (in one, the GPU's power fields made the window wider than a 1366-px laptop screen)
        hardware, opts = QHBoxLayout(), QHBoxLayout()
        for row, label, w in ((hardware, "GPU", self.hw), (hardware, "power", self.power_fields.power),
                              (hardware, "", self.power_fields.battery), (hardware, "RAM GiB", self.ram),
                              (hardware, "keep free MiB", self.margin), (opts, "context", self.ctx),
                              (opts, "min tok/s", self.min_tps), (opts, "max KLD", self.max_kld),
                              (opts, "prefer", self.prefer)):
            if label:
                row.addWidget(QLabel(label, self))
            row.addWidget(w)
        hardware.addStretch(1)
        opts.addWidget(self.choose_button)
        opts.addStretch(1)
        for w in (self.ctx, self.ram, self.margin, self.min_tps, self.max_kld):
            w.valueChanged.connect(lambda _v: self.mark_stale())
        for combo in (self.hw, self.prefer):
            combo.currentTextChanged.connect(lambda _t: self.mark_stale())
        self.sources.textChanged.connect(self.mark_stale)
        self.form = QFormLayout()
        self.form.addRow("Models", src_row)
        self.form.addRow(hardware)
        self.form.addRow(opts)
        self.form.addRow(self.status)

    def set_sources(self, sources: list[str]) -> None:
        self.sources.setPlainText("\n".join(sources))

    def source_list(self) -> list[str]:
        return [s.strip() for s in self.sources.toPlainText().splitlines() if s.strip()]

    def ask_files(self) -> None:
        files, _ = QFileDialog.getOpenFileNames(self, "GGUF files to choose from", str(Path.home()),
                                                "GGUF models (*.gguf *.GGUF);;All files (*)")
        if files:
            self.set_sources(self.source_list() + files)

    def ask_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Every GGUF under a folder", str(Path.home()))
        if folder:
            self.set_sources(self.source_list() + [folder])

    def request(self) -> ChooseRequest:
        hw = self.hw.currentText()
        return ChooseRequest(
            sources=tuple(self.source_list()), hw=None if hw == THIS_MACHINE_LABEL else hw, n_ctx=self.ctx.value(),
            min_decode_tps=self.min_tps.value() or None, max_kld=self.max_kld.value() or None,
            store_path=self.store_path,  # this machine's RAM is what it has: the field is for a GPU named
            ram_gib=(max(self.ram.value(), RAM_GIB_RANGE[0]) if self.ram.value() and hw != THIS_MACHINE_LABEL
                     else None),
            prefer=self.prefer.currentText(), margin_mib=self.margin.value(),
            power_limit_w=self.power_fields.watts(), on_battery=self.power_fields.on_battery())

    # ------------------------------------------------------------------------------------------ running
    @property
    def evaluating(self) -> bool:
        """Whether an evaluation is reading its files now (the Choose button reads Cancel)."""
        return self._evaluating

    def start_or_cancel(self) -> None:
        """The Choose button: starts an evaluation, or while one reads its files, stops it."""
        if self._evaluating:
            self.cancel()
        else:
            self.start()

    def start(self) -> str | None:
        """Evaluate off the GUI thread, the count of files read shown as it goes; returns why nothing started, or
        None."""
        req = self.request()
        if not req.sources:
            self.status.setText("Add at least one file, folder or URL.")
            return "no sources"
        self.choose_button.setText("Cancel")
        self.choose_button.setToolTip("Stop reading the files (Esc closes the window)")
        self.status.setText(f"Reading {len(req.sources)} source(s)…")
        self._evaluating = True
        self._stop = threading.Event()
        self._progress_text = ""
        self._progress_timer.start()
        self._enable_jobs()
        stop = self._stop

        def run() -> ChooseReport:
            return run_choose(req, progress=self._heard, cancelled=stop.is_set)

        self.tasks.submit(run, self._done)
        return None

    def cancel(self) -> None:
        """Stop the evaluation under way (before its next file); what was read is dropped, the inputs stay."""
        if self._evaluating:
            self._stop.set()
            self.status.setText("Stopping…")

    def _heard(self, line: str) -> None:  # called on the pool thread: only a string is handed over
        self._progress_text = line

    def _show_progress(self) -> None:
        if self._evaluating and self._progress_text and not self._stop.is_set():
            self.status.setText(self._progress_text[:1].upper() + self._progress_text[1:] + "…  (Cancel stops)")

    def _done(self, report: ChooseReport | None, err: BaseException | None) -> None:
        self.choose_button.setText("Choose")
        self.choose_button.setToolTip("")
        self._progress_timer.stop()
        self._evaluating = False
        self._enable_jobs()
        if isinstance(err, ChooseCancelled):
            self.status.setText(f"Cancelled: {err}.")
            return
        if err is not None or report is None:
            self.status.setText(f"Could not choose: {err}")
            return
        self.show_report(report)

    def mark_stale(self) -> None:
        """An input changed after the results were made: say so at once, and empty the command (it was for the old
        inputs) until Choose runs again."""
        if self.report is None or self._evaluating or self._stale:
            return
        self._stale = True
        self.status.setText("Inputs changed: the results below are for the previous inputs — press Choose to "
                            "answer for these.")
        set_role(self.status, "warn")
        self.command.setText("")
        self.copy_button.setEnabled(False)
        self.table.setEnabled(False)

    def show_report(self, report: ChooseReport) -> None:
        self.report = report
        self._stale = False
        set_role(self.status, "muted")
        self.table.setEnabled(True)
        floor_tps = self.request().min_decode_tps
        rec = report.recommendation
        self.pareto.show_choices(report.choices, floor_tps, rec.choice)
        self.bars.show_choices(report.choices)
        self.pareto_note.setText(pareto_explanation(floor_tps))
        self.bars_note.setText(memory_explanation(report.choices, report.profile.kind))
        self._fill_table(report)
        picks = rec.picks()
        shown = picks[0] if picks else (report.choices[0] if report.choices else None)
        source = shown.decode_tps.source.text() if shown is not None else ""
        self.recommendation.setText(rec.lines() + (f"\nIts speed: {source}." if source else ""))
        # one command per model where there are several: the selected file's model's (the first answer's at first)
        self.command.setText(rec.command or (rec.command_for(picks[0]) if picks else ""))
        skipped = "; ".join(f"{Path(s).name}: {e}" for s, e in report.errors)
        self.status.setText(f"{len(report.choices)} file(s) on {report.profile.name}"
                            + (f" — skipped {skipped}" if skipped else "")
                            + (f" — {self.job_note}" if self.job_note else ""))
        self.job_note = ""
        self._enable_outputs(bool(report.choices))
        self._enable_jobs()

    def _command_for_selection(self) -> None:
        """With files of several models, the command shown is the selected file's model's answer."""
        if self.report is None:
            return
        # the row the user went to last: with several selected (Ctrl or Shift held) that is the one just added
        current = self.table.currentRow()
        rows = [r.row() for r in self.table.selectionModel().selectedRows()]
        row = current if current in rows else (rows[0] if rows else -1)
        item = self.table.item(row, 0) if row >= 0 else None
        index = item.data(Qt.ItemDataRole.UserRole) if item is not None else None
        if not isinstance(index, int) or not 0 <= index < len(self.report.choices):
            return
        if self._stale:
            return
        rec = self.report.recommendation
        command = rec.command_for(self.report.choices[index])
        # the command of the selected file's model; empty where that model has no file to run (never another
        # model's command left in the box)
        self.command.setText(command)
        self.command.setPlaceholderText("" if command else "no file of this model to run: its answer says why")
        self.copy_button.setEnabled(bool(command))

    def _set_headers(self, prompt: int, depth: int) -> None:
        """The column headers and their tooltips, for a prompt and a decode depth of these many tokens."""
        for col, key in enumerate(TABLE_KEYS):
            head, tip = TABLE_HEADERS[key]
            item = self.table.horizontalHeaderItem(col) or QTableWidgetItem()
            item.setText(head.format(prompt=f"{prompt:,}", depth=f"{depth:,}"))
            item.setToolTip(tip.format(prompt=f"{prompt:,}", depth=f"{depth:,}"))
            self.table.setHorizontalHeaderItem(col, item)

    def _fill_table(self, report: ChooseReport) -> None:
        self.table.setSortingEnabled(False)
        self.table.setRowCount(len(report.choices))
        picks = report.recommendation.picks()
        req = self.request()
        depth = max((c.decode_depth for c in report.choices), default=0)
        self._set_headers(max(1, report.n_ctx - DEFAULT_N_GEN), depth)
        for r, c in enumerate(report.choices):
            fails = below_floors(c, req.min_decode_tps, req.max_kld) if c.usable else "does not fit"
            cells = choice_cells(c)
            for col, key in enumerate(TABLE_KEYS):
                text, tip = cells[key]
                if key == "status" and fails and c.usable:
                    text += f" — {fails}"
                item = QTableWidgetItem(text)
                item.setData(Qt.ItemDataRole.UserRole, r)  # the choice's index, whatever the table's order
                item.setToolTip("\n".join(t for t in (f"{c.filename}: {fails}" if fails else "", tip) if t))
                if fails:
                    item.setForeground(Qt.GlobalColor.gray)
                if c in picks:
                    font = item.font()
                    font.setBold(True)
                    item.setFont(font)
                self.table.setItem(r, col, item)
        self._size_columns()

    def _size_columns(self) -> None:
        """Each column as wide as its contents up to MAX_COLUMN_PX (the rest elided, whole in the tooltip), and
        the optional columns hidden while empty. Where the view has room left, the capped columns open toward
        their contents; where the table is still wider than its view, the fit and file columns give way down to
        MIN_COLUMN_PX before a scroll bar appears."""
        t = self.table
        for key in OPTIONAL_KEYS:
            col = TABLE_KEYS.index(key)
            t.setColumnHidden(col, not any(t.item(r, col).text() for r in range(t.rowCount())))
        t.resizeColumnsToContents()
        wanted_px = {key: t.columnWidth(TABLE_KEYS.index(key)) for key in MAX_COLUMN_PX}
        for key, most_px in MAX_COLUMN_PX.items():
            t.setColumnWidth(TABLE_KEYS.index(key), min(wanted_px[key], most_px))
        room_px = t.viewport().width() - t.horizontalHeader().length()
        if not t.verticalScrollBar().isVisible():  # room kept for one: the answer's lines, set next, take height
            room_px -= t.style().pixelMetric(QStyle.PixelMetric.PM_ScrollBarExtent)
        for key in MAX_COLUMN_PX:  # room left: toward the contents, the file first
            col = TABLE_KEYS.index(key)
            give_px = max(0, min(room_px, wanted_px[key] - t.columnWidth(col)))
            t.setColumnWidth(col, t.columnWidth(col) + give_px)
            room_px -= give_px
        for key, least_px in MIN_COLUMN_PX.items():  # too wide: the fit gives way, then the KV types, then the file
            col = TABLE_KEYS.index(key)
            take_px = max(0, min(-room_px, t.columnWidth(col) - least_px))
            t.setColumnWidth(col, t.columnWidth(col) - take_px)
            room_px += take_px

    def _enable_outputs(self, on: bool) -> None:
        self.export_button.setEnabled(on)
        self.copy_button.setEnabled(on and bool(self.command.text()))

    # ------------------------------------------------------------------------------------------ long work
    def _files(self) -> list[str]:
        """The evaluated files on this machine: what a variant is made from and what quality scores."""
        return local_files(self.report.choices) if self.report is not None else []

    def _enable_jobs(self) -> None:
        idle = self.job is None and not self._evaluating
        has_files = bool(self._files())
        self.variants_button.setEnabled(idle and has_files)
        self.quality_button.setEnabled(idle and has_files)
        why = "" if has_files else "Choose first: the files it evaluates are the ones quantized or scored"
        for button in (self.variants_button, self.quality_button):
            button.setStatusTip(why)
        refusal = self.measure_refusal()
        self.measure_button.setEnabled(idle and not refusal)
        self.measure_button.setToolTip(refusal or MEASURE_TIP)
        self.measure_button.setStatusTip(refusal)

    def measure_refusal(self) -> str:
        """Why "Measure toward floor…" cannot run now, or "" (it needs a report of this machine and a floor)."""
        if not self._files():
            return "Choose first: the search measures the files it evaluates (those on this machine)"
        if not self.min_tps.value():
            return "Set a min decode tok/s: the floor the search measures toward"
        if self.hw.currentText() != THIS_MACHINE_LABEL or self.report is None or not self.report.this_machine:
            return f"Measures on this machine only: choose with GPU \"{THIS_MACHINE_LABEL}\" first"
        return ""

    def measure_toward_floor(self) -> JobRunner | None:
        """Measure the chooser's files on this machine, best quality first, until one meets the floor (``choose
        --measure``), off the GUI thread; at the end the evaluation runs again with the measured rows."""
        if self.report is None or self.job is not None or self.measure_refusal():
            return None
        report, floor, max_kld = self.report, self.min_tps.value(), self.max_kld.value() or None
        return self._start_job(lambda: measure_runner(self, report, floor, max_kld, self.store_path),
                               "measure toward the floor", lambda answer, _m: measure_summary(answer),
                               f"Measuring toward {floor:g} tok/s…")

    def ask_variants(self) -> VariantsDialog | None:
        """Open the "Make variants" dialog (window-modal, not blocking); Write starts the quantize run."""
        if self.report is None or self.job is not None:
            return None
        dialog = VariantsDialog(self.report.choices, self)
        dialog.accepted.connect(lambda: self.make_variants(dialog.items))
        dialog.finished.connect(dialog.deleteLater)
        self.job_dialog = dialog
        dialog.open()
        return dialog

    def ask_quality(self) -> QualityDialog | None:
        """Open the "Measure quality" dialog (window-modal, not blocking); Measure starts the quality run."""
        if self.report is None or self.job is not None:
            return None
        dialog = QualityDialog(self._files(), self)
        dialog.accepted.connect(lambda: self.measure_quality(dialog.plan) if dialog.plan is not None else None)
        dialog.finished.connect(dialog.deleteLater)
        self.job_dialog = dialog
        dialog.open()
        return dialog

    def make_variants(self, items: list[QuantizeItem]) -> JobRunner | None:
        """Quantize ``items`` (a plan of app.quantize.plan) off the GUI thread; at the end the files written join
        the inputs and the evaluation runs again."""
        def written(rows: Rows, session: Any) -> str:
            self.add_sources([str(r.model_path) for r in rows if r.status == RowStatus.OK])
            return quantize_summary(rows, session.cancelled)

        return self._start_job(lambda: quantize_runner(self, items), "make variants", written,
                               f"Making {len(items)} variant(s)…")

    def measure_quality(self, plan: QualityPlan) -> JobRunner | None:
        """Score ``plan``'s files (app.quality.plan) off the GUI thread, each stored as it finishes; at the end the
        evaluation runs again and reads the scores."""
        return self._start_job(lambda: quality_runner(self, plan, self.store_path), "measure quality",
                               lambda rows, session: quality_summary(rows, plan, session.cancelled),
                               f"Measuring quality of {len(plan.models)} file(s)…")

    def _start_job(self, make: Callable[[], tuple[JobRunner, Any]], what: str,
                   summarise: Callable[[Rows, Any], str], status: str) -> JobRunner | None:
        """Start the job ``make()`` gives (runner, session); at its end ``summarise(rows, session)`` says what it did
        and the evaluation runs again; a failure is one status line ("Could not ``what``: …")."""
        try:
            runner, session = make()
        except DataDirError as e:
            self.status.setText(f"Could not {what}: {e}")
            return None

        def done(rows: Rows | None, err: BaseException | None) -> None:
            self._job_ended()
            if err is not None or rows is None:
                self.status.setText(f"Could not {what}: {err}")
                return
            self._choose_again(summarise(rows, session))

        self.job = runner
        runner.finished.connect(done)
        self._enable_jobs()
        self.status.setText(status)
        runner.start()
        return runner

    def _choose_again(self, summary: str) -> None:
        """Evaluate again after a job; its summary stays in the status line with the new report's."""
        self.job_note = summary
        if self.start() is None:
            self.status.setText(f"{summary} Choosing again…")

    def _job_ended(self) -> None:
        if self.job is not None:
            self.job.deleteLater()
        self.job = None
        self._enable_jobs()

    def add_sources(self, paths: list[str]) -> list[str]:
        """Add ``paths`` to the inputs, but not those a listed folder or entry already holds; the ones added."""
        listed = self.source_list()
        held = {Path(s).expanduser().resolve() for s in listed if "://" not in s}
        folders = [p for p in held if p.is_dir()]
        new = [p for p in paths if Path(p).resolve() not in held
               and not any(Path(p).resolve().is_relative_to(f) for f in folders)]
        if new:
            self.set_sources(listed + new)
        return new

    # ------------------------------------------------------------------------------------------ outputs
    def copy_command(self) -> None:
        QGuiApplication.clipboard().setText(self.command.text())

    def csv_text(self) -> str:
        """Every column of the chooser table, one row per file (the recommended one marked)."""
        assert self.report is not None
        picks = self.report.recommendation.picks()
        rows = [{**choice_row(c), "recommended": int(c in picks)} for c in self.report.choices]
        return to_csv(rows, [k for k, _, _ in CHOICE_COLUMNS] + ["recommended"])

    def export_csv(self, path: str | Path) -> Path:
        return write_text_atomic(path, self.csv_text())

    def ask_export_csv(self) -> None:
        if self.report is None:
            return
        path, _ = QFileDialog.getSaveFileName(self, "Export the chooser table", str(Path.home() / "choose.csv"),
                                              "CSV (*.csv)")
        if path:
            try:
                self.export_csv(path)
                self.status.setText(f"Saved {path}")
            except OSError as e:
                self.status.setText(f"Could not save {path}: {e}")
