"""The event stream: frozen, versioned, JSON-serialisable records the worker emits.

Plots, tables, CSV, the SQLite store and the GUI all read this stream; a recorded stream
replays in tests without a model. One JSON object per line: ``{"v": 1, "type": ..., ...}``.

Decoding checks every value where it enters (the worker's pipe, a recording anyone can send): each field of its
type, numbers finite and within bounds (a time in ns below 2**63, an index or count below 2**31, any number inside a
row, a test or a sample at most 10**15 in size), text and nesting bounded; NaN and infinities read as null. A row
is decoded into its typed record (:mod:`app.results.row_types`), its values of the types its field table gives: a
sweep's :class:`ResultRow`, or the quality or quantize job's row, which the event names (``"table"``; recordings
without it are sweeps'). A test (``test_started``'s, each of ``sweep_started``'s) is decoded into its typed record
by its shape, as every version has written it: a remote server's (it names an ``endpoint``) a
:class:`~app.run.plan.RemoteTest`, a timed test (any of its settings beside the model) a
:class:`~app.run.plan.TestSpec`, anything else a job's :class:`JobItem`. An event that fails is one
EventDecodeError line.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import MISSING, dataclass, field, fields
from enum import StrEnum
from typing import TYPE_CHECKING, Any, ClassVar

from app.results.row_types import ROW_KINDS, QualityRow, QuantizeRow, ResultRow, Row, RowError

if TYPE_CHECKING:
    from app.run.plan import RemoteTest, TestSpec

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
        return json.dumps(self.to_dict(), separators=(",", ":"))

    def to_dict(self) -> dict[str, Any]:
        """The event as its JSON object: a row as its table (:meth:`Row.to_mapping`), named when not a sweep's."""
        d: dict[str, Any] = {"v": SCHEMA_VERSION, "type": self.type}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, Row):
                if not isinstance(value, ResultRow):
                    d["table"] = value.KIND
                value = value.to_mapping()
            elif f.name == "test":
                value = value.to_dict()
            elif f.name == "tests":
                value = [t.to_dict() for t in value]
            d[f.name] = value
        return d


@dataclass(frozen=True)
class JobItem:
    """A job's item that is not a timed test: the model file a quality job scores (``model_path``), the output a
    quantize job writes (``src``, ``dst``, ``type``...). No reader takes more than its index; ``values`` are the
    job's own, bounded and kept as they came so a log is written back unchanged."""

    values: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return dict(self.values)


@dataclass(frozen=True)
class SweepStarted(Event):
    type: ClassVar[str] = "sweep_started"
    n_tests: int
    tests: list[TestSpec | RemoteTest]
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
    test: TestSpec | RemoteTest | JobItem  # a sweep's test, a remote server's, or a quality or quantize job's item


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
    row: ResultRow | QualityRow | QuantizeRow  # a sweep's row, or a quality or quantize job's


@dataclass(frozen=True)
class TestFailed(Event):
    __test__ = False  # not a pytest test class
    type: ClassVar[str] = "test_failed"
    test_index: int
    reason: str
    row: ResultRow | QualityRow | QuantizeRow
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


#: Bounds of a decoded event: far past any real one (a sweep of 100,000 tests, a row of a few hundred values).
MAX_NESTING = 16  # tables and lists inside one another
MAX_VALUES = 2_000_000  # values in one event's tables and lists, all told
MAX_STRING_CHARS = 1 << 20
MAX_NS = (1 << 63) - 1  # a time_ns field (perf_counter_ns)
MAX_INDEX = (1 << 31) - 1  # an index or count field (test_index, rep, token_index, n_past, n_tests...)
MAX_MAGNITUDE = 1e15  # any number inside a row, a test or a telemetry sample (bytes of 1 PB, 11 days in ns)
_NS_FIELDS = frozenset({"t_ns", "start_ns", "end_ns"})
_ROW_EVENTS = ("test_finished", "test_failed")


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
                raise EventDecodeError(f"{cls.type}: {f.name} is {type(value).__name__} {_shown(value)}, "
                                       f"not {f.type}")
            _check_value(cls.type, f.name, value)
            given[f.name] = value
        elif f.default is MISSING and f.default_factory is MISSING:
            raise EventDecodeError(f"{cls.type}: no {f.name}")
    if cls.type in _ROW_EVENTS:
        given["row"] = _decoded_row(cls.type, str(d.get("table", ResultRow.KIND)), given["row"])
    elif cls.type == "telemetry_sample":
        _check_sample(given["values"])
    elif cls.type == "test_started":
        given["test"] = _decoded_test(cls.type, given["test"], jobs=True)
    elif cls.type == "sweep_started":
        given["tests"] = [_decoded_test(cls.type, t, jobs=False) for t in given["tests"]]
    return cls(**given)


def _decoded_test(event: str, test: object, *, jobs: bool) -> TestSpec | RemoteTest | JobItem:
    """The typed record of a test table by its shape (see the module): EventDecodeError, one line naming the field,
    for a value not of its field's type. ``jobs``: a table of neither kind is a job's item (test_started's)."""
    from app.run.plan import RemoteTest, SpecError, TestSpec  # here: plan needs the telemetry package, events nothing

    if not isinstance(test, dict):
        raise EventDecodeError(f"{event}: a test is {type(test).__name__}, not a table")
    try:
        if "endpoint" in test:
            return RemoteTest.from_dict(test)
        if not jobs or _timed_keys() & test.keys():
            return TestSpec.from_dict(test)
    except SpecError as e:
        raise EventDecodeError(f"{event}: {e}") from None
    return JobItem(test)


@functools.cache
def _timed_keys() -> frozenset[str]:
    """The keys of a timed test's settings (TestSpec's fields, the model aside): a table holding any is one."""
    from app.run.plan import TestSpec

    return frozenset(f.name for f in fields(TestSpec)) - {"model_path"}


def _shown(value: Any) -> str:
    """A value for a one-line message: its first 40 characters."""
    text = repr(value) if not isinstance(value, dict | list) else type(value).__name__
    return text[:40]


def _check_value(event: str, name: str, value: Any) -> None:
    """A field's value within its bounds (see the module); EventDecodeError, one line, if not."""
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, int):
        low, high = (0, MAX_NS) if name in _NS_FIELDS else (-2, MAX_INDEX)
        if not low <= value <= high:
            raise EventDecodeError(f"{event}: {name} {_shown(value)} is outside {low}..{high}")
    elif isinstance(value, float):
        if not (math.isfinite(value) and abs(value) <= MAX_MAGNITUDE):
            raise EventDecodeError(f"{event}: {name} {_shown(value)} is not a finite number of at most "
                                   f"{MAX_MAGNITUDE:g}")
    elif isinstance(value, str):
        if len(value) > MAX_STRING_CHARS:
            raise EventDecodeError(f"{event}: {name} is {len(value):,} characters long (at most {MAX_STRING_CHARS:,})")
    elif isinstance(value, dict | list):
        _check_nested(event, name, value)


def _check_nested(event: str, name: str, value: dict[str, Any] | list[Any]) -> None:
    """Tables and lists: nesting, count, text length and every number bounded (iteratively: no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    seen = 0
    while stack:
        item, depth = stack.pop()
        if depth > MAX_NESTING:
            raise EventDecodeError(f"{event}: {name} is nested more than {MAX_NESTING} deep")
        children = item.values() if isinstance(item, dict) else item
        for child in children:
            seen += 1
            if seen > MAX_VALUES:
                raise EventDecodeError(f"{event}: {name} holds more than {MAX_VALUES:,} values")
            if isinstance(child, dict | list):
                stack.append((child, depth + 1))
            elif isinstance(child, bool) or child is None:
                continue
            elif isinstance(child, int | float):
                if not (math.isfinite(child) and abs(child) <= MAX_MAGNITUDE):
                    raise EventDecodeError(f"{event}: {name} holds the number {_shown(child)}, past "
                                           f"{MAX_MAGNITUDE:g}")
            elif isinstance(child, str) and len(child) > MAX_STRING_CHARS:
                raise EventDecodeError(f"{event}: {name} holds a text of {len(child):,} characters")
        if isinstance(item, dict) and any(not isinstance(k, str) or len(k) > 200 for k in item):
            raise EventDecodeError(f"{event}: {name} has a key that is not a short text")


def _decoded_row(event: str, table: str, row: dict[str, Any]) -> Row:
    """The typed row of the table the event names (whole numbers of int fields rounded: older recordings kept byte
    counts as floats); EventDecodeError naming the first value that is not of its field's type."""
    kind = ROW_KINDS.get(table)
    if kind is None:
        raise EventDecodeError(f"{event}: a row of table {_shown(table)}, not one of {', '.join(ROW_KINDS)}")
    try:
        return kind.from_mapping(row)
    except RowError as e:
        raise EventDecodeError(f"{event}: {e}") from None


def _check_sample(values: dict[str, Any]) -> None:
    """A telemetry sample: each value a number or null."""
    for key, value in values.items():
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise EventDecodeError(f"telemetry_sample: {key[:40]} is {type(value).__name__} {_shown(value)}, not a "
                                   "number")


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


def _not_a_number(token: str) -> None:
    """NaN, Infinity and -Infinity (JSON has none; Python writes them): read as null, which a field that must hold
    a number refuses."""
    return None


def event_from_json(line: str) -> Event:
    try:
        d = json.loads(line, parse_constant=_not_a_number)
    except json.JSONDecodeError as e:
        raise EventDecodeError(f"not JSON: {e}") from None
    except RecursionError:
        raise EventDecodeError(f"not an event: JSON nested more than Python reads ({len(line):,} characters)") from None
    except ValueError as e:  # an integer of more than 4,300 digits
        raise EventDecodeError(f"not an event: {' '.join(str(e).split())[:100]}") from None
    if not isinstance(d, dict):
        raise EventDecodeError("event is not a JSON object")
    return event_from_dict(d)
