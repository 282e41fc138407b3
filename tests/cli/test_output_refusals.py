"""Issue #54 item 2: no output flag writes over a model (another one than the command reads: those were guarded
already), a symbolic link to one, a FIFO or a device. Each output flag onto each is refused in one line with exit 2,
before anything runs, and the model's bytes are unchanged. The commands run in this process (the refusal comes before
any worker or subprocess)."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from app.cli.main import main
from app.predict.machine_fit.calibration_fit import MachineFit
from app.predict.machine_fit.calibration_store import fit_path, save_fit
from tests.gguf_synth import write_synthetic_gguf

LLAMA_BENCH_CSV = Path(__file__).parents[1] / "results" / "data" / "llama_bench" / "smollm2_cpu.csv"


def _digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A model the command does not read: the one an output flag must not replace."""
    return write_synthetic_gguf(tmp_path / "B.gguf")


@pytest.fixture
def model(tmp_path: Path) -> Path:
    return write_synthetic_gguf(tmp_path / "A.gguf")


def _targets(victim: Path) -> dict[str, tuple[Path, str]]:
    """Each kind of target an output must refuse, and what its one line says."""
    link, fifo = victim.with_name("link-to-B.csv"), victim.with_name("pipe.csv")
    if not link.is_symlink():
        link.symlink_to(victim)
        os.mkfifo(fifo)
    return {"model": (victim, "is a GGUF model"), "link": (link, "is a GGUF model (through a symbolic link)"),
            "fifo": (fifo, "is a FIFO (named pipe), not a regular file"),
            "device": (Path("/dev/null"), "is a character device, not a regular file")}


def _refused(argv: list[str], says: str, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(argv)
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert rc == 2, err
    assert len(lines) == 1 and says in lines[0] and "Traceback" not in err, err


def _each_target(victim: Path, capsys: pytest.CaptureFixture[str], argv: Callable[[str], list[str]],
                 flag: str) -> None:
    before = _digest(victim)
    for target, says in _targets(victim).values():
        _refused(argv(str(target)), f"{flag} {target}: {says}", capsys)
    assert _digest(victim) == before


def test_export_out(victim: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["import", str(LLAMA_BENCH_CSV)]) == 0
    capsys.readouterr()
    _each_target(victim, capsys, lambda out: ["export", "last", "-o", "csv", "--out", out], "--out")


def test_run_out_and_telemetry(model: Path, victim: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = ["run", "-m", str(model), "-p", "8", "-n", "2", "-r", "1"]
    _each_target(victim, capsys, lambda out: [*run, "-o", "csv", "--out", out], "--out")
    _each_target(victim, capsys, lambda out: [*run, "--telemetry", out], "--telemetry")


def test_quality_out(model: Path, victim: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = tmp_path / "text.txt"
    text.write_text("word " * 400)
    second = write_synthetic_gguf(tmp_path / "A2.gguf")
    quality = ["quality", "-m", str(model), "-m", str(second), "--text", str(text)]
    _each_target(victim, capsys, lambda out: [*quality, "-o", "csv", "--out", out], "--out")


def test_quantize_table_out(victim: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f16 = write_synthetic_gguf(tmp_path / "F16.gguf", file_type=1)
    quantize = ["quantize", "-m", str(f16), "--types", "q8_0", "--out", str(tmp_path / "outs")]
    _each_target(victim, capsys, lambda out: [*quantize, "-o", "csv", "--table-out", out], "--table-out")
    assert not (tmp_path / "outs").exists()


def test_quantize_out_folder(victim: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f16 = write_synthetic_gguf(tmp_path / "F16.gguf", file_type=1)
    before = _digest(victim)
    targets = _targets(victim)
    for name, says in (("model", "is a GGUF model, not a folder"), ("link", "is a GGUF model, not a folder"),
                       ("fifo", "is a FIFO (named pipe), not a folder"),
                       ("device", "is a character device, not a folder")):
        target = targets[name][0]
        _refused(["quantize", "-m", str(f16), "--types", "q8_0", "--out", str(target)], f"--out {target}: {says}",
                 capsys)
    assert _digest(victim) == before


def test_quantize_force_never_replaces_a_link_or_a_fifo_named_as_an_output(
        victim: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f16 = write_synthetic_gguf(tmp_path / "F16.gguf", file_type=1)
    outs = tmp_path / "outs"
    outs.mkdir()
    (outs / "F16.Q8_0.gguf").symlink_to(victim)
    _refused(["quantize", "-m", str(f16), "--types", "q8_0", "--force", "--out", str(outs)], "not a regular file",
             capsys)
    hard = outs / "F16.Q8_0.gguf"
    hard.unlink()
    os.link(f16, hard)  # the source itself under the output's name
    _refused(["quantize", "-m", str(f16), "--types", "q8_0", "--force", "--out", str(outs)], "is the source file",
             capsys)


def test_the_store_flag(victim: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--store`` onto a model, a link to one, a FIFO or a device: refused before SQLite opens it, whether the
    command reads the store (history, export, compare) or writes it (import)."""
    before = _digest(victim)
    targets = _targets(victim)
    for name, says in (("model", "is a GGUF model, not a results store"),
                       ("link", "is a GGUF model, not a results store"),
                       ("fifo", "is a FIFO (named pipe), not a results store"),
                       ("device", "is a character device, not a results store")):
        store = str(targets[name][0])
        for command in (["history"], ["export", "last"], ["compare", "last"], ["import", str(LLAMA_BENCH_CSV)]):
            _refused(["--store", store, *command], f"{store}: {says}", capsys)
    zero = ["--store", "/dev/zero", "history"]  # it said "no runs stored yet"
    _refused(zero, "/dev/zero: is a character device, not a results store", capsys)
    assert _digest(victim) == before


def test_a_saved_fit_never_replaces_a_model(isolated_data_dir: Path, tmp_path: Path) -> None:
    """The fit calibrate saves (in the data dir, where a FIFO is replaced rather than opened) is not written over a
    model found at its path."""
    fit = MachineFit("cpu X", "", "b", "2026-12-07", {"CPU": {}}, n_points=0)
    path = fit_path(fit.cpu_info, fit.gpu_info, fit.build)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_synthetic_gguf(path)
    before = _digest(path)
    with pytest.raises(OSError, match="is a GGUF model"):
        save_fit(fit)
    assert _digest(path) == before


def test_the_windows_screenshot(victim: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``gguf-workbench --screenshot`` and ``--compare-screenshot``: refused before any sweep runs or window opens."""
    from app.gui.main import main as window_main

    before = _digest(victim)
    for flag in ("--screenshot", "--compare-screenshot"):
        for target, says in _targets(victim).values():
            argv = ["--demo-run", flag, str(target)] if flag == "--screenshot" else [flag, str(target)]
            assert window_main(argv) == 2
            err = capsys.readouterr().err
            assert len(err.strip().splitlines()) == 1 and f"{flag} {target}: {says}" in err, err
    assert _digest(victim) == before


def test_an_out_that_fails_while_written_goes_to_stdout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Checked up front, then gone before the write (a disk that fills, a folder removed): the results follow on
    stdout, with one line saying why."""
    from app.cli.output import check_output_path, write_results

    folder = tmp_path / "gone"
    folder.mkdir()
    out = str(folder / "r.csv")
    check_output_path(out, "--out")
    folder.rmdir()
    assert write_results("a,b\n1,2\n", out) is False
    got = capsys.readouterr()
    assert got.out == "a,b\n1,2\n"
    assert got.err.strip() == (f"gguf-bench: error: --out {out}: cannot write (No such file or directory); the "
                               "results follow on stdout instead")
