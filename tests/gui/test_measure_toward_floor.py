"""The chooser's "Measure toward floor…" (``choose --measure`` in the window): when it may run, its progress text,
and one real search on SmolLM2 from the window."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from app.choose.measure_search import Candidate, Step, StepKind
from app.choose.verdicts import Figure
from app.gui.chooser_jobs import MeasureProgress
from app.gui.chooser_view import THIS_MACHINE_LABEL, ChooserView
from app.run.events import Notice, RepetitionStarted
from tests.run.test_measure_search import _choice as file_choice

HW = "RTX 4060 Laptop"


def _choose(qtbot, view: ChooserView, hw: str) -> None:  # noqa: ANN001 - qtbot is pytest-qt's
    view.hw.setCurrentText(hw)
    assert view.start() is None
    qtbot.waitUntil(lambda: view.report is not None and not view.evaluating, timeout=30_000)


@pytest.mark.heavy  # the repack probe's child process
def test_the_button_needs_a_floor_and_this_machine(qtbot, gui_data_dir: Path,  # noqa: ANN001
                                                   make_gguf: Callable[..., Path]) -> None:
    view = ChooserView()
    qtbot.addWidget(view)
    view.show()
    button = view.measure_button
    assert button.text() == "Measure &toward floor…" and not button.isEnabled()
    assert view.measure_toward_floor() is None  # nothing chosen yet: nothing starts
    view.set_sources([str(make_gguf("tiny.F16.gguf"))])
    _choose(qtbot, view, THIS_MACHINE_LABEL)
    assert view.report is not None and view.report.this_machine
    assert not button.isEnabled() and "min decode tok/s" in button.toolTip()  # no floor
    view.min_tps.setValue(20.0)
    assert button.isEnabled() and "best quality first" in button.toolTip()
    view.hw.setCurrentText(HW)  # a profile, not this machine
    assert not button.isEnabled() and "this machine only" in button.toolTip()
    _choose(qtbot, view, HW)
    assert not view.report.this_machine and not button.isEnabled()
    view.hw.setCurrentText(THIS_MACHINE_LABEL)  # the report is still the profile's: choose again first
    assert not button.isEnabled() and view.measure_toward_floor() is None


def test_progress_text_follows_the_search() -> None:
    p = MeasureProgress(3, 20.0)
    assert p.text() == "Measuring toward 20 tok/s… file 1 of at most 3\nstarting" and p.fraction() == 0.0
    assert p.read(Notice(t_ns=0, message="measuring a.gguf at -ngl 0 -ctk f16 (-p 64 -n 32 -r 2 -d 0) …"))
    assert p.read(RepetitionStarted(t_ns=0, test_index=0, rep=-1))
    assert "a.gguf at -ngl 0 -ctk f16 (-p 64 -n 32 -r 2 -d 0) … (warmup)" in p.text()
    p.step(Step(Candidate.of(file_choice("a.gguf", 8.0, Figure(9.0, "ceiling"))), StepKind.RULED_OUT))
    assert p.read(Notice(t_ns=0, message="ruled out: a.gguf (predicted at most 9.0 tok/s (ceiling), below the 20 "
                                         "floor)"))
    assert p.fraction() == 1 / 3 and p.text().endswith("below the 20 floor)")
    assert "file 2 of at most 3" in p.text()


@pytest.mark.heavy  # the real model
def test_measure_from_the_window_on_smollm2(qtbot, gui_data_dir: Path, smollm2_path: Path) -> None:  # noqa: ANN001
    """The real search from the button: one test in a worker, then the chooser evaluates again with its row."""
    view = ChooserView()
    qtbot.addWidget(view)
    view.show()
    view.set_sources([str(smollm2_path)])
    view.ctx.setValue(512)
    view.min_tps.setValue(5.0)
    _choose(qtbot, view, THIS_MACHINE_LABEL)
    runner = view.measure_toward_floor()
    assert runner is not None and view.job is runner and not view.measure_button.isEnabled()
    qtbot.waitUntil(lambda: view.job is None and view.report is not None and not view.evaluating
                    and "Measured:" in view.status.text(), timeout=120_000)
    status = view.status.text()
    assert "measured 1 test, 0 from cache" in status and "Measured here: run SmolLM2" in status
    assert "llama-server -m" in status
    from app.results.store import ResultStore
    with ResultStore(None) as store:
        row = store.recent_rows(1)[0]  # the search's one test
    if row.unstable or (row.host_other_cpu_pct or 0) > 25:  # a noisy short test is not learnt from
        assert view.report.choices[0].measured is None, row
    else:  # the stored row is now the chooser's measurement
        assert view.report.choices[0].measured is not None, {k: row.value(k) for k in (
            "unstable", "host_other_cpu_pct", "n_threads", "n_threads_effective", "status", "n_gpu_layers_effective")}
