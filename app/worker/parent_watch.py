"""A worker ends with the process that started it, however that one ended (a SIGKILL included).

The worker is started in a session of its own (so Ctrl-C reaches only its parent), which also means nothing kills it
when the parent dies: a quality job whose ``gguf-bench`` was killed went on scoring for minutes, reparented to PID 1,
holding the model's memory and its temporary folder. Two watches, either enough:

- the *lifeline*: the parent holds the write end of a pipe and never writes to it; the worker's thread reading the
  other end gets end-of-file the moment every copy of the write end is closed, which the kernel does when the parent
  dies, however. Works on every POSIX system.
- on Linux, ``prctl(PR_SET_PDEATHSIG, SIGKILL)``: the kernel kills the worker when the thread that started it ends,
  even if the worker's Python is stuck and its watching thread cannot run.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading

#: prctl's option that sets the signal sent when the parent dies (linux/prctl.h).
PR_SET_PDEATHSIG = 1
#: The worker's exit status when its parent is gone (as when it finds its event pipe closed).
PARENT_GONE_EXIT = 3


def die_with_parent_signal(parent_pid: int) -> bool:
    """On Linux, have the kernel SIGKILL this process when its parent dies; True when set. A parent that died before
    this ran (this process is already someone else's child) ends it at once."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            return False
    except (OSError, AttributeError):
        return False
    if parent_pid and os.getppid() != parent_pid:  # the parent died before the signal was asked for
        os._exit(PARENT_GONE_EXIT)
    return True


def watch_lifeline(fd: int) -> threading.Thread:
    """A daemon thread that ends this process when ``fd`` (the read end of the parent's lifeline pipe) reaches
    end-of-file: the parent closed it or died."""

    def watch() -> None:
        try:
            while os.read(fd, 1):  # the parent never writes: anything read is ignored
                pass
        except OSError:
            pass
        os._exit(PARENT_GONE_EXIT)

    thread = threading.Thread(target=watch, name="parent-lifeline", daemon=True)
    thread.start()
    return thread
