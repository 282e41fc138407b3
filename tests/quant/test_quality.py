"""``gguf-bench quality`` on the SmolLM2 ladder: KLD grows as bits per weight fall; rows stored and exported."""

from __future__ import annotations

import csv
import io
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from app.results.fields import QUALITY_BY_NAME, check_row
from app.results.quality_store import QUALITY_COLUMNS, quality_for
from app.results.store import ResultStore
from app.telemetry import repack_guard
from tests.cli_helpers import gguf_bench
from tests.quant.ladder import LADDER_TYPES

pytestmark = pytest.mark.slow  # builds the ladder and scores seven files (about a minute on two busy cores)

#: Small budget: 2 chunks of 128 tokens, 126 tokens scored per file, one thread (CI has two shared cores).
BUDGET = ("--tokens", "256", "--ctx", "128", "-t", "1")
TEXT = Path(__file__).parent / "data" / "quality_text.txt"
#: llama.cpp's own perplexity tool on the same files and text (the ladder's F16 as the KLD base), built from the
#: llama.cpp that ships with llama-cpp-python 0.3.36:
#:   llama-perplexity -m F16 -f quality_text.txt -c 128 -b 128 --chunks 2 -t 1 --kl-divergence-base base.bin
#:   llama-perplexity -m VARIANT --kl-divergence-base base.bin --kl-divergence -c 128 -b 128 --chunks 2 -t 1
#: (file: PPL, its ±, Mean KLD, its ±, 99.0% KLD, Same top p)
LLAMA_PERPLEXITY = {
    "f16": (41.6266, 12.02411, 0.0, 0.0, 0.0, 1.0),
    "q8_0": (41.728988, 12.109276, 0.005946, 0.000503, 0.029541, 0.96032),
    "q6_k": (41.638308, 12.180656, 0.014314, 0.002277, 0.126474, 0.92857),
    "q5_k_m": (45.196248, 13.571861, 0.096407, 0.006473, 0.357479, 0.82540),
    "q4_k_m": (43.371776, 12.729610, 0.073326, 0.006145, 0.316020, 0.88095),
    "q3_k_m": (51.913962, 15.196345, 0.182055, 0.022610, 1.298278, 0.75397),
    "q2_k": (78.647356, 20.753928, 0.647460, 0.054497, 3.187739, 0.57937),
}
#: The kernel path LLAMA_PERPLEXITY was recorded on (llama_print_system_info's CPU line; llama-perplexity repacks
#: weights by default): the exact comparison holds there.
RECORDED_PATH = ("CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | LLAMAFILE = 1 | "
                 "OPENMP = 1 | REPACK = 1 |")
RECORDED_TOL = {"ppl": 2e-3, "ppl_err": 5e-3, "kld": 0.02, "kld_abs": 2e-4, "kld_err": 0.05, "kld_p99": 0.03,
                "same_top_tokens": 1.5}
#: Elsewhere (see test_figures_are_llama_perplexitys): about twice the differences measured between kernel paths.
CROSS_PATH = {"ppl": 0.03, "ppl_err": 0.04, "kld": 0.05, "kld_abs": 5e-4, "kld_err": 0.15, "kld_p99": 0.4,
              "same_top_tokens": 8}
#: Files at least this many bits per weight apart must rank by KLD. Closer ones may swap for real on this
#: reference: it holds Q4_1's grid, and on SmolLM2 (576 columns, not a multiple of 256) K-quants fall back to
#: Q5_1/Q5_0; Q5_K_M (6.56 bits, mostly Q5_1) measured above Q4_K_M (6.17 bits, mostly Q5_0): 0.068 ± 0.003 against
#: 0.054 ± 0.002 over 504 tokens of the Python docs.
MIN_BITS_APART = 0.5  # (llama-perplexity agrees: LLAMA_PERPLEXITY's q5_k_m and q4_k_m)
#: Ties within noise: two standard errors of the two means together.
N_STD_ERR = 2.0
@pytest.fixture(scope="module")
def quality_run(quant_ladder: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """``quality`` over the whole ladder once (given lowest precision first: the reference is found by bits)."""
    data = tmp_path_factory.mktemp("quality-data")
    files = [quant_ladder[t] for t in reversed(("f16", *LADDER_TYPES))]
    args = [a for f in files for a in ("-m", str(f))]
    proc = subprocess.run([sys.executable, "-m", "app.cli.main", "--store", str(data / "results.sqlite3"), "quality",
                           *args, *BUDGET, "--text", str(TEXT), "-o", "json"], capture_output=True, text=True,
                          timeout=900, env={**os.environ, "GGUF_WORKBENCH_DATA_DIR": str(data)})
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    return {"rows": {Path(r["model_path"]).name: r for r in rows}, "order": rows, "store": data / "results.sqlite3",
            "stderr": proc.stderr, "files": files, "data": data}


def _by_type(run: dict[str, Any], ladder: dict[str, Path]) -> list[dict[str, Any]]:
    return [run["rows"][ladder[t].name] for t in ("f16", *LADDER_TYPES)]


def test_reference_is_the_dequantized_f16_and_every_row_says_so(quality_run: dict[str, Any],
                                                                 quant_ladder: dict[str, Path]) -> None:
    rows = _by_type(quality_run, quant_ladder)
    assert [r["model_path"] for r in quality_run["order"]] == [str(f) for f in quality_run["files"]]
    ref = rows[0]
    assert ref["is_reference"] and ref["mean_kld"] == 0 and ref["same_top_rate"] == 1
    for r in rows:
        assert r["status"] == "ok", r
        assert r["reference_path"] == str(quant_ladder["f16"]) and r["reference_is_dequantized"] is True
        assert r["requantized_from"] == "Q4_1" and r["text_source"] == str(TEXT)
        assert r["n_tokens"] == 2 * 63 and r["n_chunks"] == 2 and r["n_ctx"] == 128
        assert 1 < r["ppl"] < 100 and r["ppl_err"] > 0 and r["tokens_per_s"] > 0
        assert list(r) == list(QUALITY_COLUMNS)  # every column, in the export's order
    for r in rows[1:]:
        assert not r["is_reference"] and 0 < r["mean_kld"] <= r["kld_p99"] and 0 < r["same_top_rate"] <= 1
        assert 0 < r["mean_kld_err"] < r["mean_kld"]


def test_kld_grows_as_bits_per_weight_fall(quality_run: dict[str, Any], quant_ladder: dict[str, Path]) -> None:
    rows = _by_type(quality_run, quant_ladder)[1:]  # variants, most bits first
    table = [(r["model_filename"], r["bits_per_weight"], r["mean_kld"], r["mean_kld_err"]) for r in rows]
    assert [r["bits_per_weight"] for r in rows] == sorted((r["bits_per_weight"] for r in rows), reverse=True)
    n_pairs = 0
    for i, hi in enumerate(rows):
        for lo in rows[i + 1 :]:
            if hi["bits_per_weight"] - lo["bits_per_weight"] < MIN_BITS_APART:
                continue
            n_pairs += 1
            noise = N_STD_ERR * (hi["mean_kld_err"] ** 2 + lo["mean_kld_err"] ** 2) ** 0.5
            assert lo["mean_kld"] >= hi["mean_kld"] - noise, table
    assert n_pairs >= 10, table
    assert rows[-1]["mean_kld"] > 5 * rows[0]["mean_kld"], table  # q2_k is far worse than q8_0
    assert rows[-1]["same_top_rate"] < rows[0]["same_top_rate"] and rows[-1]["ppl"] > rows[0]["ppl"], table


def _cpu_path() -> str:
    """This machine's llama.cpp CPU kernel path: the CPU features its build uses (llama_print_system_info's CPU
    line), asked in a child process (llama_cpp never loads in pytest's own)."""
    code = "import llama_cpp; print(llama_cpp.llama_print_system_info().decode())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    return " ".join(out.stdout.split())


def test_figures_are_llama_perplexitys(quality_run: dict[str, Any], quant_ladder: dict[str, Path]) -> None:
    """Same chunks, same scored tokens, same formulas: llama.cpp's figures.

    On the kernel path they were recorded on (RECORDED_PATH, repacking on): up to the float16 the reference's
    log-probabilities are kept in, PPL to 0.2 %, KLD to 2 % (or 0.0002). On another path (other SIMD features, or
    weights not repacked, as on a CPU where the repack guard chose --repack 0) the model itself computes slightly
    other logits. Measured on the recording's CPU, the ladder with --repack 0 against these figures: PPL up to
    1.4 % off (Q3_K_M 51.16 vs 51.91), its ± 1.7 %, mean KLD 2.5 %, KLD's ± 7.4 %, the 99th-percentile KLD (an
    extreme of 126 tokens) 20 %, the same top token 4 tokens of 126; an Intel Xeon with AMX (repack 0, AVX-512)
    read Q8_0's PPL 1.1 % off (issue #24). So there the figures are held to CROSS_PATH, about twice those: a formula
    or token-range error larger than a few percent still fails."""
    repack = repack_guard.remembered(quality_run["data"] / repack_guard.VERDICT_FILE)
    same_path = _cpu_path() == RECORDED_PATH and (repack is None or repack.default_repack == 1)
    tol = RECORDED_TOL if same_path else CROSS_PATH
    for name, (ppl, ppl_err, kld, kld_err, kld_p99, same_top) in LLAMA_PERPLEXITY.items():
        r = quality_run["rows"][quant_ladder[name].name]
        assert r["ppl"] == pytest.approx(ppl, rel=tol["ppl"]), (name, same_path)
        assert r["ppl_err"] == pytest.approx(ppl_err, rel=tol["ppl_err"]), (name, same_path)
        assert r["mean_kld"] == pytest.approx(kld, rel=tol["kld"], abs=tol["kld_abs"]), (name, same_path)
        assert r["mean_kld_err"] == pytest.approx(kld_err, rel=tol["kld_err"], abs=1e-4), (name, same_path)
        assert r["kld_p99"] == pytest.approx(kld_p99, rel=tol["kld_p99"], abs=5e-4), (name, same_path)
        assert r["same_top_rate"] == pytest.approx(same_top, abs=tol["same_top_tokens"] / 126), (name, same_path)


def test_rows_are_stored_for_each_file(quality_run: dict[str, Any], quant_ladder: dict[str, Path]) -> None:
    for row in quality_run["rows"].values():  # every value of the type the quality field group says
        assert check_row(row, QUALITY_BY_NAME) == [], row
    with ResultStore(quality_run["store"]) as store:
        for name in ("f16", *LADDER_TYPES):
            row = quality_for(store, quant_ladder[name])
            assert row is not None and row.mean_kld == quality_run["rows"][quant_ladder[name].name]["mean_kld"]


def test_user_errors_are_one_line(tmp_path: Path, quant_ladder: dict[str, Path]) -> None:
    ref = str(quant_ladder["f16"])
    empty = tmp_path / "empty.txt"
    empty.write_text("  \n")
    cases = [
        (["-m", ref, "--text", str(tmp_path / "missing.txt")], "missing.txt: cannot read it"),
        (["-m", ref, "--text", str(empty)], "holds no text"),
        (["-m", ref, "--ctx", "100000"], "--ctx 100000: must be between"),
        (["-m", ref, "--ctx", "128", "--tokens", "64"], "--tokens 64: must be between"),
        (["-m", ref, "-m", str(empty)], "empty.txt"),
        (["-m", ref, "-t", "-1"], "-t -1: must be between 0"),
    ]
    for args, message in cases:
        proc = gguf_bench("quality", *args)
        assert proc.returncode == 2, (args, proc.stderr)
        assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_a_text_too_short_fails_every_row(tmp_path: Path, quant_ladder: dict[str, Path]) -> None:
    text = tmp_path / "short.txt"
    text.write_text("A few words only.")
    proc = gguf_bench("quality", "-m", str(quant_ladder["f16"]), "-m", str(quant_ladder["q2_k"]), "--text", str(text),
                      "--ctx", "64", "--tokens", "64", "-t", "1", "-o", "csv", "--no-store")
    assert proc.returncode == 1, proc.stderr
    assert "one chunk needs 64" in proc.stdout and "the reference could not be scored" in proc.stdout


def test_ctrl_c_keeps_the_files_already_scored(tmp_path: Path, quant_ladder: dict[str, Path]) -> None:
    store_path = tmp_path / "results.sqlite3"
    files = [quant_ladder[t] for t in ("f16", "q8_0", "q2_k")]
    proc = subprocess.Popen([sys.executable, "-m", "app.cli.main", "--store", str(store_path), "quality",
                             *[a for f in files for a in ("-m", str(f))], *BUDGET, "-o", "csv"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        lines = [proc.stderr.readline(), proc.stderr.readline()]  # "reference: ...", then the first file's result
        assert lines[1].startswith("[1/3] " + files[0].name), lines
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr
    assert "files scored and kept" in stderr
    rows = list(csv.DictReader(io.StringIO(stdout)))
    assert [r["model_filename"] for r in rows] == [f.name for f in files]
    assert rows[0]["status"] == "ok" and rows[2]["status"] == "cancelled", rows
    with ResultStore(store_path) as store:
        assert quality_for(store, files[0]) is not None  # stored the moment it finished
        assert quality_for(store, files[2]) is None
