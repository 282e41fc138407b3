"""The event stream: frozen, versioned, JSON-serialisable records the worker emits.

Plots, tables, CSV, the SQLite store and the GUI all read this stream; a recorded stream
replays in tests without a model. One JSON object per line: ``{"v": 1, "type": ..., ...}``.
"""

from __future__ import annotations

import json
from dataclasses import MISSING, asdict, dataclass, field, fields
from enum import StrEnum
from typing import Any, ClassVar

SCHEMA_VERSION = 1


class FailureKind(StrEnum):
    """Why a test failed or the worker stopped: readers branch on this, never on the message text."""

    LOAD_ERROR = "load_error"  # the model file could not be loaded
    OUT_OF_MEMORY = "out_of_memory"  # the context (KV cache, compute buffers) could not be allocated
    UNSUPPORTED_SETTINGS = "unsupported_settings"  # llama.cpp refuses the combination (e.g. quantized V, fa off)
    DECODE_ERROR = "decode_error"  # llama_decode failed mid-run
    BAD_INPUT = "bad_input"  # the test's own input is unusable (prompt file unreadable or empty)
    ENGINE_ERROR = "engine_error"  # any other engine error
    WORKER_KILLED = "worker_killed"  # the worker was killed by SIGKILL: the OOM killer, most often
    WORKER_DIED = "worker_died"  # the worker crashed or exited before finishing
    WORKER_START = "worker_start"  # the worker could not start at all
    STALLED = "stalled"  # the worker sent no event (not even a telemetry heartbeat) for too long: killed
    CANCELLED = "cancelled"  # the user cancelled


@dataclass(frozen=True)
class Event:
    """Base of every event; ``t_ns`` is time.perf_counter_ns() (CLOCK_MONOTONIC, system-wide)."""

    type: ClassVar[str] = "event"
    t_ns: int

    def to_json(self) -> str:
        return json.dumps({"v": SCHEMA_VERSION, "type": self.type, **asdict(self)}, separators=(",", ":"))


@dataclass(frozen=True)
class SweepStarted(Event):
    type: ClassVar[str] = "sweep_started"
    n_tests: int
    tests: list[dict[str, Any]]
    software: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Notice(Event):
    """Something the user should read once (e.g. "this build has no GPU backend")."""

    type: ClassVar[str] = "notice"
    message: str
    level: str = "warning"


@dataclass(frozen=True)
class ModelLoaded(Event):
    type: ClassVar[str] = "model_loaded"
    model_path: str
    load_ms: float
    n_gpu_layers_requested: int
    n_gpu_layers_effective: int
    backends: str
    extra_buffers: list[str] = field(default_factory=list)  # CPU extra buffer types holding weights (AMX…)


@dataclass(frozen=True)
class TestStarted(Event):
    __test__ = False  # not a pytest test class
    type: ClassVar[str] = "test_started"
    test_index: int
    test: dict[str, Any]


@dataclass(frozen=True)
class RepetitionStarted(Event):
    """rep == -1 is the warmup."""

    type: ClassVar[str] = "repetition_started"
    test_index: int
    rep: int


@dataclass(frozen=True)
class TokenTick(Event):
    """One decoded step: ``token_index`` counts decode steps, ``n_past`` is the context position."""

    type: ClassVar[str] = "token_tick"
    test_index: int
    rep: int
    token_index: int
    n_past: int
    n_seq: int = 1


@dataclass(frozen=True)
class PhaseResult(Event):
    """One timed phase of one repetition: ``prefill`` or ``decode``."""

    type: ClassVar[str] = "phase_result"
    test_index: int
    rep: int
    phase: str
    n_tokens: int
    start_ns: int
    end_ns: int


@dataclass(frozen=True)
class TestFinished(Event):
    __test__ = False  # not a pytest test class
    type: ClassVar[str] = "test_finished"
    test_index: int
    row: dict[str, Any]


@dataclass(frozen=True)
class TestFailed(Event):
    __test__ = False  # not a pytest test class
    type: ClassVar[str] = "test_failed"
    test_index: int
    reason: str
    row: dict[str, Any]
    kind: str = FailureKind.ENGINE_ERROR  # a FailureKind value; recordings older than the field read as engine_error


@dataclass(frozen=True)
class TelemetrySample(Event):
    type: ClassVar[str] = "telemetry_sample"
    values: dict[str, float | None]


@dataclass(frozen=True)
class SweepFinished(Event):
    type: ClassVar[str] = "sweep_finished"
    n_ok: int
    n_failed: int
    cancelled: bool = False


@dataclass(frozen=True)
class JobProgress(Event):
    """Progress of a job step that is not a timed test: quantizing a file (per tensor), scoring a file (per chunk)."""

    type: ClassVar[str] = "job_progress"
    item_index: int  # which file of the job
    done: int
    total: int
    label: str = ""


@dataclass(frozen=True)
class WorkerError(Event):
    """The worker could not go on at all (bad sweep spec, engine missing)."""

    type: ClassVar[str] = "worker_error"
    message: str
    kind: str = FailureKind.WORKER_DIED  # a FailureKind value


EVENT_TYPES: dict[str, type[Event]] = {
    cls.type: cls
    for cls in (
        SweepStarted, Notice, ModelLoaded, TestStarted, RepetitionStarted, TokenTick, PhaseResult,
        TestFinished, TestFailed, TelemetrySample, SweepFinished, WorkerError, JobProgress,
    )
}


class EventDecodeError(ValueError):
    """A line of the stream is not an event this version understands."""


def event_from_dict(d: dict[str, Any]) -> Event:
    """Rebuild an event; unknown extra keys from a newer minor version are ignored."""
    if d.get("v") != SCHEMA_VERSION:
        raise EventDecodeError(f"event schema version {d.get('v')!r}, this build reads {SCHEMA_VERSION}")
    cls = EVENT_TYPES.get(str(d.get("type")))
    if cls is None:
        raise EventDecodeError(f"unknown event type {d.get('type')!r}")
    given = {}
    for f in fields(cls):
        if f.name in d:
            value = d[f.name]
            if not _of_kind(value, str(f.type)):
                raise EventDecodeError(f"{cls.type}: {f.name} is {type(value).__name__} {str(value)[:40]!r}, "
                                       f"not {f.type}")
            given[f.name] = value
        elif f.default is MISSING and f.default_factory is MISSING:
            raise EventDecodeError(f"{cls.type}: no {f.name}")
    return cls(**given)


def _of_kind(value: Any, annotation: str) -> bool:
    """Whether a JSON value fits a field's annotation (its outer type: replays are checked where they enter)."""
    outer = annotation.split("[", 1)[0].split("|", 1)[0].strip()
    if outer == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if outer == "float":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if outer == "bool":
        return isinstance(value, bool)
    if outer == "str":
        return isinstance(value, str)
    if outer == "list":
        return isinstance(value, list)
    if outer == "dict":
        return isinstance(value, dict)
    return True


def event_from_json(line: str) -> Event:
    try:
        d = json.loads(line)
    except json.JSONDecodeError as e:
        raise EventDecodeError(f"not JSON: {e}") from None
    if not isinstance(d, dict):
        raise EventDecodeError("event is not a JSON object")
    return event_from_dict(d)
