"""Spawn the worker process, feed it a job, read its event stream, and kill it on cancel."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from app.paths import REPO_ROOT, absolute_path_env
from app.run.events import Event, EventDecodeError, FailureKind, SweepFinished, WorkerError, event_from_json
from app.run.plan import TestSpec

#: Seconds without any event (the worker's telemetry samples are a 10 Hz heartbeat) before a worker counts as
#: stalled (stopped, or hung) and is killed; ``GGUF_WORKBENCH_STALL_S`` overrides it.
DEFAULT_STALL_TIMEOUT_S = 120.0
MAX_STALL_TIMEOUT_S = 86_400.0
#: Seconds a cancelled worker has to send the repetitions it timed (a partial row) before it is killed.
CANCEL_GRACE_S = 0.5


def default_stall_timeout_s() -> float:
    """The watchdog's limit: ``GGUF_WORKBENCH_STALL_S`` when set to a positive number, else the default."""
    try:
        value = float(os.environ.get("GGUF_WORKBENCH_STALL_S", ""))
    except ValueError:
        return DEFAULT_STALL_TIMEOUT_S
    # finite and at most a day: inf overflowed select()'s timeout (a traceback mid-sweep)
    return value if 0 < value <= MAX_STALL_TIMEOUT_S else DEFAULT_STALL_TIMEOUT_S


def worker_command(event_fd: int, lifeline_fd: int | None = None) -> list[str]:
    """The worker's command line: ``python -m app.worker.main``, or in a frozen app (PyInstaller: no python) the
    app's own executable, whose entry point runs the worker when its first argument is ``--worker``. With
    ``lifeline_fd`` the worker ends when that pipe closes, and on Linux when this process dies
    (app.worker.parent_watch)."""
    watch = ["--lifeline-fd", str(lifeline_fd), "--parent-pid", str(os.getpid())] if lifeline_fd is not None else []
    if getattr(sys, "frozen", False):
        return [sys.executable, "--worker", "--event-fd", str(event_fd), *watch]
    return [sys.executable, "-m", "app.worker.main", "--event-fd", str(event_fd), *watch]


class WorkerClient:
    """One worker process running a list of tests; iterate ``events()`` until it ends."""

    def __init__(self, tests: list[TestSpec], run_id: str = "", *, first_index: int = 0, token_ticks: bool = True,
                 log_path: str | Path | None = None, stall_timeout_s: float | None = None) -> None:
        self.tests = tests
        self.stall_timeout_s = stall_timeout_s if stall_timeout_s is not None else default_stall_timeout_s()
        self.stalled = False
        self.stalled_after_s = 0.0
        self.run_id = run_id
        self.first_index = first_index
        self.token_ticks = token_ticks
        self.log_path = Path(log_path) if log_path else None
        self.proc: subprocess.Popen[bytes] | None = None
        self._read_fd: int | None = None
        self._lifeline_fd: int | None = None  # its write end: held (never written) until the worker is reaped
        self._lifeline_lock = threading.Lock()
        self.cancelled = False

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def start(self) -> None:
        r, w = os.pipe()
        life_r, life_w = os.pipe()  # the worker's lifeline: end-of-file there when this process dies, however
        job = self.job_document()
        log = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL  # noqa: SIM115
        env = absolute_path_env(dict(os.environ))  # the worker runs in REPO_ROOT: a relative data dir would move
        root = str(REPO_ROOT)
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        try:
            self.proc = subprocess.Popen(
                worker_command(w, life_r),
                stdin=subprocess.PIPE, stdout=log, stderr=log, pass_fds=(w, life_r), env=env, cwd=root,
                start_new_session=True,  # Ctrl-C reaches only us; we kill the worker (and its lifeline, if we die)
            )
        except BaseException:
            os.close(life_w)
            raise
        finally:
            os.close(w)
            os.close(life_r)
            if not isinstance(log, int):  # a file, not subprocess.DEVNULL
                log.close()
        self._read_fd = r
        self._lifeline_fd = life_w
        if self.cancelled:  # cancelled while starting: nothing was running to tell
            self._kill()
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(job).encode("utf-8"))
            self.proc.stdin.close()
        except BrokenPipeError:
            pass

    def job_document(self) -> dict[str, object]:
        """What the worker reads on stdin: a sweep of tests (other job kinds override this)."""
        return {"run_id": self.run_id, "first_index": self.first_index, "token_ticks": self.token_ticks,
                "tests": [t.to_dict() for t in self.tests], "log_path": str(self.log_path) if self.log_path else None}

    def events(self) -> Iterator[Event]:
        """Events as they arrive; ends with SweepFinished, or a WorkerError if the worker died first."""
        if self.proc is None:
            self.start()
        assert self._read_fd is not None and self.proc is not None
        finished = reported = False
        for line in self._lines():
            try:
                event = event_from_json(line)
            except EventDecodeError as e:
                yield WorkerError(t_ns=time.perf_counter_ns(), message=f"unreadable event from worker: {e}")
                continue
            finished = finished or isinstance(event, SweepFinished)
            reported = reported or (isinstance(event, WorkerError) and not finished)
            yield event
        rc = self.proc.wait()
        self._close_lifeline()  # the worker is gone: nothing left to watch it
        if not finished and not reported:  # a worker that said why it stopped has said it best
            kind, message = self._death_reason(rc)
            yield WorkerError(t_ns=time.perf_counter_ns(), message=message, kind=kind)

    def _lines(self) -> Iterator[str]:
        """The stream's lines until the worker closes it; a worker silent past the watchdog's limit is killed."""
        assert self._read_fd is not None
        fd, buf = self._read_fd, b""
        # before its first event the worker imports llama.cpp, which a loaded machine can make slow: the default
        # limit at least, however short the watchdog's
        limit_s = max(self.stall_timeout_s, DEFAULT_STALL_TIMEOUT_S)
        try:
            while True:
                ready, _, _ = select.select([fd], [], [], limit_s)
                if not ready:
                    self.stalled, self.stalled_after_s = True, limit_s
                    self._kill()  # the pipe closes when it dies: the loop ends with what was sent
                    continue
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    break
                limit_s = self.stall_timeout_s
                *lines, buf = (buf + chunk).split(b"\n")
                for line in lines:
                    if line.strip():
                        yield line.decode("utf-8", "replace")
            if buf.strip():
                yield buf.decode("utf-8", "replace")
        finally:
            os.close(fd)

    def _kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()

    def _death_reason(self, rc: int) -> tuple[FailureKind, str]:
        if self.cancelled:
            return FailureKind.CANCELLED, "cancelled"
        if self.stalled:
            return FailureKind.STALLED, (f"stalled: no event from the worker for {self.stalled_after_s:g} s "
                                         "(stopped or hung); it was killed")
        if rc < 0:
            try:
                name = signal.Signals(-rc).name
            except ValueError:
                name = f"signal {-rc}"
            if -rc == signal.SIGKILL:
                return FailureKind.WORKER_KILLED, f"worker process was killed by {name} (out of memory?)"
            if hasattr(signal, "SIGBUS") and -rc == signal.SIGBUS:  # a mapped file shrank under the worker
                return FailureKind.WORKER_DIED, (f"worker process was killed by {name} (a model file it had mapped "
                                                 "was truncated or replaced?)")
            return FailureKind.WORKER_DIED, f"worker process was killed by {name}"
        return FailureKind.WORKER_DIED, f"worker process exited with code {rc} before finishing"

    def cancel(self, grace_s: float = CANCEL_GRACE_S) -> None:
        """Stop: the worker is asked to send the repetitions it has timed (SIGUSR1) and is killed ``grace_s`` later
        at the latest, so memory and the GPU are handed back at once."""
        self.cancelled = True
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        if hasattr(signal, "SIGUSR1") and grace_s > 0:
            try:
                proc.send_signal(signal.SIGUSR1)
            except OSError:
                pass
            timer = threading.Timer(grace_s, self._kill)
            timer.daemon = True
            timer.start()
        else:
            proc.kill()

    def close(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._close_lifeline()

    def _close_lifeline(self) -> None:
        with self._lifeline_lock:  # close() may come from another thread: never close one descriptor twice
            fd, self._lifeline_fd = self._lifeline_fd, None
        if fd is not None:
            os.close(fd)
