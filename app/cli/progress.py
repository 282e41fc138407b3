"""The one-line progress display on stderr, fed by the event stream."""

from __future__ import annotations

import os
import sys
import time

from app.cli.errors import print_line
from app.results.row_types import ResultRow
from app.run.events import (
    Event,
    JobItem,
    ModelLoaded,
    Notice,
    RepetitionStarted,
    TestFailed,
    TestFinished,
    TestStarted,
    TokenTick,
)
from app.run.plan import RemoteTest, TestSpec
from app.shown_text import one_line


def write_progress(text: str, *, final: bool, tty: bool) -> None:
    """One progress line on stderr, the one way every command writes one: on a terminal it replaces the line
    before it (erased first), ``final`` ends it; its text is one line (a name holding a newline or an escape code
    cannot break it or the terminal)."""
    sys.stderr.write(("\r\033[K" if tty else "") + one_line(text) + ("\n" if final else ""))
    sys.stderr.flush()


class Progress:
    """A one-line progress display on stderr, fed by the event stream."""

    def __init__(self, n_tests: int, enabled: bool = True) -> None:
        self.n_tests = n_tests
        self.enabled = enabled
        self.tty = sys.stderr.isatty()
        self.test: TestSpec | RemoteTest | JobItem | None = None
        self.index = 0
        self.rep = 0
        self.t0 = time.monotonic()
        self.done = 0
        self._last_draw = 0.0

    def _line(self, text: str, final: bool = False) -> None:
        if not self.enabled:
            return
        if self.tty or final:
            write_progress(text, final=final, tty=self.tty)

    def _bar(self) -> str:
        width = 20
        filled = int(width * self.done / max(self.n_tests, 1))
        elapsed = time.monotonic() - self.t0
        eta = f", ~{elapsed / self.done * (self.n_tests - self.done):.0f}s left" if self.done else ""
        return f"[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.n_tests}{eta}"

    def _name(self) -> str:
        return self.test.short_name() if isinstance(self.test, TestSpec | RemoteTest) else ""

    def __call__(self, ev: Event) -> None:
        if isinstance(ev, Notice):
            self._line(f"note: {ev.message}", final=True)
        elif isinstance(ev, ModelLoaded):
            self._line(f"loaded {os.path.basename(ev.model_path)} in {ev.load_ms:.0f} ms ({ev.backends})", final=True)
        elif isinstance(ev, TestStarted):
            self.test, self.index = ev.test, ev.test_index
            self._line(f"{self._bar()} test {ev.test_index + 1}: {self._name()} warmup")
        elif isinstance(ev, RepetitionStarted):
            self.rep = ev.rep
        elif isinstance(ev, TokenTick):
            now = time.monotonic()
            if self.tty and now - self._last_draw > 0.1:
                self._last_draw = now
                reps = self.test.repetitions if isinstance(self.test, TestSpec) else 1
                rep = "warmup" if self.rep < 0 else f"rep {self.rep + 1}/{reps}"
                self._line(f"{self._bar()} test {self.index + 1}: {self._name()} {rep} token {ev.token_index + 1}")
        elif isinstance(ev, TestFinished):
            self.done += 1
            r = ev.row
            parts = [f"ttft {r.ttft_ms:.1f} ms" if r.ttft_ms is not None else "",
                     f"prefill {r.prefill_tps:.1f} tok/s" if r.prefill_tps is not None else "",
                     f"decode {r.decode_tps:.2f} tok/s" if r.decode_tps is not None else "",
                     "UNSTABLE" if r.unstable else ""] if isinstance(r, ResultRow) else []
            self._line(f"{self._bar()} test {ev.test_index + 1}: {self._name()}: "
                       + ", ".join(p for p in parts if p), final=True)
        elif isinstance(ev, TestFailed):
            self.done += 1
            if self.enabled:
                self._line(f"{self._bar()} test {ev.test_index + 1}: FAILED: {ev.reason}", final=True)
            else:  # failures are always told, even with --quiet
                print_line(f"gguf-bench: test {ev.test_index + 1} failed: {ev.reason}")
