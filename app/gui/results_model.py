"""The results table: one row per test, measured beside predicted, with the achieved fraction of each ceiling."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, QSortFilterProxyModel, Qt
from PySide6.QtGui import QBrush, QColor, QPalette

from app.gui import theme
from app.gui.predictions import PredictionService, TestPrediction
from app.results.fields import FRACTION, PLAIN, PREDICTED_VALUE, WINDOW_FIELDS, Field, RowStatus
from app.results.row_types import ResultRow

Index = QModelIndex | QPersistentModelIndex
SORT_ROLE = Qt.ItemDataRole.UserRole
TEST_INDEX_ROLE = Qt.ItemDataRole.UserRole + 1


Getter = Callable[[ResultRow, TestPrediction | None], Any]
#: a row's value of one predicted column (its own, as the CLI writes it), or of the measured figure it is for
RowFigure = Callable[[ResultRow], Any]


@dataclass(frozen=True)
class Column:
    header: str
    value: Getter
    fmt: str = "{}"
    tip: str = ""
    kind: str = PLAIN  # PLAIN | MEASURED | PREDICTED_VALUE | FRACTION (app.results.fields)


def _pct(num: Any, den: Any) -> float | None:
    try:
        n, d = float(num), float(den)
    except (TypeError, ValueError):
        return None
    return n / d if d > 0 and math.isfinite(n) else None


def _p(attr: str, own: RowFigure) -> Getter:
    """A predicted value: the row's own (for the hardware it ran on, as the CLI writes it), else the
    prediction's ``attr`` for the profile selected in the inspector (rows stored before predictions existed)."""
    def get(r: ResultRow, p: TestPrediction | None) -> Any:
        if own(r) is not None:
            return own(r)
        return getattr(p, attr) if p is not None else None
    return get


def _frac(measured: RowFigure, attr: str, own: RowFigure, own_frac: RowFigure) -> Getter:
    def get(r: ResultRow, p: TestPrediction | None) -> Any:
        if own_frac(r) is not None:
            return own_frac(r)
        return _pct(measured(r), _p(attr, own)(r, p))
    return get


def _mib(value: Callable[[ResultRow], int | None]) -> Getter:
    return lambda r, _p: v / 2**20 if (v := value(r)) else None


def _kv_types(r: ResultRow, _p: TestPrediction | None) -> Any:
    return r.type_k if r.type_v in (None, r.type_k) else f"{r.type_k}/{r.type_v}"


def _flash_attn(r: ResultRow, _p: TestPrediction | None) -> Any:
    """``auto→1`` when llama.cpp chose, else the setting as llama-bench writes it (-1 auto, 0 off, 1 on)."""
    fa, used = r.flash_attn, r.flash_attn_effective
    if fa is None:
        return None
    return f"auto→{used}" if fa == -1 and used is not None else ("auto" if fa == -1 else fa)


def _threads(r: ResultRow, _p: TestPrediction | None) -> Any:
    """``0→2`` where "all" was asked and the engine's count is known, else the setting."""
    asked, used = r.n_threads, r.n_threads_effective
    return f"{asked}→{used}" if asked == 0 and used else asked


UNSTABLE_BADGE = "⚠ unstable"
THROTTLED_BADGE = "⚠ throttled"
BATTERY_BADGE = "⚠ on battery"
#: the accent a flagged row's status cell is tinted with (amber, as the plots' rings)
UNSTABLE_ACCENT = "#f0a000"


def flags(r: ResultRow) -> list[str]:
    """What makes an ok row's figures less than clean: a spread ≥ 10 % of the mean, GPU clocks held back by power or
    temperature during the timed part, a laptop on battery (its lower power limits)."""
    return [badge for badge, on in ((UNSTABLE_BADGE, r.unstable), (THROTTLED_BADGE, r.throttled),
                                    (BATTERY_BADGE, r.power_source == "battery")) if on]


def flag_text(r: ResultRow) -> str:
    """The flags in words, with their reasons (a tooltip)."""
    words = []
    if r.unstable:
        words.append(f"unstable (spread ≥ 10 % of the mean): {r.unstable_metrics}")
    if r.throttled:
        words.append(f"throttled: the GPU's clocks were held back during the timed part ({r.throttle_reasons})")
    if r.power_source == "battery":
        words.append("on battery: a laptop runs its CPU and GPU at lower power limits unplugged")
    return "; ".join(words)


def _status(r: ResultRow, _p: TestPrediction | None) -> Any:
    """``ok``, or ``ok ⚠ unstable ⚠ throttled`` with each flag the row has: noisy results never look clean."""
    status = r.status if r.holds("status") else ""
    return " ".join([status, *flags(r)]) if status == RowStatus.OK and flags(r) else status


#: Window columns that show more than their own field's value (a live prediction, MiB, K/V together).
_COMPUTED: dict[str, Getter] = {
    "test_index": lambda r, _p: (r.test_index or 0) + 1,
    "status": _status,
    "pred_ttft_ms": _p("ttft_ms", lambda r: r.pred_ttft_ms),
    "pred_prefill_ceiling_tps": _p("prefill_tps", lambda r: r.pred_prefill_ceiling_tps),
    "prefill_achieved_frac": _frac(lambda r: r.prefill_tps, "prefill_tps", lambda r: r.pred_prefill_ceiling_tps,
                                   lambda r: r.prefill_achieved_frac),
    "pred_decode_ceiling_tps": _p("decode_tps", lambda r: r.pred_decode_ceiling_tps),
    "decode_achieved_frac": _frac(lambda r: r.decode_tps, "decode_tps", lambda r: r.pred_decode_ceiling_tps,
                                  lambda r: r.decode_achieved_frac),
    "mem_measured_bytes": _mib(lambda r: r.mem_measured_bytes),
    "pred_mem_bytes": _mib(lambda r: r.pred_mem_bytes),
    "pred_needed_bytes": _mib(lambda r: r.pred_needed_bytes),
    "type_k": _kv_types,
    "flash_attn": _flash_attn,
    "n_threads": _threads,
}


def _column(f: Field) -> Column:
    """The window column of one table field: its header, format, tooltip and kind, and how to read a row."""
    default = "" if f.type is str else None
    getter = _COMPUTED.get(f.name) or (lambda r, _p: r.value(f.name) if r.holds(f.name) else default)
    return Column(f.header, getter, f.fmt, f.tip, f.kind)


#: The window's results columns, in the order and with the headers of the field table (WINDOW_FIELDS).
COLUMNS: tuple[Column, ...] = tuple(_column(f) for f in WINDOW_FIELDS)
#: the accent each kind of column is tinted with: predicted values blue-grey, fractions olive-grey
_KIND_ACCENT = {PREDICTED_VALUE: "#3b6fd0", FRACTION: "#8a8a40"}


_BRUSHES: dict[tuple[int, str, float], QBrush] = {}


def _brush(accent: str, share: float) -> QBrush:
    """A cell's background brush, made once per page colour (light or dark) and accent."""
    key = (theme.palette().color(QPalette.ColorRole.Base).rgb(), accent, share)
    if key not in _BRUSHES:
        _BRUSHES[key] = QBrush(theme.tint(accent, share))
    return _BRUSHES[key]


class ResultsModel(QAbstractTableModel):
    """Rows of the current session (keyed by test index), with predictions from a PredictionService."""

    def __init__(self, predictor: PredictionService, parent: Any = None) -> None:
        super().__init__(parent)
        self.predictor = predictor
        self._rows: list[ResultRow] = []
        self._pred: list[TestPrediction | None] = []
        self._where: dict[int, int] = {}

    # --- updates ----------------------------------------------------------------------------------
    def clear(self) -> None:
        self.beginResetModel()
        self._rows, self._pred, self._where = [], [], {}
        self.endResetModel()

    def update_rows(self, rows: Iterable[ResultRow]) -> None:
        """Add new rows at the end, replace changed ones in place (selection and sort survive)."""
        for row in rows:
            i = -1 if row.test_index is None else row.test_index
            pos = self._where.get(i)
            if pos is None:
                n = len(self._rows)
                self.beginInsertRows(QModelIndex(), n, n)
                self._rows.append(row)
                self._pred.append(self._predict(row))
                self._where[i] = n
                self.endInsertRows()
            elif self._rows[pos] is not row and self._rows[pos] != row:
                self._rows[pos] = row
                self._pred[pos] = self._predict(row)
                self.dataChanged.emit(self.index(pos, 0), self.index(pos, len(COLUMNS) - 1))

    def _predict(self, row: ResultRow) -> TestPrediction | None:
        """A prediction only for rows that do not carry their own (older stored runs): for the hardware the row
        says it ran on (this CPU when no layer was offloaded), else for the selected profile."""
        if row.pred_decode_ceiling_tps is not None or row.pred_prefill_ceiling_tps is not None:
            return None
        return self.predictor.for_test(row, self.predictor.hardware_of([row]))

    def refresh_predictions(self) -> None:
        self._pred = [self._predict(r) for r in self._rows]
        if self._rows:
            self.dataChanged.emit(self.index(0, 0), self.index(len(self._rows) - 1, len(COLUMNS) - 1))

    def rows(self) -> list[ResultRow]:
        return list(self._rows)

    def row_at(self, pos: int) -> ResultRow:
        return self._rows[pos]

    # --- Qt model ---------------------------------------------------------------------------------
    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self._rows)

    def columnCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if orientation != Qt.Orientation.Horizontal or not 0 <= section < len(COLUMNS):
            return None
        col = COLUMNS[section]
        if role == Qt.ItemDataRole.DisplayRole:
            return col.header
        if role == Qt.ItemDataRole.ToolTipRole:
            return col.tip or None
        return None

    def raw(self, row: int, column: int) -> Any:
        return COLUMNS[column].value(self._rows[row], self._pred[row])

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        r, c = index.row(), index.column()
        col = COLUMNS[c]
        row = self._rows[r]
        if role == Qt.ItemDataRole.DisplayRole:
            v = self.raw(r, c)
            if v is None or v == "":
                return "—" if col.kind != PLAIN else ""
            if isinstance(v, float) and not math.isfinite(v):
                return "—"
            try:
                return col.fmt.format(v)
            except (ValueError, TypeError):
                return str(v)
        if role == SORT_ROLE:
            v = self.raw(r, c)
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                return float(v)
            return -math.inf if v in (None, "") else str(v)
        if role == TEST_INDEX_ROLE:
            return -1 if row.test_index is None else row.test_index
        if role == Qt.ItemDataRole.TextAlignmentRole:
            v = self.raw(r, c)
            if isinstance(v, (int, float)):
                return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            return None
        if role == Qt.ItemDataRole.ForegroundRole and row.status not in (RowStatus.OK, None):
            return QBrush(QColor(theme.ink("bad")))
        if role == Qt.ItemDataRole.BackgroundRole and col.header == "status" and flags(row):
            return _brush(UNSTABLE_ACCENT, 0.35)
        if role == Qt.ItemDataRole.BackgroundRole and col.kind in _KIND_ACCENT:
            return _brush(_KIND_ACCENT[col.kind], 0.07)
        if role == Qt.ItemDataRole.ToolTipRole:
            if row.error:
                return str(row.error)
            if flags(row):
                return flag_text(row)
            return col.tip or None
        return None


class ResultsProxy(QSortFilterProxyModel):
    """Sorts numbers as numbers (the model's SORT_ROLE), blanks last."""

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self.setSortRole(SORT_ROLE)

    def lessThan(self, left: Index, right: Index) -> bool:
        a, b = left.data(SORT_ROLE), right.data(SORT_ROLE)
        if isinstance(a, float) and isinstance(b, float):
            return a < b
        if isinstance(a, float) != isinstance(b, float):
            return isinstance(a, float)
        return str(a) < str(b)
