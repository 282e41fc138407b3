"""The chooser view: computed off the GUI thread, plots, table, recommendation, command and CSV export."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from app.gui.chooser_view import TABLE_KEYS, ChooserView
from app.gui.plots.pareto import pareto_front, point_size
from app.results.export import read_csv
from app.results.quality_store import model_key, save_quality_rows
from app.results.row_types import QualityRow
from app.results.store import ResultStore


def test_pareto_front_and_sizes() -> None:
    pts = [(100.0, 0.05), (80.0, 0.01), (60.0, 0.02), (50.0, 0.0)]
    assert pareto_front(pts) == [(50.0, 0.0), (80.0, 0.01), (100.0, 0.05)]  # (60, 0.02) is beaten by (80, 0.01)
    assert point_size(5, 5, 10) == 10.0 and point_size(10, 5, 10) == 36.0


@pytest.mark.heavy  # the real model
def test_chooser_view(qtbot, gui_data_dir: Path, smollm2_path: Path,  # noqa: ANN001 - qtbot is pytest-qt's
                      make_gguf: Callable[..., Path], tmp_path: Path) -> None:
    big = make_gguf("big-f16.gguf", n_layer=2, n_embd=256, n_ff=512, n_vocab=2000)
    files = [str(smollm2_path), str(big)]
    with ResultStore() as store:
        save_quality_rows(store, [QualityRow(run_id="q", model_index=0, model_path=files[0],
                                             model_filename=smollm2_path.name, model_key=model_key(files[0]),
                                             status="ok", mean_kld=0.03, ppl=18.5, same_top_rate=0.92)])
    view = ChooserView()
    qtbot.addWidget(view)
    view.show()
    view.set_sources(files)
    view.hw.setCurrentText("RTX 4060 Laptop")
    view.ctx.setValue(8192)
    assert view.start() is None
    assert view.evaluating and view.choose_button.text() == "Cancel"  # running on the pool thread, stoppable
    qtbot.waitUntil(lambda: view.report is not None, timeout=30_000)
    assert not view.evaluating and view.choose_button.text() == "Choose"
    report = view.report
    assert report.profile.name == "RTX 4060 Laptop" and len(report.choices) == 2
    # the table: one row per file, the KLD measured for SmolLM2 and "not measured" for the other
    assert view.table.rowCount() == 2
    kld_col = TABLE_KEYS.index("mean_kld")
    texts = {view.table.item(r, 0).text(): view.table.item(r, kld_col).text() for r in range(2)}
    assert texts == {smollm2_path.name: "0.0300", "big-f16.gguf": ""}  # not measured: its expected KLD column speaks
    # the plots: one point per file, SmolLM2 at its measured KLD, the F16 file at its expected loss (the full
    # precision's: none); bars to the VRAM
    by_name = {p[0]: p for p in view.pareto.points}
    assert by_name[smollm2_path.name][2] == 0.03 and by_name["big-f16.gguf"][2] == 0.0
    assert view.bars.budget_gib == 7.0 and all(0 < t < 7.0 for t in view.bars.totals_gib)  # 8 GiB less the margin
    # two models: one answer each, a line per model, and the command of the selected file's model
    rec = report.recommendation
    text = view.recommendation.text()
    assert len(rec.per_model) == 2 and text.startswith(rec.lines()) and text.count("\n• ") == 2
    assert "\nIts speed: public llama-bench results" in text  # the source, visible, not only in a tooltip
    assert view.command.text().startswith("llama-server -m ") and view.copy_button.isEnabled()
    for row in range(2):
        view.table.selectRow(row)
        assert Path(view.table.item(row, 0).text()).name in view.command.text()
    view.copy_command()
    from PySide6.QtGui import QGuiApplication

    assert QGuiApplication.clipboard().text() == view.command.text()
    out = view.export_csv(tmp_path / "choose.csv")
    rows = read_csv(out.read_text(encoding="utf-8"))
    assert [r["filename"] for r in rows] == [smollm2_path.name, "big-f16.gguf"]
    assert sum(int(r["recommended"]) for r in rows) == 2 and rows[0]["mean_kld"] == "0.03"


@pytest.mark.heavy  # the repack probe's child process
def test_no_sources_and_bad_hw(qtbot, gui_data_dir: Path, tmp_path: Path) -> None:  # noqa: ANN001
    view = ChooserView()
    qtbot.addWidget(view)
    assert view.start() == "no sources"
    view.set_sources([str(tmp_path)])  # an empty folder
    view.start()
    qtbot.waitUntil(lambda: not view.evaluating, timeout=30_000)
    assert "no .gguf files" in view.status.text() and view.report is None


@pytest.mark.heavy  # the real window's background jobs
def test_menu_opens_the_chooser(window) -> None:  # noqa: ANN001 - the main window fixture
    action = next(a for a in window.actions() if a.text() == "Which quantization…")
    assert action.shortcut().toString() == "Ctrl+K"
    action.trigger()
    assert window.chooser is not None and window.chooser.isVisible()
    assert window.chooser.source_list() == window.library.paths()
