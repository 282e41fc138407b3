"""A small OpenAI-style HTTP server on 127.0.0.1 that misbehaves on purpose, chosen by the URL's first part.

``http://127.0.0.1:PORT/<mode>/v1`` streams ``/completions`` as ``mode`` says: ``usage`` (tokens and a usage
chunk), ``nousage`` (no usage reported), ``slow`` (waits past the client's timeout), ``http500``, ``http429``,
``halfway`` (stops after three chunks), ``badjson`` and ``badline`` (malformed SSE), ``flaky`` (every other
request answers 500), ``echoauth`` (401 quoting the Authorization header it got), ``echoreason`` (401 whose
HTTP reason phrase quotes it), ``countone`` (a tokenize route that counts every text as one token), ``trickle``
(a byte every 0.3 s), ``multitoken`` (three-token chunks, no usage, a tokenize route), ``prefix`` (a word is
a token; one cache slot like llama-server's: the words shared with the previous prompt are cached, each other
word costs PREFILL_S_PER_WORD before the first token, and usage says how many were cached), ``objecttext`` (each
chunk's ``text`` and ``delta.content`` a JSON object, not a string). Every stream is a
few lines long, and the server counts the requests in flight.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

N_TOKENS = 4
PREFILL_S_PER_WORD = 0.0005


def _chunk(text: str, finish: str | None = None) -> bytes:
    body = {"choices": [{"text": text, "index": 0, "finish_reason": finish}]}
    return f"data: {json.dumps(body)}\n\n".encode()


class _Handler(BaseHTTPRequestHandler):
    server: FakeServer

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass

    def do_GET(self) -> None:  # noqa: N802 (http.server's name): /<mode>/v1/models
        mode = self.path.strip("/").split("/")[0]
        ids = {"usage": ["fake"], "twomodels": ["a", "b"]}.get(mode)
        if not self.path.endswith("/models") or ids is None:
            self.send_response(404)
            self.end_headers()
            return
        payload = json.dumps({"object": "list", "data": [{"id": i, "object": "model"} for i in ids]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        length = int(self.headers.get("Content-Length", 0))
        body = json.loads(self.rfile.read(length) or b"{}")
        self.server.enter(body, self.headers.get("Authorization", ""))
        try:
            self._answer(self.path.strip("/").split("/")[0], body)
        finally:
            self.server.leave()

    def _answer(self, mode: str, body: dict) -> None:
        if mode in ("countone", "multitoken") and "tokenize" in self.path:
            # countone: every text is one token; multitoken: a token per character (chunks carry several)
            text = str(body.get("content") or body.get("input") or "")
            payload = json.dumps({"count": 1 if mode == "countone" else len(text)}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        if mode == "flaky" and self.server.count % 2 == 0:
            mode = "http500"
        if mode == "echoreason":
            self.send_response(401, f"denied for {self.headers.get('Authorization', '')}")
            self.end_headers()
            return
        if mode in ("http500", "http429", "echoauth"):
            status = {"http500": 500, "http429": 429, "echoauth": 401}[mode]
            text = f"denied for {self.headers.get('Authorization', '')}" if mode == "echoauth" else "overloaded"
            self.send_response(status)
            self.end_headers()
            self.wfile.write(text.encode())
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        if mode == "slow":
            time.sleep(1.5)
        if mode == "trickle":  # one byte every 0.3 s, never a whole line: each byte comes before a 1 s timeout
            try:
                for _ in range(100):
                    self.wfile.write(b"d")
                    self.wfile.flush()
                    time.sleep(0.3)
            except (BrokenPipeError, ConnectionResetError):
                pass
            return
        if mode == "objecttext":
            for _ in range(N_TOKENS):
                odd = {"text": {"value": "tok"}, "delta": {"content": {"value": "tok"}}, "index": 0}
                self.wfile.write(f"data: {json.dumps({'choices': [odd]})}\n\n".encode())
            self.wfile.write(b"data: [DONE]\n\n")
            return
        if mode == "multitoken":  # no usage, each chunk three characters: three tokens by the tokenize route
            for _ in range(N_TOKENS):
                self.wfile.write(_chunk("abc"))
            self.wfile.write(b"data: [DONE]\n\n")
            return
        n = min(int(body.get("max_tokens", N_TOKENS)), N_TOKENS)
        prompt_words, cached = 11, None
        if mode == "prefix":
            words = str(body.get("prompt", "")).split()
            cached = self.server.take_prefix(words)
            prompt_words = len(words)
            time.sleep((prompt_words - cached) * PREFILL_S_PER_WORD)
        for i in range(n):
            if mode == "halfway" and i == 3:
                return
            if mode == "badjson" and i == 1:
                self.wfile.write(b"data: {\"choices\": [\n\n")
            if mode == "badline" and i == 1:
                self.wfile.write(b"this is not an event stream\n\n")
            self.wfile.write(b": keep-alive comment\n" if i == 0 else b"")
            self.wfile.write(_chunk(f" tok{i}"))
            self.wfile.flush()
            time.sleep(0.005)
        self.wfile.write(_chunk("", "length"))
        if mode != "nousage":
            usage: dict = {"prompt_tokens": prompt_words, "completion_tokens": n, "total_tokens": prompt_words + n}
            if cached is not None:
                usage["prompt_tokens_details"] = {"cached_tokens": cached}
            self.wfile.write(f"data: {json.dumps({'choices': [], 'usage': usage})}\n\n".encode())
        if mode != "halfway":
            self.wfile.write(b"data: [DONE]\n\n")


class FakeServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self._lock = threading.Lock()
        self.count = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.bodies: list[dict] = []
        self.auth: list[str] = []
        self._slot: list[str] = []  # the words the ``prefix`` mode's one cache slot holds

    def take_prefix(self, words: list[str]) -> int:
        """Words of ``words`` the slot already holds (its common prefix with the previous prompt); then it holds
        ``words``."""
        with self._lock:
            shared = 0
            for a, b in zip(self._slot, words, strict=False):
                if a != b:
                    break
                shared += 1
            self._slot = list(words)
            return shared

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a client that timed out and hung up is part of the test

    def enter(self, body: dict, auth: str) -> None:
        with self._lock:
            self.count += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self.bodies.append(body)
            self.auth.append(auth)

    def leave(self) -> None:
        with self._lock:
            self.in_flight -= 1

    def url(self, mode: str) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/{mode}/v1"


@contextmanager
def fake_server() -> Iterator[FakeServer]:
    server = FakeServer()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
