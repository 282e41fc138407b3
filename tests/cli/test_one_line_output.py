"""Issue #54 item 6: an error, a warning and a progress line are one line whatever the names in them hold (a newline
in --out, a source name or a model path made a one-line error two lines and broke the progress line), and an error
quotes at most a short prefix of what it rejects (a 10 MB wrong-typed TOML value was echoed whole; a 5,001-digit
TOML number was an internal error, exit 70)."""

from __future__ import annotations

import io
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from app.cli.main import main
from app.cli.progress import Progress, write_progress
from app.results.row_types import ResultRow
from app.run.events import ModelLoaded, Notice, TestFailed
from app.shown_text import MAX_LINE_CHARS, one_line, quoted


def _err_lines(argv: list[str], capsys: pytest.CaptureFixture[str], rc: int = 2) -> list[str]:
    assert main(argv) == rc
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err, err
    return err.splitlines()


def test_a_newline_in_out_keeps_the_error_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "a\nb" / "missing" / "r.csv"
    lines = _err_lines(["run", "-m", str(tmp_path / "m.gguf"), "--out", str(out)], capsys)
    assert len(lines) == 1 and "a\\x0ab" in lines[0] and "does not exist" in lines[0], lines


def test_a_newline_in_a_model_path_keeps_the_error_one_line(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    lines = _err_lines(["inspect", str(tmp_path / "two\nlines.gguf")], capsys)
    assert len(lines) == 1 and "two" in lines[0] and "lines.gguf" in lines[0], lines


def test_a_source_name_with_a_newline_is_skipped_in_one_line(make_gguf: Callable[..., Path], tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    good = make_gguf("good.gguf")
    bad = tmp_path / "bad\nname.gguf"
    bad.write_bytes(b"not a model")
    assert main(["choose", str(good), str(bad), "--hw", "RTX 4060 Laptop"]) == 0
    err = capsys.readouterr().err
    skipped = [ln for ln in err.splitlines() if "skipped" in ln]
    assert len(skipped) == 1 and "bad\\x0aname.gguf" in skipped[0], err
    assert not [ln for ln in err.splitlines() if ln.startswith("name.gguf")], err


def test_a_huge_wrong_typed_toml_value_is_quoted_by_a_short_prefix(make_gguf: Callable[..., Path], tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    model = make_gguf()
    preset = tmp_path / "big.toml"
    preset.write_text('[sweep]\nn_prompt = "' + "x" * 1_000_000 + '"\n')  # 10 MB was echoed whole
    (line,) = _err_lines(["run", "-m", str(model), "--sweep", str(preset)], capsys)
    assert len(line) < 400 and "n_prompt value 'xxx" in line and "(1,000,000 characters) is not an integer" in line
    digits = tmp_path / "digits.toml"
    digits.write_text("[sweep]\nn_prompt = 1" + "0" * 5000 + "\n")
    (line,) = _err_lines(["run", "-m", str(model), "--sweep", str(digits)], capsys)
    assert "digits.toml: not valid TOML" in line and len(line) < 400


def test_the_progress_line_stays_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    progress = Progress(2)
    progress(ModelLoaded(t_ns=0, model_path="/models/a\nb\x1b[2J.gguf", load_ms=12.0, n_gpu_layers_requested=0,
                         n_gpu_layers_effective=0, backends="CPU"))
    progress(Notice(t_ns=0, message="a note\nover two lines"))
    progress(TestFailed(t_ns=0, test_index=0, reason="llama.cpp said:\nGGML_ASSERT(x) failed", row=ResultRow()))
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 3, lines
    assert "loaded a\\x0ab\\x1b[2J.gguf" in lines[0] and "note: a note\\x0aover two lines" in lines[1]
    assert "FAILED: llama.cpp said:\\x0aGGML_ASSERT(x) failed" in lines[2]


def test_write_progress_and_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    buf = io.StringIO()
    monkeypatch.setattr(sys, "stderr", buf)
    write_progress("[1/2] a\nb.gguf: 3.0 tok/s", final=True, tty=True)
    assert buf.getvalue() == "\r\x1b[K[1/2] a\\x0ab.gguf: 3.0 tok/s\n"
    long = one_line("x" * 10_000)
    assert len(long) < MAX_LINE_CHARS + 60 and "characters cut" in long
    assert quoted("y" * 10_000).endswith("… (10,000 characters)") and quoted(10**5000).startswith("an integer of")
