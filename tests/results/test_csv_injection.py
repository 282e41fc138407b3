"""Issue #54 item 4: every CSV cell a spreadsheet would run as a formula (beginning with ``=``, ``+``, ``-``, ``@``,
a tab or a carriage return: OWASP's CSV injection rule) is written behind a single quote, whatever the row came from
(measured, an imported llama-bench CSV or JSON, a flag such as ``import --gpu``); numbers stay numbers. A published
file with formula cells was imported and exported with 28 such cells unescaped."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from app.cli.main import main
from app.results import export
from app.shown_text import cell_text, spreadsheet_cell

DATA = Path(__file__).parent / "data" / "llama_bench"
FORMULAS = {"cpu_info": '=HYPERLINK("http://x","y")', "gpu_info": "+cmd|' /C calc'!A0",
            "model_type": "-2+3+cmd|' /C calc'!A0", "model_filename": "@SUM(1+1)*cmd|' -C calc'!A0",
            "test_time": "\t=1+1"}


@pytest.mark.parametrize(("text", "written"), [
    ("=SUM(A1)", "'=SUM(A1)"), ("+A1", "'+A1"), ("-A1", "'-A1"), ("@SUM(1)", "'@SUM(1)"), ("\t=1", "'\t=1"),
    ("\r=1", "'\r=1"), ("-", "'-"), ("-inf", "'-inf"), ("'=A1", "''=A1"),
    ("-5.25", "-5.25"), ("+3", "+3"), ("-1e-05", "-1e-05"), ("12", "12"), ("1-2", "1-2"), ("a=b", "a=b"), ("", ""),
])
def test_a_cell_is_escaped_only_where_a_spreadsheet_would_run_it(text: str, written: str) -> None:
    assert spreadsheet_cell(text) == written
    assert cell_text(written) == text  # read back as it was


def _published(tmp_path: Path) -> tuple[Path, Path]:
    """The published llama-bench CSV and JSON with formula cells in every text column an attacker controls."""
    rows = list(csv.DictReader(io.StringIO((DATA / "smollm2_cpu.csv").read_text())))
    for row in rows:
        row.update(FORMULAS)
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    bad_csv = tmp_path / "published.csv"
    bad_csv.write_text(out.getvalue())
    records = json.loads((DATA / "smollm2_cpu.json").read_text())
    for record in records:
        record.update(FORMULAS)
        del record["gpu_info"]  # given by --gpu instead
    bad_json = tmp_path / "published.json"
    bad_json.write_text(json.dumps(records))
    return bad_csv, bad_json


def _cells(text: str) -> list[str]:
    return [c for row in csv.reader(io.StringIO(text)) for c in row]


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def test_imported_formula_cells_are_exported_escaped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad_csv, bad_json = _published(tmp_path)
    assert main(["import", str(bad_csv)]) == 0
    assert main(["import", str(bad_json), "--gpu", "@SUM(1)"]) == 0
    capsys.readouterr()
    runs = json.loads(_out(capsys, ["history", "--json"]))
    for run in runs:
        for fmt in ("csv", "csv-all", "summary"):
            out = tmp_path / f"{run['run_id']}.{fmt}"
            assert main(["export", run["run_id"], "-o", fmt, "--out", str(out)]) == 0
            cells = _cells(out.read_text())
            assert not [c for c in cells if c[:1] in "=+-@\t\r" and c and not _is_number(c)], fmt
            assert any(c.startswith("-") for c in cells if _is_number(c)) or fmt == "summary"  # numbers stay
        back = export.read_csv((tmp_path / f"{run['run_id']}.csv").read_text())
        for name, text in FORMULAS.items():
            assert {row[name] for row in back} == {"@SUM(1)" if name == "gpu_info" and len(back) > 3 else text}


def _out(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 0
    return capsys.readouterr().out


def test_every_csv_writer_escapes_a_header_and_its_cells() -> None:
    """The field-table CSV (runs, quality, quantize and the chooser's table use it) and the summary CSV."""
    rows = [{"model_filename": "=1+1", "n_prompt": -5, "decode_tps": -1.5, "=extra": "@x"}]
    cells = _cells(export.to_csv(rows))
    assert "'=extra" in cells and "'=1+1" in cells and "'@x" in cells and "-5" in cells and "-1.5" in cells
    assert "'=1+1" in _cells(export.to_summary_csv(rows))
