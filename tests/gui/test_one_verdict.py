"""Issue #51 point 3: one verdict for one file, context and machine. Qwen3-30B-A3B (Q4_K_M, a header-only file of its
true size) on an 8 GB "RTX 4060 Laptop" with 16 GiB of RAM at 32,768 tokens: ``gguf-bench predict``, the chooser,
the window's inspector and its compare view give the same words, the same reason and the same placement
(``-ngl``, ``-ncmoe`` and the KV-cache type), a device margin kept free in each. ``predict --ram 32`` moves the
host-memory verdict, and ``choose --json`` holds each pick's device and host bytes."""

from __future__ import annotations

from html import escape
from pathlib import Path

import pytest

from app.choose.chooser import ChooseRequest, run_choose
from app.gui.compare import CompareWindow
from app.predict.answer import Machine
from app.predict.questions import Question
from tests.cli_helpers import main_json
from tests.gui.conftest import wait_for
from tests.laptop_models import LAPTOP_FILES, write_model

pytestmark = pytest.mark.heavy  # the window, and placement searches over a full-size model shape

N_CTX = 32768
HW = "RTX 4060 Laptop"


@pytest.fixture(scope="module")
def moe_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    spec = next(s for s in LAPTOP_FILES if s[0].startswith("Qwen3-30B-A3B"))
    return write_model(tmp_path_factory.mktemp("moe"), *spec)


def test_inspector_predict_chooser_and_compare_give_one_verdict(window, moe_file: Path,  # noqa: ANN001
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    path = str(moe_file)
    doc = main_json("predict", ["-m", path, "--hw", HW, "--ram", "16", "--ctx", str(N_CTX)], capsys)
    v = doc["verdict"]
    assert doc["schema_version"] >= 2 and v["status"] == "fits" and v["n_cpu_moe"] > 0
    placement = (v["n_gpu_layers"], v["n_cpu_moe"], v["type_k"])
    flags = f"-ngl {v['n_gpu_layers']} -ncmoe {v['n_cpu_moe']} -ctk {v['type_k']}"
    assert v["word"] == "Fits with experts in system RAM" and flags in v["text"]
    assert v["device_bytes"] + v["margin_bytes"] <= 8 * 2**30 and v["margin_bytes"] == 2**30
    assert v["host_bytes"] <= v["host_budget_bytes"]

    # the chooser, through its CLI and its function: the same placement and the same verdict text
    choose = main_json("choose", [path, "--hw", HW, "--ram", "16", "--ctx", str(N_CTX)], capsys)
    f = choose["files"][0]
    assert (f["n_gpu_layers"], f["n_cpu_moe"], f["type_k"]) == placement and f["verdict"] == v["text"]
    pick = choose["recommendation"]
    assert pick["device_bytes"] == v["device_bytes"] and pick["host_bytes"] == v["host_bytes"]
    assert pick["margin_bytes"] == v["margin_bytes"] and pick["host_budget_bytes"] == v["host_budget_bytes"]
    assert flags.replace("-ctk", "-c 32768 -ctk").replace(f" -c 32768 -ctk {v['type_k']}", "") in pick["command"]
    report = run_choose(ChooseRequest(sources=(path,), hw=HW, n_ctx=N_CTX, ram_gib=16.0), machine=Machine.elsewhere())
    assert report.choices[0].verdict == v["text"]

    # the window: the inspector on the same profile, context and RAM, and compare with the file in it
    w = window
    w.library.add_files([path])
    wait_for(lambda: path in w.predictor.facts)
    assert w.choose_profile(HW)
    w.inspector.ram.setValue(16)  # as predict --ram 16
    w.library.select_paths([path])
    w.inspector.kv_type.setCurrentText("f16")
    w.inspector.ngl.setValue(999)
    w.inspector.ctx.setValue(N_CTX)
    w.details.refresh()
    html = w.inspector.text.text()
    assert "Fits with experts in system RAM" in html and flags in html, html
    # issue #52 item 3: the inspector's figures are predict's ``inspector`` view, rendered: every row, word for word
    view = doc["inspector"]
    assert view["flags"] == flags and view["rows"] and escape(v["reason"]) in html
    for row in view["rows"]:
        assert escape(row["label"]) in html and escape(row["value"]) in html, (row, html)
        assert escape(row["source"]) in html and escape(row["where"]) in html and escape(row["band"]) in html
    assert escape(view["facts"]) in html
    verdict = w.predictor.verdict(path, Question(n_ctx=N_CTX))
    assert not isinstance(verdict, str) and verdict is not None and verdict.text() == v["text"]
    cmp = CompareWindow(w.predictor)
    cmp.asked_ctx = N_CTX
    cmp.add_model(path)
    table = cmp.table_figures()
    assert table.with_fit and table.rows[0].fit == f"Fits with experts in system RAM ({flags})"
    cmp.close()


def test_predict_ram_moves_the_host_memory_verdict(moe_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """More system RAM holds more experts: the placement keeps an f16 cache with more layers' experts on the CPU."""
    small = main_json("predict", ["-m", str(moe_file), "--hw", HW, "--ram", "8", "--ctx", str(N_CTX)], capsys)
    big = main_json("predict", ["-m", str(moe_file), "--hw", HW, "--ram", "32", "--ctx", str(N_CTX)], capsys)
    assert small["verdict"]["status"] == "does_not_fit" and small["verdict"]["ran_out"] == "system RAM"
    assert big["verdict"]["status"] == "fits" and big["verdict"]["host_budget_bytes"] > 20 * 2**30
    assert any("system RAM 32 GiB (given)" in n for n in big["notes"])


def test_a_split_request_total_is_the_same_in_predict_and_the_scenario_panel(window, smollm2_path: Path,  # noqa: ANN001
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """Issue #52: SmolLM2 on "RTX 4060 Laptop" with -ngl 10 and a 512 + 128 request: ``predict`` and the window's
    scenario panel give one total (they were 0.29 s and 0.109 s apart), each phase's kind said."""
    path = str(smollm2_path)
    doc = main_json("predict", ["-m", path, "--hw", HW, "-ngl", "10", "-p", "512", "-n", "128"], capsys)
    req = doc["request"]
    assert req["decode_kind"] == "split"
    w = window
    wait_for(lambda: path in w.predictor.facts)
    assert w.choose_profile(HW)
    w.library.select_paths([path])
    w.inspector.kv_type.setCurrentText("f16")
    w.inspector.ngl.setValue(10)
    w.inspector.ctx.setValue(8192)
    w.scenario.prompt.setValue(512)
    w.scenario.output.setValue(128)
    w.details.update_scenario()
    sc = w.scenario.pred
    assert sc is not None and sc.total_s == pytest.approx(req["total_s"], rel=1e-9)
    assert f"decode {req['decode_kind']}" in w.scenario.predicted.text()
