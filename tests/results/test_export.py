"""One field table to CSV/JSON/JSONL/markdown; CSV survives awkward file names."""

from __future__ import annotations

import json

import pytest

from app.results import export
from app.results.fields import FIELDS

AWKWARD = ['with,comma.gguf', 'with "quotes".gguf', "with spaces .gguf", "ünïcødé-模型.gguf", "new\nline.gguf"]


def _rows() -> list[dict]:
    return [{"model_filename": name, "model_path": f"/models/{name}", "n_prompt": 128, "decode_tps": 12.3456789,
             "samples_ns": [1, 2, 3], "status": "ok", "test_index": i, "custom_extra": "x"}
            for i, name in enumerate(AWKWARD)]


def test_csv_round_trip_with_awkward_names() -> None:
    rows = _rows()
    text = export.to_csv(rows)
    back = export.read_csv(text)
    assert [r["model_filename"] for r in back] == AWKWARD
    assert [r["model_path"] for r in back] == [r["model_path"] for r in rows]
    assert back[0]["decode_tps"] == "12.3457"
    assert back[0]["samples_ns"] == "1 2 3"


def test_csv_columns_are_stable_and_extras_follow() -> None:
    header = export.to_csv(_rows(), all_columns=True).splitlines()[0].split(",")
    assert header[: len(FIELDS)] == list(FIELDS)
    assert header[len(FIELDS):] == ["custom_extra"]
    assert len(set(FIELDS)) == len(FIELDS)


def test_json_and_jsonl_keep_types() -> None:
    rows = _rows()
    data = json.loads(export.to_json(rows))
    assert data[1]["model_filename"] == AWKWARD[1]
    assert data[0]["samples_ns"] == [1, 2, 3]
    lines = export.to_jsonl(rows).splitlines()
    assert len(lines) == len(rows)
    assert json.loads(lines[3])["model_filename"] == AWKWARD[3]


def test_markdown_escapes_pipes_and_newlines() -> None:
    md = export.to_markdown([{"model_filename": "a|b\nc.gguf", "decode_tps": 1.0}])
    assert "a\\|b c.gguf" in md
    assert md.count("\n") == 3


def test_nan_is_empty_in_csv_and_null_in_json() -> None:
    rows = [{"decode_tps": float("nan")}]
    assert export.read_csv(export.to_csv(rows))[0]["decode_tps"] == ""
    assert json.loads(export.to_json(rows))[0]["decode_tps"] is None


def test_unknown_format_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown output format"):
        export.render([], "xlsx")


def test_markdown_of_a_sample_row_is_unchanged() -> None:
    row = {"model_filename": "SmolLM2-135M-Instruct.Q4_1.gguf", "n_prompt": 64, "n_gen": 16, "n_depth": 0,
           "n_parallel": 1, "n_gpu_layers": 99, "backends": "CPU", "type_k": "f16", "flash_attn": 0,
           "ttft_ms": 41.234567, "prefill_tps": 1552.1, "decode_tps": 88.456, "tpot_ms": 11.305, "itl_p99_ms": 14.0,
           "unstable": 1, "status": "ok", "error_kind": "", "flash_attn_effective": 0, "samples_ns": [1, 2]}
    failed = {"model_filename": "big.gguf", "n_prompt": 512, "status": "failed", "error_kind": "out_of_memory"}
    assert export.to_markdown([row, failed]) == (
        "| model_filename | n_prompt | n_gen | n_depth | n_parallel | n_gpu_layers | backends | type_k | flash_attn"
        " | ttft_ms | prefill_tps | decode_tps | tpot_ms | itl_p99_ms | unstable | status |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
        "| SmolLM2-135M-Instruct.Q4_1.gguf | 64 | 16 | 0 | 1 | 99 | CPU | f16 | 0 | 41.23 | 1552.10 | 88.46 | 11.30"
        " | 14.00 | 1 | ok |\n"
        "| big.gguf | 512 |  |  |  |  |  |  |  |  |  |  |  |  |  | failed |\n"
    )
