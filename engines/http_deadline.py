"""A total deadline for network I/O that no server can stretch.

A socket timeout bounds one read: a server that sends a byte before each timeout (a trickled header line, SSE
stream, chunk-size line or body) keeps a plain read going for ever. A :class:`Deadline` is one timer for the whole
exchange: when it fires it shuts down every connection and socket it watches, so whatever is blocked on them
returns at once (an error or an empty read) and the caller reports the deadline. Standard library only.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any


class Deadline:
    """``seconds`` from now every watched connection (its current socket, looked up when the deadline fires, so a TLS
    handshake under way is cut too) and socket is shut down. Use as a context manager, or call :meth:`close`."""

    def __init__(self, seconds: float) -> None:
        self.seconds = max(0.0, float(seconds))
        self.ends_at = time.monotonic() + self.seconds
        self._fired = threading.Event()
        self._lock = threading.Lock()
        self._conns: list[Any] = []  # http.client connections: their .sock at the moment the deadline fires
        self._socks: list[socket.socket] = []
        self._timer = threading.Timer(self.seconds, self.cut)
        self._timer.daemon = True
        self._timer.start()

    @property
    def overdue(self) -> bool:
        """Whether the deadline fired (or has passed)."""
        return self._fired.is_set() or time.monotonic() >= self.ends_at

    def left_s(self) -> float:
        """Seconds to the deadline (0 once it has passed)."""
        return max(0.0, self.ends_at - time.monotonic())

    def watch_connection(self, conn: Any) -> None:
        """Cut ``conn`` (an http.client connection) at the deadline; at once if it has passed."""
        with self._lock:
            self._conns.append(conn)
        if self._fired.is_set():
            self.cut()

    def watch_socket(self, sock: socket.socket | None) -> None:
        """Cut ``sock`` at the deadline (a response keeps reading its socket after the connection lets it go)."""
        if sock is None:
            return
        with self._lock:
            self._socks.append(sock)
        if self._fired.is_set():
            self.cut()

    def cut(self) -> None:
        """Shut down everything watched now (the timer calls this; a cancel may too)."""
        self._fired.set()
        with self._lock:
            socks = [*self._socks, *(getattr(c, "sock", None) for c in self._conns)]
        for sock in socks:
            if sock is None:
                continue
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except (OSError, ValueError):
                pass

    def close(self) -> None:
        """Stop the timer (the exchange ended in time)."""
        self._timer.cancel()

    def __enter__(self) -> Deadline:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
