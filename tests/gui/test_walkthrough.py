"""Issue #44, a new user's walkthrough: the scenario panel keeps its text and inputs whatever its height, the decode
plot tells the same story live and re-opened and reaches the asked context, predicted lines read out under the
mouse. Widgets on their own (no model, no worker): the window-level checks are in test_walkthrough_window.py."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtWidgets import QApplication, QLabel, QSplitter, QWidget

from app.gui.bridge import read_event_stream
from app.gui.plots import LivePlots
from app.gui.plots.panel import PlotPanel
from app.gui.predictions import PredictionService
from app.model.gguf_facts import read_model_facts
from app.predict.profiles import load_profiles
from app.predict.scenario import scenario_time
from app.predict.scenario_totals import MeasuredRates, ScenarioTotals
from app.predict.settings import at_context, at_context_depth
from app.run.live import LiveRun
from tests.gguf_synth import write_synthetic_gguf
from tests.gui.conftest import RECORDED

EVENTS = read_event_stream(RECORDED)
MOVE_GAP_MS = 15  # pyqtgraph's scene passes on at most one mouse move per 10 ms


def asked_depth(n_ctx: int) -> int:
    """The depth the inspector's decode figure at a context is for."""
    return at_context_depth(at_context(n_ctx))


def typed(kind: str, **values: object) -> object:
    """A result or quality row as the store and the sweep hold them: a typed row (app.results.row_types)."""
    from app.results import row_types

    return getattr(row_types, "ResultRow" if kind == "result" else "QualityRow").from_mapping(values)


def _settle(n: int = 5) -> None:
    for _ in range(n):
        QApplication.processEvents()


# --- the scenario panel ---------------------------------------------------------------------------------------
def _scenario_in_a_splitter(qtbot, width_px: int):  # noqa: ANN001, ANN202
    """The scenario panel as the window holds it (a group at the foot of the left column's splitter), every line
    shown: the prediction, the measured request, the estimate, a what-if and the trained-context warning."""
    from app.gui.main_window import _group
    from app.gui.panels.scenario import ScenarioPanel

    panel = ScenarioPanel()
    sc = scenario_time(1000, 300, 25.0, 2.8)
    panel.show_totals(ScenarioTotals(predicted=sc, measured=sc, rates=MeasuredRates(25.0, 128, 2.8, 1), exact=sc),
                      "This CPU: AMD EPYC (ceilings: no fit)", what_if=sc,
                      what_if_name="RTX 4060 Laptop (ceilings: no fit)", model="SmolLM2-135M-Instruct.Q4_1.gguf",
                      n_ctx_train=1000)
    split = QSplitter(Qt.Orientation.Vertical)
    qtbot.addWidget(split)
    split.addWidget(QLabel("the inspector above it"))
    split.addWidget(_group("Scenario: one request", panel))
    split.setChildrenCollapsible(False)
    split.resize(width_px, 760)
    split.show()
    qtbot.waitExposed(split)
    return split, panel


def _overlaps(widgets: list[QWidget]) -> list[tuple[str, str]]:
    out = []
    for i, a in enumerate(widgets):
        for b in widgets[i + 1:]:
            if a.geometry().intersects(b.geometry()):
                out.append((a.objectName() or type(a).__name__, b.objectName() or type(b).__name__))
    return out


@pytest.mark.parametrize("width_px", [360, 480])  # the left column at 1366×768 and at 1920×1080
def test_the_scenario_panel_never_paints_bars_over_its_text_nor_squashes_its_inputs(qtbot, width_px: int) -> None:  # noqa: ANN001
    split, panel = _scenario_in_a_splitter(qtbot, width_px)
    figures = [panel.predicted, panel.pred_bar, panel.exact, panel.measured, panel.meas_bar, panel.what_if,
               panel.warning, panel.source]
    for height_px in (420, 260, 180, 120, 40):  # the splitter dragged ever lower
        split.setSizes([760 - height_px, height_px])
        _settle()
        shown = [w for w in figures if w.isVisible()]
        assert len(shown) == len(figures)
        assert _overlaps(shown) == [], height_px  # no bar over a label, no label over another
        for label in (w for w in shown if isinstance(w, QLabel)):  # every line of wrapped text has its height
            assert label.height() >= label.heightForWidth(label.width()), (height_px, label.text()[:40])
        for w in (panel.kind, panel.run_button, panel.prompt, panel.output):  # the inputs keep their height
            assert w.height() >= w.sizeHint().height(), (height_px, type(w).__name__, w.height())
            top = w.mapTo(panel, QPoint(0, 0)).y()
            assert 0 <= top and top + w.height() <= panel.height()
    # what does not fit scrolls: the last line can be reached
    area = panel.figures_area
    bar = area.verticalScrollBar()
    assert bar.maximum() > 0
    bar.setValue(bar.maximum())
    _settle()
    assert panel.source.mapTo(area.viewport(), QPoint(0, panel.source.height())).y() <= area.viewport().height() + 1


# --- the decode plot ------------------------------------------------------------------------------------------
@pytest.fixture
def predictor(tmp_path: Path) -> PredictionService:
    """Facts for the recorded run's model from a small synthetic GGUF (no model read), and a laptop GPU chosen in the
    inspector: the recorded rows ran on a CPU, so the GPU is a what-if (thousands of tok/s above them)."""
    p = PredictionService()
    facts = read_model_facts(write_synthetic_gguf(tmp_path / "m.gguf", n_layer=4, n_embd=256, n_ff=512))
    p.set_facts(EVENTS[0].tests[0].model_path, facts)
    p.set_profile(next(prof for prof in load_profiles() if prof.name == "RTX 4060 Laptop"))
    return p


def _plots(qtbot, ctx: int = 8192) -> LivePlots:  # noqa: ANN001
    lp = LivePlots()
    qtbot.addWidget(lp)
    lp.resize(1300, 760)
    lp.kv_ctx_max = ctx  # the inspector's context (the window sets it)
    lp.show()
    qtbot.waitExposed(lp)
    return lp


def _live(qtbot, predictor: PredictionService) -> LivePlots:  # noqa: ANN001
    """The recorded sweep as it came in live: its plan first, then its events a batch per tick, then its end."""
    lp = _plots(qtbot)
    s = LiveRun("live")
    for k in range(0, len(EVENTS), 40):
        s.extend(EVENTS[k:k + 40])
        lp.refresh(s, predictor, force=True)
        _settle(1)
    s.mark_finished()
    lp.refresh(s, predictor, force=True)
    _settle()
    return lp


def _reopened(qtbot, predictor: PredictionService) -> LivePlots:  # noqa: ANN001
    lp = _plots(qtbot)
    s = LiveRun("past run")
    s.extend(EVENTS)
    s.mark_finished()
    lp.refresh(s, predictor, force=True)
    _settle()
    return lp


def _x_range(panel: PlotPanel) -> tuple[float, float]:
    (x0, x1), _y = panel.plot.getViewBox().viewRange()
    return (10**x0, 10**x1) if panel.log_scale else (x0, x1)


def test_the_decode_plot_is_scaled_the_same_live_and_reopened_and_a_gpu_what_if_does_not_flatten_it(
        qtbot, predictor: PredictionService) -> None:  # noqa: ANN001
    kept = _live(qtbot, predictor), _reopened(qtbot, predictor)  # held here: the plots' items live with them
    live, reopened = (p.decode for p in kept)
    (_x, (_lo, live_top)), (_x2, (_lo2, reopened_top)) = (p.plot.getViewBox().viewRange() for p in (live, reopened))
    assert live_top == pytest.approx(reopened_top)
    ceiling = np.nanmax(live.curves[0][1])  # the CPU the rows ran on: the scale is its ceiling's
    name, _xs, what_if = live.what_ifs[0]
    assert ceiling <= live_top < np.nanmax(what_if)  # the GPU what-if is above the scale, not setting it
    assert "RTX 4060 Laptop" in name
    # the what-if's figure at the asked context is on the plot all the same, in words
    depth = asked_depth(8192)
    assert depth == 8128
    note = live.note.toPlainText()
    assert live.note.isVisible() and f"at depth {depth:,}" in note and "above this scale" in note
    value = float(np.interp(depth, live.what_ifs[0][1], what_if))
    assert f"{value:,.0f} tok/s" in note
    # on a backdrop of the page's colour: the curves under it (the CPU's ceiling and expected lines) no longer run
    # through its text
    from app.gui import theme

    backdrop = live.note.fill.color()
    assert backdrop.name() == theme.plot_background() and backdrop.alpha() >= 200


def test_the_decode_plot_reaches_the_asked_context(qtbot, predictor: PredictionService) -> None:  # noqa: ANN001
    plots = _reopened(qtbot, predictor)
    dec = plots.decode
    x_lo, x_hi = _x_range(dec)
    deepest = max(t.n_depth + t.n_prompt + t.n_gen for t in EVENTS[0].tests)
    assert deepest < 200 and x_hi >= 8192 and x_lo <= 32  # the tests and the asked context on one axis
    xs, ys = dec.data_of("pred", 0)
    assert xs[-1] >= 8192 and asked_depth(8192) in xs and np.isfinite(ys).all()
    assert dec._ctx_line is not None and dec._ctx_line.isVisible()
    assert dec._ctx_line.value() == pytest.approx(math.log10(asked_depth(8192)))
    assert "context 8,192" in dec._ctx_line.label.format
    # another context asked: the axis follows it
    plots.kv_ctx_max = 32768
    plots.refresh(plots._view.session, predictor, force=True)
    _settle()
    assert _x_range(dec)[1] >= 32768 and "context 32,768" in dec._ctx_line.label.format


def test_a_predicted_line_reads_out_its_value_under_the_mouse(qtbot, predictor: PredictionService) -> None:  # noqa: ANN001
    plots = _reopened(qtbot, predictor)
    dec = plots.decode
    xs, ys = dec.data_of("pred", 0)
    x = 4000.0
    y = float(np.interp(math.log10(x), np.log10(np.maximum(xs, 1e-9)), ys))  # linear between points on a log axis
    view = QPointF(math.log10(x), y)
    pos = dec.widget.mapFromScene(dec.plot.getViewBox().mapViewToScene(view))
    qtbot.wait(MOVE_GAP_MS)
    qtbot.mouseMove(dec.widget.viewport(), pos)
    _settle()
    text = dec.pointer.text
    assert text.startswith("ceiling (CPU: AMD EPYC)"), text
    shown_y = float(text.split("decode speed ")[1].split(" tok/s")[0].replace(",", ""))
    assert shown_y == pytest.approx(y, rel=0.02) and "position " in text
    assert dec.pointer.readout is not None and dec.pointer.readout.isVisible()


# --- messages ---------------------------------------------------------------------------------------------------
LONG_NOTE = ("this llama-cpp-python build has no GPU backend (CPU only): -ngl is recorded as requested, every layer "
             "runs on the CPU, and rows say backends=CPU, n_gpu_layers_effective=0; install a CUDA or Vulkan build "
             "(gguf-bench doctor says which) for the GPU figures")


def test_messages_are_never_clipped_and_a_long_one_folds_behind_more(qtbot) -> None:  # noqa: ANN001
    from PySide6.QtWidgets import QTreeWidget, QVBoxLayout

    from app.gui.panels import messages
    from app.gui.panels.messages import MessageArea

    max_lines = getattr(messages, "MAX_LINES", 3)
    split = QSplitter(Qt.Orientation.Vertical)  # as the window's left column: messages above the library
    qtbot.addWidget(split)
    box = QWidget()
    lay = QVBoxLayout(box)
    lay.setContentsMargins(0, 0, 0, 0)
    area = MessageArea()
    lay.addWidget(area)
    tree = QTreeWidget()
    tree.setMinimumHeight(110)
    lay.addWidget(tree, 1)
    split.addWidget(box)
    split.addWidget(QLabel("the inspector"))
    split.setChildrenCollapsible(False)
    split.resize(360, 700)
    split.show()
    qtbot.waitExposed(split)
    area.add(LONG_NOTE, "warning")
    area.add("Tests 1, 2 and 3 failed. The benchmark process crashed (signal 11). The window is fine; finished "
             "results are kept.", "error")
    area.add("Other processes use about 1.4 of this machine's 2 CPU threads: measurements may be slow and "
             "unstable; close them for figures you can trust.", "warning", key="contention")

    def check() -> None:
        for m in area._rows:
            assert m.label.height() >= m.label.heightForWidth(m.label.width()), m.text[:30]  # not clipped
            assert m.geometry().bottom() <= area.height()

    for h in (400, 250, 180):  # the splitter dragged up: the inspector gives way, not the messages
        split.setSizes([h, 700 - h])
        _settle()
        check()
    note = next(m for m in area._rows if m.text == LONG_NOTE)
    assert note.shown_lines() <= max_lines and "more" in note.label.text() and note.label.toolTip() == LONG_NOTE
    before = area.height()
    note.label.linkActivated.emit("more")  # the link: the whole text
    _settle()
    check()
    assert "CUDA or Vulkan build" in note.label.text() and note.shown_lines() > max_lines and area.height() > before
    note.label.linkActivated.emit("less")
    _settle()
    assert note.shown_lines() <= max_lines


def _controller(qtbot):  # noqa: ANN001, ANN202
    """A SweepController with the window's parts it drives, its messages shown as the window shows them."""
    from app.gui.panels import messages
    from app.gui.panels.messages import MessageArea
    from app.gui.panels.sweep_editor import SweepEditor
    from app.gui.sweep_controller import SweepController

    view = QWidget()
    qtbot.addWidget(view)
    editor = SweepEditor(view)
    plots = LivePlots(view)
    area = MessageArea(view)
    sweeps = SweepController(view, plots, editor, PredictionService())
    sweeps.message.connect(lambda text, level: area.add(text, level) if level != "info" else None)
    sweeps.keyedMessage.connect(lambda text, level, key: area.add(text, level, key) if level != "info" else None)
    if hasattr(sweeps, "runChanged"):  # as the window wires it
        sweeps.runChanged.connect(lambda: area.remove_prefix(messages.RUN_KEY))
    return sweeps, editor, area


def test_a_runs_errors_go_when_another_run_is_shown(qtbot) -> None:  # noqa: ANN001
    from dataclasses import replace

    from app.run.events import TestFailed

    sweeps, _editor, area = _controller(qtbot)
    failed = TestFailed(t_ns=1, test_index=0, row=typed("result", test_index=0, status="failed"),
                        reason="file not found", kind="load_error")
    sweeps.announce([failed])
    assert any("Test 1 failed" in t for t in area.messages())
    area.add("A hardware profile file could not be read", "warning")  # not about a run: it stays
    sweeps.show_session(LiveRun("the next run"), "next")
    assert not any("failed" in t for t in area.messages())
    assert area.messages() == ["A hardware profile file could not be read"]
    sweeps.announce([replace(failed, reason="out of memory")])  # the next run's own error shows
    assert any("out of memory" in t for t in area.messages())


def test_a_cancelled_sweep_does_not_look_done(qtbot) -> None:  # noqa: ANN001
    from PySide6.QtGui import QPalette

    from app.run.session import SweepOutcome

    sweeps, editor, area = _controller(qtbot)
    bar = editor.progress
    tests = [dataclasses.replace(EVENTS[0].tests[0], n_gen=g) for g in (8, 400, 400)]
    rows = [typed("result", test_index=0, status="ok"),
            typed("result", test_index=1, status="failed", error="cancelled")]

    def end(status: str) -> tuple[int, str, str]:
        sweeps.session = LiveRun(status)
        sweeps.session.plan(tests)
        sweeps._finished(SweepOutcome(run_id=f"run-{status}", status=status, rows=rows))
        return bar.value(), bar.format(), bar.palette().color(QPalette.ColorRole.Highlight).name()

    done = end("finished")
    cancelled = end("cancelled")
    assert done[:2] == (1000, "done")
    assert cancelled[0] < 1000 and cancelled[1] == "cancelled after 1 of 3 tests"
    assert cancelled[2] != done[2]  # another colour, not only another word
    assert any(t.startswith("Sweep cancelled after 1 of 3 tests") for t in area.messages())


# --- calibration ------------------------------------------------------------------------------------------------
def test_the_calibration_title_and_bar_give_one_percentage(qtbot) -> None:  # noqa: ANN001
    from PySide6.QtWidgets import QProgressBar

    from app.gui.calibrate_action import CalibrateAction, CalibrationProgress
    from app.gui.long_work import long_work_dialog

    parent = QWidget()
    qtbot.addWidget(parent)
    action = CalibrateAction(parent, lambda _t, _l: None)
    action._progress = CalibrationProgress(passes=2)
    action.dialog = long_work_dialog(parent, "Calibrate", "Calibrating this machine…", action.cancel)
    bar = action.dialog.findChild(QProgressBar)
    seen = []
    for k in range(1, 37):  # every test of the first pass: 0.95 × (k − 1) / 72, 3.96 % at the fourth
        action._on_progress(f"test {k}/36: dense-a p64 d0")
        title_pct = int(action.dialog.labelText().split("… ")[1].split("%")[0].strip())
        seen.append((title_pct, bar.text()))
        assert bar.text() == f"{title_pct}%", (k, action.dialog.labelText(), bar.text())
    assert (3, "3%") in seen
    action.close_dialog()


def test_the_calibration_says_no_duration_it_cannot_keep(qtbot, gui_data_dir: Path) -> None:  # noqa: ANN001
    from app.gui import calibrate_action
    from app.gui.calibrate_action import CalibrateAction
    from app.gui.settings import Settings

    parent = QWidget()
    qtbot.addWidget(parent)
    settings = Settings()
    action = CalibrateAction(parent, lambda _t, _l: None, settings=settings)
    assert "three minutes" not in action.action.statusTip() and "minutes" in action.action.statusTip()
    idle = action.duration_text(load_1min=0.3, n_cpus=2)
    assert "three" not in idle and "min." not in idle and "busy" not in idle and "time left" in idle
    busy = action.duration_text(load_1min=3.1, n_cpus=2)
    assert "busy now (load 3.1 on 2 CPU threads)" in busy and "longer" in busy
    settings.set_value(calibrate_action.LAST_WALL_KEY, 1260.0)  # a calibration here took 21 minutes
    assert action.duration_text(load_1min=0.3, n_cpus=2).startswith("The last calibration here took 21 min.")


# --- file names -------------------------------------------------------------------------------------------------
NAMES = ("SmolLM2-135M-Instruct.Q4_1.gguf", "SmolLM2-135M-Instruct.Q8_0.gguf")


def _shown_whole(view, column: int, text: str, width_px: int) -> bool:  # noqa: ANN001
    """Whether ``text`` fits a column ``width_px`` wide without being elided (the cell's own margins kept)."""
    from PySide6.QtGui import QFontMetrics

    return QFontMetrics(view.font()).elidedText(text, Qt.TextElideMode.ElideMiddle, width_px - 8) == text


@pytest.mark.parametrize("window_px", [1268, 1788])  # the main window on 1366×768 and on 1920×1080
def test_the_library_shows_whole_file_names(qtbot, tmp_path: Path, window_px: int) -> None:  # noqa: ANN001
    from app.gui.panels.library import LibraryPanel
    from app.gui.tasks import Tasks
    from app.model import library as ml

    try:
        from app.gui.main_window import left_column_px
        left_px = left_column_px(window_px)
    except ImportError:  # before issue #44: the column was 380 px whatever the window
        left_px = 380
    holder = QWidget()
    qtbot.addWidget(holder)
    panel = LibraryPanel(Tasks(holder), holder)
    facts = read_model_facts(write_synthetic_gguf(tmp_path / "facts.gguf"))
    for name in NAMES:
        path = write_synthetic_gguf(tmp_path / name)
        panel.add_entries([ml.entry_for_file(path, "file")])
        panel.set_facts(str(path.resolve()), facts)
    panel.resize(left_px - 20, 300)  # the group box's frame and margins
    panel.show()
    qtbot.waitExposed(panel)
    _settle()
    tree = panel.tree
    for row in range(tree.topLevelItemCount()):
        text = tree.topLevelItem(row).text(0)
        assert text.startswith("SmolLM2-135M-Instruct.Q") and _shown_whole(tree, 0, text, tree.columnWidth(0)), (
            text, tree.columnWidth(0))
    assert str(tmp_path) in tree.topLevelItem(0).toolTip(0)  # the path (and where it was found) in the tooltip


# --- hardware lists ---------------------------------------------------------------------------------------------
def _is_natural_order(names: list[str]) -> bool:
    import re

    def key(name: str) -> tuple:
        return tuple((1, int(p)) if p.isdigit() else (0, p.casefold().strip()) for p in re.split(r"(\d+)", name) if p)

    return names == sorted(names, key=key)


def test_the_gpu_lists_are_sorted_by_name(qtbot) -> None:  # noqa: ANN001
    from app.gui.chooser_view import THIS_MACHINE_LABEL, ChooserView
    from app.gui.hardware_profiles import HardwareProfiles
    from app.gui.panels.inspector import InspectorPanel
    from app.gui.settings import Settings

    chooser = ChooserView()
    qtbot.addWidget(chooser)
    names = [chooser.hw.itemText(i) for i in range(chooser.hw.count())]
    assert names[0] == THIS_MACHINE_LABEL and len(names) > 100 and _is_natural_order(names[1:])
    assert names.index("RTX 4060") < names.index("RTX 4060 Laptop") < names.index("RTX 4060 Ti 8GB") < \
        names.index("RTX 4070")
    inspector = InspectorPanel()
    qtbot.addWidget(inspector)
    hardware = HardwareProfiles(inspector, Settings(), inspector)
    hardware.load()
    listed = [inspector.profile_combo.itemText(i) for i in range(inspector.profile_combo.count())]
    profiles = [t for t in listed if t in set(names)]
    assert len(profiles) == len(names) - 1 and _is_natural_order(profiles)


# --- past runs --------------------------------------------------------------------------------------------------
def test_past_runs_list_quality_runs_and_open_their_scores(qtbot, gui_data_dir: Path, tmp_path: Path) -> None:  # noqa: ANN001
    from app.gui.history import HistoryDialog
    from app.results.quality_store import save_quality_rows
    from app.results.store import ResultStore

    with ResultStore.recover() as store:
        store.begin_run("20261201T100000Z-aaaaaa", sweep_name="quick")
        store.add_result("20261201T100000Z-aaaaaa", typed("result", run_id="20261201T100000Z-aaaaaa", test_index=0,
                                                          status="ok", model_filename="a.gguf"))
        store.finish_run("20261201T100000Z-aaaaaa", "finished")
        save_quality_rows(store, [
            typed("quality", run_id="q-20261202T100000Z-bbbbbb", model_index=i, model_filename=name, file_type=t,
                  mean_kld=kld, ppl=20.5 + kld, status="ok", created_at="2026-12-02T10:00:00Z",
                  reference_filename="SmolLM2-F16.gguf")
            for i, (name, t, kld) in enumerate((("SmolLM2.Q8_0.gguf", "Q8_0", 0.002),
                                                ("SmolLM2.Q4_K_M.gguf", "Q4_K_M", 0.051)))])
    dlg = HistoryDialog()
    qtbot.addWidget(dlg)
    t = dlg.table
    headers = [t.horizontalHeaderItem(c).text() for c in range(t.columnCount())]
    rows = {t.item(r, 0).text(): {h: t.item(r, c).text() for c, h in enumerate(headers)} for r in range(t.rowCount())}
    assert set(rows) == {"20261201T100000Z-aaaaaa", "q-20261202T100000Z-bbbbbb"}
    quality = rows["q-20261202T100000Z-bbbbbb"]
    assert "quality" in quality.values() and "SmolLM2.Q8_0.gguf" in " ".join(quality.values())
    assert "1 quality run" in dlg.info.text()
    t.selectRow(next(r for r in range(t.rowCount()) if t.item(r, 0).text().startswith("q-")))
    view = dlg.open_quality(dlg._selected()[0][0]) if hasattr(dlg, "open_quality") else None
    assert view is not None and view.table.rowCount() == 2 and not dlg.chosen  # nothing to re-open in the window
    cells = [view.table.item(1, c).text() for c in range(view.table.columnCount())]
    assert "Q4_K_M" in cells and "0.051" in cells
    out = view.export_csv(tmp_path / "q.csv").read_text(encoding="utf-8")
    assert out.splitlines()[0].startswith("run_id,model_index,model_filename") and "SmolLM2.Q4_K_M.gguf" in out
    view.close()
    dlg.close()


# --- help -------------------------------------------------------------------------------------------------------
def test_the_help_pages_say_the_shortcuts_where_the_data_lives_and_the_physics(qtbot, gui_data_dir: Path) -> None:  # noqa: ANN001
    from PySide6.QtGui import QAction
    from PySide6.QtWidgets import QMenuBar

    from app.gui.help import PHYSICS_HTML, data_locations, shortcuts_html

    bar = QMenuBar()
    qtbot.addWidget(bar)
    menu = bar.addMenu("&View")
    a = QAction("Compare…", bar)
    a.setShortcut("Ctrl+Shift+C")
    menu.addAction(a)
    menu.addAction(QAction("No keys", bar))
    text = shortcuts_html(bar)
    assert "Ctrl+Shift+C" in text and "View → Compare" in text and "No keys" not in text and "Esc" in text
    where = dict(data_locations())
    assert where["Results store"].startswith(str(gui_data_dir / "results.sqlite3"))
    assert "GGUF_WORKBENCH_DATA_DIR" in where["Data folder"] and str(gui_data_dir) in where["Data folder"]
    for words in ("compute-bound", "memory-bandwidth-bound", "time to first token", "KV cache", "ceiling"):
        assert words in PHYSICS_HTML


# --- the telemetry legend in dark mode --------------------------------------------------------------------------
def _sample_contrast(sample, background: str) -> float:  # noqa: ANN001
    """The highest contrast any pixel of a legend sample, painted on ``background``, has against it."""
    from PySide6.QtGui import QColor, QImage, QPainter

    from app.gui.theme import contrast

    img = QImage(20, 20, QImage.Format.Format_RGB32)
    img.fill(QColor(background))
    p = QPainter(img)
    sample.paint(p, None, None)
    p.end()
    return max(contrast(QColor(img.pixel(x, y)), background) for x in range(20) for y in range(20))


@pytest.mark.parametrize("page", ["dark", "light"])
def test_the_telemetry_legend_reads_on_a_dark_page(qtbot, page: str) -> None:  # noqa: ANN001
    from app.gui import theme
    from app.gui.plots.telemetry import TelemetryPlot

    app = QApplication.instance()
    before = theme.current_theme()
    theme.apply_theme(app, page)
    try:
        plot = TelemetryPlot()
        qtbot.addWidget(plot.widget)
        bg = theme.plot_background()
        entries = {label.text: (sample, label) for sample, label in plot.legend.items}
        for phase in ("prefill", "decode"):
            sample, label = entries[phase]
            assert _sample_contrast(sample, bg) >= theme.LINE_CONTRAST, (page, phase)
            assert theme.contrast(label.opts.get("color") or theme.plot_foreground(), bg) >= theme.TEXT_CONTRAST
    finally:
        theme.apply_theme(app, before)


def test_legends_name_a_models_file_by_what_differs_and_fit_a_laptops_plot(qtbot) -> None:  # noqa: ANN001
    """Two SmolLM2 files in one run: legends say Q4_1 and Q8_0 (what differs), not the whole name cut at the plot's
    edge; the hover readout still gives the whole name."""
    from tests.gui.test_laptop_screen import _two_model_events

    plots = LivePlots()
    qtbot.addWidget(plots)
    plots.resize(884, 300)  # the plots' room in the window on 1366×768: three to a tab
    plots.show()
    qtbot.waitExposed(plots)
    predictor = PredictionService()
    predictor.set_profile(next(p for p in load_profiles() if p.name == "RTX 4060 Laptop"))
    s = LiveRun("two models")
    s.extend(_two_model_events())
    s.mark_finished()
    plots.refresh(s, predictor, force=True)
    _settle()
    for panel in (plots.ttft, plots.decode):
        if panel.legend.collapsed:
            panel.legend.toggle()
        _settle()
        labels = [label for _s, label in panel.legend.items]
        texts = [label.text for label in labels]
        assert any(t.startswith("Q4_1 · ") for t in texts) and any(t.startswith("Q8_0 · ") for t in texts), texts
        assert not any("SmolLM2-135M-Instruct" in t for t in texts), texts
        for label in labels:  # each line inside its plot, its model still named where it names one
            assert label.item.boundingRect().width() + 24 <= panel.widget.width(), (label.text, panel.widget.width())
            model = label.text.split(" · ")[0] if " · " in label.text else ""
            assert model in label.item.toPlainText(), (label.text, label.item.toPlainText())


def test_a_legend_never_hangs_over_its_plots_data(qtbot) -> None:  # noqa: ANN001
    """A folded legend's line and the telemetry's one row of entries stay above the data area (they hung 9 px over
    it: over the top of the shaded phases)."""
    from app.gui.plots.items import line, make_plot
    from app.gui.plots.telemetry import TelemetryPlot

    tel = TelemetryPlot()
    qtbot.addWidget(tel.widget)
    folded = make_plot("t", "x", "y", 1)
    qtbot.addWidget(folded)
    for k in range(8):
        folded.getPlotItem().addItem(line(f"entry {k}", "#d62728"))
    for w in (tel.widget, folded):
        w.resize(600, 300)
        w.show()
    folded.getPlotItem().legend.fit(540, 60)  # too tall for its plot: folded to one line
    _settle()
    for plot in (tel.plot, folded.getPlotItem()):
        legend = plot.legend
        parts = [legend.header] if legend.collapsed else [label for _s, label in legend.items]
        data_top = plot.getViewBox().sceneBoundingRect().top()
        for part in parts:
            assert part.sceneBoundingRect().bottom() <= data_top + 1, (part.text, part.sceneBoundingRect(), data_top)


def test_a_legend_opened_and_folded_again_gives_its_plot_back_its_height(qtbot) -> None:  # noqa: ANN001
    """Opening a folded legend on a short plot made the plot taller than its widget; folded again, it stayed so and
    the axis title was cut at the widget's foot (a re-opened run on a 1366×768 screen)."""
    from app.gui.plots.items import line, make_plot

    w = make_plot("Decode vs context position", "position in context (tokens)", "decode speed (tok/s)", 1)
    qtbot.addWidget(w)
    plot = w.getPlotItem()
    for k in range(9):
        plot.addItem(line(f"Q4_1 · entry {k} (This CPU: AMD EPYC)", "#d62728"))
    w.resize(292, 272)
    w.show()
    qtbot.waitExposed(w)
    legend = plot.legend
    legend.fit(240, 60)
    _settle()
    assert legend.collapsed
    legend.toggle()  # the header's click: every entry, taller than the plot has room for
    _settle()
    legend.toggle()  # and folded again
    qtbot.wait(20)
    _settle()
    assert plot.geometry().height() == pytest.approx(w.viewport().height(), abs=1)
    assert plot.getAxis("bottom").sceneBoundingRect().bottom() <= w.viewport().height() + 1
