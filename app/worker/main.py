"""The worker process: loads models and runs tests, writing events as JSON lines to a dedicated pipe.

Started by app.run.client as ``python -m app.worker.main --event-fd N``; the job (run id and tests)
arrives as one JSON document on stdin. llama.cpp may write to stdout/stderr; those never carry events.
Events go through a queue and a writer thread, so the timed path never waits on the reader.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import signal
import sys
import threading
import time
from typing import Any

from app.run.events import Event, FailureKind, ModelLoaded, TestFailed, TestFinished, TestStarted, WorkerError
from app.run.plan import TestSpec

#: Events written at once rather than with the next batch: rare, and the parent must have them if the worker
#: crashes just after (whether a crash came while loading a model decides whether that model is retried).
URGENT_EVENTS = (TestStarted, ModelLoaded, TestFinished, TestFailed, WorkerError)


class EventWriter:
    """Writes events to a file descriptor from a background thread; ``emit`` only enqueues.

    The writer wakes every ``flush_s`` and writes what has queued up in one go, instead of waking per
    event: on a 2-core machine a thread waking per token steals a core from llama.cpp's threads and
    measurably slows the very decode it reports (about 3% here).
    """

    def __init__(self, fd: int, flush_s: float = 0.05) -> None:
        self._file = os.fdopen(fd, "w", encoding="utf-8")
        self._queue: queue.SimpleQueue[Event | None] = queue.SimpleQueue()
        self._urgent = threading.Event()
        self._flush_s = flush_s
        self._thread = threading.Thread(target=self._drain, name="event-writer", daemon=True)
        self._thread.start()

    def emit(self, event: Event) -> None:
        self._queue.put(event)
        if isinstance(event, URGENT_EVENTS):
            self._urgent.set()

    def _drain(self) -> None:
        done = False
        while not done:
            batch = [self._queue.get()]  # block until there is something
            if batch[0] is not None and not isinstance(batch[0], URGENT_EVENTS):
                self._urgent.wait(self._flush_s)
            self._urgent.clear()
            while True:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            done = None in batch
            text = "".join(e.to_json() + "\n" for e in batch if e is not None)
            try:
                self._file.write(text)
                self._file.flush()
            except (BrokenPipeError, OSError):  # the reader went away: nobody to tell
                os._exit(3)

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join()
        try:
            self._file.close()
        except OSError:
            pass


class CancelSignal:
    """SIGUSR1 from the parent asks for a cancel that keeps the repetitions done (``Runner.request_cancel``)."""

    def __init__(self) -> None:
        self.requested = False
        self.runner: Any = None
        if hasattr(signal, "SIGUSR1"):
            signal.signal(signal.SIGUSR1, self._on_signal)

    def _on_signal(self, signum: int, frame: object) -> None:
        self.requested = True
        if self.runner is not None:
            self.runner.request_cancel()

    def attach(self, runner: Any) -> None:
        self.runner = runner
        if self.requested:  # asked before the runner existed: it stops before the first test
            runner.request_cancel()



def run_job(job: dict[str, Any], writer: EventWriter, cancel: CancelSignal | None = None) -> int:
    if job.get("kind", "sweep") != "sweep":  # quantize, quality: app.worker.jobs
        from app.worker.jobs import run_other_job

        return run_other_job(job, writer.emit, cancel)
    try:
        from app.worker.engines import new_llama_engine  # only here: the worker owns the native library
        from app.worker.runner import Runner

        tests = [TestSpec.from_dict(t) for t in job["tests"]]
        engine = new_llama_engine(log_path=job.get("log_path"))
        runner = Runner(engine, writer.emit, run_id=job.get("run_id", ""), token_ticks=job.get("token_ticks", True))
    except Exception as e:  # noqa: BLE001 - reported as an event, the worker cannot go on
        writer.emit(WorkerError(t_ns=time.perf_counter_ns(), message=f"worker cannot start: {e}",
                                 kind=FailureKind.WORKER_START))
        return 2
    if cancel is not None:
        cancel.attach(runner)
    n_ok, n_failed = runner.run(tests, first_index=int(job.get("first_index", 0)))
    return 0 if n_failed == 0 else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="app.worker.main")
    ap.add_argument("--event-fd", type=int, required=True)
    ap.add_argument("--lifeline-fd", type=int, help="end when this pipe closes: the parent died (parent_watch)")
    ap.add_argument("--parent-pid", type=int, default=0, help="the parent's process id, to end with it on Linux")
    args = ap.parse_args(argv)
    if args.lifeline_fd is not None:
        from app.worker.parent_watch import die_with_parent_signal, watch_lifeline

        die_with_parent_signal(args.parent_pid)
        watch_lifeline(args.lifeline_fd)
    cancel = CancelSignal()
    writer = EventWriter(args.event_fd)
    try:
        job = json.loads(sys.stdin.read())
        rc = run_job(job, writer, cancel)
    except json.JSONDecodeError as e:
        writer.emit(WorkerError(t_ns=time.perf_counter_ns(), message=f"bad job document: {e}",
                                 kind=FailureKind.WORKER_START))
        rc = 2
    writer.close()
    if cancel.requested:  # the parent kills us shortly: skip tearing llama.cpp and the interpreter down
        os._exit(rc)
    return rc


if __name__ == "__main__":
    sys.exit(main())
