"""``gguf-bench`` as a hostile user runs it (issue #13): unbounded counts, odd output paths and data dirs, files
that are not files. Each refusal is one line and exit 2 before the first test, with nothing in the store; a file
that fails at write time keeps the results (stdout) and the store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.results import export
from app.results.store import ResultStore
from tests.cli_helpers import gguf_bench
from tests.gguf_synth import write_synthetic_gguf

TINY = ["-p", "4", "-n", "2", "-r", "1", "-t", "1", "--no-predict", "-q"]
ROOT = os.geteuid() == 0  # root writes through any permission bit


def _one_error_line(stderr: str) -> str:
    assert "Traceback" not in stderr
    errors = [ln for ln in stderr.splitlines() if "error" in ln.lower()]
    assert len(errors) == 1, stderr
    return errors[0]


def _stored_runs(data_dir: Path) -> list:
    path = data_dir / "results.sqlite3"
    if not path.exists():
        return []
    with ResultStore(path) as store:
        return store.runs()


def _refused(data_dir: Path, *args: str) -> str:
    proc = gguf_bench(*args, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    assert _stored_runs(data_dir) == []
    return _one_error_line(proc.stderr)


@pytest.mark.heavy  # the real model
@pytest.mark.parametrize("args, needle", [
    (["-p", "5000000000"], "n_prompt value 5000000000 must be ≤ 16777216"),
    (["-p", "1-100000000"], "-p: '1-100000000' gives more than 1,000 values"),
    (["-t", "9999"], "n_threads value 9999 must be ≤ 4096"),
    (["-t", "4000"], "is far beyond the"),
    (["--parallel", "256", "-d", "100000"], "a test needs a context of"),
])
def test_unbounded_counts_are_one_line_before_anything_runs(isolated_data_dir: Path, smollm2_path: Path,
                                                             args: list[str], needle: str) -> None:
    line = _refused(isolated_data_dir, "run", "-m", str(smollm2_path), *TINY, *args)
    assert needle in line


@pytest.mark.heavy  # the real model
def test_a_1000_by_1000_toml_grid_is_refused_before_a_store_write(isolated_data_dir: Path, tmp_path: Path,
                                                                 smollm2_path: Path) -> None:
    grid = tmp_path / "grid.toml"
    grid.write_text(f"[sweep]\nn_prompt = {list(range(1, 1001))}\nn_gen = {list(range(1, 1001))}\n")
    line = _refused(isolated_data_dir, "run", "-m", str(smollm2_path), "--sweep", str(grid), "-q")
    assert str(grid) in line and "1,000,000 tests, at most 10,000" in line


@pytest.mark.heavy  # the real model
@pytest.mark.parametrize("flag", ["--out", "--telemetry"])
@pytest.mark.parametrize("where, needle", [
    ("dir", "is a directory, not a file"),
    ("missing", "folder /nonexistent does not exist"),
    ("store", "is the results store"),
    ("store-wal", "is the results store WAL file"),
    ("unwritable", "cannot create a file in /proc"),  # refused even for root: no file can be made there
])
def test_output_paths_are_checked_before_the_first_test(isolated_data_dir: Path, tmp_path: Path,
                                                        smollm2_path: Path, flag: str, where: str, needle: str) -> None:
    path = {"dir": str(tmp_path), "missing": "/nonexistent/x.csv",
            "store": str(isolated_data_dir / "results.sqlite3"),
            "store-wal": str(isolated_data_dir / "results.sqlite3-wal"), "unwritable": "/proc/results.csv"}[where]
    line = _refused(isolated_data_dir, "run", "-m", str(smollm2_path), *TINY, flag, path)
    assert f"{flag} {path}" in line and needle in line


@pytest.mark.heavy  # the real model
@pytest.mark.skipif(ROOT, reason="root can write into a read-only folder")
def test_an_unwritable_out_path_is_one_line(isolated_data_dir: Path, tmp_path: Path, smollm2_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    line = _refused(isolated_data_dir, "run", "-m", str(smollm2_path), *TINY, "--out", str(locked / "r.csv"))
    assert "permission denied" in line


@pytest.mark.heavy  # the CLI in a subprocess
def test_export_out_dir_is_one_line(isolated_data_dir: Path, tmp_path: Path) -> None:
    line = _refused(isolated_data_dir, "export", "last", "--out", str(tmp_path))
    assert "is a directory" in line
    line = _refused(isolated_data_dir, "export", "last", "--out", str(isolated_data_dir / "results.sqlite3"))
    assert "is the results store" in line


@pytest.mark.heavy  # the real model
def test_prompt_file_dir_says_directory(isolated_data_dir: Path, tmp_path: Path, smollm2_path: Path) -> None:
    line = _refused(isolated_data_dir, "run", "-m", str(smollm2_path), *TINY, "--prompt-file", str(tmp_path))
    assert "is a directory" in line and "not found" not in line


@pytest.mark.heavy  # the CLI in a subprocess
def test_a_fifo_as_model_is_not_a_regular_file(isolated_data_dir: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.gguf"
    os.mkfifo(fifo)
    line = _refused(isolated_data_dir, "run", "-m", str(fifo), *TINY)
    assert f"{fifo}: not a regular file" in line and "empty" not in line


@pytest.mark.heavy  # the real model and the CLI in a subprocess
@pytest.mark.parametrize("command", [["run", *TINY], ["history"]])
def test_a_data_dir_that_is_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, smollm2_path: Path,
                                   command: list[str]) -> None:
    odd = tmp_path / "data"
    odd.write_text("not a folder")
    monkeypatch.setenv("GGUF_WORKBENCH_DATA_DIR", str(odd))
    proc = gguf_bench(*command, timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    assert f"{odd}: the data dir (GGUF_WORKBENCH_DATA_DIR) is a file, not a folder" in _one_error_line(proc.stderr)
    assert odd.read_text() == "not a folder"


@pytest.mark.heavy  # the real model
def test_a_logs_file_in_the_data_dir(isolated_data_dir: Path, smollm2_path: Path) -> None:
    (isolated_data_dir / "logs").write_text("")
    line = _refused(isolated_data_dir, "run", "-m", str(smollm2_path), *TINY, "--no-store")
    assert "logs folder of the data dir is a file, not a folder" in line


@pytest.mark.heavy  # the real model and the CLI in a subprocess
@pytest.mark.skipif(ROOT, reason="root can write into a read-only folder")
def test_a_read_only_data_dir_with_no_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            smollm2_path: Path) -> None:
    ro = tmp_path / "ro"
    (ro / "logs").mkdir(parents=True)
    ro.chmod(0o555)
    (ro / "logs").chmod(0o555)
    monkeypatch.setenv("GGUF_WORKBENCH_DATA_DIR", str(ro))
    proc = gguf_bench("run", "-m", str(smollm2_path), *TINY, "--no-store", timeout=60)
    assert proc.returncode == 2 and "read-only" in _one_error_line(proc.stderr)


@pytest.mark.heavy  # the real model and the CLI in a subprocess
def test_dev_full_is_refused_before_the_first_test(isolated_data_dir: Path, smollm2_path: Path) -> None:
    """A device is not an output (issue #54): refused up front, so nothing runs; the results-on-stdout fallback for a
    disk that fills during the sweep is tests/cli/test_io_failures.py's."""
    line = _refused(isolated_data_dir, "run", "-m", str(smollm2_path), *TINY, "-o", "csv", "--out", "/dev/full")
    assert "--out /dev/full: is a character device, not a regular file" in line


@pytest.mark.heavy  # the real model and the CLI in a subprocess
def test_out_and_telemetry_are_written_whole(isolated_data_dir: Path, tmp_path: Path, smollm2_path: Path) -> None:
    out, trace = tmp_path / "r.csv", tmp_path / "trace.csv"
    out.write_text("old results")
    proc = gguf_bench("run", "-m", str(smollm2_path), *TINY, "-o", "csv", "--out", str(out), "--telemetry", str(trace))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    assert [r["status"] for r in export.read_csv(out.read_text())] == ["ok"]
    assert trace.read_text().startswith("t_ns,")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.csv", "trace.csv"]  # no temporary file left
    assert len(_stored_runs(isolated_data_dir)) == 1


@pytest.mark.heavy  # the CLI in a subprocess
def test_past_the_trained_context_warns_and_runs(isolated_data_dir: Path, tmp_path: Path) -> None:
    model = write_synthetic_gguf(tmp_path / "short-ctx.gguf", n_ctx_train=512)
    proc = gguf_bench("run", "-m", str(model), "-d", "600", *TINY, "-o", "csv")
    assert proc.returncode in (0, 1), proc.stderr  # the synthetic model may not load: the warning comes first
    warnings = [ln for ln in proc.stderr.splitlines() if "warning" in ln]
    assert len(warnings) == 1
    assert "short-ctx.gguf: tests reach 606 tokens" in warnings[0] and "trained context of 512" in warnings[0]
    assert len(export.read_csv(proc.stdout)) == 1
    (run,) = _stored_runs(isolated_data_dir)
    assert run.n_ok + run.n_failed == 1


@pytest.mark.heavy  # the CLI in a subprocess
@pytest.mark.parametrize("args", [
    ("predict", "-p", "-5"), ("predict", "-n", "-1"), ("predict", "-d", "-7"), ("predict", "--ctx", "1e400"),
    ("predict", "--ctx", "1" + "0" * 400), ("predict", "-ngl", "-2"),
    ("choose", "m.gguf", "--ctx", "-3"), ("choose", "m.gguf", "-p", "-1"), ("choose", "m.gguf", "-n", "-4"),
    ("choose", "m.gguf", "--min-decode-tps", "nan"), ("choose", "m.gguf", "--max-kld", "inf"),
    ("history", "--limit", "0"),
])
def test_out_of_range_counts_are_one_line_and_exit_2(args: tuple[str, ...]) -> None:
    """Issue #29: negative -p/-n/-d in choose and predict were accepted with exit 0; huge ones gave tracebacks."""
    proc = gguf_bench(*args)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]  # argparse's usage, then the one line that says why
    assert last.startswith("gguf-bench") and any(w in last for w in ("must be", "is not a")), proc.stderr


@pytest.mark.heavy  # the CLI in a subprocess
def test_doctor_follows_the_library_path_runs_use(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Issue #29: with LLAMA_CPP_LIB_PATH naming no llama.cpp, doctor said [ok] while every run failed to start:
    it asked the installed libraries, not the ones llama_cpp loads."""
    monkeypatch.setenv("LLAMA_CPP_LIB_PATH", str(tmp_path / "nonexistent"))
    proc = gguf_bench("doctor")
    assert proc.returncode == 1 and "[error]" in proc.stdout and "[ok]" not in proc.stdout, proc.stdout
    assert "nonexistent" in proc.stdout and "Traceback" not in proc.stderr


@pytest.mark.heavy  # the CLI in a subprocess
@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_a_hardware_profile_with_a_non_finite_figure_is_one_line(value: str, isolated_data_dir: Path) -> None:
    """Issue #29: NaN or inf in a user's hardware TOML reached the predictions (tracebacks, NaN figures)."""
    (isolated_data_dir / "hardware").mkdir()
    (isolated_data_dir / "hardware" / "mine.toml").write_text(
        '[[gpu]]\nname = "Mine"\nvendor = "NVIDIA"\nkind = "laptop"\narchitecture = "Ampere"\nvram_gib = 8\n'
        'memory_type = "GDDR6"\nmemory_bus_bits = 128\nmemory_data_rate_gbps = 12.0\n'
        f'peak_bandwidth_gbps = {value}\nfp16_tensor_tflops = 20.0\nsource = "test"\n')
    proc = gguf_bench("predict", "--hw", "Mine")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "mine.toml" in proc.stderr and "finite" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.heavy  # a subprocess
@pytest.mark.parametrize("size", ["30000x30000", "0x0", "800", "axb", "-5x600"])
def test_a_screenshot_size_past_any_screen_is_refused(size: str, tmp_path: Path) -> None:
    """Issue #29: ``--size 30000x30000`` was obeyed (13.8 GB) and larger sizes crashed."""
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    proc = subprocess.run([sys.executable, "-m", "app.gui.main", "--replay", str(tmp_path / "x.jsonl"),
                           "--screenshot", str(tmp_path / "s.png"), "--size", size],
                          capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 2 and "--size" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert not (tmp_path / "s.png").exists()


@pytest.mark.heavy  # the CLI in a subprocess
@pytest.mark.parametrize("args, says", [
    (("--url", "http://127.0.0.1:99999/v1"), "Port out of range"),
    (("--url", "http://[::1/v1"), "Invalid IPv6 URL"),
    (("--url", "http://127.0.0.1:1/v1", "--request-timeout", "inf"), "--request-timeout"),
    (("--url", "http://127.0.0.1:1/v1", "--rate", "inf"), "--rate"),
])
def test_server_urls_and_timeouts_are_checked_where_they_enter(args: tuple[str, ...], says: str) -> None:
    """This stop's own hostile round: a port past 65535, a broken IPv6 literal and an infinite timeout gave
    tracebacks (ValueError, OverflowError)."""
    proc = gguf_bench("run", *args, "--served-model", "x", "-p", "4", "-n", "1")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert says in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


@pytest.mark.heavy  # the CLI in a subprocess
def test_a_toml_nested_too_deeply_is_one_line(tmp_path: Path, isolated_data_dir: Path) -> None:
    """This stop's own hostile round: 600 nested arrays raised RecursionError out of tomllib."""
    nested = "[" * 600 + "1" + "]" * 600
    preset = tmp_path / "deep.toml"
    preset.write_text(f"[sweep]\nn_prompt = {nested}\n")
    proc = gguf_bench("run", "--sweep", str(preset))
    assert proc.returncode == 2 and "nested too deeply" in proc.stderr and "Traceback" not in proc.stderr
    (isolated_data_dir / "hardware").mkdir()
    (isolated_data_dir / "hardware" / "deep.toml").write_text(f"x = {nested}\n")
    proc = gguf_bench("predict", "--hw", "RTX 4060 Laptop")
    assert proc.returncode == 2 and "nested too deeply" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.heavy  # the CLI in a subprocess
@pytest.mark.parametrize("damage", [
    '{"version": 1, "fits": []}', '{"version": 1, "cpu_info": "x", "gpu_info": "", "build": "b", "created": "d", '
    '"n_points": 1, "fits": {"CPU": {"decode": {"phase": "decode", "coefficients": {"fixed": NaN}, '
    '"band_frac": 0.1}}}}', "[" * 5000, '{"version": 1', '"just a string"',
])
def test_a_damaged_saved_fit_means_not_calibrated(damage: str, tmp_path: Path) -> None:
    """Issue #29: damaged saved fits gave tracebacks (or NaN figures). One is read as no fit at all."""
    from app.predict.machine_fit.calibration_store import fit_path, llama_build
    from app.telemetry.machine import ProbeMode, scan_machine

    facts = scan_machine(ProbeMode.NONE).run_facts()
    path = fit_path(str(facts.get("cpu_model") or ""), str(facts.get("gpu_info") or ""), llama_build())
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(damage.replace('"cpu_info": "x"', json.dumps(str(facts.get("cpu_model") or "")).join(
        ['"cpu_info": ', ""])))
    model = tmp_path / "m.gguf"
    from tests.gguf_synth import write_synthetic_gguf

    write_synthetic_gguf(model)
    proc = gguf_bench("predict", "-m", str(model), "--json")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["decode"]["kind"] != "fit" and doc["decode_ceiling_tps"] > 0


def test_negative_or_absurd_token_counts_from_a_server_are_not_believed() -> None:
    from engines.openai_http import _int_or_none

    assert [_int_or_none(v) for v in (5, 0, -3, 10**30, True, "7", 2.0)] == [5, 0, None, None, None, None, None]
