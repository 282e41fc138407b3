"""Issue #28: the chooser's "Make variants…" and "Measure quality…" (real quantizer and quality job in the worker,
on tiny synthetic models), their progress, Cancel, and the plot's explanations and recommended point."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QPushButton

from app.choose.chooser import ChooseRequest, run_choose
from app.gui.chooser_jobs import (
    QualityDialog,
    QualityProgress,
    QuantizeProgress,
    VariantsDialog,
    default_source,
    time_left_text,
)
from app.gui.chooser_view import TABLE_KEYS, ChooserView
from app.gui.plots.pareto import CHOSEN_Z, ParetoPlot, memory_explanation, pareto_explanation
from app.quality.plan import plan_quality
from app.quantize.plan import plan_quantize
from app.results.row_types import QualityRow, QuantizeRow
from app.run.events import JobItem, JobProgress, TestFinished, TestStarted

HW = "RTX 4060 Laptop"


class Clock:
    def __init__(self) -> None:
        self.now_s = 100.0

    def __call__(self) -> float:
        return self.now_s


def _chooser(qtbot, files: list[Path]) -> ChooserView:  # noqa: ANN001 - qtbot is pytest-qt's
    view = ChooserView()
    qtbot.addWidget(view)
    view.show()
    view.set_sources([str(f) for f in files])
    view.hw.setCurrentText(HW)
    assert view.start() is None
    qtbot.waitUntil(lambda: view.report is not None and not view.evaluating, timeout=30_000)
    return view


def _check(dialog: VariantsDialog, names: list[str]) -> None:
    dialog.set_types(names)
    assert dialog.checked_types() == names


def test_quantize_progress_counts_tensors_of_all_outputs(tmp_path: Path,
                                                         make_gguf: Callable[..., Path]) -> None:
    src = make_gguf("tiny.F16.gguf")
    items = plan_quantize(src, ["q8_0", "q4_0"], tmp_path / "out")
    clock = Clock()
    p = QuantizeProgress(items, clock)
    assert p.fraction() == 0.0 and "starting" in p.text()
    assert p.read(TestStarted(t_ns=0, test_index=0, test=JobItem({})))
    clock.now_s += 10
    p.read(JobProgress(t_ns=0, item_index=0, done=5, total=10, label="blk.0.attn_q.weight"))
    assert p.fraction() == 0.25
    text = p.text()
    assert text.startswith("Making variants… 25%, about 30 s left")  # 10 s for a quarter: 30 s for the rest
    assert "tiny.Q8_0.gguf (Q8_0), file 1 of 2" in text and "tensor 5/10: blk.0.attn_q.weight" in text
    p.read(TestFinished(t_ns=0, test_index=0, row=QuantizeRow()))
    p.read(JobProgress(t_ns=0, item_index=1, done=10, total=10, label="output.weight"))
    assert p.fraction() == 1.0 and "file 2 of 2" in p.text()
    assert time_left_text(None) == "" and time_left_text(600) == ", about 10 min left"


def test_quality_progress_names_the_file_and_its_reference(make_gguf: Callable[..., Path]) -> None:
    ref = make_gguf("tiny.F32.gguf", tensor_dtype="F32")
    other = make_gguf("tiny.F16.gguf")
    plan = plan_quality([str(other), str(ref)], n_tokens=1024)
    assert Path(plan.reference).name == "tiny.F32.gguf"
    p = QualityProgress(plan, Clock())
    p.read(TestStarted(t_ns=0, test_index=plan.reference_index, test=JobItem({})))
    p.read(JobProgress(t_ns=0, item_index=plan.reference_index, done=1, total=2))
    assert p.fraction() == 0.25 and "scoring tiny.F32.gguf (the reference), file 1 of 2" in p.text()
    p.read(TestFinished(t_ns=0, test_index=plan.reference_index, row=QualityRow()))
    p.read(JobProgress(t_ns=0, item_index=0, done=1, total=2))
    assert p.fraction() == 0.75
    assert "scoring tiny.F16.gguf (against tiny.F32.gguf), file 2 of 2\nchunk 1/2" in p.text()


def test_recommended_point_on_top_and_plots_explained(qtbot, gui_data_dir: Path,  # noqa: ANN001
                                                      make_gguf: Callable[..., Path]) -> None:
    files = [make_gguf(f"m{i}.F16.gguf") for i in range(3)]  # three identical files: their points coincide
    report = run_choose(ChooseRequest(sources=tuple(str(f) for f in files), hw=HW))
    chosen = report.recommendation.choice
    assert chosen is not None
    plot = ParetoPlot()
    qtbot.addWidget(plot)
    plot.show_choices(report.choices, None, chosen)
    others = [item for name, item in plot.point_items.items() if name != chosen.filename]
    assert len(others) == 2
    mine = plot.point_items[chosen.filename]
    assert mine.zValue() == CHOSEN_Z and all(o.zValue() < mine.zValue() for o in others)
    assert plot.ring is not None and plot.ring.zValue() > mine.zValue()
    assert all(o.zValue() < mine.zValue() for o in plot.listDataItems() if o not in (mine, plot.ring))
    # the explanations say what size, the dashed lines and the allowance are
    text = pareto_explanation(5.0)
    assert "area grows with the file's size" in text and "Pareto front" in text and "floor (5 tok/s)" in text
    assert "floor" not in pareto_explanation(None)
    mem = memory_explanation(report.choices, report.profile.kind)
    assert report.profile.kind == "laptop" and {c.overhead_bytes for c in report.choices} == {512 * 2**20}
    assert "GPU allowance: 512 MiB" in mem and "not measured" in mem
    unified = memory_explanation(report.choices, "unified")
    assert "no GPU allowance" in unified and "75%" in unified
    assert "allowance" not in memory_explanation(report.choices, "cpu")


def test_variants_dialog_defaults_and_refusals(qtbot, gui_data_dir: Path,  # noqa: ANN001
                                               make_gguf: Callable[..., Path]) -> None:
    f16 = make_gguf("tiny.F16.gguf")
    f32 = make_gguf("tiny.F32.gguf", tensor_dtype="F32")
    report = run_choose(ChooseRequest(sources=(str(f16), str(f32)), hw=HW))
    assert default_source(report.choices) == str(f32)  # the most bits per weight
    dialog = VariantsDialog(report.choices)
    qtbot.addWidget(dialog)
    assert dialog.source.currentText() == str(f32) and dialog.out_dir.text() == str(f32.parent)
    assert dialog.checked_types() == ["q8_0", "q5_k_m", "q4_k_m"]
    rows = {dialog.types.item(r).data(Qt.ItemDataRole.UserRole): dialog.types.item(r)
            for r in range(dialog.types.count())}
    # F16 is already there and F32 is the source: neither can be ticked
    assert rows["f16"].text().endswith("(already exists)") and rows["f32"].text().endswith("(the source itself)")
    assert not rows["f16"].flags() & Qt.ItemFlag.ItemIsEnabled
    _check(dialog, [])
    dialog.accept()
    assert dialog.error.text() == "Tick at least one target type." and not dialog.items
    _check(dialog, ["q8_0"])
    dialog.out_dir.setText(str(f16))  # a file, not a folder: the plan's own line
    dialog.accept()
    assert dialog.error.text() == f"--out {f16}: is a GGUF model, not a folder" and not dialog.items


@pytest.mark.heavy
def test_make_a_q8_0_variant_from_the_chooser(qtbot, gui_data_dir: Path,  # noqa: ANN001
                                              make_gguf: Callable[..., Path]) -> None:
    f32 = make_gguf("tiny.F32.gguf", tensor_dtype="F32")
    view = _chooser(qtbot, [f32])
    assert view.variants_button.isEnabled() and view.quality_button.isEnabled()
    dialog = view.ask_variants()
    assert dialog is not None and dialog.isVisible()
    _check(dialog, ["q8_0"])
    dialog.buttons.button(dialog.buttons.StandardButton.Ok).click()
    assert view.job is not None and not view.variants_button.isEnabled()  # running, off the GUI thread
    qtbot.waitUntil(lambda: view.job is None, timeout=60_000)
    out = f32.parent / "tiny.Q8_0.gguf"
    assert out.is_file()
    assert view.source_list() == [str(f32), str(out)]
    assert "wrote tiny.Q8_0.gguf" in view.status.text() or "Choosing again" in view.status.text()
    qtbot.waitUntil(lambda: not view.evaluating and len(view.report.choices) == 2, timeout=30_000)
    assert {c.filename for c in view.report.choices} == {"tiny.F32.gguf", "tiny.Q8_0.gguf"}
    assert {c.file_type for c in view.report.choices} == {"F32", "Q8_0"}
    assert "wrote tiny.Q8_0.gguf" in view.status.text()
    assert "GPU allowance: 512 MiB" in view.bars_note.text()
    # made again: the existing output is refused, never overwritten
    again = view.ask_variants()
    assert again is not None and "q8_0" not in again.checked_types()
    assert not list(f32.parent.glob("*.part"))


@pytest.mark.heavy
def test_measure_quality_fills_the_kld_column(qtbot, gui_data_dir: Path,  # noqa: ANN001
                                              make_gguf: Callable[..., Path]) -> None:
    f32 = make_gguf("tiny.F32.gguf", tensor_dtype="F32")
    f16 = make_gguf("tiny.F16.gguf")
    view = _chooser(qtbot, [f16, f32])
    kld_col = TABLE_KEYS.index("mean_kld")

    def klds() -> dict[str, str]:
        return {view.table.item(r, 0).text(): view.table.item(r, kld_col).text()
                for r in range(view.table.rowCount())}

    assert all(t == "" for t in klds().values())  # nothing measured yet: the expected KLD column speaks
    dialog = view.ask_quality()
    assert isinstance(dialog, QualityDialog) and dialog.plan is not None
    assert "Reference: tiny.F32.gguf (F32" in dialog.summary.text()  # the quality feature's pick, shown
    dialog.tokens.setValue(1024)
    dialog.buttons.button(dialog.buttons.StandardButton.Ok).click()
    assert view.job is not None
    qtbot.waitUntil(lambda: view.job is None, timeout=120_000)
    qtbot.waitUntil(lambda: not view.evaluating and klds()["tiny.F16.gguf"] != "",
                    timeout=30_000)
    got = klds()
    assert float(got["tiny.F32.gguf"]) == 0.0 and 0.0 <= float(got["tiny.F16.gguf"]) < 0.1
    assert "Quality: scored 2 of 2 file(s) against tiny.F32.gguf" in view.status.text()
    by_name = {p[0]: p for p in view.pareto.points}
    assert by_name["tiny.F16.gguf"][2] is not None  # off the "not measured" line


@pytest.mark.heavy
def test_cancel_keeps_finished_variants_and_leaves_no_half_file(qtbot, gui_data_dir: Path,  # noqa: ANN001
                                                                make_gguf: Callable[..., Path]) -> None:
    src = make_gguf("big.F32.gguf", tensor_dtype="F32", n_layer=4, n_embd=512, n_ff=2048, n_vocab=2000)
    view = _chooser(qtbot, [src])
    out = src.parent / "variants"
    items = plan_quantize(src, ["q8_0", "q6_k", "q5_k_m", "q4_k_m", "q3_k_m"], out)
    runner = view.make_variants(items)
    assert runner is not None and runner.dialog is not None
    # cancel while the third output is being written (its tensors under way)
    qtbot.waitUntil(lambda: "file 3 of 5\ntensor " in runner.dialog.labelText()
                    and any(p.name.endswith(".part") for p in out.iterdir()), timeout=60_000)
    assert "%, about" in runner.dialog.labelText()
    cancel = runner.dialog.findChild(QPushButton)
    assert cancel is not None and cancel.text() == "Cancel"
    cancel.click()  # as the user does: the worker is killed
    qtbot.waitUntil(lambda: view.job is None, timeout=30_000)
    assert runner.wait(10)
    written = sorted(p.name for p in out.iterdir())
    assert not [n for n in written if n.endswith(".part")], written  # no half-written file under any name
    assert {"big.Q8_0.gguf", "big.Q6_K.gguf"} <= set(written) and "big.Q3_K_M.gguf" not in written
    assert "Cancelled; wrote big.Q8_0.gguf, big.Q6_K.gguf" in view.status.text()
    kept = [str(out / n) for n in written]
    assert sorted(view.source_list()) == sorted([str(src), *kept])  # what finished joins the inputs
    qtbot.waitUntil(lambda: not view.evaluating and len(view.report.choices) == len(kept) + 1,
                    timeout=30_000)
