"""The workbench window, offscreen: a real sweep on SmolLM2, cancel, CSV export, replay of a recorded stream.

The recorded stream (data/smollm2_small_sweep.jsonl) came from a real run by record_events.py; replaying it
needs no model. Each test has its own data dir (settings, results store, a fixed CPU probe).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QKeySequence

from app.gui import theme
from app.gui.bridge import read_event_stream
from app.results import export
from app.results.row_types import ResultRow
from app.results.store import ResultStore
from app.run.events import FailureKind, Notice, SweepFinished, SweepStarted, TestFailed, WorkerError
from app.run.plan import SweepSpec
from tests.gui.conftest import RECORDED, wait_for

pytestmark = pytest.mark.heavy  # the real model in a worker and the real window's background jobs


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie still answers kill(0): look at its state
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_window_opens_ready_on_the_default_model(window, smollm2_path: Path) -> None:
    w = window
    assert w.library.selected_paths() == [str(smollm2_path)]
    assert w.editor.preset.currentText() == "quick"
    assert w.editor.run_button.isEnabled() and not w.editor.cancel_button.isEnabled()
    assert w.editor.spec([str(smollm2_path)]) is not None
    assert "This CPU" in w.inspector.profile_combo.currentText()
    wait_for(lambda: str(smollm2_path) in w.predictor.facts)
    w.details.update_inspector()
    assert "Fits" in w.inspector.text.text() and "Decode ceiling" in w.inspector.text.text()
    assert "Q4_1" in w.library._items[str(smollm2_path)].text(2)
    shortcuts = {a.text(): a.shortcut() for a in w.actions()}
    assert shortcuts["Run sweep"] == QKeySequence("Ctrl+R")
    assert shortcuts["Cancel sweep"] == QKeySequence("Esc")
    assert shortcuts["Export results as CSV…"] == QKeySequence("Ctrl+E")
    assert shortcuts["Add model files…"] == QKeySequence("Ctrl+O")


def test_profile_choice_changes_the_inspector(window) -> None:
    w = window
    assert w.choose_profile("RTX 4060 Laptop")
    text = w.inspector.text.text()
    assert "RTX 4060 Laptop" in text and "Fits" in text
    w.inspector.ctx.setValue(1_048_576)  # a million tokens of f16 KV do not fit in 8 GiB
    text = w.inspector.text.text()  # not entirely on the GPU: layers go to the CPU (said, with flags) or none fits
    assert ("Fits with layers on the CPU" in text and "-ngl " in text) or "Does not fit" in text
    assert "beyond the trained context" in text


def test_real_sweep_fills_table_plots_store_and_csv(window, qtbot, smollm2_path: Path, tmp_path: Path) -> None:
    w = window
    # one thread: llama.cpp's spinning thread barrier crawls when other processes share this 2-core machine
    tests = SweepSpec(models=[str(smollm2_path)], n_prompt=[32], n_gen=[8], n_threads=[1], repetitions=1).tests()
    with qtbot.waitSignal(w.sweepFinished, timeout=120_000) as blocker:
        w.start_tests(tests, "gui-test")
    outcome = blocker.args[0]
    assert outcome.status == "finished", outcome
    assert w.results.rowCount() == 1
    row = w.results.row_at(0)
    assert row.status == "ok" and row.run_id == outcome.run_id
    assert row.pred_decode_ceiling_tps, "the window's rows carry the CLI's predicted columns"
    x, y = w.plots.data_of("ttft", "meas", 0)
    assert list(x) == [32.0] and y[0] > 0
    assert len(w.plots.data_of("dec", "tok", 0)[0]) >= 6  # per-token rates of the timed repetition
    assert len(w.plots.data_of("dec", "mean", 0)[1]) == 1
    assert len(w.plots.data_of("tel", "rss")[1]) > 0 and w.plots.n_phase_regions() == 2
    assert np.isfinite(w.plots.data_of("ttft", "pred", 0, 0)[1]).all()  # the prediction beside it
    with ResultStore() as store:
        stored = store.rows(outcome.run_id)
        assert store.run_info(outcome.run_id)["status"] == "finished"
    out = w.export_csv(str(tmp_path / "out.csv"))
    header = Path(out).read_text(encoding="utf-8").splitlines()[0]
    assert header == export.to_csv([r.to_mapping() for r in stored]).splitlines()[0]
    assert header == export.to_csv([r.to_mapping() for r in w.session.ordered_rows()]).splitlines()[0]
    png = w.save_plots_png(str(tmp_path / "plots.png"))
    assert png and Path(png).stat().st_size > 10_000
    # re-opened from the store, the run comes back with its per-token data (its event stream was kept)
    w.session = type(w.session)("something else")
    assert w.open_run(outcome.run_id)
    w.sweeps.tick(force=True)
    assert len(w.plots.data_of("dec", "tok", 0)[0]) >= 6
    assert w.results.rowCount() == 1 and w.results.row_at(0).run_id == outcome.run_id


def test_cancel_keeps_finished_rows_and_kills_the_worker(window, qtbot, smollm2_path: Path) -> None:
    w = window
    # a short first test, then long ones: the cancel lands while the second test decodes
    tests = SweepSpec(models=[str(smollm2_path)], n_prompt=[16], n_gen=[8, 400, 400], n_threads=[1],
                      repetitions=1).tests()
    w.start_tests(tests, "cancel-test")
    wait_for(lambda: w.session.n_done >= 1, timeout_s=120)
    pid = w.bridge.worker_pid
    assert pid is not None and _pid_alive(pid)
    t0 = time.monotonic()
    with qtbot.waitSignal(w.sweepFinished, timeout=10_000) as blocker:
        w.cancel_sweep()
    took = time.monotonic() - t0
    outcome = blocker.args[0]
    assert outcome.status == "cancelled"
    assert took < 1.5, f"cancel took {took:.2f} s"
    assert not _pid_alive(pid)
    kept = [r for r in outcome.rows if r.status == "ok"]
    assert 1 <= len(kept) < len(tests)
    assert w.results.rowCount() == len(outcome.rows)
    with ResultStore() as store:
        assert [r.test_index for r in store.rows(outcome.run_id)] == [r.test_index for r in outcome.rows]
        assert store.run_info(outcome.run_id)["status"] == "cancelled"
    assert w.editor.run_button.isEnabled() and w.editor.progress.format().startswith("cancelled after ")
    assert w.editor.progress.value() < 1000  # where it stopped, not a full bar


def test_replay_recorded_stream_draws_every_plot(window) -> None:
    events = read_event_stream(RECORDED)
    w = window
    w.replay(events, "recorded")
    s = w.session
    assert s.n_tests == 4 and len(s.ok_rows()) == 4
    assert w.results.rowCount() == 4
    x, y = w.plots.data_of("ttft", "meas", 0)
    assert sorted(x) == [32.0, 32.0, 64.0, 64.0] and (y > 0).all()
    ticks = sum(1 for e in events if e.type == "token_tick" and e.rep >= 0)
    xs, rates = w.plots.data_of("dec", "tok", 0)
    assert len(rates) == ticks - 4 * 2  # the first token of each timed repetition has no previous step
    assert (xs >= 32).all() and (rates > 0).all()
    tel = sum(1 for e in events if e.type == "telemetry_sample")
    assert len(w.plots.data_of("tel", "rss")[1]) == tel
    assert w.plots.n_phase_regions() == 4 * 2 * 2  # tests × repetitions × (prefill, decode)
    assert len(w.plots.data_of("itl", "meas")[1]) == len(rates)
    kv_x, kv_y = w.plots.data_of("kv", "meas", 0)
    assert len(kv_x) == 4 and (kv_y > 0).all()
    assert "this llama-cpp-python build has no GPU backend" in " ".join(w.messages.messages())
    # selecting rows highlights their points
    w.select_tests({0, 1})
    assert len(w.plots.data_of("ttft", "hl")[0]) == 2
    assert len(w.plots.data_of("dec", "hl")[0]) == 2
    # the scenario panel now has a measured split
    assert w.scenario.meas is not None and w.scenario.meas.ttft_s > 0 and w.scenario.meas.decode_s > 0


def test_results_table_sorts_numbers_and_shows_predictions(window) -> None:
    w = window
    w.replay(read_event_stream(RECORDED), "recorded")
    from app.gui.results_model import COLUMNS

    col = [c.header for c in COLUMNS].index("TTFT ms")
    w.table.sortByColumn(col, Qt.SortOrder.DescendingOrder)
    values = [w.proxy.index(r, col).data(Qt.ItemDataRole.UserRole) for r in range(w.proxy.rowCount())]
    assert values == sorted(values, reverse=True)
    frac = [c.header for c in COLUMNS].index("decode %")
    assert all(w.proxy.index(r, frac).data().endswith("%") for r in range(w.proxy.rowCount()))


def test_the_columns_fit_their_contents_when_rows_come(window) -> None:
    w = window
    w.replay(read_event_stream(RECORDED), "recorded")
    w.results_panel.fit_columns()  # every column at once
    fitted = [w.table.columnWidth(c) for c in range(w.results.columnCount())]
    for c in range(w.results.columnCount()):
        w.table.setColumnWidth(c, 20)
    w.results_panel.show_rows(list(w.session.ok_rows()))
    assert [w.table.columnWidth(c) for c in range(w.results.columnCount())] == fitted


def test_errors_show_in_plain_words_and_the_window_stays(window) -> None:
    w = window
    events = [
        SweepStarted(t_ns=1, n_tests=2, tests=[]),
        Notice(t_ns=2, message="this build has no GPU backend"),
        TestFailed(t_ns=3, test_index=0, reason="/m.gguf: cannot allocate a context of 65536 tokens: out of memory",
                   row=ResultRow(test_index=0, status="failed", error="out of memory"), kind=FailureKind.OUT_OF_MEMORY),
        WorkerError(t_ns=4, message="worker process was killed by SIGKILL (out of memory?)",
                    kind=FailureKind.WORKER_KILLED),
        SweepFinished(t_ns=5, n_ok=0, n_failed=1),
    ]
    w.replay(events, "errors")
    text = " ".join(w.messages.messages())
    assert "Out of memory" in text and "killed, probably out of memory" in text
    assert w.isVisible() and w.results.rowCount() == 1
    w.messages.clear()
    assert not w.messages.isVisible()


def test_bad_model_file_is_shown_per_entry(window, tmp_path: Path) -> None:
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF\x03\x00\x00\x00")
    w = window
    w.library.add_files([str(bad)])
    wait_for(lambda: str(bad) in w.predictor.fact_errors)
    assert w.library._items[str(bad)].text(3) == "unreadable"
    assert "truncated" in w.library.error_of(str(bad))
    assert any("broken.gguf" in m for m in w.messages.messages())
    w.run_sweep()  # only the broken file is selected: nothing starts, the reason is shown
    assert not w.bridge.running


def test_sweep_editor_validates_inline(window) -> None:
    ed = window.editor
    ed.edits["n_prompt"].setText("128,12x")
    ed.edits["n_prompt"].textEdited.emit("128,12x")
    assert ed.preset.currentText() == "custom"
    assert ed.spec(["m.gguf"]) is None and ed.error.isVisible() and "12x" in ed.error.text()
    assert theme.ink("bad") in ed.edits["n_prompt"].styleSheet()  # marked as an error
    ed.edits["n_prompt"].setText("128-512*2")
    ed.edits["type_k"].setText("q8_0,q9")
    ed.edits["type_k"].textEdited.emit("q8_0,q9")
    assert ed.spec(["m.gguf"]) is None and "q9" in ed.error.text()
    ed.set_preset("standard")
    spec = ed.spec(["m.gguf"])
    assert spec is not None and spec.n_prompt == [128, 512] and spec.n_depth == [0, 4096] and not ed.error.isVisible()


def test_settings_persist_between_windows(qtbot, gui_data_dir: Path, smollm2_path: Path) -> None:
    from app.gui.main_window import MainWindow

    w1 = MainWindow()
    qtbot.addWidget(w1)
    w1.editor.set_preset("long-context")
    w1.resize(701, 503)  # within the offscreen screen, which restoreGeometry clamps to
    w1.choose_profile("RTX 4060 Laptop")
    w1.inspector.profile_combo.activated.emit(w1.inspector.profile_combo.currentIndex())
    w1.settings.add_recent_model(str(smollm2_path))
    w1.close()
    assert (gui_data_dir / "workbench.ini").is_file()
    w2 = MainWindow()
    qtbot.addWidget(w2)
    qtbot.waitUntil(lambda: w2.hardware.ready, timeout=30_000)
    assert w2.editor.preset.currentText() == "long-context"
    assert (w2.size().width(), w2.size().height()) == (701, 503)
    assert w2.inspector.profile_combo.currentText() == "RTX 4060 Laptop"
    w2.close()


def test_history_reopens_a_run_and_compare_shows_ratios(window, tmp_path: Path) -> None:
    rows = [e.row for e in read_event_stream(RECORDED) if e.type == "test_finished"]
    with ResultStore() as store:
        for rid, factor in (("run-a", 1.0), ("run-b", 2.0)):
            store.begin_run(rid, sweep_name="stored")
            for r in rows:
                store.add_result(rid, r.replace(run_id=rid, decode_tps=r.decode_tps * factor))
            store.finish_run(rid, "finished")
    w = window
    assert w.open_run("run-b")
    assert w.results.rowCount() == 4 and len(w.plots.data_of("ttft", "meas", 0)[0]) == 4
    cmp = w.show_compare(runs=["run-a", "run-b"])
    assert len(cmp.items) == 2 and cmp.table.rowCount() == 2
    assert cmp.table.item(1, 3).text() == "2.00× ⚠"  # decode ratio against the first (2 repetitions: noise)
    assert cmp.table.item(0, 5).text() == "1.00× ⚠"
    cmp.close()


@pytest.mark.parametrize("size", [(1600, 1000)])
def test_window_screenshot_is_a_picture(window, tmp_path: Path, size: tuple[int, int]) -> None:
    window.replay(read_event_stream(RECORDED), "recorded")
    window.resize(*size)
    path = tmp_path / "shot.png"
    assert window.save_screenshot(str(path))
    assert path.stat().st_size > 50_000


def test_dropping_files_and_folders_adds_them(window, make_gguf, tmp_path: Path) -> None:
    from PySide6.QtCore import QMimeData, QPointF, QUrl
    from PySide6.QtGui import QDropEvent

    single = make_gguf("dropped.gguf")
    folder = tmp_path / "more"
    folder.mkdir()
    (folder / "inside.gguf").write_bytes(single.read_bytes())
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(single)), QUrl.fromLocalFile(str(folder))])
    event = QDropEvent(QPointF(10, 10), Qt.DropAction.CopyAction, mime, Qt.MouseButton.NoButton,
                       Qt.KeyboardModifier.NoModifier)
    window.library.dropEvent(event)
    wait_for(lambda: str(folder / "inside.gguf") in window.library.paths())
    assert str(single) in window.library.paths()
    assert str(folder) in window.library.folders
    wait_for(lambda: str(single) in window.predictor.facts)
    assert window.library._items[str(single)].text(2) == "F16"
