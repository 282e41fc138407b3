"""The event stream contract: every event survives JSON, versions are checked."""

from __future__ import annotations

import json

import pytest

from app.results.row_types import QualityRow, QuantizeRow, ResultRow
from app.run import events as ev


def _samples() -> list[ev.Event]:
    return [
        ev.SweepStarted(t_ns=1, n_tests=2, tests=[{"n_prompt": 8}], software={"build_commit": "abc"}),
        ev.Notice(t_ns=2, message="no GPU backend"),
        ev.ModelLoaded(t_ns=3, model_path="/m.gguf", load_ms=12.5, n_gpu_layers_requested=99,
                       n_gpu_layers_effective=0, backends="CPU"),
        ev.TestStarted(t_ns=4, test_index=0, test={"n_prompt": 8}),
        ev.RepetitionStarted(t_ns=5, test_index=0, rep=-1),
        ev.TokenTick(t_ns=6, test_index=0, rep=0, token_index=3, n_past=12),
        ev.PhaseResult(t_ns=7, test_index=0, rep=0, phase="prefill", n_tokens=8, start_ns=1, end_ns=5),
        ev.TestFinished(t_ns=8, test_index=0, row=ResultRow(decode_tps=12.5, model_filename='a "b", c.gguf')),
        ev.TestFailed(t_ns=9, test_index=1, reason="x: out of memory", row=ResultRow(status="failed")),
        ev.TelemetrySample(t_ns=10, values={"rss_bytes": 1.0, "power_w": None}),
        ev.SweepFinished(t_ns=11, n_ok=1, n_failed=1),
        ev.WorkerError(t_ns=12, message="boom"),
        ev.JobProgress(t_ns=13, item_index=1, done=5, total=272, label="blk.0.attn_q.weight"),
    ]


def test_every_event_type_round_trips() -> None:
    samples = _samples()
    assert {type(e) for e in samples} == set(ev.EVENT_TYPES.values())
    for e in samples:
        line = e.to_json()
        assert "\n" not in line
        assert json.loads(line)["v"] == ev.SCHEMA_VERSION
        assert ev.event_from_json(line) == e


def test_other_schema_versions_and_junk_are_refused() -> None:
    d = json.loads(ev.Notice(t_ns=1, message="m").to_json())
    d["v"] = ev.SCHEMA_VERSION + 1
    with pytest.raises(ev.EventDecodeError, match="version"):
        ev.event_from_dict(d)
    with pytest.raises(ev.EventDecodeError):
        ev.event_from_json("not json")
    with pytest.raises(ev.EventDecodeError, match="unknown event type"):
        ev.event_from_json('{"v": 1, "type": "nope", "t_ns": 0}')


def test_unknown_extra_keys_are_ignored() -> None:
    d = json.loads(ev.Notice(t_ns=1, message="m").to_json())
    d["added_in_a_later_minor"] = 1
    assert ev.event_from_dict(d) == ev.Notice(t_ns=1, message="m")


def test_a_row_event_carries_its_typed_row_and_names_a_jobs_table() -> None:
    sweep = ev.TestFinished(t_ns=1, test_index=0, row=ResultRow(test_index=0, status="ok", decode_tps=9.5))
    assert "table" not in json.loads(sweep.to_json())  # a sweep's rows are written as they always were
    back = ev.event_from_json(sweep.to_json())
    assert isinstance(back, ev.TestFinished) and isinstance(back.row, ResultRow) and back.row.decode_tps == 9.5
    for row in (QualityRow(model_index=1, ppl=12.5, is_reference=False), QuantizeRow(output_index=2, type="q4_0")):
        line = ev.TestFailed(t_ns=1, test_index=0, reason="r", row=row).to_json()
        assert json.loads(line)["table"] == row.KIND and ev.event_from_json(line).row == row  # type: ignore[attr-defined]


def test_a_rows_value_of_the_wrong_type_is_one_line_naming_the_field() -> None:
    d = json.loads(ev.TestFinished(t_ns=1, test_index=0, row=ResultRow(decode_tps=9.5)).to_json())
    d["row"]["n_gen"] = "128"
    with pytest.raises(ev.EventDecodeError) as e:
        ev.event_from_dict(d)
    assert str(e.value) == "test_finished: result row: n_gen: str '128' where the field table has int"
    d["row"] = {"ppl": "low"}
    d["table"] = "quality"
    with pytest.raises(ev.EventDecodeError, match="^test_finished: quality row: ppl: str 'low' where"):
        ev.event_from_dict(d)
    d["table"] = "nope"
    with pytest.raises(ev.EventDecodeError, match="a row of table 'nope', not one of result, quality, quantize"):
        ev.event_from_dict(d)
