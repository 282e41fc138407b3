"""Reading a recorded event stream: ``gguf-workbench --replay FILE`` (a file anyone can send) and a past run's event
log. Untrusted input, checked where it enters, with a bound on bytes, lines and time.

The file is read line by line, never whole: a line longer than :data:`MAX_LINE_BYTES` (one 400 MB line once hung the
window), more than :data:`MAX_EVENTS` events or :data:`MAX_RECORDING_BYTES` bytes (unpacked) end the reading with one
:class:`ReplayError` line naming the line. Each event is decoded with its values typed and bounded
(:func:`app.run.events.event_from_json`), then held to the sweep it claims to be part of: a test index within the
sweep's tests, a token tick within its test's generated tokens and context, no more ticks per repetition than tokens
generated (200,000 ticks in one test of 16 tokens once gave the plots twenty tracebacks), a phase that ends after it
starts. Blank lines and ``#`` comments are skipped; ``.gz`` files are read through gzip, bounded the same way.
"""

from __future__ import annotations

import gzip
import io
import zlib
from collections import Counter
from pathlib import Path

from app.bounded_read import open_regular
from app.results.row_types import ResultRow
from app.run import events as ev
from app.run.plan import RemoteTest, TestSpec

#: A recorded sweep of 10,000 tests with per-token ticks stays far below this (unpacked).
MAX_RECORDING_BYTES = 1 << 30
#: The longest line: a sweep_started of 10,000 tests is about 5 MB, any other event a few KB.
MAX_LINE_BYTES = 16 << 20
#: The most events one recording holds (a sweep of 10,000 tests of 128 tokens, three repetitions, is about 5 million).
MAX_EVENTS = 10_000_000


#: The most tests a recorded sweep holds, and how far past its count the tests of unreadable files may be numbered.
MAX_TESTS = 1_000_000
MAX_UPFRONT_FAILURES = 100_000


class ReplayError(ValueError):
    """A recording that cannot be replayed; ``str()`` is one line naming the file, the line and why."""


def read_event_stream(path: str | Path) -> list[ev.Event]:
    """Events from a JSONL recording, plain or gzip; ReplayError (one line) for the first line that is not a
    good event of the sweep it belongs to, or a file past the bounds. OSError when the file cannot be opened
    (a FIFO or device is refused without blocking: :func:`app.bounded_read.open_regular`)."""
    p = Path(path)
    raw = open_regular(p)
    try:
        stream: io.BufferedIOBase = gzip.GzipFile(fileobj=raw) if p.suffix == ".gz" else raw
        return _read_lines(p, stream)
    except (OSError, EOFError, zlib.error) as e:
        if isinstance(e, FileNotFoundError | PermissionError):
            raise
        raise ReplayError(f"{p}: cannot be read ({type(e).__name__}: {' '.join(str(e).split())[:120]})") from None
    finally:
        raw.close()


def _read_lines(p: Path, stream: io.BufferedIOBase) -> list[ev.Event]:
    out: list[ev.Event] = []
    check = _SweepCheck()
    total = 0
    for number in range(1, MAX_EVENTS * 4):
        line = stream.readline(MAX_LINE_BYTES + 1)
        if not line:
            return out
        total += len(line)
        if len(line) > MAX_LINE_BYTES:
            raise ReplayError(f"{p}: line {number:,} is longer than {MAX_LINE_BYTES:,} bytes (no event is)")
        if total > MAX_RECORDING_BYTES:
            raise ReplayError(f"{p}: more than {MAX_RECORDING_BYTES:,} bytes (unpacked)")
        text = line.strip()
        if not text or text.startswith(b"#"):
            continue
        if len(out) >= MAX_EVENTS:
            raise ReplayError(f"{p}: more than {MAX_EVENTS:,} events")
        try:
            event = ev.event_from_json(text.decode("utf-8"))
            check(event)
        except UnicodeDecodeError as e:
            raise ReplayError(f"{p}: line {number:,} is not UTF-8 text ({e})") from None
        except ev.EventDecodeError as e:
            raise ReplayError(f"{p}: line {number:,}: {' '.join(str(e).split())[:300]}") from None
        out.append(event)
    raise ReplayError(f"{p}: more than {MAX_EVENTS * 4:,} lines")


class _SweepCheck:
    """Holds each event to the sweep it belongs to (the tests sweep_started and test_started announce)."""

    def __init__(self) -> None:
        self.n_tests: int | None = None
        self.tests: dict[int, TestSpec | RemoteTest | ev.JobItem] = {}
        self.ticks: Counter[tuple[int, int]] = Counter()

    def __call__(self, event: ev.Event) -> None:
        if isinstance(event, ev.SweepStarted):
            if len(event.tests) > MAX_TESTS or event.n_tests > MAX_TESTS:
                raise ev.EventDecodeError(f"sweep_started: more than {MAX_TESTS:,} tests")
            if self.n_tests is None:  # a restarted worker announces the tests left, numbered from its first
                self.n_tests = max(event.n_tests, len(event.tests))
                self.tests = dict(enumerate(event.tests))
            return
        index = getattr(event, "test_index", None)
        if index is None:
            return
        # tests of files that could not be read are numbered after the sweep's: a margin above its count
        limit = min(MAX_TESTS, (self.n_tests or 0) + MAX_UPFRONT_FAILURES)
        if not 0 <= index < limit:
            raise ev.EventDecodeError(f"{event.type}: test_index {index} is not a test of the sweep "
                                      f"({self.n_tests or 0} tests)")
        if isinstance(event, ev.TestStarted):
            self.tests[index] = event.test
        elif isinstance(event, ev.TokenTick):
            self._tick(event)
        elif isinstance(event, ev.PhaseResult) and event.end_ns < event.start_ns:
            raise ev.EventDecodeError(f"phase_result: test {index} ends ({event.end_ns}) before it starts "
                                      f"({event.start_ns})")
        elif isinstance(event, ev.TestFinished | ev.TestFailed):
            row_index = event.row.test_index if isinstance(event.row, ResultRow) else None
            if row_index is not None and row_index != index:
                raise ev.EventDecodeError(f"{event.type}: its row is of test {row_index}, the event of test {index}")

    def _tick(self, tick: ev.TokenTick) -> None:
        test = self.tests.get(tick.test_index)
        if not isinstance(test, TestSpec | RemoteTest):  # a test not announced, or a job's item: the bound alone
            return
        n_gen = max(test.n_gen, 0)
        context = max(test.n_depth, 0) + max(test.n_prompt, 0) + n_gen + 1
        n_seq = max(1, test.n_parallel, tick.n_seq)
        if tick.token_index > n_gen or tick.n_past > context * n_seq:
            raise ev.EventDecodeError(f"token_tick: token {tick.token_index} at position {tick.n_past} is past test "
                                      f"{tick.test_index}'s {n_gen} generated tokens (context {context})")
        key = (tick.test_index, tick.rep)
        self.ticks[key] += 1
        if self.ticks[key] > (n_gen + 1) * n_seq:
            raise ev.EventDecodeError(f"token_tick: more than {n_gen} ticks in repetition {tick.rep} of test "
                                      f"{tick.test_index} ({n_gen} generated tokens)")

