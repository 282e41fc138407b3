"""Issue #12: the window on a laptop screen tells one true story.

Compare rows per model per run, the fit verdict beyond the trained context, the 1366×768 geometry, the unstable
badge, the summary CSV, and the warning when other processes compete with a measurement.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from app.gui.bridge import read_event_stream
from app.gui.contention import ContentionWatch
from app.gui.results_model import UNSTABLE_BADGE
from app.results import export
from app.results.row_types import ResultRow
from app.results.store import ResultStore
from app.run.events import TelemetrySample
from app.run.live import LiveRun
from tests.gui.conftest import RECORDED, wait_for

EVENTS = read_event_stream(RECORDED)
ROWS = [e.row for e in EVENTS if e.type == "test_finished"]


def _two_model_rows(run_id: str) -> list[ResultRow]:
    """The recorded rows, and the same tests on a second model file three times as fast at decode."""
    other = [r.replace(model_path="/models/Other-Model.Q8_0.gguf", model_filename="Other-Model.Q8_0.gguf",
                       test_index=r.test_index + len(ROWS), decode_tps=r.decode_tps * 3, model_size=7 * 2**20)
             for r in ROWS]
    return [r.replace(run_id=run_id) for r in ROWS + other]


@pytest.mark.heavy  # the real window's background jobs and a worker
def test_compare_gives_one_series_and_one_row_per_model_per_run(window) -> None:
    with ResultStore() as store:
        store.begin_run("run-2m", sweep_name="two")
        for r in _two_model_rows("run-2m"):
            store.add_result("run-2m", r)
        store.finish_run("run-2m", "finished")
    cmp = window.show_compare(runs=["run-2m"])
    assert len(cmp.items) == 2 and cmp.table.rowCount() == 2
    names = [cmp.table.item(k, 0).text() for k in range(2)]
    assert "SmolLM2" in names[0] and "Other-Model.Q8_0" in names[1]  # the model is in the label
    smol = np.mean([r.decode_tps for r in ROWS if not r.n_depth])
    assert float(cmp.table.item(0, 2).text().replace(",", "")) == pytest.approx(smol, abs=0.06)  # not averaged
    assert cmp.table.item(1, 3).text() == "3.00× ⚠"  # two repetitions each: within noise, and said so
    assert "fewer than 3 repetitions" in cmp.note.text() and "2 reps ⚠" in cmp.table.item(1, 1).text()
    labels = [label.text for _s, label in cmp.decode.legend.items]
    measured = [t for t in labels if t.endswith("(measured)")]
    assert len(measured) == 2 and "Other-Model.Q8_0" in measured[1]
    cmp.close()


def _stored_run(run_id: str) -> str:
    """The recorded rows as a finished run in the store."""
    with ResultStore() as store:
        store.begin_run(run_id, sweep_name=run_id)
        for r in ROWS:
            store.add_result(run_id, r.replace(run_id=run_id))
        store.finish_run(run_id, "finished")
    return run_id


@pytest.mark.heavy  # the real model in a worker and the real window's background jobs
def test_compare_ratios_never_mix_measured_and_predicted(window, smollm2_path: Path) -> None:
    window.choose_profile("RTX 4060 Laptop")
    cmp = window.show_compare(runs=[_stored_run("run-m")], models=[str(smollm2_path)])
    wait_for(lambda: cmp.table.item(1, 4).text() != "—")
    cmp.refresh()
    assert cmp.table.item(1, 1).text() == "predicted"
    assert cmp.table.item(1, 5).text() == "1.00×"  # its own baseline: the first predicted entry
    assert "like with like" in cmp.note.text()
    cmp.close()


@pytest.mark.heavy  # the real model in a worker and the real window's background jobs
def test_compare_keeps_measurements_readable_beside_a_fast_what_if(window, smollm2_path: Path) -> None:
    """A laptop GPU's what-if at thousands of tok/s does not squash CPU measurements onto the axis: the y axis
    fits the measurements and their predictions, the what-if is named as off the scale; KV memory has its plot."""
    window.choose_profile("RTX 4060 Laptop")
    cmp = window.show_compare(runs=[_stored_run("run-w")], models=[str(smollm2_path)])
    wait_for(lambda: any("what-if" in label.text for _s, label in cmp.decode.legend.items))
    cmp.refresh()
    top = cmp.decode.plot.getViewBox().viewRange()[1][1]
    measured = max(r.decode_tps for r in ROWS)
    what_if = max(cmp.decode.data_of("dec", "curve", len(cmp.decode.legend.items) - 1)[1])
    assert measured < top < what_if and "Off the scale" in cmp.note.text() and "what-if" in cmp.note.text()
    assert any("KV" in label.text for _s, label in cmp.kv.legend.items)
    # the memory plot reaches the context the inspector asks, as the main window's does (it stopped at 4,096)
    window.inspector.ctx.setValue(8192)
    _x0, x1 = cmp.kv.plot.getViewBox().viewRange()[0]
    assert cmp.asked_ctx == 8192 and (10**x1 if cmp.kv.plot.getAxis("bottom").logMode else x1) >= 8192 * 0.99
    cmp.close()


@pytest.mark.heavy  # the real model and the real window's background jobs
def test_the_fit_verdict_warns_beyond_the_trained_context(window, smollm2_path: Path) -> None:
    w = window
    wait_for(lambda: str(smollm2_path) in w.predictor.facts)
    trained = w.predictor.facts[str(smollm2_path)].n_ctx_train
    w.inspector.ctx.setValue(trained * 4)
    text = w.inspector.text.text()
    assert "beyond the trained context" in text and f"({trained:,})" in text
    assert f"Largest context</td><td>{trained:,} tokens (the trained context" in text  # agrees with the verdict
    w.inspector.ctx.setValue(trained // 2)
    text = w.inspector.text.text()
    assert "beyond the trained context" not in text and "Fits" in text
    for part in ("= weights", "+ KV cache", "+ compute buffers", "+ runtime overhead", "(the context full)"):
        assert part in text


def _two_model_events() -> list[Any]:
    """The recorded sweep, then the same tests again on a second model file (a Q8_0 twice as fast at decode)."""
    from dataclasses import replace

    n = len(ROWS)
    other = "/models/SmolLM2-135M-Instruct.Q8_0.gguf"
    start = EVENTS[0]
    tests = start.tests + [replace(t, model_path=other) for t in start.tests]
    out: list[Any] = [replace(start, n_tests=len(tests), tests=tests)]
    body = [e for e in EVENTS[1:] if e.type != "sweep_finished"]
    out += body
    for e in body:
        if e.type == "test_started":
            out.append(replace(e, test_index=e.test_index + n, test=replace(e.test, model_path=other)))
        elif e.type == "test_finished":
            row = e.row.replace(model_path=other, model_filename=Path(other).name, test_index=e.row.test_index + n,
                                decode_tps=e.row.decode_tps * 2, model_size=144 * 2**20)
            out.append(replace(e, test_index=e.test_index + n, row=row))
        elif hasattr(e, "test_index"):
            out.append(replace(e, test_index=e.test_index + n))
        elif e.type == "model_loaded":
            out.append(replace(e, model_path=other))
    return out + [e for e in EVENTS if e.type == "sweep_finished"]


def _settle() -> None:
    """Let Qt run its deferred layout requests (a legend that collapsed resizes its plot on the next pass)."""
    from PySide6.QtWidgets import QApplication

    for _ in range(3):
        QApplication.processEvents()


def _rows_shown(view: Any, row_h: int) -> int:
    return view.viewport().height() // max(row_h, 1)


@pytest.mark.heavy  # the real window's background jobs
@pytest.mark.parametrize("n_models", [1, 2])
@pytest.mark.parametrize("size", [(1366, 768), (1600, 1000)])
def test_a_laptop_screen_keeps_every_part_readable(window, size: tuple[int, int], n_models: int) -> None:
    w = window
    w.choose_profile("RTX 4060 Laptop")  # a what-if line too: the most legend entries a plot gets
    w.replay(EVENTS if n_models == 1 else _two_model_events(), "recorded")
    w.resize(*size)
    for _ in range(20):
        w.sweeps.tick(force=True)
        _settle()
    assert w.width() <= size[0] and w.height() <= size[1]
    lib_row_h = w.library.tree.sizeHintForRow(0)
    assert lib_row_h > 0 and _rows_shown(w.library.tree, lib_row_h) >= 3
    assert _rows_shown(w.table, w.table.rowHeight(0)) >= 5
    tabs = range(w.plots.tabs.count()) if w.plots.mode == "tabs" else [None]
    for tab in tabs:
        if tab is not None:
            w.plots.tabs.setCurrentIndex(tab)
            _settle()
        for p in w.plots.panels:
            if p.widget.isVisible():
                vb = p.plot.getViewBox()
                assert vb.width() >= 200 and vb.height() >= 150, (size, p.name, vb.width(), vb.height())
    assert len(w.session.models()) == n_models and w.results.rowCount() == n_models * len(ROWS)
    visible = {p.name for p in w.plots.panels if p.widget.isVisible()}
    assert w.plots.mode == "tabs" and visible  # two rows of plots would be too short on these screens
    assert "Fits" in w.inspector.text.text()[:600]  # the verdict comes before the facts: never scrolled away


@pytest.mark.heavy  # the real window's background jobs
def test_unstable_results_wear_a_badge_in_the_table_and_the_plots(window) -> None:
    w = window
    noisy = [e if e.type != "test_finished" or e.test_index != 1 else
             type(e)(t_ns=e.t_ns, test_index=e.test_index,
                     row=e.row.replace(unstable=1, unstable_metrics="ttft_ms,decode_tps"))
             for e in EVENTS]
    w.replay(noisy, "noisy")
    w.sweeps.tick(force=True)
    status_col = next(c for c in range(w.results.columnCount())
                      if w.results.headerData(c, __import__("PySide6.QtCore").QtCore.Qt.Orientation.Horizontal)
                      == "status")
    texts = [w.results.index(r, status_col).data() for r in range(w.results.rowCount())]
    assert texts.count(f"ok {UNSTABLE_BADGE}") == 1 and texts.count("ok") == 3
    ux, _uy = w.plots.data_of("ttft", "unstable")
    dx, _dy = w.plots.data_of("dec", "unstable")
    assert len(ux) == 1 and len(dx) == 1
    assert any("unstable" in label.text for _s, label in w.plots.ttft.legend.items)


@pytest.mark.heavy  # the real window's background jobs
def test_the_summary_csv_has_the_key_columns_first_in_mib(window, tmp_path: Path) -> None:
    w = window
    w.replay(EVENTS, "recorded")
    w.sweeps.tick(force=True)
    name = w.results_panel.default_name("summary", "csv")
    assert name.startswith("gguf-bench_20261129T114731Z") and "SmolLM2-135M-Instruct.Q4_1" in name
    path = w.results_panel.export_summary(str(tmp_path / name))
    text = Path(path).read_text()
    header, *rows = list(csv.reader(io.StringIO(text)))
    assert header == export.summary_columns()
    assert header[:6] == ["run_id", "test_index", "model_filename", "hw_profile", "status", "unstable"]
    assert "model_size_mib" in header and "mem_measured_mib" in header and "model_size" not in header
    assert not any("samples" in c for c in header) and len(header) < 40
    row = dict(zip(header, rows[0], strict=True))
    assert float(row["model_size_mib"]) == pytest.approx(ROWS[0].model_size / 2**20, abs=0.05)
    assert "e+" not in text and "e-" not in text.replace("SmolLM2-135M-Instruct", "")
    full = w.export_csv(str(tmp_path / "full.csv"))
    assert Path(full).read_text().splitlines()[0].split(",") == export.columns_for([r.to_mapping() for r in ROWS])


def test_other_processes_using_the_cpu_are_warned_about_once() -> None:
    session = LiveRun("busy")
    for k in range(5):
        session.apply(TelemetrySample(t_ns=k + 1, values={"cpu_pct": 100.0}))
    load = [1.2]
    watch = ContentionWatch(load_1min=lambda: load[0], n_cpus=2)
    assert watch.check(session) == []  # the benchmark's own thread is the whole load
    load[0] = 2.4
    warnings = watch.check(session)
    assert len(warnings) == 1 and warnings[0][0] == "cpu"
    assert "about 1.4 of this machine's 2 CPU threads" in warnings[0][1]
    assert watch.check(session) == []  # once per run


@pytest.mark.heavy  # the real model and the real window's background jobs
def test_predicted_curves_show_as_soon_as_a_model_is_selected(window, smollm2_path: Path) -> None:
    w = window
    wait_for(lambda: str(smollm2_path) in w.predictor.facts)
    w.library.select_paths([str(smollm2_path)])
    assert w.session.title == "preview" and w.session.models() == [str(smollm2_path)] and not w.session.rows

    def drawn() -> bool:
        w.sweeps.tick()
        return len(w.plots.data_of("ttft", "pred", 0, 0)[1]) > 10
    wait_for(drawn)
    assert w.results.rowCount() == 0


def test_each_repetition_is_drawn_as_it_lands(qtbot) -> None:  # noqa: ANN001
    from app.gui.plots.panel import PlotView
    from app.gui.plots.ttft import TtftPlot
    from app.gui.predictions import PredictionService

    first_done = next(k for k, e in enumerate(EVENTS) if e.type == "test_finished")
    session = LiveRun("live")
    session.extend(EVENTS[:first_done])  # test 0's repetitions are in, its mean is not
    plot = TtftPlot()
    qtbot.addWidget(plot.widget)
    plot.draw(PlotView(session, PredictionService()))
    xs, ys = plot.data_of("ttft", "rep", 0)
    n_reps = sum(1 for e in EVENTS[:first_done] if e.type == "phase_result" and e.phase == "prefill" and e.rep >= 0)
    assert len(xs) == n_reps == 2 and (ys > 0).all()
    session.extend([EVENTS[first_done]])
    plot.draw(PlotView(session, PredictionService()))
    assert len(plot.data_of("ttft", "rep", 0)[0]) == 0 and len(plot.data_of("ttft", "meas", 0)[0]) == 1


def test_a_legend_with_a_shape_per_depth_paints(qtbot) -> None:  # noqa: ANN001
    """pyqtgraph's legend sample hands a per-point list of shapes to drawSymbol, which crashed the process."""
    from app.gui.plots.panel import PlotView
    from app.gui.plots.ttft import TtftPlot
    from app.gui.predictions import PredictionService

    session = LiveRun("depths")
    session.extend(EVENTS)
    plot = TtftPlot()
    qtbot.addWidget(plot.widget)
    plot.widget.show()
    plot.draw(PlotView(session, PredictionService()))
    assert not plot.widget.grab().isNull()
    assert "■ depth 64" in plot.legend.items[0][1].text


def test_a_legend_too_tall_for_its_plot_collapses_to_one_line_and_opens_on_click(qtbot) -> None:  # noqa: ANN001
    from PySide6.QtWidgets import QApplication

    from app.gui.plots.items import line, make_plot

    w = make_plot("t", "x", "y", 1)
    qtbot.addWidget(w)
    plot = w.getPlotItem()
    names = [f"predicted (this CPU), depth {k} — SmolLM2" for k in range(8)]
    for name in names:
        plot.addItem(line(name, "#d62728"))
    w.resize(300, 365)
    w.show()
    QApplication.processEvents()
    legend = plot.legend
    legend.fit(270, 400)
    assert not legend.collapsed and legend.header is None  # room enough: every entry shows
    legend.fit(270, 130)
    QApplication.processEvents()
    assert legend.collapsed and legend.header.text.startswith("▸ legend: 8 entries")
    assert legend.header.toolTip().split("\n") == names  # the entries stay readable on hover
    assert legend.height() < 30 and plot.getViewBox().height() > 250
    legend.toggle()  # the header's click
    QApplication.processEvents()
    assert not legend.collapsed and legend.header.text == "▾ hide legend"
    assert legend.drop.isVisible() and all(label.isVisible() for _s, label in legend.items)
    assert plot.getViewBox().height() > 250  # the entries over the data: the plot keeps its data area
    legend.fit(270, 130)  # the user's choice wins over the plot's height until they collapse it again
    assert not legend.collapsed
    plot.addItem(line("what-if (RTX 4060 Laptop)", "#1f77b4"))
    legend.toggle()
    assert legend.collapsed and "9 entries" in legend.header.text
