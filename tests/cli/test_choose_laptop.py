"""``choose --hw "RTX 4060 Laptop"`` over a folder of real model shapes (issue #27's acceptance): a dense 14B too
large for 8 GB and a 30B-A3B mixture of experts, as header-only GGUFs of their true sizes. The answer names a
partial or expert offload with its command and says why the other file lost; several contexts give one answer
each; nothing of this machine is probed for a GPU named by --hw."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.cli.main import main
from app.telemetry import machine
from tests.cli_helpers import main_json
from tests.gguf_synth import write_shape_gguf


@pytest.fixture(scope="module")
def laptop_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("laptop")
    write_shape_gguf(folder / "dense-14b.Q4_K_M.gguf", n_layer=48, n_embd=5120, n_head=40, n_head_kv=8, n_ff=13824,
                     n_vocab=152064, name="dense-14b")  # Qwen2.5-14B's shape: 8.5 GB
    write_shape_gguf(folder / "moe-30b-a3b.Q4_K_M.gguf", n_layer=48, n_embd=2048, n_head=32, n_head_kv=4,
                     key_length=128, n_ff=768, n_vocab=151936, n_expert=128, n_expert_used=8,
                     name="moe-30b-a3b")  # Qwen3-30B-A3B's shape: 17 GB
    return folder


@pytest.fixture
def no_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    """TEST DOUBLE: the CPU probe fails the test if a remote-GPU choose calls it."""
    def tripped(**kwargs: object) -> None:
        raise AssertionError("the CPU probe ran for a remote GPU")

    monkeypatch.setattr(machine, "probe_cpu", tripped)


def _choose(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    return main_json("choose", argv, capsys)


@pytest.mark.heavy  # seconds of placement search over full-size model shapes
def test_the_answer_is_an_expert_offload_and_names_why_the_dense_lost(
        laptop_folder: Path, isolated_data_dir: Path, no_probe: None, capsys: pytest.CaptureFixture[str]) -> None:
    doc = _choose([str(laptop_folder), "--hw", "RTX 4060 Laptop", "--ctx", "8192", "--min-decode-tps", "30"], capsys)
    files = {f["filename"]: f for f in doc["files"]}
    dense, moe = files["dense-14b.Q4_K_M.gguf"], files["moe-30b-a3b.Q4_K_M.gguf"]
    assert dense["status"] == "partial" and 0 < dense["n_gpu_layers"] < 49
    assert moe["status"] == "fits" and moe["n_cpu_moe"] > 0
    rec = doc["recommendation"]
    assert rec["filename"] == "moe-30b-a3b.Q4_K_M.gguf"
    assert f"-ngl 49 -ncmoe {moe['n_cpu_moe']} -c 8192" in rec["command"]
    assert "dense-14b.Q4_K_M.gguf below the 30 tok/s floor" in rec["sentence"]
    assert not list(isolated_data_dir.rglob("cpu_probe.json"))


@pytest.mark.heavy  # seconds of placement search over full-size model shapes
def test_without_a_floor_the_partial_offload_is_named_with_its_command(
        laptop_folder: Path, isolated_data_dir: Path, no_probe: None, capsys: pytest.CaptureFixture[str]) -> None:
    doc = _choose([str(laptop_folder), "--hw", "RTX 4060 Laptop", "--ctx", "8192"], capsys)
    rec = doc["recommendation"]
    assert rec["filename"] == "dense-14b.Q4_K_M.gguf" and "layers offloaded" in rec["sentence"]
    dense = next(f for f in doc["files"] if f["filename"] == "dense-14b.Q4_K_M.gguf")
    assert "-ncmoe" not in rec["command"] and f" -ngl {dense['n_gpu_layers']} " in rec["command"]
    # with no floor to meet, the unquantized cache (fewer layers fit beside it) beats a faster q4_0 one
    assert " -ctk f16 " in rec["command"] and 0 < dense["n_gpu_layers"] < 49
    assert any("-ctk q4_0" in line for line in dense["placements"])
    assert "The others rank lower on quality: moe-30b-a3b.Q4_K_M.gguf (4.52 bits/weight)" in rec["sentence"]


@pytest.mark.heavy  # seconds of placement search over full-size model shapes
def test_several_contexts_give_one_answer_each(
        laptop_folder: Path, isolated_data_dir: Path, no_probe: None, capsys: pytest.CaptureFixture[str]) -> None:
    doc = _choose([str(laptop_folder), "--hw", "RTX 4060 Laptop", "--ctx", "4096,32768"], capsys)
    reports = doc["contexts"]
    assert [r["n_ctx"] for r in reports] == [4096, 32768]
    moe = [next(f for f in r["files"] if f["filename"].startswith("moe")) for r in reports]
    assert moe[0]["n_cpu_moe"] < moe[1]["n_cpu_moe"]  # a longer context's cache leaves room for fewer experts
    rc = main(["choose", str(laptop_folder), "--hw", "RTX 4060 Laptop", "--ctx", "4096,32768"])
    out = capsys.readouterr().out
    assert rc == 0 and "By context:" in out and "32,768 tokens: " in out


def test_measure_takes_one_context(laptop_folder: Path, isolated_data_dir: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["choose", str(laptop_folder), "--ctx", "4096,8192", "--measure", "--min-decode-tps", "5"])
    err = capsys.readouterr().err
    assert rc != 0 and "--measure takes one --ctx" in err


@pytest.mark.heavy  # seconds of placement search over full-size model shapes
def test_a_split_on_a_gpu_not_owned_says_why_its_speed_is_the_ceiling(
        laptop_folder: Path, isolated_data_dir: Path, no_probe: None, capsys: pytest.CaptureFixture[str]) -> None:
    """Both answers are splits (layers or experts in system RAM) of a GPU named by --hw: their host CPU has no
    expected figure, and the figure says so, not that nothing was measured."""
    doc = _choose([str(laptop_folder), "--hw", "RTX 4060 Laptop", "--ctx", "8192", "--min-decode-tps", "30"], capsys)
    for f in doc["files"]:
        assert f["decode_tps"]["kind"] == "ceiling", f
        assert f["decode_tps"]["source"].endswith("no expected figure: split placement: no expected decode without "
                                                  "an expected figure for the host CPU alone"), f
    rc = main(["choose", str(laptop_folder), "--hw", "RTX 4060 Laptop", "--ctx", "8192", "--min-decode-tps", "30"])
    lines = capsys.readouterr().out.splitlines()
    assert rc == 0
    header = next(line for line in lines if line.startswith("file "))
    rows = [line for line in lines if line.startswith(("dense-14b", "moe-30b"))]
    assert "-ncmoe" in rows[1]  # the longest placement: the columns after it still line up with the header
    column = header.index("KV fits")
    assert all(row[column - 1] == " " and row[column:].startswith("none") for row in rows), (header, rows)
