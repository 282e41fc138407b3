"""The window's results table takes its columns from the field table (app.results.fields)."""

from __future__ import annotations

import json

from PySide6.QtCore import Qt

from app.gui.predictions import PredictionService
from app.gui.results_model import COLUMNS, ResultsModel
from app.results.fields import FIELD_BY_NAME, PLAIN, WINDOW_FIELDS
from app.results.row_types import ResultRow
from tests.gui.conftest import RECORDED

H = Qt.Orientation.Horizontal


def _recorded_rows() -> list[ResultRow]:
    events = [json.loads(line) for line in RECORDED.read_text().splitlines() if line and not line.startswith("#")]
    return [ResultRow.from_mapping(e["row"]) for e in events if e.get("type") == "test_finished"]


def test_headers_tips_and_kinds_are_the_tables(qtbot, qtmodeltester) -> None:  # noqa: ANN001 - pytest-qt fixtures
    model = ResultsModel(PredictionService())
    assert model.columnCount() == len(WINDOW_FIELDS)
    headers = [model.headerData(c, H) for c in range(model.columnCount())]
    assert headers == [f.header for f in WINDOW_FIELDS]
    tips = [model.headerData(c, H, Qt.ItemDataRole.ToolTipRole) for c in range(model.columnCount())]
    assert tips == [f.tip for f in WINDOW_FIELDS]
    assert [(c.fmt, c.kind) for c in COLUMNS] == [(f.fmt, f.kind) for f in WINDOW_FIELDS]
    model.update_rows(_recorded_rows())
    qtmodeltester.check(model)


def test_cells_use_the_tables_formats(qtbot) -> None:  # noqa: ANN001 - pytest-qt fixture
    rows = _recorded_rows()
    assert len(rows) == 4
    model = ResultsModel(PredictionService())
    model.update_rows(rows)
    col = {f.name: i for i, f in enumerate(WINDOW_FIELDS)}
    first = rows[0]
    assert model.index(0, col["test_index"]).data() == str(first.test_index + 1)
    assert model.index(0, col["decode_tps"]).data() == FIELD_BY_NAME["decode_tps"].fmt.format(first.decode_tps)
    assert model.index(0, col["ttft_ms"]).data() == f"{first.ttft_ms:.1f}"
    frac = model.index(0, col["decode_achieved_frac"]).data()
    assert frac == f"{first.decode_achieved_frac:.0%}"
    assert model.index(0, col["mem_measured_bytes"]).data() == f"{first.mem_measured_bytes / 2**20:.0f}"
    shaded = [c for c, f in enumerate(WINDOW_FIELDS) if model.index(0, c).data(Qt.ItemDataRole.BackgroundRole)]
    assert shaded == [c for c, f in enumerate(WINDOW_FIELDS) if f.kind in ("predicted", "fraction")]
    blank = ResultsModel(PredictionService())
    blank.update_rows([ResultRow(test_index=7, status="failed", error="out of memory")])
    texts = {f.name: blank.index(0, c).data() for c, f in enumerate(WINDOW_FIELDS)}
    assert texts["test_index"] == "8" and texts["error"] == "out of memory"
    assert all(texts[f.name] == "—" for f in WINDOW_FIELDS if f.kind != PLAIN)


def test_flash_attention_column_says_what_auto_became(qtbot) -> None:  # noqa: ANN001 - pytest-qt fixture
    model = ResultsModel(PredictionService())
    model.update_rows([ResultRow(test_index=0, flash_attn=-1, flash_attn_effective=1),
                       ResultRow(test_index=1, flash_attn=0, flash_attn_effective=0),
                       ResultRow(test_index=2, flash_attn=-1)])
    col = next(i for i, f in enumerate(WINDOW_FIELDS) if f.name == "flash_attn")
    assert [model.index(r, col).data() for r in range(3)] == ["auto→1", "0", "auto"]


def test_threads_column_says_what_all_became(qtbot) -> None:  # noqa: ANN001 - pytest-qt fixture
    model = ResultsModel(PredictionService())
    model.update_rows([ResultRow(test_index=0, n_threads=0, n_threads_effective=2),
                       ResultRow(test_index=1, n_threads=1, n_threads_effective=1),
                       ResultRow(test_index=2, n_threads=0)])
    col = next(i for i, f in enumerate(WINDOW_FIELDS) if f.name == "n_threads")
    assert [model.index(r, col).data() for r in range(3)] == ["0→2", "1", "0"]
