"""Issue #28: one figure per question. The inspector, the chooser, the scenario panel, the results table and
``gguf-bench predict --json`` asked about the same file on the same GPU at the same context give one expected
decode (with one band) and one memory figure, from the one prediction policy; and no expected figure sits above
its ceiling.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from app.choose.chooser import ChooseRequest, run_choose
from app.gui.panels.library import human_bytes
from app.gui.results_model import ResultsModel
from app.predict.expected_sources import ExpectedSources
from app.predict.fitted_model import Expected
from app.predict.hardware_context import HardwareContext
from app.predict.prediction import at_context, at_context_depth, capped_at_ceiling
from app.predict.profiles import find_profile, load_profiles
from app.predict.row_predictions import RowPredictor
from app.results.fields import WINDOW_FIELDS
from tests.cli_helpers import gguf_bench
from tests.gui.conftest import wait_for

GPU = "RTX 4060 Laptop"
N_CTX = 8192


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def test_an_expected_figure_above_its_ceiling_is_the_ceiling_marked() -> None:
    notes: list[str] = []
    e, value = capped_at_ceiling(Expected(120.0, 100.0, 140.0, "a fit"), 120.0, 110.0, "decode", notes)
    # the band: the fit's top, and its relative width below the figure shown (100/120 of 110)
    assert value == 110.0 and e is not None and e.value == 110.0 and e.high == 140.0
    assert e.low == pytest.approx(110.0 * 100.0 / 120.0)
    assert "capped at the ceiling" in e.source and "above its ceiling" in notes[0]
    same, v = capped_at_ceiling(Expected(90.0, 80.0, 95.0, "a fit"), 90.0, 110.0, "decode", [])
    assert v == 90.0 and same is not None and same.value == 90.0


def test_every_view_gives_one_expected_decode_and_one_memory_figure(window, smollm2_path: Path) -> None:  # noqa: ANN001
    w = window
    path = str(smollm2_path)
    wait_for(lambda: path in w.predictor.facts)
    facts = w.predictor.facts[path]
    question = at_context(N_CTX)
    depth = at_context_depth(question)

    # predict --json, as a user runs it: its at_context block
    out = gguf_bench("predict", "-m", path, "--hw", GPU, "--ctx", str(N_CTX), "--json")
    assert out.returncode == 0, out.stderr
    cli = json.loads(out.stdout)["at_context"]
    assert cli["decode_kind"] == "expected" and cli["depth"] == depth
    assert cli["decode_tps"] <= cli["decode_ceiling_tps"]
    decode, low, high, needed = cli["decode_tps"], cli["decode_tps_low"], cli["decode_tps_high"], cli["needed_bytes"]

    # the chooser, for the same GPU and context
    store_path = None if w.store_path is None else str(w.store_path)  # str(None) made a store named 'None' here
    report = run_choose(ChooseRequest(sources=(path,), hw=GPU, n_ctx=N_CTX, store_path=store_path))
    choice = report.choices[0]
    assert choice.type_k == "f16" and choice.status == "fits"
    assert choice.decode_tps.value == pytest.approx(decode, rel=1e-9)
    assert (choice.decode_tps.low, choice.decode_tps.high) == pytest.approx((low, high), rel=1e-9)
    assert choice.memory_bytes == needed

    # the inspector, on that GPU at that context: the figure, its band and its depth, visible
    w.choose_profile(GPU)
    w.library.select_paths([path])
    w.inspector.kv_type.setCurrentText("f16")
    w.inspector.ngl.setValue(999)
    w.inspector.ctx.setValue(N_CTX)
    w.details.refresh()
    html = w.inspector.text.text()
    m = re.search(r"Decode expected</td><td><b>([\d,.]+) tok/s</b> \(([\d,.]+)–([\d,.]+)\) at depth ([\d,]+)", html)
    assert m is not None, html
    assert _number(m.group(1)) == pytest.approx(decode, abs=0.051)
    assert (_number(m.group(2)), _number(m.group(3))) == pytest.approx((low, high), abs=0.051)
    assert int(_number(m.group(4))) == depth
    assert f"Memory needed</td><td>{human_bytes(needed)} of" in html

    # the scenario panel, asked for the request that fills this context
    w.scenario.prompt.setValue(question.n_prompt)
    w.scenario.output.setValue(question.n_gen)
    w.details.update_scenario()
    shown = w.scenario.pred
    assert shown is not None
    assert shown.output_tokens / shown.decode_s == pytest.approx(decode, rel=1e-9)

    # the results table, for a test of that request run with every layer on that GPU
    profile = find_profile(GPU, load_profiles())
    rows = RowPredictor(HardwareContext(cpu=profile, gpu=profile), ExpectedSources.load("a CPU", ""))
    row = {"model_path": path, "model_filename": Path(path).name, "test_index": 0, "status": "ok",
           "n_prompt": question.n_prompt, "n_gen": question.n_gen, "n_depth": 0, "n_ctx": N_CTX,
           "n_gpu_layers": 999, "n_gpu_layers_effective": facts.n_layer + 1, "backends": "CUDA,CPU",
           "type_k": "f16", "type_v": "f16", "flash_attn": -1, "flash_attn_effective": 1, "repack": -1}
    row.update(rows(row))
    assert row["expected_decode_tps"] == pytest.approx(decode, rel=1e-9)
    assert row["pred_needed_bytes"] == needed
    table = ResultsModel(w.predictor)
    table.update_rows([row])
    col = {f.header: i for i, f in enumerate(WINDOW_FIELDS)}
    assert _number(table.index(0, col["decode expected"]).data(Qt.ItemDataRole.DisplayRole)) == pytest.approx(
        decode, abs=0.051)
    assert _number(table.index(0, col["needs MiB"]).data(Qt.ItemDataRole.DisplayRole)) == pytest.approx(
        needed / 2**20, abs=0.51)
