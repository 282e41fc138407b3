"""Issue #9 point 6: expected curves with their bands beside the ceilings, drawn as soon as a model is selected."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.gui.conftest import wait_for

pytestmark = pytest.mark.heavy  # the real model in a worker and the real window's background jobs


def test_expected_curves_and_bands_show_beside_the_ceilings_before_any_run(window, smollm2_path: Path) -> None:
    w = window
    wait_for(lambda: w.predictor.expectations.public is not None)  # loaded off the GUI thread after the scan
    assert w.choose_profile("RTX 4060 Laptop")
    w.library.select_paths([str(smollm2_path)])

    def drawn() -> bool:
        w.sweeps.tick()
        return len(w.plots.data_of("ttft", "exp", 0, "mid")[1]) > 10 and len(w.plots.data_of("dec", "exp", 0, "mid")[1])
    wait_for(drawn)
    assert not w.session.rows  # nothing ran: these are predictions only
    for plot in ("ttft", "dec"):
        _x, mid = w.plots.data_of(plot, "exp", 0, "mid")
        _x, lo = w.plots.data_of(plot, "exp", 0, "lo")
        _x, hi = w.plots.data_of(plot, "exp", 0, "hi")
        ok = np.isfinite(mid)
        assert ok.all() and (lo[ok] < mid[ok]).all() and (mid[ok] < hi[ok]).all()  # a band around the figure
    _x, ceiling = w.plots.data_of("dec", "pred", 0)
    _x, expected = w.plots.data_of("dec", "exp", 0, "mid")
    assert (expected <= ceiling * 1.0001).all()  # expected sits at or under the ceiling
    labels = [label.text for _s, label in w.plots.decode.legend.items]
    assert any(t.startswith("expected ± band (RTX 4060 Laptop)") for t in labels)
    assert any(t.startswith("ceiling (RTX 4060 Laptop)") for t in labels)
    text = w.inspector.text.text()
    assert "Decode expected" in text and "Prefill expected" in text and "public llama-bench" in text


def test_without_a_fit_the_inspector_says_ceilings_only(window, smollm2_path: Path) -> None:
    w = window
    wait_for(lambda: str(smollm2_path) in w.predictor.facts and w.predictor.expectations.public is not None)
    w.library.select_paths([str(smollm2_path)])
    w.inspector.ctx.setValue(2048)  # this CPU (the default profile), never calibrated in this test's data dir
    assert "no fit for this hardware: ceilings only" in w.inspector.text.text()
    assert w.predictor.expectations.machine_fit is None and "not calibrated" in w.predictor.expectations.note


@pytest.mark.cpu_identity
def test_rows_measured_on_this_cpu_get_this_machines_fit(window) -> None:
    """A CPU row names its hardware "CPU: <model>", not the window's "This CPU": the calibration fit still applies
    when its ``cpu_info`` is this machine's. The fit here is a stand-in with known figures (a test double for a
    saved calibration, which takes minutes to make)."""
    from dataclasses import replace

    from app.gui.expectations import Expectations
    from app.predict.answer import Machine
    from app.predict.machine_fit.fitted_model import Expected
    from tests.gui.conftest import recorded_on_this_cpu
    from tests.predict.answer_helpers import StandInFit

    events = recorded_on_this_cpu()
    cpu = next(e.row.cpu_info for e in events if e.type == "test_finished")
    known = {"decode": Expected(50.0, 40.0, 60.0, "stand-in fit"), "prefill": Expected(400.0, 300.0, 500.0, "stand-in")}
    w = window
    here = Machine(cpu=w.predictor.machine_cpu, cpu_model=cpu, fit=StandInFit({"CPU": lambda _f, _s: known}))
    w.predictor.set_expectations(Expectations(machine=here))  # type: ignore[arg-type]
    w.replay(events, "recorded")

    def drawn() -> bool:
        w.sweeps.tick(force=True)
        return len(w.plots.data_of("dec", "exp", 0, "mid")[1]) > 0
    wait_for(drawn)
    _x, mid = w.plots.data_of("dec", "exp", 0, "mid")
    _x, ttft = w.plots.data_of("ttft", "exp", 0, "mid")
    xs, _y = w.plots.data_of("ttft", "exp", 0, "mid")
    assert np.allclose(mid, 50.0) and np.allclose(ttft, np.maximum(xs.astype(int), 1) / 400.0 * 1000.0)
    w.predictor.set_expectations(Expectations(machine=replace(here, cpu_model="another CPU")))
    w.replay(events, "recorded")

    def ceiling_drawn() -> bool:
        w.sweeps.tick(force=True)
        return len(w.plots.data_of("dec", "pred", 0)[1]) > 0 and not w.predictor.busy
    wait_for(ceiling_drawn)
    w.sweeps.tick(force=True)
    assert len(w.plots.data_of("dec", "exp", 0, "mid")[1]) == 0  # another machine's rows: no fit of ours applies


@pytest.mark.cpu_identity
def test_this_cpu_is_never_its_own_what_if(window) -> None:
    """A CPU row records the compute figure of its weight type (the int8 dot peak for quantized weights), not the
    FMA figure of the window's "This CPU" profile: the same CPU all the same, so no what-if line."""
    from dataclasses import replace

    from app.predict.ceilings.prefill import prefill_tflops
    from tests.gui.conftest import recorded_on_this_cpu

    w = window
    cpu = w.predictor.machine_cpu
    assert cpu is not None and w.choose_profile("This CPU")
    # the figure this CPU's Q4_1 rows are predicted with: 4 x the FMA peak with AVX2 dot products, 2 x with AVX-512's
    # and FP16, more with AMX tiles; never assume one ISA's ratio
    rows = {"pred_bandwidth_gbps": cpu.peak_bandwidth_gbps, "pred_tflops": prefill_tflops(cpu, "Q4_1")}
    events = [replace(e, row=e.row.replace(**rows)) if e.type == "test_finished" else e
              for e in recorded_on_this_cpu()]
    w.replay(events, "recorded")

    def drawn() -> bool:
        w.sweeps.tick(force=True)
        return len(w.plots.data_of("ttft", "pred", 0, 0)[1]) > 0 and not w.predictor.busy
    wait_for(drawn)
    w.sweeps.tick(force=True)
    assert len(w.plots.data_of("ttft", "whatif", 0)[1]) == 0
    assert not any("what-if" in label.text for _s, label in w.plots.ttft.legend.items)
