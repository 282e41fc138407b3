"""Issue #44 point 2: one total deadline per request, per streamed response and per header read, whatever the server
sends. A server sending a byte at a time (its status line, a header, an SSE stream, a chunk-size line or a body)
resets every socket timeout and used to hold ``run --url`` (on ``/tokenize`` or on the stream) and ``inspect URL``
for ever; each now ends at its deadline with one line saying so."""

from __future__ import annotations

import socket
import socketserver
import threading
import time
from collections.abc import Iterator

import pytest

from engines.openai_http import Endpoint, count_tokens, served_models, stream_request

#: What the server trickles, chosen by the URL's first path part.
MODES = {
    "status": b"",  # the status line itself, a byte at a time
    "headers": b"HTTP/1.1 200 OK\r\n",  # then one header line that never ends
    "body": b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: 1000000000\r\n\r\n",
    "chunked": b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n",
}
TRICKLE = {"status": b"HTTP/1.1 200 " + b"K" * 10_000, "headers": b"X-Slow: " + b"a" * 10_000,
           "body": b"GGUF" + b"d" * 10_000, "chunked": b"1" * 10_000}
BYTE_EVERY_S = 0.05


class _Trickler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        sock: socket.socket = self.request
        sock.settimeout(5)
        head = b""
        try:
            while b"\r\n\r\n" not in head and len(head) < 65536:
                got = sock.recv(4096)
                if not got:
                    return
                head += got
            mode = head.split(b" ", 2)[1].decode().strip("/").split("/")[0]
            if mode == "flood":  # tiny chunks of text as fast as the socket takes them, for ever
                sock.sendall(MODES["body"])
                chunk = b'data: {"choices": [{"text": "x", "index": 0}]}\n\n'
                for _ in range(200_000):
                    sock.sendall(chunk * 64)
                return
            if mode == "hugechunk":  # a chunk size past 2**63 at once: http.client's peek overflowed on it
                sock.sendall(MODES["chunked"] + b"F" * 40 + b"\r\n" + b"data: x\n\n")
                time.sleep(0.3)
                return
            sock.sendall(MODES[mode])
            for byte in TRICKLE[mode]:
                sock.sendall(bytes([byte]))
                time.sleep(BYTE_EVERY_S)
        except (OSError, KeyError, IndexError):
            return


class TrickleServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def url(self, mode: str, tail: str = "v1") -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/{mode}/{tail}"


@pytest.fixture(scope="module")
def trickle() -> Iterator[TrickleServer]:
    server = TrickleServer(("127.0.0.1", 0), _Trickler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


DEADLINE_S = 0.6
SLACK_S = 3.0  # a busy two-core machine: the deadline holds, give or take scheduling


@pytest.mark.parametrize("mode", list(MODES))
def test_a_streamed_request_ends_at_its_deadline(trickle: TrickleServer, mode: str) -> None:
    t0 = time.monotonic()
    r = stream_request(Endpoint(trickle.url(mode), "m", timeout_s=DEADLINE_S), "p", 4)
    took = time.monotonic() - t0
    assert took < DEADLINE_S + SLACK_S, took
    assert r.error == f"timed out: the whole request took more than {DEADLINE_S:g} s", r.error


@pytest.mark.parametrize("mode", list(MODES))
def test_tokenize_and_models_end_at_their_deadline(trickle: TrickleServer, mode: str) -> None:
    endpoint = Endpoint(trickle.url(mode), "m", timeout_s=DEADLINE_S)
    t0 = time.monotonic()
    assert count_tokens(endpoint, "some words") is None
    assert served_models(endpoint) is None
    took = time.monotonic() - t0
    assert took < 2 * DEADLINE_S + SLACK_S, took  # one tokenize route (the deadline ends the asking), then /models


@pytest.mark.parametrize("mode", list(MODES))
def test_a_remote_header_read_ends_at_its_deadline(trickle: TrickleServer, mode: str) -> None:
    from app.model.gguf_http import RemoteGGUFError, RemoteOptions, remote_facts

    opts = RemoteOptions(deadline_s=DEADLINE_S, timeout_s=5.0, retries=0, use_cache=False)
    t0 = time.monotonic()
    with pytest.raises(RemoteGGUFError) as info:
        remote_facts(trickle.url(mode, "model.gguf"), opts)
    took = time.monotonic() - t0
    assert took < DEADLINE_S + SLACK_S, took
    assert str(info.value).endswith(f"the header read took more than {DEADLINE_S:g} s"), str(info.value)


def test_a_chunk_size_past_any_integer_is_a_failed_request(trickle: TrickleServer) -> None:
    r = stream_request(Endpoint(trickle.url("hugechunk"), "m", timeout_s=5), "p", 4)
    assert r.error and "Traceback" not in r.error and "\n" not in r.error, r.error
    assert count_tokens(Endpoint(trickle.url("hugechunk"), "m", timeout_s=5), "x") is None


def test_a_flood_of_tiny_chunks_is_cut_before_it_fills_memory(trickle: TrickleServer) -> None:
    t0 = time.monotonic()
    r = stream_request(Endpoint(trickle.url("flood"), "m", timeout_s=30), "p", 4)
    assert r.error == "the server sent more than 1,024 chunks of text", r.error
    assert len(r.chunk_ns) <= 1024 and time.monotonic() - t0 < 10


def test_a_test_s_prompts_are_made_as_they_are_sent() -> None:
    """``-p 1048576 --requests 100000`` built every prompt first: a million words each, 100,000 of them."""
    from collections.abc import Sequence

    from app.remote.session import PromptMaker, Texts
    from engines.openai_http import LoadRun

    made: list[int] = []

    class Counted(PromptMaker):
        def text(self, n_words: int, request_index: int) -> str:
            made.append(request_index)
            return super().text(3, request_index)

    texts = Texts(Counted(Endpoint("http://127.0.0.1:9/v1", "m")), 1 << 20, 100_000, lambda i: i)
    assert isinstance(texts, Sequence) and len(texts) == 100_000
    LoadRun(Endpoint("http://127.0.0.1:9/v1", "m"), texts, 4, 1, [0.0] * 100_000, contexts=texts)
    assert made == []  # nothing made until a request is sent
    assert texts[5] == texts[5] and made == [5, 5]


def test_the_deadline_is_stated_in_help() -> None:
    from app.cli.main import build_parser

    run_help = build_parser()._subparsers._group_actions[0].choices["run"].format_help()  # type: ignore[union-attr]
    inspect_help = build_parser()._subparsers._group_actions[0].choices["inspect"].format_help()  # type: ignore
    assert "whatever the server sends" in " ".join(run_help.split())
    assert "whatever the server sends" in " ".join(inspect_help.split())


@pytest.mark.heavy  # the CLI in a subprocess
def test_run_url_against_a_trickling_server_ends_within_its_deadlines(trickle: TrickleServer, tmp_path) -> None:  # noqa: ANN001
    from tests.cli_helpers import gguf_bench

    for mode in ("body", "chunked"):
        t0 = time.monotonic()
        proc = gguf_bench("run", "--url", trickle.url(mode), "--served-model", "m", "--request-timeout", "1",
                          "-p", "4", "-n", "2", "--requests", "2", "--no-store", "-o", "csv", timeout=120)
        took = time.monotonic() - t0
        # warm-up, two tokenize routes at most, two requests: about 5 deadlines, never for ever
        assert took < 30, took
        assert proc.returncode == 1, proc.stderr
        assert "Traceback" not in proc.stderr and "the whole request took more than 1 s" in proc.stdout
