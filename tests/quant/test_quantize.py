"""``gguf-bench quantize`` on the real model: the ladder, its recorded lineage, one-line errors, and cancel."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.model.facts_cache import cached_facts
from app.model.lineage import KEY_QUANTIZED_FROM, KEY_REQUANTIZED_FROM, header_strings
from app.quantize.plan import QUANT_TYPE_NAMES, QuantizeSetupError, lineage, output_name, parse_types, plan_quantize
from tests.cli_helpers import gguf_bench
from tests.quant.ladder import LADDER_TYPES


@pytest.mark.slow  # the session's ladder: about a minute to build on two busy cores
def test_ladder_files_record_their_lineage_and_fall_in_bits(quant_ladder: dict[str, Path]) -> None:
    ref = quant_ladder["f16"]
    assert cached_facts(ref).file_type == "F16"
    assert header_strings(ref) == {KEY_QUANTIZED_FROM: "Q4_1", KEY_REQUANTIZED_FROM: "Q4_1"}
    bits = [cached_facts(quant_ladder[t]).bits_per_weight for t in ("f16", *LADDER_TYPES)]
    assert bits == sorted(bits, reverse=True) and len(set(bits)) == len(bits), bits
    for name in LADDER_TYPES:
        assert cached_facts(quant_ladder[name]).file_type == name.upper()
        # made from the F16, which was made from the Q4_1: the origin carries through
        assert header_strings(quant_ladder[name]) == {KEY_QUANTIZED_FROM: "F16", KEY_REQUANTIZED_FROM: "Q4_1"}
    assert not list(ref.parent.glob("*.part"))


def test_lineage_and_names() -> None:
    assert lineage("F16", {}) == {KEY_QUANTIZED_FROM: "F16"}  # a true F16: nothing requantized
    assert lineage("Q4_1", {}) == {KEY_QUANTIZED_FROM: "Q4_1", KEY_REQUANTIZED_FROM: "Q4_1"}
    assert lineage("F16", {KEY_REQUANTIZED_FROM: "Q4_1"})[KEY_REQUANTIZED_FROM] == "Q4_1"
    assert output_name(Path("SmolLM2-135M-Instruct.Q4_1.gguf"), "Q4_1", "q8_0") == "SmolLM2-135M-Instruct.Q8_0.gguf"
    assert output_name(Path("m-f16.gguf"), "F16", "q4_k_m") == "m.Q4_K_M.gguf"
    assert output_name(Path("model.gguf"), "F16", "q2_k") == "model.Q2_K.gguf"
    assert parse_types("Q8_0, q4_k_m,q8_0") == ["q8_0", "q4_k_m"]
    with pytest.raises(QuantizeSetupError, match="unknown type 'q9_9'"):
        parse_types("q8_0,q9_9")


def test_every_type_name_is_known_to_the_engine() -> None:
    from engines.llama_cpp_quantize import QUANT_TYPES

    assert set(QUANT_TYPE_NAMES) == set(QUANT_TYPES)


@pytest.mark.slow  # the session's ladder: about a minute to build on two busy cores
def test_user_errors_are_one_line(tmp_path: Path, smollm2_path: Path, quant_ladder: dict[str, Path]) -> None:
    not_gguf = tmp_path / "notes.gguf"
    not_gguf.write_text("not a model")
    cases = [
        (["-m", str(quant_ladder["f16"]), "--types", "q8_0,q7", "--out", str(tmp_path)], "unknown type 'q7'"),
        (["-m", str(not_gguf), "--out", str(tmp_path)], "notes.gguf"),
        (["-m", str(tmp_path / "missing.gguf"), "--out", str(tmp_path)], "missing.gguf"),
        (["-m", str(smollm2_path), "--out", str(tmp_path)], "already quantized (Q4_1)"),
        (["-m", str(quant_ladder["f16"]), "--types", "q8_0", "--out", str(quant_ladder["f16"].parent)],
         "already exists (pass --force"),
        (["-m", str(quant_ladder["f16"]), "--out", str(not_gguf)], "not a folder"),
    ]
    for args, message in cases:
        proc = gguf_bench("quantize", *args)
        assert proc.returncode == 2, (args, proc.stderr)
        assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not (tmp_path / "SmolLM2-135M-Instruct.Q8_0.gguf").exists()


@pytest.mark.slow  # the session's ladder: about a minute to build on two busy cores
def test_force_overwrites_and_table_says_what_was_written(tmp_path: Path, quant_ladder: dict[str, Path]) -> None:
    src = quant_ladder["q4_k_m"]  # quantized: --allow-requantize; small, so quick
    args = ["-m", str(src), "--types", "q4_0", "--out", str(tmp_path), "--allow-requantize", "-o", "csv", "-q"]
    first = gguf_bench("quantize", *args)
    assert first.returncode == 0, first.stderr
    again = gguf_bench("quantize", *args, "--force")
    assert again.returncode == 0, again.stderr
    header, row = again.stdout.splitlines()[:2]
    cells = dict(zip(header.split(","), row.split(","), strict=True))
    assert cells["file_type"] == "Q4_0" and cells["status"] == "ok" and cells["requantized_from"] == "Q4_1"
    assert cells["source_file_type"] == "Q4_K_M" and cells["reference_is_dequantized"] == "0"
    assert float(cells["bits_per_weight"]) < cached_facts(src).bits_per_weight + 0.5


@pytest.mark.slow  # the session's ladder: about a minute to build on two busy cores
def test_ctrl_c_keeps_finished_outputs_and_removes_the_half_written_one(tmp_path: Path,
                                                                       quant_ladder: dict[str, Path]) -> None:
    out = tmp_path / "out"
    env = {**os.environ}
    proc = subprocess.Popen([sys.executable, "-m", "app.cli.main", "quantize", "-m", str(quant_ladder["f16"]),
                             "--types", "q4_0,q8_0,q6_k", "--out", str(out)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 300
    try:  # interrupt while the second output is being written (the first is complete)
        while not (list(out.glob("*.Q4_0.gguf")) and list(out.glob("*.Q8_0.gguf.*.part"))):
            assert proc.poll() is None and time.monotonic() < deadline, "quantize ended before it was interrupted"
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr
    assert sorted(p.name for p in out.iterdir()) == ["f16.Q4_0.gguf".replace("f16", quant_ladder["f16"].name
                                                                             .removesuffix(".F16.gguf"))]
    assert cached_facts(next(out.iterdir())).file_type == "Q4_0"
    assert "cancelled" in stdout and "1 outputs kept" in stderr


def test_two_runs_into_one_folder_never_touch_each_others_part_files(tmp_path: Path) -> None:
    """Issue #29 case 3: interrupting run A removed run B's half-written ``.part`` file (both wrote ``dst.part``).
    Each run's outputs now go through names of its own, and a run cleans up only what it made."""
    from app.quantize.session import QuantizeSession
    from tests.gguf_synth import write_synthetic_gguf

    src = write_synthetic_gguf(tmp_path / "m.F16.gguf")
    a = plan_quantize(src, ["q8_0"], tmp_path / "out")
    b = plan_quantize(src, ["q8_0"], tmp_path / "out")
    assert a[0].dst == b[0].dst and a[0].part != b[0].part
    Path(a[0].part).write_bytes(b"A half-written")
    Path(b[0].part).write_bytes(b"B half-written")
    session = QuantizeSession(a, "run-a")
    session.cancelled = True
    session._cleanup()  # what A does after a Ctrl+C: A's own .part goes, B's stays
    assert not Path(a[0].part).exists() and Path(b[0].part).read_bytes() == b"B half-written"
    assert [r.status for r in session.rows] == ["cancelled"]
