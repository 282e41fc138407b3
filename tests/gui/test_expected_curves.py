"""Issue #9 point 6: expected curves with their bands beside the ceilings, drawn as soon as a model is selected."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tests.gui.conftest import wait_for


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
