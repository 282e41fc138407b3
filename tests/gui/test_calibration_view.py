"""The calibration result window: a row per backend and phase, and one residual point per calibration point."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtGui import QKeySequence
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QWidget

from app.calibrate.ladder import CalibrationResult
from app.calibrate.synth_models import SynthShape, write_synth_model
from app.gui import theme
from app.gui.calibrate_action import CalibrateAction
from app.gui.calibration_view import TABLE_HEADERS, CalibrationView
from app.gui.plots.style import color
from app.model.gguf_facts import read_model_facts
from app.predict.machine_fit.calibration_fit import MachineFit, Sample, fit_machine, workload_of
from app.predict.machine_fit.calibration_store import fit_path, llama_build, save_fit
from app.predict.machine_fit.fitted_model import PhaseFit
from app.predict.settings import PredictSettings
from app.telemetry.machine import scan_machine

DECODE = {"bytes:f16": 1 / 10e9, "kv:fa": 1 / 5e9, "layer": 50e-6, "fixed": 200e-6}
PREFILL = {"flops:f16": 1 / 50e9, "attn:fa": 1 / 20e9, "layer": 20e-6, "layer_ubatch": 1e-3}
#: each point's measured speed off the known form by this factor; in decode the 7th is a disturbed test (a third of
#: its speed: set aside)
NOISE = (1.02, 0.97, 1.05, 0.99, 1.01, 0.96, 1.0, 1.03, 0.98, 1.04, 1.0, 0.97, 1.02, 0.95, 1.01, 1.03)
DISTURBED = 6


def _tps(coefs: dict[str, float], feats: dict[str, float]) -> float:
    return 1.0 / sum(coefs.get(k, 0.0) * v for k, v in feats.items())


@pytest.fixture(scope="module")
def samples(tmp_path_factory: pytest.TempPathFactory) -> list[Sample]:
    """F16 synthetic models at four shapes and four prompt/depth settings, speeds off the known form by NOISE."""
    folder = tmp_path_factory.mktemp("models")
    out = []
    for e, n, g in ((256, 2, 1), (256, 6, 4), (512, 3, 4), (512, 8, 4)):
        facts = read_model_facts(write_synth_model(folder / f"l{e}x{n}.gguf", SynthShape(e, n, "F16", gqa=g)))
        for p, d in ((16, 0), (64, 256), (128, 512), (256, 0)):
            w = workload_of(facts, PredictSettings(n_ctx=2048, n_prompt=p, n_gen=16, depth=d, flash_attn=True))
            k = len(out)
            slow = 0.3 if k == DISTURBED else 1.0
            out.append(Sample("CPU", w, f"l{e}x{n} p{p} d{d} fa",
                              _tps(DECODE, w.features("decode")) * NOISE[k] * slow,
                              _tps(PREFILL, w.features("prefill")) * NOISE[-1 - k]))
    return out


def _fit(samples: list[Sample], cpu_info: str = "cpu X", gpu_info: str = "") -> MachineFit:
    return fit_machine(samples, cpu_info=cpu_info, gpu_info=gpu_info, build=llama_build(), created="2026-12-01")


def _action(qtbot, notes: list[tuple[str, str]]) -> CalibrateAction:  # noqa: ANN001
    parent = QWidget()
    qtbot.addWidget(parent)
    return CalibrateAction(parent, lambda text, level: notes.append((text, level)))


def _cells(view: CalibrationView) -> list[list[str]]:
    t = view.table
    return [[t.item(r, c).text() for c in range(t.columnCount())] for r in range(t.rowCount())]


def _xy(item) -> tuple[np.ndarray, np.ndarray]:  # noqa: ANN001
    x, y = item.getData()
    return np.asarray(x, dtype=float), np.asarray(y, dtype=float)


def test_table_and_residual_plot_of_a_calibration(qtbot, samples: list[Sample]) -> None:  # noqa: ANN001
    fit = _fit(samples)
    result = CalibrationResult(fit, save_fit(fit), n_ladder_points=len(samples), n_store_points=0, wall_s=12.0)
    view = _action(qtbot, []).show_result(result)
    assert view.isVisible() and [view.table.horizontalHeaderItem(c).text() for c in range(7)] == list(TABLE_HEADERS)
    decode, prefill = fit.fits["CPU"]["decode"], fit.fits["CPU"]["prefill"]
    assert [p.used for p in decode.points].count(False) == 1 and not decode.points[DISTURBED].used  # the disturbed test
    rows = _cells(view)
    assert [r[:3] for r in rows] == [["CPU", "decode", "16 (1 set aside)"], ["CPU", "prefill", "16"]]
    for row, pf in zip(rows, (decode, prefill), strict=True):
        errors = [p.fitted_tps / p.measured_tps - 1 for p in pf.points if p.used]
        assert row[3] == f"{np.median(np.abs(errors)) * 100:.1f}" and float(row[3]) > 0.5
        assert row[4] == f"±{pf.band_frac * 100:.1f}"
        assert row[5] == f"{max(errors, key=abs) * 100:+.1f}"
        assert row[6] == result.path.name and result.path.is_file()
    assert str(result.path) in view.headline.text() and "16 ladder points" in view.headline.text()

    assert view.x_choice.currentText() == "weights read per token"
    assert view.plot.getPlotItem().getAxis("bottom").logMode
    for phase, pf in (("decode", decode), ("prefill", prefill)):
        used, aside = view.series[("CPU", phase)]
        (ux, uy), (ax, ay) = _xy(used), _xy(aside)
        assert len(ux) + len(ax) == len(pf.points) == len(samples)  # one point per calibration point
        order = [p for p in pf.points if p.used] + [p for p in pf.points if not p.used]
        by_label = {s.label: s for s in samples}
        want_mb = [sum(by_label[p.label].workload.class_bytes.values()) / 1e6 for p in order]
        np.testing.assert_allclose(10 ** np.concatenate([ux, ax]), want_mb, rtol=1e-9)
        np.testing.assert_allclose(np.concatenate([uy, ay]),
                                   [(p.fitted_tps / p.measured_tps - 1) * 100 for p in order], rtol=1e-9)
    outlier_y = _xy(view.series[("CPU", "decode")][1])[1]
    assert len(outlier_y) == 1 and outlier_y[0] > 100  # the set-aside point, hollow ...
    assert view.plot.getPlotItem().viewRange()[1][1] < 20 < outlier_y[0]  # ... beyond the used points' range,
    assert f"1 set-aside point(s) beyond the plot ({outlier_y[0]:+.0f} %" in view.plot_note.text()  # which says so
    hint = view.minimumSizeHint()
    assert hint.width() <= 1366 - 16 and hint.height() <= 728 - 40  # fits a laptop's screen with its frame
    assert "p64 d256" in view.series[("CPU", "prefill")][0].points()[1].data()  # the hover tip names the point

    view.x_choice.setCurrentText("prompt length")
    used, _aside = view.series[("CPU", "prefill")]
    np.testing.assert_allclose(10 ** _xy(used)[0], [16, 64, 128, 256] * 4)
    view.activateWindow()
    assert QTest.qWaitForWindowActive(view)
    QTest.keySequence(view, QKeySequence("Ctrl+W"))
    assert not view.isVisible()


def test_bands_and_zero_line_are_drawn_in_the_series_colours(qtbot, samples: list[Sample]) -> None:  # noqa: ANN001
    fit = _fit(samples)
    view = CalibrationView()
    qtbot.addWidget(view)
    app = QApplication.instance()
    try:
        for choice in ("light", "dark"):
            theme.apply_theme(app, choice)
            view.show_fit(fit, Path("fit.json"))
            lines = sorted((round(i.value(), 6), i.pen.color().name()) for i in view._drawn if hasattr(i, "value"))
            bands = {(round(s * pf.band_frac * 100, 6), color(k)) for k, pf in
                     enumerate(fit.fits["CPU"].values()) for s in (1, -1)}
            assert set(lines) == bands | {(0.0, theme.plot_foreground())}
            used, _aside = view.series[("CPU", "decode")]
            assert used.opts["brush"].color().name() == color(0)
    finally:
        theme.apply_theme(app, "light")


def test_an_older_fit_plots_its_points_in_order(qtbot, samples: list[Sample]) -> None:  # noqa: ANN001
    doc = _fit(samples).to_json_dict()
    for phases in doc["fits"].values():
        for pf in phases.values():
            pf["points"] = [p[:4] for p in pf["points"]]  # saved before points recorded where they lie
    old = MachineFit.from_json_dict(json.loads(json.dumps(doc)))
    view = CalibrationView()
    qtbot.addWidget(view)
    view.show_fit(old, Path("fit-old.json"))
    assert [view.x_choice.itemText(i) for i in range(view.x_choice.count())] == ["place in the fit"]
    used, aside = view.series[("CPU", "decode")]
    assert sorted([*_xy(used)[0], *_xy(aside)[0]]) == list(range(1, len(samples) + 1))
    with pytest.raises(ValueError, match="3 fields"):
        PhaseFit.from_json_dict({**doc["fits"]["CPU"]["decode"], "points": [["a", 1.0, 2.0]]})


def test_points_keep_where_they_lie_through_a_save(samples: list[Sample]) -> None:
    pf = _fit(samples).fits["CPU"]["prefill"]
    again = PhaseFit.from_json_dict(json.loads(json.dumps(pf.to_json_dict())))
    assert again.points == pf.points and {p.n_prompt for p in again.points} == {16, 64, 128, 256}
    assert all(p.weight_bytes > 0 for p in again.points)


def test_last_calibration_says_when_there_is_none_and_shows_the_saved_one(qtbot, samples: list[Sample],  # noqa: ANN001
                                                                          gui_data_dir: Path) -> None:
    notes: list[tuple[str, str]] = []
    action = _action(qtbot, notes)
    action.last_action.trigger()
    qtbot.waitUntil(lambda: bool(notes), timeout=10_000)
    assert notes == [("Not calibrated yet: Sweep → Calibrate this machine… fits this machine's speeds "
                      "(a few minutes).", "info")] and action.view is None
    scan = scan_machine()
    path = save_fit(_fit(samples, scan.cpu_model, scan.gpu_info()))
    action.last_action.trigger()
    qtbot.waitUntil(lambda: action.view is not None and action.view.isVisible(), timeout=10_000)
    assert path == fit_path(scan.cpu_model, scan.gpu_info(), llama_build())
    assert _cells(action.view)[0][6] == path.name and len(notes) == 1
    action.view.close()
    path.write_text("{not json", encoding="utf-8")
    action.last_action.trigger()
    qtbot.waitUntil(lambda: len(notes) == 2, timeout=10_000)
    assert notes[1][1] == "warning" and "cannot be read" in notes[1][0] and "\n" not in notes[1][0]


@pytest.mark.heavy  # the real window's background jobs
def test_the_window_has_last_calibration_in_the_sweep_menu(window) -> None:  # noqa: ANN001
    menus = {m.title(): m for m in (a.menu() for a in window.menuBar().actions()) if m is not None}
    assert window.calibrate.last_action in menus["&Sweep"].actions()


def test_a_finished_calibration_opens_the_window_and_last_calibration_shows_it_again(  # noqa: ANN001
        qtbot, samples: list[Sample]) -> None:
    notes: list[tuple[str, str]] = []
    action = _action(qtbot, notes)
    fit = _fit(samples)
    result = CalibrationResult(fit, save_fit(fit), n_ladder_points=16, n_store_points=0, wall_s=3.0)
    action.done.emit(result, None)  # what the calibration thread sends when it ends
    assert notes[-1][0].startswith("Calibrated on 16 ladder points") and action.view is not None
    assert action.view.isVisible() and action.view.fit is fit
    action.view.close()
    action.last_action.trigger()  # this session's calibration, at once: no file read
    assert action.view.isVisible() and action.view.fit is fit and len(notes) == 1
