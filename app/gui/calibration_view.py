"""The calibration result window: how well this machine's fit matches the points it was fitted on.

Opens when Sweep → Calibrate this machine… finishes, and from Sweep → Last calibration… (the saved fit). A table
has one row per backend and phase (points, median and worst error, band, the file it is stored in); a residual
plot has each point's error (fitted ÷ measured − 1, the figure the table summarises) against where the point lies
(weights read per token, prompt length, or its place in the fit), one series per backend and phase, a line at 0 %
and each series' band as dashed lines in its colour. Set-aside points (outliers) are hollow. Hovering a point names it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent, Qt
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QLabel,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.calibrate import FitPoint, MachineFit, PhaseFit
from app.gui import theme
from app.gui.plots.items import make_plot, style_plot
from app.gui.plots.style import color
from app.gui.top_level import add_close_keys, fit_to_screen

TABLE_HEADERS = ("Backend", "Phase", "Points", "Median |error| (%)", "Band (± %)", "Worst error (%)", "Stored in")


@dataclass(frozen=True)
class XAxis:
    """One choice of the residual plot's x: its axis label, whether it is logarithmic, a point's value (by its
    place in the fit and the point)."""

    label: str
    log: bool
    value: Callable[[int, FitPoint], float]


#: The x choices, by combo-box text; the first two need points that record where they lie (fits since they do).
X_AXES: dict[str, XAxis] = {
    "weights read per token": XAxis("weights read per token (MB)", True, lambda _i, p: p.weight_bytes / 1e6),
    "prompt length": XAxis("prompt (tokens)", True, lambda _i, p: float(p.n_prompt)),
    "place in the fit": XAxis("point (in the order fitted)", False, lambda i, _p: float(i + 1)),
}


def phase_cells(backend: str, phase: str, pf: PhaseFit, path: Path) -> tuple[str, ...]:
    """One table row: backend, phase, points (and how many set aside), median |error| %, band ± %, the signed
    error of the worst used point %, the fit's file name."""
    aside = len(pf.points) - len(pf.used_points)
    worst = max(pf.used_points, key=lambda p: abs(p.rel_error), default=None)
    return (backend, phase, f"{len(pf.points)}" + (f" ({aside} set aside)" if aside else ""),
            f"{pf.median_error * 100:.1f}", f"±{pf.band_frac * 100:.1f}",
            f"{worst.rel_error * 100:+.1f}" if worst is not None else "—", path.name)


def point_tip(backend: str, phase: str, p: FitPoint) -> str:
    """A point's tooltip: what it is, measured and fitted tokens/s, its error."""
    aside = "" if p.used else " — set aside (an outlier)"
    return (f"{backend} {phase}: {p.label}{aside}\nmeasured {p.measured_tps:,.1f} tok/s, fitted "
            f"{p.fitted_tps:,.1f} tok/s ({p.rel_error * 100:+.1f} %)")


class CalibrationView(QDialog):
    """A machine fit's table and residual plot (one window per main window; ``show_fit`` shows another fit)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Calibration result")
        self.fit: MachineFit | None = None
        self.path = Path()
        self.headline = QLabel("", self)
        self.headline.setWordWrap(True)
        self.headline.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.table = QTableWidget(0, len(TABLE_HEADERS), self)
        self.table.setHorizontalHeaderLabels(list(TABLE_HEADERS))
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.verticalHeader().setVisible(False)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.notes = theme.set_role(QLabel("", self), "muted")
        self.notes.setWordWrap(True)
        self.x_choice = QComboBox(self)
        self.x_choice.currentTextChanged.connect(lambda _text: self._draw())
        x_label = QLabel("&x axis", self)
        x_label.setBuddy(self.x_choice)
        self.plot = make_plot("How far the fit is from each point", "weights read per token (MB)",
                              "fitted ÷ measured − 1 (%)")
        self.plot.setParent(self)
        self.plot_note = theme.set_role(QLabel("", self), "muted")
        self.plot_note.setWordWrap(True)
        #: per (backend, phase): the scatter of the points the fit used and of those it set aside
        self.series: dict[tuple[str, str], tuple[pg.ScatterPlotItem, pg.ScatterPlotItem]] = {}
        self._drawn: list[pg.GraphicsObject] = []
        controls = QHBoxLayout()
        controls.addWidget(x_label)
        controls.addWidget(self.x_choice)
        controls.addWidget(self.plot_note, 1)
        plot_box = QWidget(self)
        plot_lay = QVBoxLayout(plot_box)
        plot_lay.setContentsMargins(0, 0, 0, 0)
        plot_lay.addLayout(controls)
        plot_lay.addWidget(self.plot, 1)
        split = QSplitter(Qt.Orientation.Vertical, self)
        split.addWidget(self.table)
        split.addWidget(plot_box)
        split.setChildrenCollapsible(False)
        split.setSizes([150, 450])
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        buttons.rejected.connect(self.close)
        lay = QVBoxLayout(self)
        lay.addWidget(self.headline)
        lay.addWidget(split, 1)
        lay.addWidget(self.notes)
        lay.addWidget(buttons)
        fit_to_screen(self, 1100, 760)
        add_close_keys(self)

    def show_fit(self, fit: MachineFit, path: Path, headline: str = "") -> None:
        """Show ``fit`` (saved at ``path``), with ``headline`` above it (default: what the fit is of)."""
        self.fit, self.path = fit, Path(path)
        gpu = f" and {fit.gpu_info}" if fit.gpu_info else ""
        self.headline.setText(f"{headline or f'Fit of {fit.created}: {fit.n_points} points.'}\n"
                              f"{fit.cpu_info}{gpu}, {fit.build}. Stored in {self.path}")
        rows = [(b, ph, pf) for b, phases in fit.fits.items() for ph, pf in phases.items()]
        self.table.setRowCount(len(rows))
        for r, (backend, phase, pf) in enumerate(rows):
            for c, text in enumerate(phase_cells(backend, phase, pf, self.path)):
                item = QTableWidgetItem(text)
                if c >= 2 and c < len(TABLE_HEADERS) - 1:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                if c == len(TABLE_HEADERS) - 1:
                    item.setToolTip(str(self.path))
                self.table.setItem(r, c, item)
        self.table.resizeColumnsToContents()
        self.notes.setText("\n".join(f"Not fitted: {n}" for n in fit.notes))
        self.notes.setVisible(bool(fit.notes))
        located = all(p.weight_bytes > 0 for _b, _ph, pf in rows for p in pf.points)
        choices = list(X_AXES) if located else ["place in the fit"]
        self.x_choice.blockSignals(True)
        self.x_choice.clear()
        self.x_choice.addItems(choices)
        self.x_choice.blockSignals(False)
        self._draw()
        self.show()
        self.raise_()
        self.activateWindow()

    def x_axis(self) -> XAxis:
        return X_AXES.get(self.x_choice.currentText(), X_AXES["place in the fit"])

    def _draw(self) -> None:
        """Every series again (a new fit, another x, another theme): one scatter per backend, phase and use."""
        p = self.plot.getPlotItem()
        for item in self._drawn:
            p.removeItem(item)
        self._drawn.clear()
        self.series.clear()
        if self.fit is None:
            return
        axis = self.x_axis()
        p.setLabel("bottom", axis.label)
        p.setLogMode(x=axis.log, y=False)
        style_plot(self.plot)
        zero = pg.InfiniteLine(pos=0.0, angle=0, pen=pg.mkPen(theme.plot_foreground(), width=1))
        p.addItem(zero)
        self._drawn.append(zero)
        hidden = 0
        used_pct: list[float] = [0.0]  # the y range: the used points and the bands (an outlier may lie beyond)
        aside_pct: list[float] = []
        rows = [(b, ph, pf) for b, phases in self.fit.fits.items() for ph, pf in phases.items()]
        for i, (backend, phase, pf) in enumerate(rows):
            c = color(i)
            items = []
            for used in (True, False):
                pts = [(axis.value(k, pt), pt) for k, pt in enumerate(pf.points) if pt.used == used]
                shown = [(x, pt) for x, pt in pts if math.isfinite(pt.rel_error) and math.isfinite(x)
                         and (x > 0 or not axis.log)]
                hidden += len(pts) - len(shown)
                (used_pct if used else aside_pct).extend(pt.rel_error * 100 for _, pt in shown)
                xs = np.array([x for x, _ in shown], dtype=float)
                name = f"{backend} {phase}" if used else (f"{backend} {phase}: set aside" if shown else None)
                item = pg.ScatterPlotItem(
                    x=np.log10(xs) if axis.log else xs, y=np.array([pt.rel_error * 100 for _, pt in shown]),
                    data=[point_tip(backend, phase, pt) for _, pt in shown], size=8 if used else 9,
                    brush=pg.mkBrush(c) if used else None, pen=pg.mkPen(theme.plot_background() if used else c,
                                                                        width=0.8 if used else 1.6),
                    symbol="o", name=name, hoverable=True, tip=lambda x, y, data: data)
                p.addItem(item)
                items.append(item)
            self.series[(backend, phase)] = (items[0], items[1])
            self._drawn.extend(items)
            used_pct.extend((pf.band_frac * 100, -pf.band_frac * 100))
            for sign in (1, -1):
                band = pg.InfiniteLine(pos=sign * pf.band_frac * 100, angle=0,
                                       pen=pg.mkPen(c, width=1, style=Qt.PenStyle.DashLine))
                band.setToolTip(f"{backend} {phase} band ±{pf.band_frac * 100:.1f} %")
                p.addItem(band)
                self._drawn.append(band)
        lo, hi = min(used_pct), max(used_pct)
        beyond = [y for y in aside_pct if not lo <= y <= hi]
        notes = ["dashed: each series' band; hollow: set aside as outliers"]
        if beyond:
            notes.append(f"{len(beyond)} set-aside point(s) beyond the plot ({', '.join(f'{y:+.0f} %' for y in beyond)}"
                         "; right-click → View All)")
        if hidden:
            notes.append(f"{hidden} point(s) not shown (no value on this axis)")
        self.plot_note.setText("; ".join(notes))
        p.enableAutoRange(axis="x")
        p.setYRange(lo, hi, padding=0.15)

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 - Qt's name
        """A theme switch: the series again in the new page's colours."""
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange and self.fit is not None:
            self._draw()
