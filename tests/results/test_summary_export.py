"""The short "summary" CSV: key columns first, sizes in MiB, plain decimals, no per-repetition samples."""

from __future__ import annotations

import csv
import io

from app.cli.main import build_parser
from app.results import export
from app.results.fields import FIELDS, SUMMARY_FIELDS


def test_summary_columns_come_from_the_field_table_in_order() -> None:
    cols = export.summary_columns()
    assert cols[:5] == ["run_id", "test_index", "model_filename", "hw_profile", "status"]
    assert [f.summary for f in SUMMARY_FIELDS] == list(range(len(SUMMARY_FIELDS)))
    assert all(f.name in FIELDS for f in SUMMARY_FIELDS) and len(cols) < 40
    assert {"model_size_mib", "mem_measured_mib", "pred_mem_mib"} <= set(cols)
    assert not any(c.startswith("samples") or "_samples_" in c for c in cols)
    assert cols.index("ttft_ms") + 2 == cols.index("pred_ttft_ms")  # measured beside predicted


def test_summary_cells_are_plain_decimals_and_mib() -> None:
    row = {"model_size": 144_811_072, "ttft_ms": 1234.56789, "decode_achieved_frac": 0.83125,
           "pred_mem_bytes": 3.2e9, "decode_tps": 12345678.9, "samples_ns": [1, 2], "unstable": True,
           "model_filename": "a,b.gguf"}
    header, values = list(csv.reader(io.StringIO(export.to_summary_csv([row]))))
    cell = dict(zip(header, values, strict=True))
    assert cell["model_size_mib"] == "138.1" and cell["pred_mem_mib"] == "3051.8"
    assert cell["ttft_ms"] == "1234.6" and cell["decode_achieved_frac"] == "0.831"
    assert cell["decode_tps"] == "12345678.90"  # never 1.23457e+07
    assert cell["unstable"] == "1" and cell["model_filename"] == "a,b.gguf" and cell["error"] == ""
    assert export.render([row], "summary") == export.to_summary_csv([row])


def test_the_cli_offers_the_summary_output() -> None:
    args = build_parser().parse_args(["export", "last", "-o", "summary"])
    assert args.output == "summary"
    assert build_parser().parse_args(["run", "-o", "summary"]).output == "summary"
