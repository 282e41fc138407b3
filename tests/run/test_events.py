"""The event stream contract: every event survives JSON, versions are checked."""

from __future__ import annotations

import json

import pytest

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
        ev.TestFinished(t_ns=8, test_index=0, row={"decode_tps": 12.5, "model_filename": 'a "b", c.gguf'}),
        ev.TestFailed(t_ns=9, test_index=1, reason="x: out of memory", row={"status": "failed"}),
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
