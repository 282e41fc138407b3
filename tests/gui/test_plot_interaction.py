"""Pointing at the live plots (issue #28): the hover readout of the nearest measured point, click-to-select its test's
row, and the log-scale toggle that redraws keep and restarts remember. Real mouse events on the plots' viewports,
drawn from the recorded stream (data/smollm2_small_sweep.jsonl, no model)."""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
import pytest
from PySide6.QtCore import QEvent, QPoint, QPointF, Qt
from PySide6.QtWidgets import QApplication

from app.gui.bridge import read_event_stream
from app.gui.plots import LivePlots
from app.gui.plots.decode import mean_pos
from app.gui.plots.interaction import number
from app.gui.plots.panel import Curve, PlotPanel
from app.gui.plots.style import MIB
from app.gui.plots.ttft import TtftPlot
from app.gui.predictions import PredictionService
from app.gui.results_model import TEST_INDEX_ROLE
from app.gui.settings import Settings
from app.predict.profiles import cpu_profile
from app.results.row_types import ResultRow
from app.run.live import LiveRun
from tests.gui.conftest import RECORDED

EVENTS = read_event_stream(RECORDED)
GIB = 1024**3
MOVE_GAP_MS = 15  # pyqtgraph's scene passes on at most one mouse move per 10 ms (its mouseRateLimit)


@pytest.fixture
def predictor() -> PredictionService:
    """No model facts (no model file read): the plots draw the rows' own figures; a profile for the KV plot's line."""
    p = PredictionService()
    p.set_profile(cpu_profile("test CPU", bandwidth_gbps=20.0, gflops=200.0, ram_bytes=16 * GIB))
    return p


@pytest.fixture
def plots(qtbot, run: LiveRun, predictor: PredictionService) -> Iterator[LivePlots]:  # noqa: ANN001 - pytest-qt's
    lp = LivePlots()
    qtbot.addWidget(lp)
    lp.resize(1300, 760)
    lp.show()
    qtbot.waitExposed(lp)
    lp.refresh(run, predictor, force=True)
    _settle()
    yield lp


def _settle() -> None:
    for _ in range(5):  # pyqtgraph fits auto ranges and lays out before it paints
        QApplication.processEvents()


def _row(run: LiveRun, test_index: int) -> ResultRow:
    return next(r for r in run.ok_rows() if r.test_index == test_index)


def _at(panel: PlotPanel, x: float, y: float) -> QPoint:
    """Where the data point (x, y) is on the plot's viewport (log10 first on a log axis)."""
    log_x, log_y = panel.pointer.log_modes()
    view = QPointF(math.log10(x) if log_x else x, math.log10(y) if log_y else y)
    return panel.widget.mapFromScene(panel.plot.getViewBox().mapViewToScene(view))


def _hover(qtbot, panel: PlotPanel, pos: QPoint) -> str:  # noqa: ANN001
    qtbot.wait(MOVE_GAP_MS)
    qtbot.mouseMove(panel.widget.viewport(), pos)
    _settle()
    return panel.pointer.text


def test_hovering_a_measured_point_reads_out_its_figures_and_leaving_hides_them(qtbot, plots: LivePlots,
                                                                                 run: LiveRun) -> None:
    ttft = plots.ttft
    r3 = _row(run, 3)  # prompt 64 at depth 64
    text = _hover(qtbot, ttft, _at(ttft, 64.0, r3.ttft_ms))
    sd_pct = round(r3.ttft_ms_stddev / r3.ttft_ms * 100)
    assert f"TTFT {number(r3.ttft_ms)} ms ±{sd_pct} %" in text
    assert "prompt 64 tok" in text and "test 3 · prompt 64 · gen 16 · depth 64 · KV f16" in text
    assert "measured (±1 sd) — SmolLM2-135M-Instruct.Q4_1" in text
    assert ttft.pointer.readout is not None and ttft.pointer.readout.isVisible()
    assert ttft.pointer.marker.isVisible() and ttft.pointer.marker.getData()[1][0] == pytest.approx(r3.ttft_ms)

    r0 = _row(run, 0)  # another point: another readout
    text = _hover(qtbot, ttft, _at(ttft, 32.0, r0.ttft_ms))
    assert "test 0 · prompt 32" in text and f"TTFT {number(r0.ttft_ms)} ms" in text and "depth" not in text

    # the middle of the empty data area, far from every point: nothing to read out
    vb_rect = ttft.plot.getViewBox().sceneBoundingRect()
    empty = ttft.widget.mapFromScene(QPointF(vb_rect.center().x(), vb_rect.top() + 5))
    assert _hover(qtbot, ttft, empty) == "" and not ttft.pointer.readout.isVisible()
    assert not ttft.pointer.marker.isVisible()

    _hover(qtbot, ttft, _at(ttft, 64.0, r3.ttft_ms))
    assert ttft.pointer.readout.isVisible()
    QApplication.sendEvent(ttft.widget, QEvent(QEvent.Type.Leave))  # the mouse leaves the plot
    assert ttft.pointer.text == "" and not ttft.pointer.readout.isVisible()


def test_each_plot_reads_out_in_its_own_units(qtbot, plots: LivePlots, run: LiveRun) -> None:
    r1 = _row(run, 1)
    text = _hover(qtbot, plots.decode, _at(plots.decode, mean_pos(r1), r1.decode_tps))
    assert f"decode {number(r1.decode_tps)} tok/s ±0.2 %" in text and f"position {mean_pos(r1):.0f} tok" in text
    assert "test 1" in text

    kv = plots.kv  # a log y axis from the start
    r2 = _row(run, 2)
    text = _hover(qtbot, kv, _at(kv, 256.0, r2.mem_measured_bytes / MIB))
    # tests of one context can lie a pixel apart on the log axis: the readout is of the test it names
    named = _row(run, int(text.split("\ntest ")[1].split(" ")[0]))
    assert "context 256 tok" in text and f"RSS growth {number(named.mem_measured_bytes / MIB)} MiB" in text
    assert abs(named.mem_measured_bytes / r2.mem_measured_bytes - 1) < 0.02

    itl = plots.itl  # thousands of per-token points: only those under the mouse are searched
    s = run
    t, lat, tests = np.asarray(s.t_s(s.tok_t_ns.view())), s.tok_itl_ms.view(), s.tok_test.view().astype(int)
    i = int(np.flatnonzero(tests == 2)[5])
    text = _hover(qtbot, itl, _at(itl, float(t[i]), float(lat[i])))
    assert text.startswith("measured, per token") and "ITL " in text and "test 2 · prompt 32" in text


@pytest.mark.heavy  # the real window's background jobs
def test_clicking_a_point_selects_its_row_and_ctrl_click_adds_or_removes(window, qtbot) -> None:  # noqa: ANN001
    w = window
    w.replay(EVENTS, "recorded")
    _settle()
    s = w.session

    def table_selection() -> set[int]:
        return {int(i.data(TEST_INDEX_ROLE)) for i in w.table.selectionModel().selectedRows()}

    def click(panel: PlotPanel, x: float, y: float, ctrl: bool = False) -> None:
        mods = Qt.KeyboardModifier.ControlModifier if ctrl else Qt.KeyboardModifier.NoModifier
        qtbot.mouseClick(panel.widget.viewport(), Qt.MouseButton.LeftButton, mods, _at(panel, x, y))
        _settle()

    r3, r1 = _row(s, 3), _row(s, 1)
    click(w.plots.ttft, 64.0, r3.ttft_ms)
    assert table_selection() == {3} and w.sweeps.selected == {3}
    hx, hy = w.plots.data_of("ttft", "hl")  # highlighted in every plot, as a table selection is
    assert hx.tolist() == [64.0] and hy.tolist() == [pytest.approx(r3.ttft_ms)]
    assert w.plots.data_of("dec", "hl")[0].tolist() == [pytest.approx(mean_pos(r3))]

    click(w.plots.decode, mean_pos(r1), r1.decode_tps, ctrl=True)  # Ctrl adds
    assert table_selection() == {1, 3} and w.sweeps.selected == {1, 3}
    click(w.plots.ttft, 64.0, r3.ttft_ms, ctrl=True)  # and takes out what was in
    assert table_selection() == {1}
    click(w.plots.ttft, 32.0, _row(s, 0).ttft_ms)  # a plain click replaces
    assert table_selection() == {0} and len(w.plots.data_of("ttft", "hl")[0]) == 1

    vb_rect = w.plots.ttft.plot.getViewBox().sceneBoundingRect()  # a click on no point changes nothing
    qtbot.mouseClick(w.plots.ttft.widget.viewport(), Qt.MouseButton.LeftButton, pos=w.plots.ttft.widget.mapFromScene(
        QPointF(vb_rect.center().x(), vb_rect.top() + 5)))
    _settle()
    assert table_selection() == {0}


def test_the_log_toggle_survives_redraws_with_ranges_in_log_units(qtbot, plots: LivePlots, run: LiveRun,
                                                                  predictor: PredictionService) -> None:
    itl, decode, ttft = plots.itl, plots.decode, plots.ttft
    assert not itl.log_scale and itl.plot.getViewBox().viewRange()[1][1] >= 10  # linear: tens of ms
    qtbot.mouseClick(itl.log_toggle.button, Qt.MouseButton.LeftButton)  # the plot's "log" button
    _settle()
    assert itl.log_scale and itl.log_toggle.checked and itl.plot.getAxis("left").logMode
    assert itl.plot.getAxis("left").labelText == "inter-token latency (ms, log scale)"
    lat = run.tok_itl_ms.view()
    (_x0, _x1), (y0, y1) = itl.plot.getViewBox().viewRange()
    assert y0 == pytest.approx(math.floor(math.log10(np.nanmin(lat[lat > 0]))))  # the decade below the least
    assert 1.0 < y1 < 3.0 and 10**y1 >= np.percentile(lat, 95)  # log10 of tens of ms

    # the context menu's action is the same switch; decode's position axis starts on a log scale (a short test's
    # tokens and the asked context, thousands of tokens, on one axis): the switch makes it linear and back
    assert decode.log_scale and decode.plot.getAxis("bottom").logMode
    decode.log_toggle.action.trigger()
    assert decode.log_toggle.action in decode.plot.getViewBox().getMenu(None).actions()
    assert not decode.log_scale and not decode.plot.getAxis("bottom").logMode
    _settle()
    decode.log_toggle.action.trigger()
    assert decode.log_scale and decode.plot.getAxis("bottom").logMode
    x_max = max([t.n_depth + t.n_prompt + t.n_gen for t in run.tests.values()] + [plots.kv_ctx_max]) * 1.05
    assert 10 ** decode.plot.getViewBox().viewRange()[0][1] == pytest.approx(x_max)

    ttft.log_toggle.action.trigger()
    _settle()
    err = ttft.items[("ttft", "err", 0)][1]  # error bars are not mapped by pyqtgraph: drawn in log10 units
    assert sorted(err.opts["y"]) == pytest.approx(sorted(np.log10([r.ttft_ms for r in run.ok_rows()])))
    assert 1.5 < ttft.plot.getViewBox().viewRange()[1][1] < 3.0

    for _ in range(2):  # redraws (a new selection, the run's end) keep the choice and the log ranges
        plots.refresh(run, predictor, selected={1}, force=True)
        plots.refresh(run, predictor, force=True)
        _settle()
        assert itl.log_scale and itl.plot.getAxis("left").logMode
        assert itl.plot.getViewBox().viewRange()[1] == pytest.approx([y0, y1])
        assert 10 ** decode.plot.getViewBox().viewRange()[0][1] == pytest.approx(x_max)
        assert ttft.log_scale and ttft.plot.getAxis("bottom").logMode and ttft.plot.getAxis("left").logMode

    itl.log_toggle.action.trigger()  # and back: linear ranges again
    _settle()
    assert not itl.plot.getAxis("left").logMode and itl.plot.getViewBox().viewRange()[1][1] >= 10
    assert itl.plot.getAxis("left").labelText == "inter-token latency (ms)"
    assert plots.tel.log_toggle is None  # two y axes in different units: no log toggle
    assert all(not p.plot.menuEnabled() for p in plots.panels)  # pyqtgraph's own Log X/Y would bypass the redraws


def test_the_log_choice_is_remembered_across_restarts(qtbot, run: LiveRun, predictor: PredictionService) -> None:  # noqa: ANN001
    first = LivePlots()
    qtbot.addWidget(first)
    first.keep_log_scales(Settings())
    assert first.kv.log_scale and not first.ttft.log_scale  # the defaults: KV memory on a log axis
    first.refresh(run, predictor, force=True)
    assert first.kv._limit.value() == pytest.approx(math.log10(16 * 1024))  # placed in log10 units
    first.ttft.log_toggle.action.trigger()
    first.kv.log_toggle.action.trigger()
    assert first.kv._limit.value() == pytest.approx(16 * 1024)  # redrawn at once: linear MiB
    Settings().sync()

    again = LivePlots()
    qtbot.addWidget(again)
    again.keep_log_scales(Settings())
    assert again.ttft.log_scale and again.ttft.plot.getAxis("left").logMode
    assert not again.kv.log_scale and not again.kv.plot.getAxis("left").logMode
    assert again.kv.plot.getAxis("left").labelText == "memory (MiB)"
    fresh = LivePlots()  # a window that restores nothing keeps the defaults
    qtbot.addWidget(fresh)
    fresh.keep_log_scales(Settings(), restore=False)
    assert not fresh.ttft.log_scale and fresh.kv.log_scale


def test_the_compare_views_measured_curves_read_out_too(qtbot) -> None:  # noqa: ANN001
    panel = TtftPlot("Time to first token", columns=1)
    qtbot.addWidget(panel.widget)
    panel.widget.resize(420, 340)
    panel.widget.show()
    qtbot.waitExposed(panel.widget)
    xs = np.array([128.0, 512.0, 2048.0])
    panel.draw_curves([Curve("run A — Q4_1", xs, np.array([90.0, 300.0, 1400.0]), "#1f77b4"),
                       Curve("Q4_1 (predicted)", xs, np.array([40.0, 150.0, 700.0]), "#1f77b4", measured=False)])
    _settle()
    assert _hover(qtbot, panel, _at(panel, 512.0, 300.0)) == "run A — Q4_1\nprompt length 512 tokens · TTFT 300 ms"
    assert _hover(qtbot, panel, _at(panel, 2048.0, 700.0)) == ""  # a predicted line is no measured point


def test_log_axes_label_plain_numbers_that_fit() -> None:
    import math

    from app.gui.plots.items import log_tick_text, log_ticks

    def labels(lo: float, hi: float, px: float) -> list[str]:
        return [log_tick_text(v) for v in log_ticks(math.log10(lo), math.log10(hi), px)]

    assert labels(4, 110, 300) == ["5", "10", "20", "50", "100"]  # 1-2-5 where there is room
    assert labels(4, 110, 120) == ["10", "100"]  # decades where there is not
    assert labels(1, 1e6, 300) == ["1", "10", "100", "1,000", "10,000", "100,000", "1,000,000"]
    assert len(labels(1, 1e12, 200)) <= 200 // 42  # many decades: every n-th
    assert labels(20, 35, 300) == ["20", "30"]  # less than a decade: the finest steps
    assert log_tick_text(math.log10(0.5)) == "0.5" and "·" not in log_tick_text(math.log10(90))
