"""Issue #44 point 3: a replay (``gguf-workbench --replay FILE``, a file anyone can send) is untrusted input. Each
hostile recording of the red-team round (one 400 MB line, values of 10**30, strings for numbers, JSON nested 100,000
deep, 200,000 token ticks in one test, NaN values) gives at most one line, no traceback, no hang: the reader
(app.run.replay) bounds lines and counts and types every value where it enters."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from app.paths import REPO_ROOT

RECORDED = REPO_ROOT / "tests" / "gui" / "data" / "smollm2_small_sweep.jsonl"


def _events() -> list[dict[str, Any]]:
    return [json.loads(line) for line in RECORDED.read_text().splitlines() if line.strip() and line[0] != "#"]


def _write(path: Path, events: list[dict[str, Any]], extra: str = "") -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in events) + extra)
    return path


def _huge(tmp: Path) -> Path:
    evs = _events()
    for e in evs:
        if e["type"] == "test_finished":
            e["row"].update(decode_tps=1e30, n_prompt=10**30)
        if e["type"] == "token_tick":
            e["n_past"] = 10**30
    return _write(tmp / "huge.jsonl", evs)


def _strings(tmp: Path) -> Path:
    evs = _events()
    for e in evs:
        if e["type"] == "sweep_started":
            for t in e["tests"]:
                t["n_gen"] = "16"
    return _write(tmp / "strings.jsonl", evs)


def _row_strings(tmp: Path) -> Path:
    evs = _events()
    for e in evs:
        if e["type"] == "test_finished":
            e["row"].update(decode_tps="fast", samples_ts=["a", "b"])
    return _write(tmp / "rowstrings.jsonl", evs)


def _sample_strings(tmp: Path) -> Path:
    evs = _events()
    for e in evs:
        if e["type"] == "telemetry_sample":
            e["values"]["rss_bytes"] = "big"
    return _write(tmp / "samplestrings.jsonl", evs)


def _nested(tmp: Path) -> Path:
    deep = "[" * 100_000 + "]" * 100_000
    return _write(tmp / "nested.jsonl", _events(), f'{{"v":1,"type":"notice","t_ns":1,"message":"x","level":{deep}}}\n')


def _nested_row(tmp: Path) -> Path:
    evs = _events()
    deep: Any = 1
    for _ in range(200):  # within what Python's JSON reader takes, far past what any row holds
        deep = [deep]
    for e in evs:
        if e["type"] == "test_finished":
            e["row"]["extra"] = deep
    return _write(tmp / "nestedrow.jsonl", evs)


def _ticks(tmp: Path) -> Path:
    out = []
    for e in _events():
        out.append(e)
        if e["type"] == "repetition_started" and e["test_index"] == 0 and e["rep"] == 0:
            out += [{"v": 1, "type": "token_tick", "t_ns": e["t_ns"] + i, "test_index": 0, "rep": 0, "token_index": i,
                     "n_past": 32 + i, "n_seq": 1} for i in range(200_000)]
    return _write(tmp / "ticks.jsonl", out)


def _long_line(tmp: Path) -> Path:
    path = _write(tmp / "longline.jsonl", _events()[:3])
    with open(path, "a") as f:
        f.write('{"v":1,"type":"notice","t_ns":1,"message":"' + "x" * (17 << 20) + '"}\n')
    return path


def _index(tmp: Path) -> Path:
    evs = _events()
    for e in evs:
        if e["type"] == "test_started":
            e["test_index"] = 1 << 30
    return _write(tmp / "index.jsonl", evs)


def _nan(tmp: Path) -> Path:
    evs = _events()
    for e in evs:
        if e["type"] == "test_finished":
            for k in ("decode_tps", "ttft_ms", "prefill_tps", "avg_ts"):
                e["row"][k] = float("nan")
            e["row"]["samples_ts"] = [float("nan")] * 3
        if e["type"] == "telemetry_sample":
            e["values"].update(rss_bytes=float("nan"), cpu_pct=float("inf"))
    return _write(tmp / "nan.jsonl", evs)


REFUSED: dict[str, tuple[Callable[[Path], Path], str]] = {
    "values of 10**30": (_huge, "outside"),
    "a string for a test's number": (_strings, "n_gen is str"),
    "strings for a row's numbers": (_row_strings, "decode_tps: str"),
    "a string for a sample": (_sample_strings, "rss_bytes is str"),
    "JSON nested 100,000 deep": (_nested, "nested"),
    "a row nested 200 deep": (_nested_row, "nested more than"),
    "200,000 ticks in a test of 16 tokens": (_ticks, "16 generated tokens"),
    "a line of 17 MB": (_long_line, "longer than"),
    "a test index past the sweep": (_index, "not a test of the sweep"),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_a_hostile_recording_is_one_line(tmp_path: Path, case: str) -> None:
    from app.run.replay import ReplayError, read_event_stream

    make, says = REFUSED[case]
    path = make(tmp_path)
    t0 = time.monotonic()
    with pytest.raises(ReplayError) as info:
        read_event_stream(path)
    assert time.monotonic() - t0 < 10
    message = str(info.value)
    assert says in message and "\n" not in message and len(message) < 600, message
    assert message.startswith(f"{path}: ")


def test_nan_values_read_as_missing(tmp_path: Path) -> None:
    from app.run.replay import read_event_stream

    events = read_event_stream(_nan(tmp_path))
    rows = [e.row for e in events if e.type == "test_finished"]
    assert rows and all(r.decode_tps is None and r.samples_ts == [None] * 3 for r in rows)
    samples = [e.values for e in events if e.type == "telemetry_sample"]
    assert samples and all(v["rss_bytes"] is None and v["cpu_pct"] is None for v in samples)


def test_the_recorded_sweep_and_its_gzip_still_replay(tmp_path: Path) -> None:
    from app.run.replay import read_event_stream

    plain = read_event_stream(RECORDED)
    packed = tmp_path / "r.jsonl.gz"
    packed.write_bytes(gzip.compress(RECORDED.read_bytes()))
    assert len(plain) == len(read_event_stream(packed)) == len(_events())


def test_a_gzip_bomb_and_a_cut_gzip_are_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from app.run import replay

    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(gzip.compress(RECORDED.read_bytes())[:-40])
    with pytest.raises(replay.ReplayError, match="cannot be read"):
        replay.read_event_stream(cut)
    bomb = tmp_path / "bomb.jsonl.gz"
    bomb.write_bytes(gzip.compress(b"\n" * (8 << 20)))  # 8 MiB of blank lines in a few KB
    monkeypatch.setattr(replay, "MAX_RECORDING_BYTES", 1 << 20)
    with pytest.raises(replay.ReplayError, match="bytes"):
        replay.read_event_stream(bomb)


def test_events_from_the_worker_are_held_to_the_same_bounds() -> None:
    from app.run.events import EventDecodeError, event_from_json

    for line in ('{"v":1,"type":"token_tick","t_ns":1,"test_index":0,"rep":0,"token_index":0,"n_past":1e400}',
                 '{"v":1,"type":"phase_result","t_ns":-5,"test_index":0,"rep":0,"phase":"decode","n_tokens":1,'
                 '"start_ns":0,"end_ns":1}',
                 '{"v":1,"type":"model_loaded","t_ns":1,"model_path":"m","load_ms":NaN,"n_gpu_layers_requested":0,'
                 '"n_gpu_layers_effective":0,"backends":"CPU"}',
                 '{"v":1,"type":"notice","t_ns":1,"message":' + "1" * 5000 + "}"):
        with pytest.raises(EventDecodeError):
            event_from_json(line)


@pytest.mark.heavy  # the real window in a subprocess, once per hostile recording
def test_the_window_replays_each_hostile_recording_in_at_most_one_line(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "QT_QPA_PLATFORM": "offscreen"}
    for make in (*(m for m, _ in REFUSED.values()), _nan):
        path = make(tmp_path)
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "app.gui.main", "--replay", str(path), "--screenshot",
                               str(tmp_path / "shot.png")], capture_output=True, text=True, env=env, timeout=120)
        took = time.monotonic() - t0
        said = [line for line in (proc.stdout + proc.stderr).splitlines()
                if line.strip() and "propagateSizeHints" not in line and "saved" not in line]
        assert "Traceback" not in proc.stderr and len(said) <= 1, (path.name, said[:5])
        assert proc.returncode in (0, 2) and took < 60, (path.name, proc.returncode, took)
