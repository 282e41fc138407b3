"""The event stream contract: every event survives JSON, versions are checked."""

from __future__ import annotations

import json

import pytest

from app.paths import REPO_ROOT
from app.results.row_types import QualityRow, QuantizeRow, ResultRow
from app.run import events as ev
from app.run.plan import RemoteTest, TestSpec


def _samples() -> list[ev.Event]:
    return [
        ev.SweepStarted(t_ns=1, n_tests=2, tests=[TestSpec("/m.gguf", n_prompt=8),
                                                   RemoteTest("http://h:8080", "m", 8, 4, 2, 8, rate_rps=2.5)],
                        software={"build_commit": "abc"}),
        ev.Notice(t_ns=2, message="no GPU backend"),
        ev.ModelLoaded(t_ns=3, model_path="/m.gguf", load_ms=12.5, n_gpu_layers_requested=99,
                       n_gpu_layers_effective=0, backends="CPU"),
        ev.TestStarted(t_ns=4, test_index=0, test=TestSpec("/m.gguf", n_prompt=8)),
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


def test_a_test_is_decoded_into_its_typed_record_by_its_shape() -> None:
    local, remote = TestSpec("/m.gguf", n_prompt=8, flash_attn=0), RemoteTest("http://h", "qwen", 64, 16, 4, 16)
    for test in (local, remote):
        back = ev.event_from_json(ev.TestStarted(t_ns=1, test_index=0, test=test).to_json())
        assert isinstance(back, ev.TestStarted) and back.test == test and type(back.test) is type(test)
    assert json.loads(ev.TestStarted(t_ns=1, test_index=0, test=remote).to_json())["test"]["n_parallel"] == 4
    # a quality job's file and a quantize job's output are no timed tests: kept as the job wrote them
    quantize = {"src": "/a-f16.gguf", "dst": "/a-q4_0.gguf", "part": "/a-q4_0.gguf.1-ab.part", "type": "q4_0",
                "allow_requantize": False, "metadata": {"quantize.from": "F16"}}
    for item in ({"model_path": "/m.gguf"}, quantize):
        line = json.dumps({"v": 1, "type": "test_started", "t_ns": 1, "test_index": 0, "test": item})
        back = ev.event_from_json(line)
        assert back == ev.TestStarted(t_ns=1, test_index=0, test=ev.JobItem(item)) and back.to_json() == \
            ev.TestStarted(t_ns=1, test_index=0, test=ev.JobItem(item)).to_json()
        assert json.loads(back.to_json())["test"] == item


def test_a_tests_value_of_the_wrong_type_is_one_line_naming_the_field() -> None:
    d = json.loads(ev.TestStarted(t_ns=1, test_index=0, test=TestSpec("/m.gguf")).to_json())
    d["test"]["n_gen"] = "16"
    with pytest.raises(ev.EventDecodeError) as e:
        ev.event_from_dict(d)
    assert str(e.value) == "test_started: a test's n_gen is str '16', not int"
    for key, value, says in (("type_k", 8, "a test's type_k is int 8, not str"),
                             ("n_prompt", True, "a test's n_prompt is bool True, not int"),
                             ("flash_attn", 7, "a test's flash_attn: 7 is not on, off or auto"),
                             ("n_cpu_moe", -5, "a test's n_cpu_moe: a count is 0 to")):
        bad = {**d["test"], "n_gen": 16, key: value}
        with pytest.raises(ev.EventDecodeError, match=f"^test_started: {says}"):
            ev.event_from_dict({**d, "test": bad})
    with pytest.raises(ev.EventDecodeError, match="^test_started: a test is list, not a table$"):
        ev.event_from_dict({**d, "test": [1]})
    s = json.loads(ev.SweepStarted(t_ns=1, n_tests=1, tests=[RemoteTest("http://h", "m", 8, 4, 2, 8)]).to_json())
    s["tests"][0]["concurrency"] = "2"
    with pytest.raises(ev.EventDecodeError, match="^sweep_started: a test's concurrency is str '2', not int$"):
        ev.event_from_dict(s)
    s["tests"][0] = {"n_prompt": 8}  # a sweep's test names its model
    with pytest.raises(ev.EventDecodeError, match="^sweep_started: a test has no model_path$"):
        ev.event_from_dict(s)


def test_an_earlier_versions_log_decodes_to_the_typed_tests() -> None:
    from app.run.replay import read_event_stream

    events = read_event_stream(REPO_ROOT / "tests" / "gui" / "data" / "smollm2_small_sweep.jsonl")
    start = next(e for e in events if isinstance(e, ev.SweepStarted))
    assert all(isinstance(t, TestSpec) for t in start.tests) and [t.n_depth for t in start.tests] == [0, 0, 64, 64]
    first = start.tests[0]  # written before repack, -ncmoe, -ot and -nkvo, with flash attention as a bool
    assert (first.flash_attn, first.repack, first.n_cpu_moe, first.tensor_buft_overrides) == (0, -1, 0, "none")
    started = [e.test for e in events if isinstance(e, ev.TestStarted)]
    assert started == start.tests
    # a remote server's test as earlier versions wrote it: no depth or prefix cache yet, model_path and n_parallel
    old = {"endpoint": "http://127.0.0.1:8080", "served_model": "qwen", "n_prompt": 512, "n_gen": 128,
           "concurrency": 4, "n_requests": 16, "rate_rps": None, "model_path": "qwen", "n_parallel": 4}
    back = ev.event_from_dict({"v": 1, "type": "test_started", "t_ns": 1, "test_index": 0, "test": old})
    assert back.test == RemoteTest("http://127.0.0.1:8080", "qwen", 512, 128, 4, 16)  # type: ignore[attr-defined]
