"""The plot classes, each drawn from a recorded LiveRun (data/smollm2_small_sweep.jsonl, no model needed) beside
its predictions; LivePlots drawing what changed at each refresh; the compare view's one series per entry."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyqtgraph as pg
import pytest

from app.gui.bridge import read_event_stream
from app.gui.compare import CompareWindow
from app.gui.plots import LivePlots
from app.gui.plots.decode import DecodePlot, mean_pos
from app.gui.plots.items import show_curve
from app.gui.plots.itl import ItlPlot
from app.gui.plots.kv import KvPlot
from app.gui.plots.panel import PlotPanel, PlotView
from app.gui.plots.style import color
from app.gui.plots.telemetry import TelemetryPlot
from app.gui.plots.ttft import TtftPlot
from app.gui.predictions import PredictionService
from app.model.gguf_facts import read_model_facts
from app.predict.profiles import cpu_profile, find_profile, load_profiles
from app.results.store import ResultStore
from app.run.live import LiveRun
from tests.gui.conftest import RECORDED

EVENTS = read_event_stream(RECORDED)
GIB = 1024**3


def _profile(name: str = "test CPU") -> Any:
    return cpu_profile(name, bandwidth_gbps=20.0, gflops=200.0, ram_bytes=16 * GIB)


@pytest.fixture
def predictor(run: LiveRun, smollm2_path: Path) -> PredictionService:
    """Predictions for the recorded run's model (its recorded path may differ from this checkout's)."""
    p = PredictionService()
    for path in run.models():
        p.set_facts(path, read_model_facts(smollm2_path))
    p.set_profile(_profile())
    return p


@pytest.fixture
def view(run: LiveRun, predictor: PredictionService) -> PlotView:
    return PlotView(run, predictor)


@pytest.fixture
def panels(qtbot) -> Iterator[dict[str, PlotPanel]]:  # noqa: ANN001 - pytest-qt's
    decode = DecodePlot()
    made: dict[str, PlotPanel] = {"ttft": TtftPlot(), "dec": decode, "kv": KvPlot(), "tel": TelemetryPlot(),
                                  "itl": ItlPlot(decode)}
    for p in made.values():
        qtbot.addWidget(p.widget)
    yield made


def _labels(panel: PlotPanel) -> list[str]:
    return [label.text for _sample, label in panel.legend.items]


def _n_ticks() -> int:
    """Per-token rates in the recording: the first token of each timed repetition has no previous step."""
    return sum(1 for e in EVENTS if e.type == "token_tick" and e.rep >= 0) - 4 * 2


@pytest.mark.heavy  # the real model
def test_ttft_plot_shows_measured_means_and_one_prediction_per_depth(panels, view: PlotView, run: LiveRun) -> None:
    p = panels["ttft"]
    p.draw(view)
    x, y = p.data_of("ttft", "meas", 0)
    assert sorted(x) == [32.0, 32.0, 64.0, 64.0]
    assert sorted(y) == sorted(float(r.ttft_ms) for r in run.ok_rows())
    for j in (0, 1):  # the run used depths 0 and 64
        xs, ys = p.data_of("ttft", "pred", 0, j)
        assert len(xs) > 10 and np.isfinite(ys).all() and (np.diff(ys) > 0).all()
    assert p.data_of("ttft", "pred", 0, 1)[1][-1] > p.data_of("ttft", "pred", 0, 0)[1][-1]  # deeper: slower
    ran_on = run.ok_rows()[0].hw_profile  # the recorded rows say which CPU they ran on: not the chosen one
    assert _labels(p) == ["measured (±1 sd); ● depth 0, ■ depth 64", f"ceiling ({ran_on}), depth 0",
                          f"ceiling ({ran_on}), depth 64", "what-if (test CPU)"]
    symbols = p.items[("ttft", "meas", 0)][1].opts["symbol"]  # the shape tells the depth, the colour the model
    assert sorted(symbols) == ["o", "o", "s", "s"]
    assert len(p.data_of("ttft", "hl")[0]) == 0
    _wx, what_if = p.data_of("ttft", "whatif", 0)
    assert what_if[-1] > p.data_of("ttft", "pred", 0, 0)[1][-1]  # the chosen 20 GB/s, 200 GFLOPS CPU is slower


@pytest.mark.heavy  # the real model
def test_the_prediction_beside_a_measurement_is_for_the_hardware_it_ran_on(panels, run: LiveRun,
                                                                          predictor: PredictionService) -> None:
    """Issue #12 point 1: with the inspector on a laptop GPU, the dashed prediction beside CPU measurements is
    still the CPU's (each row's own pred_ttft_ms); the GPU is only the labelled what-if line."""
    predictor.set_profile(find_profile("RTX 4060 Laptop", load_profiles()))
    view = PlotView(run, predictor)
    p = panels["ttft"]
    p.draw(view)
    xs, ys = p.data_of("ttft", "pred", 0, 0)
    _wx, wy = p.data_of("ttft", "whatif", 0)
    for r in run.ok_rows():
        if not r.n_depth:
            own = float(r.pred_ttft_ms)
            assert np.interp(r.n_prompt, xs, ys) == pytest.approx(own, rel=0.08)
            assert np.interp(r.n_prompt, xs, wy) < 0.2 * own
    ran_on, what_if = view.hardware(run.models()[0])
    assert ran_on is not None and ran_on.name == run.ok_rows()[0].hw_profile and "4060" in what_if.name
    assert f"what-if ({what_if.name})" in _labels(p)


@pytest.mark.heavy  # the real model
def test_no_what_if_when_the_chosen_profile_is_the_hardware_measured(panels, run: LiveRun,
                                                                     predictor: PredictionService) -> None:
    row = run.ok_rows()[0]
    predictor.set_profile(cpu_profile("This CPU: the same", row.pred_bandwidth_gbps,
                                      row.pred_tflops * 1000.0, 16 * GIB))
    p = panels["dec"]
    p.draw(PlotView(run, predictor))
    assert _labels(p) == ["per token (measured)", "test mean (±1 sd); ● depth 0, ■ depth 64",
                          f"ceiling ({row.hw_profile})"]
    assert len(p.data_of("dec", "whatif", 0)[0]) == 0


@pytest.mark.heavy  # the real model
def test_decode_plot_shows_tokens_means_and_the_ceiling(panels, view: PlotView, run: LiveRun) -> None:
    p = panels["dec"]
    p.draw(view)
    xs, rates = p.data_of("dec", "tok", 0)
    assert len(rates) == _n_ticks() and (xs >= 32).all() and (rates > 0).all()
    mx, my = p.data_of("dec", "mean", 0)
    assert sorted(mx) == sorted(mean_pos(r) for r in run.ok_rows()) and (my > 0).all()
    cx, cy = p.data_of("dec", "pred", 0)
    assert np.isfinite(cy).all() and cy[0] > cy[-1] > 0  # the ceiling falls as the context fills
    assert set(p.curves) == {0} and np.array_equal(p.curves[0][1], cy)
    ran_on = run.ok_rows()[0].hw_profile
    assert _labels(p) == ["per token (measured)", "test mean (±1 sd); ● depth 0, ■ depth 64", f"ceiling ({ran_on})",
                          "what-if ceiling (test CPU)"]  # the answer's figure for it: a ceiling (no fit here)
    _wx, wy = p.data_of("dec", "whatif", 0)
    assert np.isfinite(wy).all() and wy[0] < cy[0]  # 20 GB/s chosen vs the 33 GB/s the run was measured on


@pytest.mark.heavy  # the real model
def test_a_redraw_leaves_a_predicted_curve_it_already_shows_alone(panels, view: PlotView) -> None:
    p = panels["dec"]
    p.draw(view)
    item = p.items[("dec", "pred", 0)][1]
    shown = p.data_of("dec", "pred", 0)[1].copy()
    calls: list[int] = []
    set_data = item.setData
    item.setData = lambda *a, **k: (calls.append(1), set_data(*a, **k))[1]  # counts, then the real setData
    p.draw(view)
    assert calls == [] and np.array_equal(p.data_of("dec", "pred", 0)[1], shown)
    xs = np.linspace(0.0, 10.0, 5)
    show_curve(item, xs, xs * 2)  # another curve object: shown
    assert calls == [1] and np.array_equal(p.data_of("dec", "pred", 0)[1], xs * 2)
    show_curve(item, xs, None)  # none (being computed): emptied
    assert calls == [1, 1] and len(p.data_of("dec", "pred", 0)[0]) == 0


@pytest.mark.heavy  # the real model
def test_kv_plot_shows_predicted_memory_measured_points_and_the_ram_line(panels, view: PlotView) -> None:
    p = panels["kv"]
    p.draw(view)
    kx, ky = p.data_of("kv", "meas", 0)
    assert len(kx) == 4 and (ky > 0).all()
    _x, kv_mib = p.data_of("kv", "kv", 0)
    _x, total_mib = p.data_of("kv", "tot", 0)
    assert np.isfinite(kv_mib).all() and (total_mib > kv_mib).all() and kv_mib[-1] > kv_mib[0]
    assert "KV cache, pred. (f16)" in _labels(p) and "RAM 16 GiB (test CPU)" in p._limit.label.format
    p.reset()  # a new sweep: nothing drawn is kept
    assert p._limit is None and len(p.data_of("kv", "meas", 0)[0]) == 0 and _labels(p) == []
    p.draw(view)
    assert "RAM 16 GiB (test CPU)" in p._limit.label.format


@pytest.mark.heavy  # the real model
def test_telemetry_plot_shows_samples_phases_and_predicted_memory(panels, view: PlotView) -> None:
    p = panels["tel"]
    p.draw(view)
    n_tel = sum(1 for e in EVENTS if e.type == "telemetry_sample")
    assert len(p.data_of("tel", "rss")[1]) == n_tel
    assert len(p.data_of("tel2", "cpu")[1]) == n_tel
    assert p.n_phase_regions == 4 * 2 * 2  # tests × repetitions × (prefill, decode)
    assert p._mem_pred is not None and p._mem_pred.value() > 10  # MiB
    assert _labels(p)[:2] == ["prefill", "decode"] and "worker CPU (%)" in _labels(p)
    p.draw(view)  # nothing new: no region drawn twice
    assert p.n_phase_regions == 16
    p.reset()
    assert p.n_phase_regions == 0 and len(p.data_of("tel2", "cpu")[1]) == 0 and _labels(p) == ["prefill", "decode"]


@pytest.mark.heavy  # the real model
def test_itl_plot_shows_latencies_and_the_floor_from_the_drawn_ceiling(panels, view: PlotView, run: LiveRun) -> None:
    p = panels["itl"]
    p.draw(view)  # the decode plot has drawn no ceiling yet: no floor
    assert len(p.data_of("itl", "meas")[1]) == _n_ticks()
    assert np.isnan(p.data_of("itl", "pred")[1]).all()
    panels["dec"].draw(view)
    p.draw(view)
    _t, floor = p.data_of("itl", "pred")
    xs, ys = panels["dec"].curves[0]
    assert np.allclose(floor, 1000.0 / np.interp(run.tok_pos.view(), xs, ys))


@pytest.mark.heavy  # the real model
def test_selected_tests_are_highlighted(panels, run: LiveRun, predictor: PredictionService) -> None:
    view = PlotView(run, predictor, frozenset({0, 1}))
    for p in panels.values():
        p.draw(view)
    assert len(panels["ttft"].data_of("ttft", "hl")[0]) == 2
    assert len(panels["dec"].data_of("dec", "hl")[0]) == 2
    n_sel = int(np.isin(run.tok_test.view(), [0, 1]).sum())
    assert 0 < n_sel < _n_ticks()
    assert len(panels["dec"].data_of("dec", "hltok")[0]) == n_sel
    assert len(panels["itl"].data_of("itl", "hl")[0]) == n_sel


@pytest.mark.heavy  # the real model
def test_a_new_profile_renames_the_prediction_legends(panels, view: PlotView, run: LiveRun,
                                                      predictor: PredictionService) -> None:
    p = panels["dec"]
    p.draw(view)
    predictor.set_profile(_profile("other CPU"))
    p.draw(PlotView(run, predictor))
    assert _labels(p)[-1] == "what-if ceiling (other CPU)"  # no fit for it here: its figure is the ceiling


def _shown_plots(qtbot) -> LivePlots:  # noqa: ANN001 - pytest-qt's
    plots = LivePlots()
    qtbot.addWidget(plots)
    plots.resize(1200, 900)  # tall enough for the grid: all five plots show
    plots.show()
    qtbot.waitExposed(plots)
    return plots


def _everything_drawn(plots: LivePlots) -> dict[tuple, tuple[list, ...]]:
    """Every line's and marker set's data, and every error bar's, by key (the per-token floors included)."""
    out: dict[tuple, tuple[list, ...]] = {}
    for p in plots.panels:
        for key, (_owner, item) in p.items.items():
            if isinstance(item, pg.PlotDataItem):
                out[key] = tuple(np.asarray(a, dtype=float).tolist() for a in plots.data_of(*key))
            elif isinstance(item, pg.ErrorBarItem):
                out[key] = tuple(np.asarray(item.opts[k], dtype=float).tolist() for k in ("x", "y", "top", "bottom"))
    return out


@pytest.mark.heavy  # the predictor fixture reads the real model's facts
def test_live_plots_draw_what_changed_at_each_refresh(qtbot, predictor: PredictionService) -> None:  # noqa: ANN001
    """No scheduler: a refresh gives new data to the plots whose series grew, all of them at once; one with nothing
    new is left alone; a selection redraws only the plots that show it."""
    plots = _shown_plots(qtbot)
    half = [e for e in EVENTS if e.type != "sweep_finished"]
    run = LiveRun("live")
    run.extend(half[: len(half) // 2])
    assert plots.refresh(run, predictor) and plots.last_drawn == tuple(p.name for p in plots.panels)
    assert not plots.behind
    drawn = plots.redraws
    assert not plots.refresh(run, predictor) and plots.redraws == drawn  # nothing changed: nothing drawn
    run.extend(half[len(half) // 2:])  # more data of the same run: drawn at the next refresh, whatever came
    assert plots.refresh(run, predictor) and not plots.behind
    assert len(plots.data_of("ttft", "meas", 0)[0]) == 4 and plots.n_phase_regions() == 16
    n_tel = sum(1 for e in EVENTS if e.type == "telemetry_sample")
    assert len(plots.data_of("tel2", "cpu")[0]) == n_tel and len(plots.data_of("tel", "rss")[0]) == n_tel
    assert len(plots.data_of("itl", "meas")[0]) == _n_ticks() and len(plots.data_of("nothing")[0]) == 0
    assert plots.refresh(run, predictor, {0})  # a selection: only the plots that show it
    assert 0 < len(plots.last_drawn) < 5 and "tel" not in plots.last_drawn
    assert not plots.refresh(run, predictor, {0}, force=True)  # nothing new: nothing to set, forced or not
    plots.reset()
    assert len(plots.data_of("ttft", "meas", 0)[0]) == 0 and plots.n_phase_regions() == 0


@pytest.mark.heavy  # the predictor fixture reads the real model's facts
def test_series_grown_event_by_event_draw_what_one_draw_of_the_whole_run_draws(
        qtbot, predictor: PredictionService) -> None:  # noqa: ANN001
    """Each series appends what came since the last refresh: after a refresh every few events, every item shows
    exactly what a plot drawn once from the finished run shows (the per-token lines and floors, telemetry, phases,
    means, the selection's highlight)."""
    grown, whole = _shown_plots(qtbot), _shown_plots(qtbot)
    run = LiveRun("live")
    events = list(EVENTS)
    for k in range(0, len(events), 7):
        run.extend(events[k : k + 7])
        grown.refresh(run, predictor, {1})
    once = LiveRun("once")
    once.extend(events)
    whole.refresh(once, predictor, {1})
    assert _everything_drawn(grown) == _everything_drawn(whole)
    assert grown.n_phase_regions() == whole.n_phase_regions() == 16
    assert len(grown.data_of("itl", "hl")[0]) == int(np.isin(run.tok_test.view(), [1]).sum()) > 0


@pytest.mark.heavy  # the predictor fixture reads the real model's facts
def test_new_data_is_drawn_at_the_next_refresh_while_a_prompt_is_processed(qtbot,  # noqa: ANN001
                                                                           predictor: PredictionService) -> None:
    """Nothing is held back while llama.cpp processes a prompt: a telemetry sample that lands then is drawn at the
    next refresh (a refresh that only appends is cheap: no prediction is asked for, no series rebuilt)."""
    from app.run.events import RepetitionStarted

    plots = _shown_plots(qtbot)
    events = [e for e in EVENTS if e.type != "sweep_finished"]
    samples = [e for e in events if e.type == "telemetry_sample"]
    run = LiveRun("live")
    run.extend([e for e in events if e.type != "telemetry_sample"])
    assert plots.refresh(run, predictor)
    run.extend([RepetitionStarted(t_ns=events[-1].t_ns, test_index=0, rep=0)])
    assert run.prefilling
    asked: list[str] = []
    for p in plots.panels:  # a prediction is never asked for again for more data
        p.predict = lambda view, name=p.name: asked.append(name)  # type: ignore[method-assign]
    run.extend(samples[:3])
    assert plots.refresh(run, predictor) and plots.last_drawn == ("tel",) and asked == []
    assert len(plots.data_of("tel2", "cpu")[0]) == 3


@pytest.mark.heavy  # the real model
def test_a_hidden_plot_waits_until_it_shows(qtbot, run: LiveRun, predictor: PredictionService) -> None:  # noqa: ANN001
    plots = LivePlots()
    qtbot.addWidget(plots)
    plots.resize(1200, 500)  # too low for the grid: two tabs, the first showing
    plots.show()
    qtbot.waitUntil(lambda: plots.mode == "tabs", timeout=2000)
    assert plots.refresh(run, predictor, force=True)  # first draws: all
    assert not plots.kv.widget.isVisible()
    assert plots.refresh(run, predictor, {0}) and "kv" not in plots.last_drawn  # the other tab waits
    assert plots.behind and plots.kv.dirty
    plots.tabs.setCurrentIndex(1)
    assert plots.refresh(run, predictor, {0}) and "kv" in plots.last_drawn and not plots.behind


@pytest.mark.heavy  # the real model in a worker
def test_compare_view_shows_one_series_per_entry(qtbot, run: LiveRun, predictor: PredictionService) -> None:  # noqa: ANN001
    rows = [e.row for e in EVENTS if e.type == "test_finished"]
    with ResultStore() as store:
        for rid, factor in (("run-a", 1.0), ("run-b", 2.0)):
            store.begin_run(rid, sweep_name=rid)
            for r in rows:
                store.add_result(rid, r.replace(run_id=rid, decode_tps=r.decode_tps * factor))
            store.finish_run(rid, "finished")
    cmp = CompareWindow(predictor)
    qtbot.addWidget(cmp)
    assert cmp.add_run("run-a") and cmp.add_run("run-b")
    cmp.add_model(run.models()[0])
    for panel in (cmp.ttft, cmp.decode):
        labels = _labels(panel)
        # each run: its measurement and, in its colour, its prediction for the CPU it ran on; the file: a what-if
        assert len(labels) == 5 and labels[0].startswith("run-a") and labels[0].endswith("(measured)")
        assert labels[1].endswith(" predicted") and labels[2].startswith("run-b") and "what-if" in labels[4]
        pens = [panel.items[(panel.name, "curve", k)][1].opts["pen"].color().name() for k in range(5)]
        assert pens[0] == pens[1] == pg.mkColor(color(0)).name() and pens[2] == pens[3] == pg.mkColor(color(1)).name()
        assert pens[4] == pens[0]  # the file's what-if: the colour of its first measurement
        assert pens[0] != pens[2]  # two runs of one file stay apart
    assert "Measured on " in cmp.note.text()  # both runs on one CPU: named once, not in every legend entry
    tx, ty = cmp.ttft.data_of("ttft", "curve", 0)
    assert list(tx) == [32.0, 64.0] and (ty > 0).all()  # means of the depth-0 tests
    _dx, da = cmp.decode.data_of("dec", "curve", 0)
    _dx, db = cmp.decode.data_of("dec", "curve", 2)
    assert len(da) == 4 and np.allclose(db, 2 * da)
    _px, py = cmp.ttft.data_of("ttft", "curve", 4)
    assert len(py) == 40 and np.isfinite(py).all()
    assert cmp.ttft.plot.getViewBox().viewRange()[1][0] == 0.0  # times and speeds read from zero
    cmp.items.pop()
    cmp.refresh()
    assert len(_labels(cmp.ttft)) == 4 and len(cmp.ttft.data_of("ttft", "curve", 4)[0]) == 0


@pytest.mark.heavy  # the real model, under two names
def test_compare_note_names_the_start_two_model_files_share_once(qtbot, tmp_path: Path, smollm2_path: Path,  # noqa: ANN001
                                                                  predictor: PredictionService) -> None:
    cmp = CompareWindow(predictor)
    qtbot.addWidget(cmp)
    for quant in ("Q4_1", "Q8_0"):  # two names of one file: what the note and legends make of a quant pair
        link = tmp_path / f"SmolLM2-135M-Instruct.{quant}.gguf"
        link.symlink_to(smollm2_path)
        predictor.set_facts(str(link), read_model_facts(smollm2_path))
        cmp.add_model(str(link))
    note = cmp.note.text()
    assert note.startswith("Models: SmolLM2-135M-Instruct (legends name the rest") and ".…" not in note
    assert [label.split(" ")[0] for label in _labels(cmp.ttft)] == ["Q4_1", "Q8_0"]


@pytest.mark.heavy  # the real model
def test_a_new_sweep_draws_the_same_legends_again(qtbot, run: LiveRun,  # noqa: ANN001
                                                  predictor: PredictionService) -> None:
    plots = LivePlots()
    qtbot.addWidget(plots)
    plots.resize(1200, 800)
    plots.show()
    qtbot.waitExposed(plots)
    assert plots.refresh(run, predictor, {0})
    legends = {p.name: _labels(p) for p in plots.panels}
    meas = plots.ttft.items[("ttft", "meas", 0)][1]
    plots.reset()  # a new sweep: every item and legend entry goes
    assert meas.scene() is None and all(_labels(p) == [] for p in plots.panels if p.name != "tel")
    assert plots.refresh(run, predictor, {0})
    assert {p.name: _labels(p) for p in plots.panels} == legends and meas.scene() is None


def test_compare_legends_drop_the_start_all_models_share() -> None:
    from app.compare.entries import CompareItem, legend_names, shared_prefix

    q4, q8 = "/m/SmolLM2-135M-Instruct.Q4_1.gguf", "/m/SmolLM2-135M-Instruct.Q8_0.gguf"
    assert shared_prefix(["SmolLM2-135M-Instruct.Q4_1", "SmolLM2-135M-Instruct.Q8_0"]) == "SmolLM2-135M-Instruct."
    assert shared_prefix(["SmolLM2-135M-Instruct.Q4_1"] * 2) == ""  # one file twice: nothing to tell apart
    assert shared_prefix(["qwen-Q4", "llama-Q4"]) == ""
    names = legend_names([CompareItem("run", "SmolLM2", q4, "r1"), CompareItem("model", "", q8)], with_run=False)
    assert names == ["Q4_1", "Q8_0"]
