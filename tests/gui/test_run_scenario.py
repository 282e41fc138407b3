"""Issue #12 point 7: "Run this scenario" measures the request instead of extrapolating from other tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.predict.scenario_totals import exact_measurement
from app.results.row_types import ResultRow


@pytest.mark.heavy  # the real model and the real window's background jobs
def test_run_this_scenario_measures_exactly_that_request(window, qtbot, smollm2_path: Path) -> None:  # noqa: ANN001
    w = window
    w.library.select_paths([str(smollm2_path)])
    w.editor.edits["n_threads"].setText("1")
    w.scenario.kind.setCurrentIndex(w.scenario.kind.findData("custom"))
    w.scenario.prompt.setValue(24)
    w.scenario.output.setValue(6)
    assert not w.scenario.exact.isVisible()
    with qtbot.waitSignal(w.sweepFinished, timeout=120_000):
        w.scenario.run_button.click()
    rows = w.session.ok_rows()
    assert len(rows) == 1 and (rows[0].n_prompt, rows[0].n_gen, rows[0].n_depth) == (24, 6, 0)
    assert rows[0].model_path == str(smollm2_path) and rows[0].n_repetitions == 1
    w.details.update_scenario()
    text = w.scenario.exact.text()
    assert w.scenario.exact.isVisible() and text.startswith("<b>Measured (SmolLM2-135M-Instruct.Q4_1.gguf)</b>")
    assert f"TTFT {rows[0].ttft_ms / 1000:,.2f} s" in text  # the test's own TTFT, not an extrapolation
    assert "Estimated from measured rates" in w.scenario.measured.text()  # the estimate stays beside it, named


def test_an_exact_measurement_needs_the_same_lengths_model_and_an_empty_context() -> None:
    row = ResultRow(status="ok", model_path="/a.gguf", n_prompt=1000, n_gen=300, n_depth=0, ttft_ms=2000.0,
                    decode_tps=30.0)
    sc = exact_measurement([row], 1000, 300, "/a.gguf")
    assert sc is not None and sc.ttft_s == 2.0 and abs(sc.decode_s - 10.0) < 1e-9 and abs(sc.total_s - 12.0) < 1e-9
    assert exact_measurement([row], 1000, 299, "/a.gguf") is None
    assert exact_measurement([row], 1000, 300, "/b.gguf") is None
    assert exact_measurement([row.replace(n_depth=4096)], 1000, 300, "/a.gguf") is None
    assert exact_measurement([row.replace(status="failed")], 1000, 300, "/a.gguf") is None
