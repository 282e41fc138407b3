"""A run as its events have told it so far (live, replayed or re-opened): events in, growing arrays and rows out.

The window's timer hands queued events to :meth:`LiveRun.extend`; its plots take what is new from the arrays. A
recorded event stream, or the rows of a past run, fill the same model, so nothing that reads it knows where the
numbers came from. Qt-free: the window reads it, and so can anything else.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from app.results.fields import RowStatus
from app.results.row_types import ResultRow
from app.run.events import (
    Event,
    ModelLoaded,
    Notice,
    PhaseResult,
    RepetitionStarted,
    SweepFinished,
    SweepStarted,
    TelemetrySample,
    TestFailed,
    TestFinished,
    TestStarted,
    TokenTick,
    WorkerError,
)
from app.run.plan import RemoteTest, TestSpec

#: Telemetry readings the timeline keeps (the sampler's names).
TELEMETRY_KEYS: tuple[str, ...] = (
    "rss_bytes", "cpu_pct", "vram_used_bytes", "process_vram_bytes", "gpu_util_pct", "power_w",
)


class Series:
    """A growable float64 array (amortised O(1) append, zero-copy view)."""

    def __init__(self, capacity: int = 256) -> None:
        self._a = np.empty(capacity, dtype=np.float64)
        self.n = 0

    def append(self, value: float) -> None:
        if self.n == self._a.size:
            self._a = np.resize(self._a, self._a.size * 2)
        self._a[self.n] = value
        self.n += 1

    def extend(self, values: np.ndarray) -> None:
        """Append every value of ``values`` (one copy, however many)."""
        k = len(values)
        if self.n + k > self._a.size:
            self._a = np.resize(self._a, max(self._a.size * 2, self.n + k))
        self._a[self.n : self.n + k] = values
        self.n += k

    def clear(self) -> None:
        self.n = 0

    def view(self) -> np.ndarray:
        return self._a[: self.n]

    def __len__(self) -> int:
        return self.n


@dataclass(frozen=True)
class PhaseSpan:
    start_ns: int
    end_ns: int
    phase: str  # "prefill" | "decode"
    test_index: int
    rep: int


def decode_mean_position(row: ResultRow) -> float:
    """Average context position of a test's decode steps: depth + prompt + half the generated tokens."""
    return float((row.n_depth or 0) + (row.n_prompt or 0) + (row.n_gen or 0) / 2)


def test_of_row(row: ResultRow) -> TestSpec:
    """The test a row ran, as far as it tells it (a past run's rows, a CSV): its settings, defaults where absent."""
    known = {field: value for field, column in _ROW_TEST_COLUMNS if (value := row.value(column)) is not None}
    try:
        return TestSpec.from_dict({"model_path": row.model_path or "", **known})
    except ValueError:  # a setting an older build wrote otherwise: the row's model alone
        return TestSpec(model_path=row.model_path or "")


#: The columns of a row that are settings of the test it ran: (TestSpec's field, the row's column).
_ROW_TEST_COLUMNS = (*((c, c) for c in ("n_prompt", "n_gen", "n_depth", "n_gpu_layers", "type_k", "type_v",
                                        "flash_attn", "n_threads", "n_batch", "n_ubatch", "n_parallel")),
                     ("repetitions", "n_repetitions"))


def test_label(test: TestSpec | RemoteTest) -> str:
    """Short name of a test: ``model p128 n32 d0 ngl99 f16 fa auto`` (the CLI progress line's, too)."""
    return test.short_name()


#: a generated token's cost in prompt tokens' time before any test has finished (a CPU's prefill runs a few
#: times faster than its decode per token; a GPU's many times)
DECODE_TOKEN_COST = 4.0


class LiveRun:
    """Everything one sweep (live, replayed or re-opened) has told so far."""

    def __init__(self, title: str = "") -> None:
        self.title = title
        self.run_id = ""
        self.t0_ns: int | None = None
        self.last_ns: int | None = None
        self.n_tests = 0
        self.tests: dict[int, TestSpec | RemoteTest] = {}  # a job's items are not held: they are no tests
        self.rows: dict[int, ResultRow] = {}
        self.test_start_ns: dict[int, int] = {}
        self.test_end_ns: dict[int, int] = {}
        self.current: int | None = None
        self.current_rep = -1
        self.loads: list[ModelLoaded] = []
        self.notices: list[str] = []
        self.errors: list[str] = []
        self.started = False
        self.prefilling = False  # a repetition started and its prompt is being processed (as the events say)
        self.finished = False
        self.cancelled = False
        # per decoded token of timed repetitions (warmups kept out)
        self.tok_t_ns = Series()
        self.tok_pos = Series()
        self.tok_rate = Series()  # tokens/s per sequence
        self.tok_itl_ms = Series()
        self.tok_test = Series()
        self.tok_rep_start = Series()  # 1.0 on the first kept token of a repetition (a break in the lines)
        self._last_tick: tuple[tuple[int, int], int] | None = None
        self.phases: list[PhaseSpan] = []
        self.tel_t_ns = Series()
        self.tel: dict[str, Series] = {k: Series() for k in TELEMETRY_KEYS}
        self.version = 0  # bumps on every change: the window redraws only when it moved
        self.rows_version = 0
        self.tests_version = 0  # bumps when a test's settings arrive (the plan, a test's start)
        self._work_key: tuple[int, int, int] | None = None
        self._work_cache: tuple[dict[int, float], float, float] = ({}, 1.0, 0.0)

    # --- feeding ------------------------------------------------------------------------------
    def extend(self, events: Iterable[Event]) -> int:
        n = 0
        for ev in events:
            self.apply(ev)
            n += 1
        return n

    def apply(self, ev: Event) -> None:
        """Fold one event into the model."""
        self.version += 1
        if ev.t_ns:
            if self.t0_ns is None:
                self.t0_ns = ev.t_ns
            self.last_ns = ev.t_ns if self.last_ns is None else max(self.last_ns, ev.t_ns)
        if isinstance(ev, RepetitionStarted):
            self.prefilling = True
        elif isinstance(ev, (TokenTick, TestFinished, TestFailed, SweepFinished)) or (
                isinstance(ev, PhaseResult) and ev.phase == "prefill"):
            self.prefilling = False
        if isinstance(ev, TokenTick):
            self._tick(ev)
        elif isinstance(ev, TelemetrySample):
            self.tel_t_ns.append(ev.t_ns)
            for k in TELEMETRY_KEYS:
                v = ev.values.get(k)
                self.tel[k].append(np.nan if v is None else float(v))
        elif isinstance(ev, PhaseResult):
            if ev.rep >= 0:
                self.phases.append(PhaseSpan(ev.start_ns, ev.end_ns, ev.phase, ev.test_index, ev.rep))
        elif isinstance(ev, RepetitionStarted):
            self.current_rep = ev.rep
        elif isinstance(ev, TestStarted):
            self.current, self.current_rep = ev.test_index, -1
            if isinstance(ev.test, TestSpec | RemoteTest):
                self.tests[ev.test_index] = ev.test
            self.tests_version += 1
            self.test_start_ns[ev.test_index] = ev.t_ns
        elif isinstance(ev, (TestFinished, TestFailed)):
            if isinstance(ev.row, ResultRow):  # a sweep's row (a quality or quantize job's has no test to plot)
                self.add_row(ev.row)
            if ev.t_ns:
                self.test_end_ns[ev.test_index] = ev.t_ns
            if isinstance(ev, TestFailed):
                self.errors.append(f"test {ev.test_index + 1} failed: {ev.reason}")
            self.current = None
        elif isinstance(ev, SweepStarted):
            if not self.started:  # a restarted worker sends another SweepStarted for the tests left
                self.started = True
                self.n_tests = ev.n_tests
                for i, t in enumerate(ev.tests):
                    self.tests.setdefault(i, t)
        elif isinstance(ev, ModelLoaded):
            self.loads.append(ev)
        elif isinstance(ev, Notice):
            if ev.message not in self.notices:
                self.notices.append(ev.message)
        elif isinstance(ev, WorkerError):
            if ev.message != "cancelled":
                self.errors.append(ev.message)
        elif isinstance(ev, SweepFinished):
            self.cancelled = self.cancelled or ev.cancelled

    def _tick(self, ev: TokenTick) -> None:
        key = (ev.test_index, ev.rep)
        prev = self._last_tick
        self._last_tick = (key, ev.t_ns)
        if ev.rep < 0 or prev is None or prev[0] != key or ev.token_index == 0:
            return
        dt_ns = ev.t_ns - prev[1]
        if dt_ns <= 0:
            return
        first = ev.token_index == 1
        self.tok_t_ns.append(ev.t_ns)
        self.tok_pos.append(ev.n_past)
        self.tok_itl_ms.append(dt_ns / 1e6)
        self.tok_rate.append(1e9 / dt_ns)
        self.tok_test.append(ev.test_index)
        self.tok_rep_start.append(1.0 if first else 0.0)

    def add_row(self, row: ResultRow) -> None:
        i = len(self.rows) if row.test_index is None else row.test_index
        self.rows[i] = row
        self.run_id = self.run_id or (row.run_id or "")
        if i not in self.tests:  # the test it ran, as far as the row tells it
            self.tests[i] = test_of_row(row)
        self.rows_version += 1
        self.version += 1

    def plan(self, tests: Iterable[TestSpec | RemoteTest]) -> None:
        """The tests about to run (before the worker says so), so plots can prepare their predictions."""
        for i, t in enumerate(tests):
            self.tests.setdefault(i, t)
        self.tests_version += 1
        self.n_tests = max(self.n_tests, len(self.tests))
        self.version += 1

    def mark_finished(self, cancelled: bool = False) -> None:
        self.finished = True
        self.cancelled = self.cancelled or cancelled
        self.current = None
        self.version += 1

    @classmethod
    def from_rows(cls, rows: Iterable[ResultRow], title: str = "") -> LiveRun:
        """A finished session holding only result rows (a past run from the store, a CSV)."""
        s = cls(title)
        for r in rows:
            s.add_row(r)
        s.n_tests = len(s.rows)
        s.started = True
        s.mark_finished()
        return s

    # --- reading ------------------------------------------------------------------------------
    @property
    def n_done(self) -> int:
        return len(self.rows)

    def ordered_rows(self) -> list[ResultRow]:
        return [self.rows[i] for i in sorted(self.rows)]

    def ok_rows(self) -> list[ResultRow]:
        return [r for r in self.ordered_rows() if r.status == RowStatus.OK]

    def models(self) -> list[str]:
        """Model paths in first-seen order (tests, then rows)."""
        seen: dict[str, None] = {}
        for i in sorted(self.tests):
            seen.setdefault(self.tests[i].model_path, None)
        return [m for m in seen if m]

    def t_s(self, t_ns: np.ndarray | float) -> np.ndarray | float:
        """Seconds since the sweep started."""
        return (t_ns - (self.t0_ns or 0)) / 1e9

    def progress(self) -> float:
        """0..1: the share of the sweep's work done: finished tests plus the share of the current one (repetitions,
        warmup counted), each test weighted by its work (:meth:`test_work`), so a long test ahead does not make
        the time left grow when it comes."""
        if not self.n_tests:
            return 1.0 if self.finished else 0.0
        if self.finished:
            return 1.0
        part = 0.0
        if self.current is not None:
            test = self.tests.get(self.current)
            reps = test.repetitions if isinstance(test, TestSpec) else 1
            part = min(max(self.current_rep + 1, 0) / (reps + 1), 0.99)
        if len(self.tests) < self.n_tests:  # the plan is not known yet: every test counts the same
            return min((self.n_done + part) / self.n_tests, 1.0)
        work, total, done = self._work_done()
        if self.current is not None and self.current not in self.rows:
            done += work.get(self.current, 0.0) * part
        return min(done / total, 1.0)

    def _work_done(self) -> tuple[dict[int, float], float, float]:
        """(each test's work, the sweep's total, the finished tests' share): recomputed only when a row arrives
        (the 10 Hz tick asks for progress much more often than rows change)."""
        key = (self.rows_version, self.tests_version, len(self.tests))
        if self._work_key != key:
            ratio = self.decode_token_cost()
            work = {i: self.test_work(t, ratio) for i, t in self.tests.items()}
            done = sum(work[i] for i in self.rows if i in work)
            self._work_cache = (work, sum(work.values()) or 1.0, done)
            self._work_key = key
        return self._work_cache

    def decode_token_cost(self) -> float:
        """What one generated token costs in prompt tokens' time: prefill rate ÷ decode rate of the finished
        tests (:data:`DECODE_TOKEN_COST` before any)."""
        ratios = [r.prefill_tps / r.decode_tps for r in self.rows.values() if r.prefill_tps and r.decode_tps]
        return statistics.median(ratios) if ratios else DECODE_TOKEN_COST

    @staticmethod
    def test_work(test: TestSpec | RemoteTest, decode_token_cost: float = 0.0) -> float:
        """A test's work in prompt-token units: per repetition (and its warmup) the context and prompt it
        processes and its generated tokens at ``decode_token_cost`` each (a remote test: one run)."""
        reps = (test.repetitions if isinstance(test, TestSpec) else 1) + 1
        prefill = test.n_depth + test.n_prompt
        gen = test.n_gen
        return reps * max(prefill + (decode_token_cost or DECODE_TOKEN_COST) * gen, 1.0)

    def eta_s(self, now_ns: int | None = None) -> float | None:
        """Seconds left, from the time the finished share of the sweep took (None before anything is known)."""
        now = now_ns if now_ns is not None else self.last_ns
        if self.finished or self.t0_ns is None or now is None:
            return None
        frac = self.progress()
        if frac <= 0.02:
            return None
        elapsed = (now - self.t0_ns) / 1e9
        return max(elapsed / frac - elapsed, 0.0)
