"""Issue #44, a new user's walkthrough, in the real window: the chooser takes the inspector's GPU and remembers its
own after a restart, Compare has a key, the Help menu, a run's error does not carry into the next, and on a
laptop's and a desktop's window the library, the scenario panel and the decode plot read whole."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QFontMetrics, QKeySequence
from PySide6.QtWidgets import QApplication, QLabel

from app.gui.bridge import read_event_stream
from tests.gui.conftest import RECORDED, wait_for

pytestmark = pytest.mark.heavy  # the real window and its background jobs

EVENTS = read_event_stream(RECORDED)


def _settle(n: int = 5) -> None:
    for _ in range(n):
        QApplication.processEvents()


def test_the_chooser_takes_the_inspectors_gpu_and_remembers_its_own(qtbot, window) -> None:  # noqa: ANN001
    from app.gui.main_window import MainWindow

    w = window
    assert w.choose_profile("RTX 4060 Laptop")
    chooser = w.show_chooser()
    assert chooser.hw.currentText() == "RTX 4060 Laptop"  # the GPU the inspector shows
    chooser.hw.setCurrentIndex(chooser.hw.findText("RTX 4070 Laptop"))  # another one, in the chooser
    chooser.close()
    w.settings.sync()
    again = MainWindow()  # a restart, its inspector on this CPU (its own default: nothing chosen there)
    qtbot.addWidget(again)
    again.inspector.select_profile("This CPU")
    assert again.show_chooser().hw.currentText() == "RTX 4070 Laptop"
    again.chooser.close()
    again.close()


def test_compare_has_a_key_and_the_help_menu_is_there(window) -> None:  # noqa: ANN001
    w = window
    actions = {a.text().replace("&", ""): a for a in w.findChildren(type(w.menuBar().actions()[0]))}
    compare = actions["Compare…"]
    assert not compare.shortcut().isEmpty() and compare.shortcut() == QKeySequence("Ctrl+Shift+C")
    menus = [a.text().replace("&", "") for a in w.menuBar().actions()]
    assert menus[-1] == "Help"
    help_menu = w.menuBar().actions()[-1].menu()
    titles = [a.text() for a in help_menu.actions()]
    assert titles == ["Keyboard shortcuts…", "Where your data lives…", "How speed works: prefill and decode…",
                      "About GGUF Workbench…"]
    help_menu.actions()[0].trigger()
    page = w.help_dialog.browser.toPlainText()
    for keys in ("Ctrl+R", "Ctrl+K", "Ctrl+Shift+C", "Ctrl+H", "F1"):
        assert keys in page, keys
    help_menu.actions()[1].trigger()
    assert "results.sqlite3" in w.help_dialog.browser.toPlainText()
    help_menu.actions()[2].trigger()
    assert "memory-bandwidth-bound" in w.help_dialog.browser.toPlainText()
    w.help_dialog.close()


def test_an_error_of_one_run_does_not_carry_into_the_next(window) -> None:  # noqa: ANN001
    from app.run.events import TestFailed

    w = window
    from tests.gui.test_walkthrough import typed

    failed = [e for e in EVENTS if not (e.type == "test_finished" and e.test_index == 1)]
    failed.insert(-1, TestFailed(t_ns=failed[-2].t_ns + 1, test_index=1,
                                 row=typed("result", test_index=1, status="failed", error="out of memory"),
                                 reason="out of memory", kind="out_of_memory"))
    w.replay(failed, "a run with a failure")
    assert any("failed" in t for t in w.messages.messages())
    w.replay(EVENTS, "the next run")
    assert not any("failed" in t for t in w.messages.messages())


def _full(view, text: str, width_px: int) -> bool:  # noqa: ANN001
    return QFontMetrics(view.font()).elidedText(text, Qt.TextElideMode.ElideMiddle, width_px - 8) == text


@pytest.mark.parametrize("size", [(1268, 680), (1788, 975)])  # the window on 1366×768 and 1920×1080
def test_a_laptops_and_a_desktops_window_read_whole(window, size: tuple[int, int], smollm2_path: Path) -> None:  # noqa: ANN001
    from app.gui.main_window import left_column_px

    w = window
    w.resize(*size)
    w.main_split.setSizes([left_column_px(size[0]), size[0] - left_column_px(size[0])])
    w.choose_profile("RTX 4060 Laptop")
    w.inspector.ctx.setValue(8192)
    w.replay(EVENTS, "recorded")
    for _ in range(10):
        w.sweeps.tick(force=True)
        _settle()
    wait_for(lambda: not w.tasks.pending and not w.predictor.busy)
    w.sweeps.tick(force=True)
    _settle()
    # the library: the built-in model's whole name
    tree = w.library.tree
    item = next(tree.topLevelItem(r) for r in range(tree.topLevelItemCount())
                if tree.topLevelItem(r).toolTip(0).startswith(str(smollm2_path.resolve())))
    assert item.text(0) == "SmolLM2-135M-Instruct.Q4_1" and _full(tree, item.text(0), tree.columnWidth(0))
    # the results: the model's whole file name
    table = w.table
    name = table.model().index(0, 1).data()
    assert name.endswith(".gguf") and _full(table, name, table.columnWidth(1)), (name, table.columnWidth(1))
    # the scenario panel: its inputs whole, its lines at their height, no bar over a line (on a laptop's screen
    # in its tab beside the inspector's)
    if getattr(w, "left_mode", "") == "tabs":
        w.left_tabs.setCurrentWidget(w.scenario_box)
        _settle()
    sc = w.scenario
    for inp in (sc.kind, sc.prompt, sc.output, sc.run_button):
        assert inp.height() >= inp.sizeHint().height() and inp.isVisible()
    shown = [x for x in (sc.predicted, sc.pred_bar, sc.exact, sc.measured, sc.meas_bar, sc.what_if, sc.warning,
                         sc.source) if x.isVisible()]
    for i, a in enumerate(shown):
        if isinstance(a, QLabel):
            assert a.height() >= a.heightForWidth(a.width())
        for b in shown[i + 1:]:
            assert not a.geometry().intersects(b.geometry())
    # the decode plot reaches the inspector's context; the GPU what-if does not set its scale
    dec = w.plots.decode
    (x0, x1), (_y0, y1) = dec.plot.getViewBox().viewRange()
    assert 10 ** x1 >= 8192 and y1 < max(dec.what_ifs[0][2])
    assert "RTX 4060 Laptop" in dec.note.toPlainText() and "8,128" in dec.note.toPlainText()
    top_left = dec.widget.mapTo(w, QPoint(0, 0))
    assert top_left.x() + dec.widget.width() <= w.width()
    # every plot's axis title has its room: the tick labels' row as tall in each (the decode plot's was laid out
    # short before its first labels, its axis title cut at the plot's foot)
    rows = {p.name: p.plot.getAxis("bottom").height() for p in w.plots.panels}
    assert min(rows.values()) == max(rows.values()), rows
    # the inspector's figure for this GPU at the asked context is the what-if line's at that depth
    text = w.inspector.text.text()
    shown = float(text.split("Decode expected</td><td><b>")[1].split(" tok/s")[0].replace(",", ""))
    _name, xs, ys = dec.what_ifs[0]
    assert "at depth 8,128" in text and 8128 in xs
    assert float(ys[list(xs).index(8128)]) == pytest.approx(shown, rel=0.01)
