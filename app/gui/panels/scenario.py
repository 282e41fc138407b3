"""Scenario: one request's wall time split into TTFT and decode, predicted and (after a run) measured."""

from __future__ import annotations

from html import escape
from typing import Any

from PySide6.QtCore import QRectF, Qt, Signal
from PySide6.QtGui import QColor, QPainter, QPaintEvent, QPalette
from PySide6.QtWidgets import (
    QComboBox,
    QFrame,
    QGridLayout,
    QLabel,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.gui import theme
from app.predict.scenario import Scenario
from app.predict.scenario_totals import MeasuredRates, ScenarioTotals

SCENARIOS: dict[str, tuple[int, int]] = {"Chat": (1000, 300), "RAG": (12000, 500)}
TTFT_COLOUR = QColor(240, 160, 40)
DECODE_COLOUR = QColor(60, 130, 220)
#: lines of the figures the panel keeps in view however its splitter is dragged (the rest scrolls)
MIN_FIGURE_LINES = 2
#: lines of the figures a column with room for them gives them (the window's left column from 1920×1080 up)
FIGURE_LINES_WANTED = 9


class SplitBar(QWidget):
    """A stacked bar: TTFT then decode, scaled to a shared maximum."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ttft_s = 0.0
        self.decode_s = 0.0
        self.scale_s = 1.0
        self.setMinimumHeight(14)
        self.setMaximumHeight(16)

    def set_values(self, ttft_s: float, decode_s: float, scale_s: float) -> None:
        self.ttft_s, self.decode_s, self.scale_s = ttft_s, decode_s, max(scale_s, 1e-9)
        self.update()

    def paintEvent(self, _event: QPaintEvent) -> None:  # noqa: N802
        p = QPainter(self)
        w, h = self.width(), self.height()
        p.fillRect(0, 0, w, h, self.palette().color(QPalette.ColorRole.AlternateBase))
        a = w * self.ttft_s / self.scale_s
        b = w * self.decode_s / self.scale_s
        p.fillRect(QRectF(0, 0, a, h), TTFT_COLOUR)
        p.fillRect(QRectF(a, 0, b, h), DECODE_COLOUR)
        p.end()


def split_text(what: str, sc: Scenario | None, note: str = "") -> str:
    if sc is None:
        return f"<b>{what}</b>: <span style='color:{theme.ink('muted')}'>{escape(note) or '—'}</span>"
    ttft, decode = theme.ink("ttft"), theme.ink("decode")
    return (f"<b>{what}</b>: {sc.total_s:,.2f} s = <span style='color:{ttft}'>TTFT {sc.ttft_s:,.2f} s</span>"
            f" + <span style='color:{decode}'>decode {sc.decode_s:,.2f} s</span> ({sc.ttft_share:.0%} in TTFT)")


class ScenarioPanel(QWidget):
    """Chat / RAG / typed lengths → total time ≈ prompt ÷ prefill rate + output ÷ decode rate."""

    changed = Signal()
    run_requested = Signal(int, int)  # (prompt tokens, answer tokens): measure this request for real

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.kind = QComboBox(self)
        for name, (p, n) in SCENARIOS.items():
            self.kind.addItem(f"{name} ({p:,} prompt / {n} answer)", name)
        self.kind.addItem("Typed lengths", "custom")
        self.prompt = QSpinBox(self)
        self.output = QSpinBox(self)
        for spin, tip in ((self.prompt, "prompt tokens"), (self.output, "answer tokens")):
            spin.setRange(0, 1_000_000)
            spin.setSingleStep(100)
            spin.setToolTip(tip)
            spin.valueChanged.connect(self._typed)
        self.kind.currentIndexChanged.connect(self._kind_chosen)
        self.predicted = QLabel(self)
        self.exact = QLabel(self)
        self.measured = QLabel(self)
        self.what_if = QLabel(self)
        self.warning = QLabel(self)
        theme.set_role(self.warning, "warn")
        for lab in (self.predicted, self.exact, self.measured, self.what_if, self.warning):
            lab.setWordWrap(True)
            lab.setTextFormat(Qt.TextFormat.RichText)
        self.pred_bar = SplitBar(self)
        self.meas_bar = SplitBar(self)
        self.source = QLabel(self)
        self.source.setWordWrap(True)
        theme.set_role(self.source, "muted")
        self.run_button = QPushButton("Run this scenario", self)
        self.run_button.setToolTip("Measure one request of exactly these lengths on the selected model, from an "
                                   "empty context (one repetition after a warm-up), instead of extrapolating")
        self.run_button.clicked.connect(lambda: self.run_requested.emit(*self.lengths()))
        grid = QGridLayout()
        grid.setContentsMargins(0, 0, 0, 0)
        grid.addWidget(self.kind, 0, 0, 1, 3)
        grid.addWidget(self.run_button, 0, 3)
        grid.addWidget(QLabel("prompt", self), 1, 0)
        grid.addWidget(self.prompt, 1, 1)
        grid.addWidget(QLabel("answer", self), 1, 2)
        grid.addWidget(self.output, 1, 3)
        # the figures, each label as tall as its wrapped text and each bar under its own label, in a scroll area:
        # a short panel (a laptop's screen, a dragged splitter) scrolls them instead of painting bars over text or
        # squashing the inputs above them
        self.body = QWidget(self)
        body = QVBoxLayout(self.body)
        body.setContentsMargins(0, 0, 0, 0)
        body.setSpacing(2)
        for w in (self.predicted, self.pred_bar, self.exact, self.measured, self.meas_bar, self.what_if,
                  self.warning, self.source):
            body.addWidget(w)
        body.addStretch(1)
        self.figures_area = QScrollArea(self)
        self.figures_area.setWidgetResizable(True)
        self.figures_area.setFrameShape(QFrame.Shape.NoFrame)
        self.figures_area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.figures_area.setWidget(self.body)
        self.figures_area.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Expanding)
        self.figures_area.setMinimumHeight(MIN_FIGURE_LINES * (self.fontMetrics().lineSpacing() + 2) + 4)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(2)
        lay.addLayout(grid)
        lay.addWidget(self.figures_area, 1)
        self._setting = False
        self._kind_chosen()
        self.pred: Scenario | None = None
        self.meas: Scenario | None = None

    def figures_wanted_px(self) -> int:
        """The height the figures want, before any is shown: FIGURE_LINES_WANTED lines and the two bars (the
        prediction, the estimate and the what-if wrap to two lines each in a 1920×1080 window's column)."""
        return FIGURE_LINES_WANTED * (self.fontMetrics().lineSpacing() + 2) + 2 * self.pred_bar.maximumHeight()

    def lengths(self) -> tuple[int, int]:
        return self.prompt.value(), self.output.value()

    def _kind_chosen(self, *_a: Any) -> None:
        name = self.kind.currentData()
        if name in SCENARIOS:
            self._setting = True
            p, n = SCENARIOS[name]
            self.prompt.setValue(p)
            self.output.setValue(n)
            self._setting = False
        self.changed.emit()

    def _typed(self, *_a: Any) -> None:
        if self._setting:
            return
        i = self.kind.findData("custom")
        if self.kind.currentIndex() != i:
            self.kind.blockSignals(True)
            self.kind.setCurrentIndex(i)
            self.kind.blockSignals(False)
        self.changed.emit()

    def show_totals(self, totals: ScenarioTotals, profile_name: str = "", missing: str = "", *,
                    what_if: Scenario | None = None, what_if_name: str = "", model: str = "",
                    n_ctx_train: int = 0) -> None:
        """Show the prediction (for the hardware the rates were measured on), the estimate from measured rates,
        and the inspector's other profile as a what-if; either may be None."""
        self.pred, self.meas = totals.predicted, totals.measured
        on = f" on {profile_name}" if profile_name else ""
        self.predicted.setText(split_text(f"Predicted{escape(on)}", self.pred, missing or "no prediction yet"))
        self.exact.setVisible(totals.exact is not None)
        self.exact.setText(split_text(f"Measured{f' ({escape(model)})' if model else ''}", totals.exact)
                           if totals.exact else "")
        self.measured.setText(split_text(f"Estimated from measured rates{f' ({escape(model)})' if model else ''}",
                                         self.meas, "run a sweep to measure"))
        self.what_if.setVisible(bool(what_if_name))
        self.what_if.setText(split_text(f"What-if on {escape(what_if_name)}", what_if, "no prediction")
                             if what_if_name else "")
        p, n = self.lengths()
        beyond = n_ctx_train and p + n > n_ctx_train
        self.warning.setVisible(bool(beyond))
        self.warning.setText(f"⚠ {p + n:,} tokens is beyond {escape(model) or 'the model'}'s trained context "
                             f"({n_ctx_train:,}): llama.cpp warns, and quality may collapse." if beyond else "")
        scale = max((s.total_s for s in (self.pred, self.meas, totals.exact) if s is not None), default=1.0)
        for bar, sc in ((self.pred_bar, self.pred), (self.meas_bar, self.meas)):
            bar.set_values(sc.ttft_s if sc else 0.0, sc.decode_s if sc else 0.0, scale)
        self.source.setText(source_text(totals.rates, profile_name))


def source_text(rates: MeasuredRates | None, profile_name: str = "") -> str:
    """Where the estimate comes from: the measured rates' tests (``profile_name`` is kept for callers)."""
    if rates is None:
        return ""
    return (f"An extrapolation from the measured rates: prefill {rates.prefill_tps:,.0f} tok/s "
            f"(at {rates.prefill_n_prompt} prompt tokens), decode {rates.decode_tps:,.1f} tok/s "
            f"(mean of {rates.n_decode_tests} test{'' if rates.n_decode_tests == 1 else 's'}).")
