"""Inspector: what the selected model is, and what the selected hardware should do with it."""

from __future__ import annotations

import os
from html import escape

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QScrollArea,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.gui import theme
from app.gui.power_fields import PowerFields
from app.gui.predictions import PredictionService
from app.model.facts import ModelFacts
from app.model.kv_cache import REPORTED_CACHE_TYPES
from app.predict.profiles import HardwareProfile, with_given_ram
from app.predict.questions import DEFAULT_N_CTX, Question
from app.views.inspector import FigureRow, InspectorView, facts_line, inspector_view

#: the verdict's colour by its status (the words are the verdict's own: app.predict.placement.FitVerdict)
FIT_COLOURS = {"fits": "good", "partial": "warn", "does_not_fit": "bad"}


class InspectorPanel(QWidget):
    """Model facts + fit and ceilings for a hardware profile, at a chosen context, KV type and GPU layers."""

    profileChanged = Signal()
    settingsChanged = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.profile_combo = QComboBox(self)
        self.profile_combo.setToolTip("Hardware the predictions are for: the detected GPU, this CPU (measured "
                                      "by a short probe), or any profile from the list")
        self.profile_combo.setMinimumContentsLength(18)
        self.profile_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.profile_combo.currentIndexChanged.connect(self._profile_chosen)
        self.ram = QDoubleSpinBox(self)
        self.ram.setRange(0.0, 65536.0)
        self.ram.setDecimals(0)
        self.ram.setSingleStep(8.0)
        self.ram.setSuffix(" GiB RAM")
        self.ram.setSpecialValueText("RAM: assumed")
        self.ram.setToolTip("System RAM beside the GPU, for placements that keep layers or experts in it (as "
                            "gguf-bench predict --ram): 'assumed' takes this machine's for its own hardware, else "
                            "16 GiB beside a laptop GPU and 32 beside a desktop one; the OS's share is held back")
        self.ram.valueChanged.connect(lambda _v: self.profileChanged.emit())
        self.ctx = QSpinBox(self)
        self.ctx.setRange(256, 1_048_576)
        self.ctx.setSingleStep(1024)
        self.ctx.setValue(DEFAULT_N_CTX)
        self.ctx.setSuffix(" tokens")
        self.ctx.setToolTip("Context size for the fit check and the KV-cache size")
        self.kv_type = QComboBox(self)
        self.kv_type.addItems(list(REPORTED_CACHE_TYPES))
        self.kv_type.setToolTip("KV cache type (llama.cpp -ctk/-ctv)")
        self.ngl = QSpinBox(self)
        self.ngl.setRange(0, 999)
        self.ngl.setValue(999)
        self.ngl.setSpecialValueText("0 (CPU only)")
        self.ngl.setToolTip("GPU layers (-ngl); 999 = all")
        # the GPU's power state (a laptop part's limit, on battery): part of the hardware the figures are for
        self.power_fields = PowerFields(self, self.profileChanged.emit)
        self.power, self.battery = self.power_fields.power, self.power_fields.battery
        for w in (self.ctx, self.ngl):
            w.valueChanged.connect(lambda _v: self.settingsChanged.emit())
        self.kv_type.currentIndexChanged.connect(lambda _i: self.settingsChanged.emit())
        form = QFormLayout()
        form.setContentsMargins(0, 0, 0, 0)
        # the hardware, the RAM beside it and its GPU power state in one row (a row more pushed the figures below a
        # laptop's fold)
        hw_row = QHBoxLayout()
        hw_row.addWidget(self.profile_combo, 6)
        hw_row.addWidget(self.ram, 3)
        hw_row.addWidget(self.power, 3)
        hw_row.addWidget(self.battery, 0)
        form.addRow("Hardware", hw_row)
        # the context, the KV type and the GPU layers in one row: a row less above the figures, which a laptop's
        # screen shows whole only so (the layers' spin box says what it is: "-ngl 999")
        self.ngl.setPrefix("-ngl ")
        row = QHBoxLayout()
        row.addWidget(self.ctx, 5)
        row.addWidget(self.kv_type, 3)
        row.addWidget(self.ngl, 4)
        form.addRow("Context", row)
        self.text = QLabel(self)
        self.text.setWordWrap(True)
        self.text.setTextFormat(Qt.TextFormat.RichText)
        self.text.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        self.text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        scroll = QScrollArea(self)
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        scroll.setWidget(self.text)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addLayout(form)
        lay.addWidget(scroll, 1)
        self._profiles: list[HardwareProfile | None] = []

    # --- profiles -------------------------------------------------------------------------------
    def set_profiles(self, items: list[tuple[str, HardwareProfile | None]], select: str | None = None) -> None:
        current = select or self.profile_combo.currentText()
        self.profile_combo.blockSignals(True)
        self.profile_combo.clear()
        self._profiles = []
        for label, profile in items:
            self.profile_combo.addItem(label)
            if profile is not None:
                self.profile_combo.setItemData(self.profile_combo.count() - 1, _profile_tip(profile),
                                               Qt.ItemDataRole.ToolTipRole)
            self._profiles.append(profile)
        i = self.profile_combo.findText(current) if current else -1
        if i < 0 and current:  # a profile name without its "Detected:" prefix, or the other way round
            i = next((k for k, p in enumerate(self._profiles)
                      if p is not None and (p.name == current or current.endswith(p.name))), -1)
        self.profile_combo.setCurrentIndex(max(i, 0))
        self.profile_combo.blockSignals(False)
        self._sync_power()
        self.profileChanged.emit()

    def current_profile(self) -> HardwareProfile | None:
        """The profile chosen, with the system RAM given beside it (as ``predict --ram``), at the power state the GPU
        power fields ask (as ``predict --power-limit``/``--on-battery``; as it is where they ask nothing)."""
        i = self.profile_combo.currentIndex()
        profile = self._profiles[i] if 0 <= i < len(self._profiles) else None
        # RAM beside a discrete GPU only (the one rule, with_given_ram): a CPU or unified memory holds the model in
        # its own pool, so the field is off for them
        self.ram.setEnabled(profile is not None and not profile.is_unified)
        if profile is not None and self.ram.value() > 0 and not profile.is_unified:
            profile = with_given_ram(profile, self.ram.value())
        return self.power_fields.applied(profile)

    def _profile_chosen(self, _index: int) -> None:
        self._sync_power()  # before the answer asks current_profile()
        self.profileChanged.emit()

    def _sync_power(self) -> None:
        """The power fields for the chosen profile (off for a CPU or unified memory)."""
        i = self.profile_combo.currentIndex()
        self.power_fields.sync(self._profiles[i] if 0 <= i < len(self._profiles) else None)

    def select_profile(self, query: str) -> bool:
        """Select the first profile whose label or name contains ``query`` (case-insensitive)."""
        q = query.casefold()
        for k, p in enumerate(self._profiles):
            if p is not None and (q in self.profile_combo.itemText(k).casefold() or q in p.name.casefold()):
                self.profile_combo.setCurrentIndex(k)
                return True
        return False

    # --- text -----------------------------------------------------------------------------------
    def show_model(self, path: str | None, facts: ModelFacts | None, error: str | None,
                   predictor: PredictionService) -> None:
        """The selected file on the chosen hardware: the view :func:`app.views.inspector.inspector_view` decides
        (the figures ``gguf-bench predict`` prints), rendered; or why there is none."""
        if not path:
            self.text.setText("<i>Select a model in the library.</i>")
            return
        name = escape(os.path.basename(path))
        if not os.path.isfile(path):
            error = "the file no longer exists (deleted or moved since it was added)"
        if error:
            self.text.setText(f"<b>{name}</b><br><span style='color:{theme.ink('bad')}'>Cannot read this file: "
                              f"{escape(error)}</span>")
            return
        if facts is None:
            self.text.setText(f"<b>{name}</b><br><i>reading the file's header…</i>")
            return
        html = [f"<b>{name}</b>"]
        profile = predictor.profile
        question = self.question()
        if profile is None:
            html.append("<i>No hardware profile yet (measuring this CPU…).</i>")
            view: InspectorView | str | None = None
        else:
            view = inspector_view(facts, profile, question, predictor.verdict(path, question),
                                  lambda s: predictor.predict_settings(path, s, measured=True),
                                  os.path.basename(path))
        if isinstance(view, InspectorView):
            # the verdict first: on a short screen it must not scroll out of view; then the figures, the file's
            # facts and a line for the notes (in full, the tooltip's): on a laptop's screen all of it above the fold
            html += [f"<br><b>On {escape(view.profile_name)}</b>: {_verdict_html(view)}", _rows_html(view.rows()),
                     _facts_html(view.facts_line()), _notes_line(view.notes)]
            self.text.setText("".join(html))
            tip = view.sources_text()
            self.text.setToolTip("\n\n".join([tip, *view.notes]) if tip else "\n\n".join(view.notes))
            return
        if isinstance(view, str):  # a failed answer shows its reason
            html.append(f"<br><span style='color:{theme.ink('bad')}'>{escape(view)}</span>")
        html.append(_facts_html(facts_line(facts, self.kv_type.currentText())))
        self.text.setText("".join(html))
        self.text.setToolTip("")

    def question(self) -> Question:
        """What the inspector asks: its context, KV-cache type and -ngl (999: the best placement, as the chooser and
        ``predict`` search it), the default margin."""
        return Question(n_ctx=self.ctx.value(), type_k=self.kv_type.currentText(), n_gpu_layers=self.ngl.value())


def _verdict_html(view: InspectorView) -> str:
    """The verdict's word in its colour, then its flags, context and reason (the words every surface prints)."""
    verdict = view.verdict
    colour = FIT_COLOURS.get(verdict.status, "muted")
    if verdict.beyond_trained and colour == "good":
        colour = "warn"
    flags = f" ({escape(view.flags)})" if view.flags else ""
    return (f"<span style='color:{theme.ink(colour)}; font-weight:bold'>{escape(verdict.word)}</span>"
            f"{flags} at {view.question.n_ctx:,} tokens — {escape(verdict.reason())}")


def _facts_html(line: str) -> str:
    """The file's facts as one small paragraph (seven rows put them below a laptop screen's fold); its size, type and
    parameters are the library's columns, its quantization is in its name."""
    return f"<p style='color:{theme.ink('muted')}; font-size:small; margin:2px 0 0 0'>{escape(line)}</p>"


def _notes_line(notes: tuple[str, ...]) -> str:
    """The answer's notes (its assumptions: the system RAM, a laptop GPU's power limit) as one muted line; the notes
    themselves are the tooltip's, as the whole source is (in full they put the file's facts below the fold)."""
    if not notes:
        return ""
    what = "A note" if len(notes) == 1 else f"{len(notes)} notes"  # words, no symbol: a font may lack it
    return (f"<p style='color:{theme.ink('muted')}; font-size:small; margin:0'>{what} on what these figures assume: "
            f"hover to read</p>")


def _row_html(row: FigureRow) -> str:
    """A row's value, emphasised where it is a figure the answer expects or measured, its source muted."""
    muted = theme.ink("muted")
    if row.kind == "none":
        return f"<span style='color:{muted}'>{escape(row.value)}</span>"
    value = f"<b>{escape(row.value)}</b>" if row.kind in ("expected", "measured") else escape(row.value)
    value += f" ({escape(row.band)})" if row.band else ""
    where = f" {escape(row.where)}" if row.where else ""
    source = f" <span style='color:{muted}'>— {escape(row.source)}</span>" if row.source else ""
    return value + where + source


def _rows_html(rows: tuple[FigureRow, ...]) -> str:
    return _table([(r.label, _row_html(r)) for r in rows])


def _table(rows: list[tuple[str, str]]) -> str:
    cells = "".join(f"<tr><td style='color:{theme.ink('muted')}; padding-right:8px'>{escape(k)}</td><td>{v}</td></tr>"
                    for k, v in rows)
    return f"<table cellspacing='0' cellpadding='0'>{cells}</table>"


def _profile_tip(p: HardwareProfile) -> str:
    mem = "RAM" if p.kind == "cpu" else "VRAM"
    return (f"{p.name}: {p.peak_bandwidth_gbps:.0f} GB/s, {p.fp16_tensor_tflops * 1000:.0f} GFLOPS, "
            f"{mem} {p.vram_gib:.0f} GiB ({p.source})")
