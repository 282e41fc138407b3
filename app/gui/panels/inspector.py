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
from app.gui.panels.library import human_bytes
from app.gui.predictions import PredictionService
from app.model.facts import ModelFacts
from app.model.kv_cache import REPORTED_CACHE_TYPES
from app.predict.answer import Answer, Figure
from app.predict.placement import FitVerdict
from app.predict.profiles import HardwareProfile, with_given_ram
from app.predict.questions import DEFAULT_N_CTX, Question
from app.predict.settings import at_context_depth

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
        self.profile_combo.currentIndexChanged.connect(lambda _i: self.profileChanged.emit())
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
        for w in (self.ctx, self.ngl):
            w.valueChanged.connect(lambda _v: self.settingsChanged.emit())
        self.kv_type.currentIndexChanged.connect(lambda _i: self.settingsChanged.emit())
        form = QFormLayout()
        form.setContentsMargins(0, 0, 0, 0)
        hw_row = QHBoxLayout()
        hw_row.addWidget(self.profile_combo, 3)
        hw_row.addWidget(self.ram, 2)
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
        self.profileChanged.emit()

    def current_profile(self) -> HardwareProfile | None:
        """The profile chosen, with the system RAM given beside it (as ``predict --ram``)."""
        i = self.profile_combo.currentIndex()
        profile = self._profiles[i] if 0 <= i < len(self._profiles) else None
        # RAM beside a discrete GPU only (the one rule, with_given_ram): a CPU or unified memory holds the model in
        # its own pool, so the field is off for them
        self.ram.setEnabled(profile is not None and not profile.is_unified)
        if profile is not None and self.ram.value() > 0 and not profile.is_unified:
            profile = with_given_ram(profile, self.ram.value())
        return profile

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
        tk = self.kv_type.currentText()
        kv = human_bytes(facts.kv_bytes_per_token(tk)) or f"{facts.kv_bytes_per_token(tk):.0f} B"
        # the file's facts as one small paragraph (seven rows put them below a laptop screen's fold); its size,
        # type and parameters are the library's columns, its quantization is in its name
        facts_html = (f"<p style='color:{theme.ink('muted')}; font-size:small; margin:2px 0 0 0'>"
                      f"{escape(facts.architecture)}, {facts.n_layer} layers, {facts.bits_per_weight:.2f} bits/weight; "
                      f"{facts.n_head} heads, {facts.n_head_kv} KV heads × {facts.head_dim_k}, {kv} of KV cache per "
                      f"token ({escape(tk)}); trained context {facts.n_ctx_train:,} tokens</p>")
        html = [f"<b>{name}</b>"]
        profile = predictor.profile
        question = self.question()
        verdict = predictor.verdict(path, question)
        if profile is None:
            html.append("<i>No hardware profile yet (measuring this CPU…).</i>")
        elif isinstance(verdict, str):
            html.append(f"<br><span style='color:{theme.ink('bad')}'>{escape(verdict)}</span>")
        elif verdict is not None:
            placed = verdict.asked if verdict.user_placed else verdict.best
            at = (question.with_placement(placed.n_gpu_layers, placed.n_cpu_moe, placed.type_k)
                  if placed is not None else question)
            pred = predictor.predict_settings(path, at.at_context(), measured=True)
            if pred is None:
                html.append("<i>No prediction for this model and profile.</i>")
            else:
                # the verdict first: on a short screen it must not scroll out of view; then the figures, the
                # file's facts and a line for the notes (in full, the tooltip's): on a laptop's screen all of it
                # above the fold
                verdict_html, figures = self._prediction_html(path, facts, pred, profile, at, verdict, predictor)
                html += [verdict_html, figures, facts_html, _notes_line(pred.notes)]
                self.text.setText("".join(html))
                tip = self._sources_tip(pred, predictor, path, at)
                self.text.setToolTip("\n\n".join([tip, *pred.notes]) if tip else "\n\n".join(pred.notes))
                return
        html.append(facts_html)
        self.text.setText("".join(html))
        self.text.setToolTip("")

    def question(self) -> Question:
        """What the inspector asks: its context, KV-cache type and -ngl (999: the best placement, as the chooser and
        ``predict`` search it), the default margin."""
        return Question(n_ctx=self.ctx.value(), type_k=self.kv_type.currentText(), n_gpu_layers=self.ngl.value())

    def _short_answer(self, path: str, at: Question, predictor: PredictionService, got: Answer) -> Answer:
        """The answer for a 512-token prompt at the question's context (llama-bench's default -p; the context's own
        prompt is long): the prefill and TTFT rows' figures."""
        return predictor.predict_settings(path, at.short_prompt(), measured=True) or got

    def _sources_tip(self, got: Answer, predictor: PredictionService, path: str, at: Question) -> str:
        """The inspector's tooltip: each expected figure's whole source (the text names only the source's kind,
        which keeps every figure above the fold of a laptop's screen)."""
        short = self._short_answer(path, at, predictor, got)
        parts = [(phase, fig) for phase, fig in (("Decode", got.decode), ("Decode, empty cache", got.decode_empty),
                                                 ("Prefill", short.prefill)) if fig is not None]
        seen: dict[str, list[str]] = {}
        for phase, fig in parts:
            seen.setdefault(fig.source.text(), []).append(phase)
        return "\n\n".join(f"{', '.join(phases)}: {text}" for text, phases in seen.items())

    def _prediction_html(self, path: str, facts: ModelFacts, got: Answer, profile: HardwareProfile,
                         at: Question, verdict: FitVerdict, predictor: PredictionService) -> tuple[str, str]:
        """The verdict (the one every surface prints: its words, placement and reason) and the figures behind it on
        ``profile`` at the verdict's placement: the memory breakdown, decode at a full context and from an empty
        cache, prefill for a 512-token prompt; each as the answer gives it (its kind and its source's name; the
        whole source is the tooltip's)."""
        pred = got.prediction
        fit = pred.fit
        colour = FIT_COLOURS.get(verdict.status, "muted")
        if verdict.beyond_trained and colour == "good":
            colour = "warn"
        placed = verdict.asked if verdict.user_placed else verdict.best
        flags = f" ({escape(placed.flags(verdict.kv_cache))})" if placed is not None else ""
        verdict_html = (f"<span style='color:{theme.ink(colour)}; font-weight:bold'>{escape(verdict.word)}</span>"
                        f"{flags} at {at.n_ctx:,} tokens — {escape(verdict.reason())}")
        short = self._short_answer(path, at, predictor, got)
        depth = at_context_depth(at.at_context())
        rows = [
            # the breakdown in one row: five rows pushed the speed figures below a laptop screen's fold
            ("Memory needed", f"{human_bytes(fit.needed_bytes)} of {human_bytes(fit.budget_bytes)} "
                              f"= weights {human_bytes(fit.weight_bytes)} + KV cache {human_bytes(fit.kv_bytes)} "
                              f"+ compute buffers {human_bytes(fit.compute_buffer_bytes)} + runtime overhead "
                              f"{human_bytes(fit.overhead_bytes)}"
                              + (f"; {human_bytes(fit.margin_bytes)} kept free" if fit.margin_bytes else "")),
            ("Largest context", largest_context(fit.max_ctx, facts.n_ctx_train)),
            ("Decode ceiling", f"{pred.decode_ceiling_empty_tps:,.1f} tok/s empty, {pred.decode_ceiling_tps:,.1f} "
                               f"at depth {depth:,} (the context full)"),
            _figure_row("Decode", got.decode, f"at depth {depth:,}", got.no_expected_decode),
            _figure_row("Decode, empty cache", got.decode_empty, "llama-bench's tg128"),
            ("Prefill ceiling", f"{short.prediction.prefill_ceiling_tps:,.0f} tok/s, TTFT "
                                f"{short.prediction.ttft_ms:,.1f} ms (512-token prompt)"),
        ]
        if short.prefill is not None:
            rows.append(_figure_row("Prefill", short.prefill, "512-token prompt"))
        return f"<br><b>On {escape(profile.name)}</b>: {verdict_html}", _table(rows)


def _notes_line(notes: tuple[str, ...]) -> str:
    """The answer's notes (its assumptions: the system RAM, a laptop GPU's power limit) as one muted line; the notes
    themselves are the tooltip's, as the whole source is (in full they put the file's facts below the fold)."""
    if not notes:
        return ""
    what = "A note" if len(notes) == 1 else f"{len(notes)} notes"  # words, no symbol: a font may lack it
    return (f"<p style='color:{theme.ink('muted')}; font-size:small; margin:0'>{what} on what these figures assume: "
            f"hover to read</p>")


def _figure_row(phase: str, fig: Figure, where: str, why: str = "") -> tuple[str, str]:
    """A phase's figure as the answer gives it: expected (with its band) or measured, what it is for and its source;
    or, for a ceiling, why there is no expected figure."""
    muted = theme.ink("muted")
    if fig.kind == "ceiling":
        hint = " (Sweep → Calibrate this machine…)" if phase == "Decode" else ""
        return (f"{phase} expected", f"<span style='color:{muted}'>no fit for this hardware: ceilings only"
                                     f"{hint}{': ' + escape(why) if why else ''}</span>")
    label = f"{phase} {'measured' if fig.kind == 'measured' else 'expected'}"
    band = f" ({fig.low:,.1f}–{fig.high:,.1f})" if fig.low is not None and fig.high and fig.high > fig.low else ""
    return (label, f"<b>{fig.value:,.1f} tok/s</b>{band} {escape(where)} <span style='color:{muted}'>— "
                   f"{escape(fig.source.name or fig.source.text())}</span>")


def largest_context(max_ctx: int, n_ctx_train: int) -> str:
    """The largest context that both fits and stays within the trained context (what the verdict accepts)."""
    if n_ctx_train and max_ctx > n_ctx_train:
        return f"{n_ctx_train:,} tokens (the trained context; memory allows {max_ctx:,})"
    return f"{max_ctx:,} tokens"


def _table(rows: list[tuple[str, str]]) -> str:
    cells = "".join(f"<tr><td style='color:{theme.ink('muted')}; padding-right:8px'>{escape(k)}</td><td>{v}</td></tr>"
                    for k, v in rows)
    return f"<table cellspacing='0' cellpadding='0'>{cells}</table>"


def _profile_tip(p: HardwareProfile) -> str:
    mem = "RAM" if p.kind == "cpu" else "VRAM"
    return (f"{p.name}: {p.peak_bandwidth_gbps:.0f} GB/s, {p.fp16_tensor_tflops * 1000:.0f} GFLOPS, "
            f"{mem} {p.vram_gib:.0f} GiB ({p.source})")
