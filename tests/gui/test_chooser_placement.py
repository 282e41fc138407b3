"""Issue #27: the window's chooser table shows what ``gguf-bench choose`` prints: the placement (-ngl, -ncmoe, the KV
type), decode at the context and from an empty cache, the figure's kind and the lineage; the command copied for
the pick carries the placement's flags; the table fits a 1366×768 laptop screen and works from the keyboard.

Header-only GGUFs of real shapes on the "RTX 4060 Laptop" profile (as tests/cli/test_choose_laptop.py): a dense 14B
too large for 8 GB (partial offload) and a 30B-A3B mixture of experts (experts in system RAM); no model runs.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication

from app.choose.choice_text import placement_flags
from app.choose.verdicts import llama_server_command
from app.gui.chooser_view import TABLE_HEADERS, TABLE_KEYS, ChooserView
from tests.gguf_synth import write_shape_gguf, write_synthetic_gguf

pytestmark = pytest.mark.heavy  # seconds of placement search over full-size model shapes

HW = "RTX 4060 Laptop"
DENSE, MOE, COPY = "dense-14b.Q4_K_M.gguf", "moe-30b-a3b.Q4_K_M.gguf", "tiny-copy.Q8_0.gguf"
#: What fit_to_screen gives the chooser on a 1366×768 screen (tests/gui/test_screen_fit.py checks that it does).
LAPTOP_WINDOW_PX = (1293, 681)


@pytest.fixture(scope="module")
def laptop_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("laptop")
    write_shape_gguf(folder / DENSE, n_layer=48, n_embd=5120, n_head=40, n_head_kv=8, n_ff=13824, n_vocab=152064,
                     name="dense-14b")  # Qwen2.5-14B's shape: 8.5 GB
    write_shape_gguf(folder / MOE, n_layer=48, n_embd=2048, n_head=32, n_head_kv=4, key_length=128, n_ff=768,
                     n_vocab=151936, n_expert=128, n_expert_used=8, name="moe-30b-a3b")  # Qwen3-30B-A3B's: 17 GB
    return folder


def _chosen(qtbot, sources: list[str], floor_tps: float = 30.0) -> ChooserView:  # noqa: ANN001 - pytest-qt's
    view = ChooserView()
    qtbot.addWidget(view)
    view.resize(*LAPTOP_WINDOW_PX)
    view.show()
    view.set_sources(sources)
    view.hw.setCurrentText(HW)
    view.min_tps.setValue(floor_tps)
    assert view.start() is None
    qtbot.waitUntil(lambda: view.report is not None and not view.evaluating, timeout=30_000)
    return view


def _cells(view: ChooserView, filename: str) -> dict[str, tuple[str, str]]:
    """The (text, tooltip) of each column of ``filename``'s row."""
    t = view.table
    row = next(r for r in range(t.rowCount()) if t.item(r, 0).text() == filename)
    return {k: (t.item(row, c).text(), t.item(row, c).toolTip()) for c, k in enumerate(TABLE_KEYS)}


def test_the_table_shows_the_placement_both_decodes_and_the_kind(qtbot, gui_data_dir: Path,  # noqa: ANN001
                                                                 laptop_folder: Path) -> None:
    view = _chosen(qtbot, [str(laptop_folder)])
    choices = {c.filename: c for c in view.report.choices}
    moe, dense = choices[MOE], choices[DENSE]
    assert moe.n_cpu_moe > 0 and dense.status == "partial" and 0 < dense.n_gpu_layers < 49
    m, d = _cells(view, MOE), _cells(view, DENSE)
    # the placement as the command line's table writes it, in words and every configuration tried in its tooltip
    assert m["placement"][0] == f"-ngl 49 -ncmoe {moe.n_cpu_moe} {moe.type_k}" == placement_flags(moe)
    assert f"experts of {moe.n_cpu_moe} of 48 in system RAM" in m["placement"][1]
    assert d["placement"][0] == f"-ngl {dense.n_gpu_layers} {dense.type_k}"
    assert "Configurations tried, best first:" in d["placement"][1] and "-ctk f16" in d["placement"][1]
    # decode at the context (its depth in the header) and from an empty cache, side by side, and the figures' kind
    t = view.table
    header = {k: t.horizontalHeaderItem(c).text() for c, k in enumerate(TABLE_KEYS)}
    assert header["decode_tps"] == f"decode @{moe.decode_depth:,}\n(tok/s)" and moe.decode_depth > 8000
    assert header["decode_empty_tps"] == "decode, empty\n(tok/s)" and moe.decode_empty_tps.depth == 64
    fig = moe.decode_tps  # a split on a GPU not owned: the public fit and the published CPU rows composed, a band
    assert m["decode_tps"][0] == f"{fig.value:,.0f} ({fig.low:,.0f}–{fig.high:,.0f})"
    assert m["decode_empty_tps"][0].startswith(f"{moe.decode_empty_tps.value:,.0f}")
    assert moe.decode_empty_tps.value > moe.decode_tps.value
    assert m["decode_kind"][0] == moe.decode_tps.kind == "split"
    assert moe.decode_tps.text("{:,.1f}") + " tok/s: split by the bytes" in m["decode_tps"][1]  # band and source
    # every header has its explanation; the failing file says why on every cell
    assert all(t.horizontalHeaderItem(c).toolTip() for c in range(t.columnCount()))
    assert "-ncmoe N the experts of the first N layers" in TABLE_HEADERS["placement"][1]
    assert d["status"][0].startswith("partial — below the 30 tok/s floor (")
    assert d["memory_mib"][1].startswith(f"{DENSE}: below the 30 tok/s floor")
    # no file was requantized and nothing was measured here: those columns stay out of the way
    assert t.isColumnHidden(TABLE_KEYS.index("requantized_from"))
    assert t.isColumnHidden(TABLE_KEYS.index("measured_decode_tps"))
    assert t.isColumnHidden(TABLE_KEYS.index("mean_kld"))  # no KLD measured: only the expected column shows
    assert not t.isColumnHidden(TABLE_KEYS.index("expected_kld"))


def test_the_command_carries_the_placement_and_is_copied_from_the_keyboard(
        qtbot, gui_data_dir: Path, laptop_folder: Path) -> None:  # noqa: ANN001
    view = _chosen(qtbot, [str(laptop_folder)], floor_tps=0)
    # two models: one answer each, and the command is the selected file's model's
    rec = view.report.recommendation
    assert rec.choice is None and {c.filename for c in rec.picks()} == {MOE, DENSE}
    choices = {c.filename: c for c in view.report.choices}
    moe, dense = choices[MOE], choices[DENSE]
    t = view.table
    t.selectRow(next(r for r in range(t.rowCount()) if t.item(r, 0).text() == MOE))
    command = view.command.text()
    assert command == llama_server_command(moe, 8192)  # the command line's builder, not a copy of it
    assert f" -ngl 49 -ncmoe {moe.n_cpu_moe} -c 8192 -ctk {moe.type_k} -ctv {moe.type_k} " in command
    QGuiApplication.clipboard().clear()
    view.copy_button.setFocus()
    qtbot.keyClick(view.copy_button, Qt.Key.Key_Space)
    assert QGuiApplication.clipboard().text() == command
    # the dense model's file: a partial offload, its -ngl, no -ncmoe
    t.selectRow(next(r for r in range(t.rowCount()) if t.item(r, 0).text() == DENSE))
    assert view.command.text() == llama_server_command(dense, 8192)
    assert f" -ngl {dense.n_gpu_layers} -c 8192 -ctk {dense.type_k} -ctv {dense.type_k} " in view.command.text()
    assert "-ncmoe" not in view.command.text()
    # the table from the keyboard: arrows move between the files' rows
    view.table.setFocus()
    view.table.setCurrentCell(0, 0)
    qtbot.keyClick(view.table, Qt.Key.Key_Down)
    assert view.table.currentRow() == 1
    assert view.table.selectionModel().isRowSelected(1, view.table.rootIndex())


def test_lineage_and_quality_columns_appear_and_the_table_fits_a_laptop(
        qtbot, gui_data_dir: Path, laptop_folder: Path, tmp_path: Path) -> None:  # noqa: ANN001
    copy = write_synthetic_gguf(tmp_path / COPY, extra_kv={"workbench.requantized_from": "Q4_K_M"})
    view = _chosen(qtbot, [str(laptop_folder), str(copy)])
    c = _cells(view, COPY)
    assert c["requantized_from"][0] == "Q4_K_M" and "no better than that file's" in c["requantized_from"][1]
    t = view.table
    assert not t.isColumnHidden(TABLE_KEYS.index("requantized_from"))
    # every column inside the view at the chooser's 1366×768 size: no scroll bar to find the placement or KLD
    assert t.horizontalHeader().length() <= t.viewport().width()
    placement_col = TABLE_KEYS.index("placement")
    widest = max(t.fontMetrics().horizontalAdvance(t.item(r, placement_col).text()) for r in range(t.rowCount()))
    assert t.columnWidth(placement_col) >= widest  # the placement is never elided


def test_the_ram_field_is_choose_s_ram(qtbot, gui_data_dir: Path, laptop_folder: Path) -> None:  # noqa: ANN001
    """Issue #41 point 3: the window's RAM field is `choose --ram`: auto assumes (and says so), a value is used."""
    view = _chosen(qtbot, [str(laptop_folder)], floor_tps=0)
    assert view.ram.text() == "auto" and view.request().ram_gib is None
    moe = next(c for c in view.report.choices if c.filename == MOE)
    assert any("16 GiB, common beside a laptop GPU" in n for n in moe.notes), moe.notes
    view.ram.setValue(64)
    assert view.request().ram_gib == 64
    view.report = None
    assert view.start() is None
    qtbot.waitUntil(lambda: view.report is not None and not view.evaluating, timeout=30_000)
    moe = next(c for c in view.report.choices if c.filename == MOE)
    assert any("system RAM 64 GiB (given)" in n for n in moe.notes), moe.notes
