"""Issue #29 "Also": odd HTTP replies gave tracebacks. A raw socket answers each request with bytes no proper
server sends (a status line that is not HTTP, a 200 KB header, a Content-Length that is not a number, SSE data
nested 100,000 deep, a chat delta that is a string); every client of a server here must turn each into its own
failure (a request's error, None, RemoteGGUFError), never an exception of another kind."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from app.model.gguf_http import RemoteGGUFError, RemoteOptions, remote_facts
from engines.openai_http import Endpoint, count_tokens, served_models, stream_request

_OK = b"HTTP/1.1 200 OK\r\n"
REPLIES = {
    "content-length not a number": _OK + b"Content-Length: abc\r\n\r\nxx",
    "status line not HTTP": b"garbage here\r\n\r\n",
    "HTTP/0.9 answer": b"hello",
    "header line of 200 KB": _OK + b"X: " + b"a" * 200_000 + b"\r\n\r\n",
    "200 headers": _OK + b"X: a\r\n" * 200 + b"\r\n",
    "bad chunk size": _OK + b"Transfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n",
    "SSE nested 100,000 deep": _OK + b"\r\ndata: " + b"[" * 100_000 + b"\n\n",
    "SSE integer of 5,000 digits": _OK + b'\r\ndata: {"usage": {"prompt_tokens": 1' + b"0" * 5000 + b"}}\n\n",
    "choices and delta not objects": _OK + b'\r\ndata: {"choices": "abc"}\n\ndata: {"choices": [{"delta": "x"}]}\n\n',
    "timings and details not objects": _OK + b'\r\ndata: {"choices": [{"text": "a", "finish_reason": "stop"}], '
                                             b'"timings": [1], "usage": {"prompt_tokens_details": 5}}\n\n',
    "status 999": b"HTTP/1.1 999 Weird\r\nContent-Length: 2\r\n\r\nxx",
}


@contextmanager
def answering(reply: bytes) -> Iterator[int]:
    """A port on 127.0.0.1 whose every connection gets ``reply``, then is closed."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)

    def answer(conn: socket.socket) -> None:
        with conn:
            try:
                conn.settimeout(2)
                conn.recv(1 << 16)
                conn.sendall(reply)
                conn.shutdown(socket.SHUT_WR)
                conn.recv(1 << 16)  # until the client hangs up: no reset before it read the reply
            except OSError:
                pass

    def serve() -> None:  # each connection on its own thread: a client slow to hang up never holds up the next
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            threading.Thread(target=answer, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield srv.getsockname()[1]
    finally:
        srv.close()


def _clients(port: int) -> dict[str, Callable[[], object]]:
    base = f"http://127.0.0.1:{port}/v1"
    plain, chat = Endpoint(base, "m", timeout_s=2), Endpoint(base, "m", timeout_s=2, chat=True)
    return {
        "completions": lambda: stream_request(plain, "hi", 2),
        "chat": lambda: stream_request(chat, "hi", 2),
        "models": lambda: served_models(plain),
        "tokenize": lambda: count_tokens(plain, "hi"),
        "GGUF header": lambda: remote_facts(f"http://127.0.0.1:{port}/m.gguf",
                                            RemoteOptions(retries=0, backoff_s=0.0, use_cache=False)),
    }


@pytest.mark.parametrize("reply", list(REPLIES), ids=list(REPLIES))
def test_an_odd_reply_is_each_clients_own_failure(reply: str) -> None:
    with answering(REPLIES[reply]) as port:
        for client, call in _clients(port).items():
            try:
                out = call()
            except RemoteGGUFError as e:
                assert client == "GGUF header" and str(e).startswith(f"http://127.0.0.1:{port}/m.gguf: "), e
                assert "\n" not in str(e)
                continue
            if reply.startswith("timings") and client == "completions":  # a good stream with odd extras
                assert not out.error and out.text == "a" and out.cached_tokens is None, out  # type: ignore[attr-defined]
            elif client in ("completions", "chat"):  # failed, or no text to time (the row then says so)
                assert out.error or out.first_token_ns is None, (client, out)  # type: ignore[attr-defined]
                assert "\n" not in out.error  # type: ignore[attr-defined]
            elif client == "GGUF header":
                pytest.fail(f"{reply}: the header read of a non-GGUF answer returned {out!r}")
            else:
                assert out is None, (client, out)
