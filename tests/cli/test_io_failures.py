"""Issue #44 point 4 (a full disk, a closed stdout, an ASCII terminal) and the names printed raw of point 3: one line
saying what failed, the sweep goes on, nothing measured is lost; control characters in a name never reach the
terminal as such."""

from __future__ import annotations

import contextlib
import errno
import gzip
import io
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from app.paths import REPO_ROOT
from app.results.row_types import ResultRow
from app.run.events import Notice, TestFinished


def test_control_characters_are_escaped_and_the_progress_erase_kept() -> None:
    from app.cli.terminal import escape_controls

    assert escape_controls("evil\x1b]0;owned\x07\x1b[2J.gguf") == "evil\\x1b]0;owned\\x07\\x1b[2J.gguf"
    assert escape_controls("\r\x1b[K[##  ] 1/2 a\x9bb\u202egnp.gguf\n") == "\r\x1b[K[##  ] 1/2 a\\x9bb\\u202egnp.gguf\n"
    assert escape_controls("tab\tand newline\n stay; é ünïcode too") == "tab\tand newline\n stay; é ünïcode too"


def test_a_file_name_with_escape_codes_is_printed_escaped(make_gguf: Callable[..., Path],
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    from app.cli.main import main

    model = make_gguf("evil\x1b[2J\x1b]0;title\x07.gguf")
    assert main(["inspect", str(model)]) == 0
    out, err = capsys.readouterr()
    assert "\x1b" not in out + err and "\x07" not in out + err
    assert "evil\\x1b[2J\\x1b]0;title\\x07.gguf" in out


def test_a_stream_that_cannot_encode_a_name_gets_it_escaped() -> None:
    from app.cli.terminal import GuardedStream

    raw = io.TextIOWrapper(io.BytesIO(), encoding="ascii")
    stream = GuardedStream(raw, "stdout")  # type: ignore[arg-type]
    stream.write("| modèl-ünï.gguf | 12.5 |\n")
    raw.seek(0)
    assert raw.buffer.getvalue() == b"| mod\\xe8l-\\xfcn\\xef.gguf | 12.5 |\n"  # type: ignore[attr-defined]


class _Full(io.RawIOBase):
    """A file on a full disk: every write fails with ENOSPC."""

    def writable(self) -> bool:
        return True

    def write(self, b: object) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")


def test_a_stdout_that_fails_is_said_once_and_the_rest_dropped(capsys: pytest.CaptureFixture[str]) -> None:
    from app.cli.terminal import GuardedStream, Output

    said = Output("gguf-bench")
    stream = GuardedStream(io.TextIOWrapper(_Full(), encoding="utf-8"), "stdout", said.lost)  # type: ignore[arg-type]
    stream.write("a row\n")
    stream.write("another row\n")
    stream.flush()
    err = capsys.readouterr().err
    assert said.stdout_lost == "No space left on device"
    assert err.count("cannot write to stdout (No space left on device)") == 1 and len(err.splitlines()) == 1


def test_an_event_log_on_a_full_disk_is_dropped_with_one_reason(tmp_path: Path) -> None:
    from app.run.session import EventLog

    path = tmp_path / "run.events.jsonl.gz"
    path.write_bytes(b"")
    raw = io.BufferedWriter(_Full())  # as open(path, "wb") gives: the disk is met when the buffer is written
    log = EventLog(path, raw, gzip.GzipFile(fileobj=raw, mode="wb"))
    big = Notice(t_ns=0, message="x" * 100_000)  # more than gzip buffers: the write reaches the disk
    first = log.write(big, flush=True)
    assert "cannot write" in first or "cannot be written" in first, first
    assert "No space left on device" in first and "\n" not in first
    assert log.write(TestFinished(t_ns=0, test_index=0, row=ResultRow()), flush=True) == ""  # said once
    log.close()
    assert not path.exists()  # a cut gzip stream would replay as nothing: removed


def test_a_store_that_cannot_keep_results_warns_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from app.results.pending_rows import PendingRows
    from app.results.store import ResultStore

    warnings: list[str] = []
    store = ResultStore.recover(tmp_path / "s.sqlite3", warn=warnings.append, write_attempts=1)

    def full(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(PendingRows, "append", full)
    store._db.close()  # every write now fails: the store is gone from under it
    for i in range(5):
        store.add_result("run", ResultRow(test_index=i, status="ok"))
    assert len(warnings) == 1 and "only in this run's output" in warnings[0], warnings


def _bench(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
           shell_redirect: str = "") -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), **(env or {})}
    command = [sys.executable, "-m", "app.cli.main", *args]
    if shell_redirect:
        quoted = " ".join(f"'{c}'" for c in command)
        return subprocess.run(["bash", "-c", f"exec {quoted} {shell_redirect}"], capture_output=True, text=True,
                              env=full_env, cwd=cwd, timeout=300)
    return subprocess.run(command, capture_output=True, text=True, env=full_env, cwd=cwd, timeout=300)


@pytest.mark.heavy  # the CLI in a subprocess, stdout closed
def test_a_closed_stdout_is_one_line_and_never_a_traceback(make_gguf: Callable[..., Path]) -> None:
    model = make_gguf("m.gguf")
    proc = _bench("inspect", str(model), shell_redirect=">&-")
    assert "Traceback" not in proc.stderr and proc.returncode == 1, proc.stderr
    assert proc.stderr.count("stdout is closed") == 1 and len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.heavy  # a sweep in a worker
def test_an_ascii_terminal_keeps_the_results_table(tmp_path: Path, smollm2_path: Path) -> None:
    model = tmp_path / "SmolLM2-modèle-ünï\u2603.gguf"
    model.symlink_to(smollm2_path)
    proc = _bench("run", "-m", str(model), "-p", "8", "-n", "2", "-r", "1", "--no-predict", "-o", "md",
                  env={"PYTHONIOENCODING": "ascii"})
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert "SmolLM2-mod\\xe8le-\\xfcn\\xef\\u2603.gguf" in proc.stdout and "| ok " in proc.stdout.replace("|ok", "| ok")


@pytest.mark.heavy  # a sweep in a worker, stdout closed: the rows are in the store
def test_a_sweep_with_stdout_closed_keeps_its_rows(tmp_path: Path, smollm2_path: Path) -> None:
    store = tmp_path / "r.sqlite3"
    proc = _bench("--store", str(store), "run", "-m", str(smollm2_path), "-p", "8", "-n", "2", "-r", "1",
                  "--no-predict", "-q", shell_redirect=">&-")
    assert "Traceback" not in proc.stderr and proc.returncode == 1, proc.stderr
    listed = _bench("--store", str(store), "history", "--json")
    assert '"n_ok": 1' in listed.stdout, listed.stdout


@contextlib.contextmanager
def _nearly_full_disk(tmp_path: Path, free_kib: int) -> Iterator[Path]:
    """A small tmpfs with ``free_kib`` KiB left (root only: skipped where it cannot be mounted)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("needs root to mount a small tmpfs")
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.decode()[:100]}")
    try:
        total = shutil.disk_usage(mount).total
        (mount / "filler").write_bytes(b"\0" * (total - free_kib * 1024))
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


@pytest.mark.heavy  # a sweep in a worker on a disk that fills
def test_a_data_dir_that_fills_mid_sweep(tmp_path: Path, smollm2_path: Path, isolated_data_dir: Path) -> None:
    with _nearly_full_disk(tmp_path, free_kib=120) as disk:
        data = disk / "data"
        shutil.copytree(isolated_data_dir, data)  # the repack verdict: no probe
        proc = _bench("run", "-m", str(smollm2_path), "-p", "8", "-n", "8,16,32,64", "-r", "1", "--no-predict",
                      "-o", "csv", "-q", env={"GGUF_WORKBENCH_DATA_DIR": str(data)})
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode in (0, 1), proc.stderr
    rows = [line for line in proc.stdout.splitlines()[1:] if line.strip()]
    assert len(rows) == 4, proc.stdout  # every test measured and printed: none lost to the full disk
    assert len(proc.stderr.strip().splitlines()) <= 3, proc.stderr
