"""A loopback HTTP server for the remote-header tests: serves real files with or without Range support,
truncated, or failing a few times first; it counts requests and bytes sent."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


@dataclass
class ServerState:
    files: dict[str, Path]
    #: range | norange | truncate | flaky | stall | hugerange (claims a 1 TB range, sends without end) | onebyte
    #: (answers every range with one byte) | trickle (sends one byte every 0.2 s) | nolength (a plain 200 without
    #: Content-Length, the connection closed at the file's end) | liar (a range's Content-Length promised, 100 bytes
    #: sent, then silence) | silent (reads the request, never answers)
    mode: str = "range"
    fail_first: int = 0  # flaky: answer 500 this many times first; stall: answer 1 s late
    requests: int = 0
    bytes_sent: int = 0
    statuses: list[int] = field(default_factory=list)
    auth_headers: list[str] = field(default_factory=list)


class _Handler(BaseHTTPRequestHandler):
    state: ServerState

    def log_message(self, *args: object) -> None:  # keep the test output clean
        pass

    def _send(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.state.statuses.append(status)
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        try:
            self.wfile.write(body)
            self.state.bytes_sent += len(body)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _hostile(self, path: Path, start: int, size: int) -> None:
        st = self.state
        end = start if st.mode == "onebyte" else size - 1 if st.mode == "liar" else 10**12 - 1
        self.state.statuses.append(206)
        self.send_response(206)
        self.send_header("Content-Range", f"bytes {start}-{end}/{size if st.mode != 'hugerange' else 10**12}")
        if st.mode in ("onebyte", "liar"):
            self.send_header("Content-Length", str(end - start + 1))
        self.end_headers()
        try:
            for chunk in _hostile_body(path, start, st.mode):
                self.wfile.write(chunk)
                self.wfile.flush()
                st.bytes_sent += len(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.close_connection = True

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        st = self.state
        st.requests += 1
        st.auth_headers.append(self.headers.get("Authorization", ""))
        if self.path.startswith("/resolve/"):  # like Hugging Face: a redirect to the file's storage
            self.state.statuses.append(302)
            self.send_response(302)
            self.send_header("Location", "/" + self.path.removeprefix("/resolve/"))
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        path = st.files.get(self.path.split("?")[0])
        if path is None:
            self._send(404, {"Content-Length": "0"}, b"")
            return
        if st.mode == "silent":
            time.sleep(30)  # the client's deadline comes first; the server's shutdown does not wait for this thread
            return
        if st.mode == "nolength":
            self.state.statuses.append(200)
            self.send_response(200)
            self.send_header("Connection", "close")
            self.end_headers()
            try:
                self.wfile.write(path.read_bytes())
                self.state.bytes_sent += path.stat().st_size
            except (BrokenPipeError, ConnectionResetError):
                pass
            self.close_connection = True
            return
        if st.mode == "stall" and st.fail_first > 0:  # answer too late for the client's timeout
            st.fail_first -= 1
            time.sleep(1.0)
        if st.mode == "flaky" and st.fail_first > 0:
            st.fail_first -= 1
            self._send(500, {"Content-Length": "0"}, b"")
            return
        size = path.stat().st_size
        etag = f'"{size}-{path.stat().st_mtime_ns}"'
        m = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
        if st.mode in ("hugerange", "onebyte", "trickle", "liar") and m:
            self._hostile(path, int(m.group(1)), size)
            return
        if st.mode == "norange" or not m:
            self._send(200, {"Content-Length": str(size), "ETag": etag}, path.read_bytes())
            return
        start = int(m.group(1))
        end = min(int(m.group(2)) if m.group(2) else size - 1, size - 1)
        with path.open("rb") as f:
            f.seek(start)
            body = f.read(end + 1 - start)
        headers = {"Content-Range": f"bytes {start}-{end}/{size}", "Content-Length": str(len(body)),
                   "ETag": etag}
        if st.mode == "truncate":
            body = body[: len(body) // 2]  # promise the whole range, send half, close
            self.close_connection = True
        self._send(206, headers, body)


def _hostile_body(path: Path, start: int, mode: str) -> Iterator[bytes]:
    data = path.read_bytes()
    if mode == "onebyte":
        yield data[start : start + 1]
    elif mode == "liar":  # the promised length, then 100 bytes and silence (the connection kept open)
        yield data[start : start + 100]
        time.sleep(30)
    elif mode == "trickle":
        for i in range(start, min(start + 50, len(data))):  # bounded: the test's deadline comes first
            yield data[i : i + 1]
            time.sleep(0.2)
    else:  # hugerange: the file, then zeros, at most 64 MiB in all
        yield data[start:]
        for _ in range(64):
            yield bytes(1 << 20)


@contextmanager
def serve(files: dict[str, Path], mode: str = "range", fail_first: int = 0) -> Iterator[tuple[str, ServerState]]:
    """(base URL, state) of a server on 127.0.0.1 serving ``files`` (URL path -> file) until the block ends."""
    state = ServerState(files=files, mode=mode, fail_first=fail_first)
    handler = type("Handler", (_Handler,), {"state": state})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", state
    finally:
        server.shutdown()
        server.server_close()
