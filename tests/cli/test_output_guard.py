"""Issue #29 (cases 1 and 4): no output flag may write over a file the same command reads, or the store's side
files, or the workbench's data dir: by path, through a symbolic link, or through a hard link (the same inode)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from tests.cli_helpers import gguf_bench
from tests.gguf_synth import write_synthetic_gguf

pytestmark = pytest.mark.heavy  # the CLI in a subprocess


def _digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _refused(proc, says: str) -> None:  # noqa: ANN001 - a CompletedProcess
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0] and "Traceback" not in proc.stderr, proc.stderr


@pytest.fixture
def model(tmp_path: Path) -> Path:
    return write_synthetic_gguf(tmp_path / "v.gguf")


def test_out_onto_the_input_model_is_refused_by_path_link_and_inode(model: Path, tmp_path: Path) -> None:
    before = _digest(model)
    soft, hard = tmp_path / "soft.gguf", tmp_path / "hard.gguf"
    soft.symlink_to(model)
    os.link(model, hard)
    for out in (model, soft, hard):
        proc = gguf_bench("run", "-m", str(model), "-p", "8", "-n", "4", "-r", "1", "-o", "csv", "--out", str(out))
        _refused(proc, "is an input of this command")
    proc = gguf_bench("run", "-m", str(soft), "-p", "8", "-n", "4", "-r", "1", "--telemetry", str(model))
    _refused(proc, "--telemetry")
    assert _digest(model) == before


def test_out_onto_the_prompt_file_or_a_sweep_preset_is_refused(model: Path, tmp_path: Path) -> None:
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("Some words to read.\n")
    preset = tmp_path / "mine.toml"
    preset.write_text("[sweep]\nn_prompt = [8]\nn_gen = [4]\n")
    _refused(gguf_bench("run", "-m", str(model), "--prompt-file", str(prompt), "--out", str(prompt)),
             "is an input of this command")
    _refused(gguf_bench("run", "-m", str(model), "--sweep", str(preset), "--out", str(preset)),
             "is an input of this command")
    assert prompt.read_text() == "Some words to read.\n" and "n_gen" in preset.read_text()


def test_out_onto_the_stores_pending_rows_file_or_the_data_dir_is_refused(
        model: Path, tmp_path: Path, isolated_data_dir: Path) -> None:
    store = tmp_path / "r.sqlite3"
    pending = tmp_path / "r.sqlite3.pending-rows.jsonl"
    _refused(gguf_bench("--store", str(store), "run", "-m", str(model), "--out", str(pending)), "PENDING-ROWS")
    own = isolated_data_dir / "cpu_probe.json"
    own.write_text("{}")
    _refused(gguf_bench("run", "-m", str(model), "--out", str(own)), "data dir")
    assert own.read_text() == "{}"


def test_quality_out_onto_its_text_or_a_model_is_refused(model: Path, tmp_path: Path) -> None:
    text = tmp_path / "text.txt"
    text.write_text("word " * 200)
    _refused(gguf_bench("quality", "-m", str(model), "--text", str(text), "--out", str(text)),
             "is an input of this command")
    _refused(gguf_bench("quality", "-m", str(model), "--text", str(text), "--out", str(model)),
             "is an input of this command")
    assert text.read_text() == "word " * 200
