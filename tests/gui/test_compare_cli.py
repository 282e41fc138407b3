"""``gguf-bench compare`` prints what the window's Compare view shows: for the same stored runs (the recorded sweep,
data/smollm2_small_sweep.jsonl, stored twice), the same figures, ratios and cells, from the same function."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from app.cli.main import main as gguf_bench_main
from app.gui.bridge import read_event_stream
from app.gui.compare import CompareWindow
from app.gui.predictions import PredictionService
from app.model.gguf_facts import read_model_facts
from app.results.store import ResultStore
from tests.gui.conftest import RECORDED

ROWS = [e.row for e in read_event_stream(RECORDED) if e.type == "test_finished"]


def _store_runs(model_path: str) -> None:
    """The recorded rows as two runs of one file, the second decoding twice as fast."""
    with ResultStore() as store:
        for rid, factor in (("run-a", 1.0), ("run-b", 2.0)):
            store.begin_run(rid, sweep_name=rid)
            for r in ROWS:
                faster = (r.decode_tps or 0.0) * factor
                store.add_result(rid, r.replace(run_id=rid, model_path=model_path, decode_tps=faster))
            store.finish_run(rid, "finished")


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    capsys.readouterr()
    assert gguf_bench_main(["compare", *args]) == 0
    return capsys.readouterr().out


def _in_order(line: str, cells: list[str]) -> bool:
    """Whether every cell's text is in ``line``, each after the one before."""
    at = 0
    for cell in cells:
        at = line.find(cell, at)
        if at < 0:
            return False
        at += len(cell)
    return True


def _window_cells(cmp: CompareWindow) -> list[list[str]]:
    t = cmp.table
    return [[t.item(r, c).text() for c in range(t.columnCount())] for r in range(t.rowCount())]


def _same_as_the_window(qtbot, capsys: pytest.CaptureFixture[str], predictor: PredictionService) -> dict[str, Any]:  # noqa: ANN001
    cmp = CompareWindow(predictor)
    qtbot.addWidget(cmp)
    assert cmp.add_run("run-a") and cmp.add_run("run-b")
    shown = cmp.table_figures()
    doc = json.loads(_cli(capsys, "run-a", "run-b", "--json"))
    assert doc["reference_prompt"] == shown.prompt
    assert [e["figures"] for e in doc["entries"]] == [asdict(r.figures) for r in shown.rows]
    assert [e["ratios"] for e in doc["entries"]] == [r.ratios for r in shown.rows]
    window = _window_cells(cmp)
    assert [[e["name"], e["shown_kind"], *e["cells"].values()] for e in doc["entries"]] == window
    assert [cmp.table.horizontalHeaderItem(c).text() for c in range(2, cmp.table.columnCount())] == \
        list(doc["entries"][0]["cells"])
    text = _cli(capsys, "run-a", "run-b")  # the text table: the same cells, one line per entry
    lines = text.splitlines()
    for row in window:
        line = next(ln for ln in lines if ln.startswith(row[0]))
        assert _in_order(line, row[1:])  # its kind, figures and ratios, in order
    assert "fewer than 3 repetitions" in text  # the recording has two each: said, as the window's note says
    return doc


def test_cli_compare_prints_the_windows_table_for_the_same_runs(qtbot, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: ANN001
    """Rows only (the model file is not on this machine): the figures the rows carry."""
    _store_runs("/nowhere/SmolLM2-135M-Instruct.Q4_1.gguf")
    doc = _same_as_the_window(qtbot, capsys, PredictionService())
    a, b = doc["entries"]
    assert b["ratios"]["decode_tps"] == pytest.approx(2.0) and a["ratios"]["decode_tps"] == 1.0
    assert a["figures"]["size_bytes"] == ROWS[0].model_size and a["figures"]["kv_bytes_per_token"] is None
    assert a["cells"]["× decode"] == "1.00× ⚠"


@pytest.mark.heavy  # reads the real model's facts
def test_cli_compare_reads_the_files_facts_as_the_window_does(qtbot, capsys: pytest.CaptureFixture[str],  # noqa: ANN001
                                                              smollm2_path: Path) -> None:
    _store_runs(str(smollm2_path))
    predictor = PredictionService()
    predictor.set_facts(str(smollm2_path), read_model_facts(smollm2_path))
    doc = _same_as_the_window(qtbot, capsys, predictor)
    facts = predictor.facts[str(smollm2_path)]
    assert doc["entries"][0]["figures"]["size_bytes"] == facts.file_bytes
    assert doc["entries"][0]["figures"]["kv_bytes_per_token"] == facts.kv_bytes_per_token("f16") > 0


def test_cli_compare_says_which_run_it_cannot_find(capsys: pytest.CaptureFixture[str]) -> None:
    _store_runs("/nowhere/m.gguf")
    assert gguf_bench_main(["compare", "run-a", "nope"]) == 2
    assert "no run 'nope'" in capsys.readouterr().err
    out = _cli(capsys, "last", "run-a")  # 'last' is run-b; a run named twice counts once
    assert len([ln for ln in out.splitlines() if ln.startswith("run-")]) == 2
