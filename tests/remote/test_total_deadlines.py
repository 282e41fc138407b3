"""Issue #44 point 2: one total deadline per request, per streamed response and per header read, whatever the server
sends. A server sending a byte at a time (its status line, a header, an SSE stream, a chunk-size line or a body)
resets every socket timeout and used to hold ``run --url`` (on ``/tokenize`` or on the stream) and ``inspect URL``
for ever; each now ends at its deadline with one line saying so."""

from __future__ import annotations

import socket
import socketserver
import subprocess
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
    # no Content-Length and Connection: close: http.client lets go of the connection's socket once the response
    # owns it (the socket a deadline that watched only the connection could no longer find)
    "closed": b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n",
}
TRICKLE = {"status": b"HTTP/1.1 200 " + b"K" * 10_000, "headers": b"X-Slow: " + b"a" * 10_000,
           "body": b"GGUF" + b"d" * 10_000, "chunked": b"1" * 10_000, "closed": b" " * 10_000}
#: The modes every request kind is checked against in the fast tier (``closed`` is the heavy tests' below).
FAST_MODES = ["status", "headers", "body", "chunked"]
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
            if mode == "slowroutes":  # every tokenize route answers after SLOW_ROUTE_S: 404 first, then a count
                time.sleep(SLOW_ROUTE_S)
                found = b"/tokenize" in head.split(b"\r\n", 1)[0] and b"/extras/" not in head.split(b"\r\n", 1)[0]
                sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n{\"count\": 5}" if found else
                             b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
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
#: The acceptance of issue #54 item 3: a hostile server's read ends within its deadline plus 10 %.
STATED_S = 2.0
WITHIN_S = STATED_S * 1.1
SLOW_ROUTE_S = 0.7 * STATED_S


@pytest.mark.parametrize("mode", FAST_MODES)
def test_a_streamed_request_ends_at_its_deadline(trickle: TrickleServer, mode: str) -> None:
    t0 = time.monotonic()
    r = stream_request(Endpoint(trickle.url(mode), "m", timeout_s=DEADLINE_S), "p", 4)
    took = time.monotonic() - t0
    assert took < DEADLINE_S + SLACK_S, took
    assert r.error == f"timed out: the whole request took more than {DEADLINE_S:g} s", r.error


@pytest.mark.parametrize("mode", FAST_MODES)
def test_tokenize_and_models_end_at_their_deadline(trickle: TrickleServer, mode: str) -> None:
    endpoint = Endpoint(trickle.url(mode), "m", timeout_s=DEADLINE_S)
    t0 = time.monotonic()
    assert count_tokens(endpoint, "some words") is None
    assert served_models(endpoint) is None
    took = time.monotonic() - t0
    assert took < 2 * DEADLINE_S + SLACK_S, took  # one tokenize route (the deadline ends the asking), then /models


@pytest.mark.parametrize("mode", FAST_MODES)
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


@pytest.mark.heavy  # waits out a deadline per request kind
@pytest.mark.parametrize("ask", ["tokenize", "models", "stream", "header"])
def test_an_answer_that_drips_until_the_server_closes_ends_at_its_deadline(trickle: TrickleServer, ask: str) -> None:
    """Issue #54 item 3: ``run --url … --request-timeout 2`` against a /tokenize answering a byte at a time without
    Content-Length (``Connection: close``) waited past 100 s: the deadline watched the connection, whose socket
    http.client had already handed to the response."""
    from app.model.gguf_http import RemoteGGUFError, RemoteOptions, remote_facts

    endpoint = Endpoint(trickle.url("closed"), "m", timeout_s=STATED_S)
    t0 = time.monotonic()
    if ask == "tokenize":
        assert count_tokens(endpoint, "some words") is None
    elif ask == "models":
        assert served_models(endpoint) is None
    elif ask == "stream":
        assert stream_request(endpoint, "p", 4).error == f"timed out: the whole request took more than {STATED_S:g} s"
    else:
        with pytest.raises(RemoteGGUFError, match=f"the header read took more than {STATED_S:g} s$"):
            remote_facts(trickle.url("closed", "model.gguf"), RemoteOptions(deadline_s=STATED_S, use_cache=False))
    assert time.monotonic() - t0 <= WITHIN_S


@pytest.mark.heavy  # waits out a deadline
def test_the_tokenize_routes_share_one_deadline(trickle: TrickleServer) -> None:
    """Each route had a deadline of its own: two routes each answering just inside it took twice the deadline."""
    endpoint = Endpoint(trickle.url("slowroutes"), "m", timeout_s=STATED_S)
    t0 = time.monotonic()
    assert count_tokens(endpoint, "some words") is None  # the second route's count came after the deadline
    assert time.monotonic() - t0 <= WITHIN_S


@pytest.mark.heavy  # the CLI in a subprocess, against a tokenize route that drips until it closes
def test_run_url_against_a_dripping_tokenize_route_ends_within_its_side_deadlines(
        trickle: TrickleServer, tmp_path) -> None:  # noqa: ANN001
    """The completions never answer here (``closed`` drips them too), so every request and side request ends at
    --request-timeout: the warm-up, one tokenize when sizing the prompt, two requests. Today's code waited past
    100 s on the first tokenize."""
    from tests.cli_helpers import gguf_bench

    t0 = time.monotonic()
    proc = gguf_bench("run", "--url", trickle.url("closed"), "--served-model", "m", "--request-timeout",
                      f"{STATED_S:g}", "-p", "4", "-n", "2", "--requests", "2", "--no-store", "-o", "csv", timeout=120)
    took = time.monotonic() - t0
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr and f"the whole request took more than {STATED_S:g} s" in proc.stdout
    assert took < 4 * WITHIN_S + 10, took  # four deadlines, and the interpreter's start on a busy machine


def test_a_reply_whose_text_is_an_object_is_a_malformed_reply() -> None:
    """Issue #54 item 8: ``choices[].text`` holding an object was counted as a token (4 of them at 31,717 tok/s);
    it is a failed request, one line."""
    from tests.remote.fake_server import fake_server

    with fake_server() as server:
        for chat in (False, True):
            r = stream_request(Endpoint(server.url("objecttext"), "m", timeout_s=5, chat=chat), "p", 4)
            where = "choices[].delta.content" if chat else "choices[].text"
            assert r.error == f"malformed reply: {where} is an object, not text", r.error
            assert r.chunk_ns == [] and "\n" not in r.error


#: A header server's misbehaviours (tests/model/range_server.py): a range answer dripping a byte every 0.2 s, a
#: Content-Length promised then silence, a server that never answers.
HOSTILE_HEADER_SERVERS = ("trickle", "liar", "silent")


@pytest.mark.heavy  # waits out a deadline per server
@pytest.mark.parametrize("mode", HOSTILE_HEADER_SERVERS)
def test_a_header_read_from_a_hostile_server_ends_within_its_deadline(make_gguf, mode: str) -> None:  # noqa: ANN001
    """Issue #54 item 3: a lying Content-Length took 4 tries of 20 s each; retries now count against the read's
    one deadline (their backoff too), which ends the read with the line that names it."""
    from app.model.gguf_http import RemoteGGUFError, RemoteOptions, remote_facts
    from tests.model.range_server import serve

    with serve({"/f.gguf": make_gguf()}, mode=mode) as (base, _state):
        t0 = time.monotonic()
        with pytest.raises(RemoteGGUFError) as info:
            remote_facts(f"{base}/f.gguf", RemoteOptions(deadline_s=STATED_S, use_cache=False))
        took = time.monotonic() - t0
    assert took <= WITHIN_S, took
    assert str(info.value).endswith(f"the header read took more than {STATED_S:g} s"), str(info.value)


@pytest.mark.heavy  # the CLI in subprocesses, each waiting out its deadline
def test_inspect_url_against_hostile_servers_ends_within_url_timeout(make_gguf) -> None:  # noqa: ANN001
    """``inspect URL --url-timeout S``: the command's own start and end (measured on a server that answers at
    once, in this test) plus S, plus 10 %, whatever the server does; a plain 200 without a length is read."""
    from tests.cli_helpers import gguf_bench
    from tests.model.range_server import serve

    path = make_gguf()

    def inspect(mode: str) -> tuple[float, subprocess.CompletedProcess[str], str]:
        with serve({"/f.gguf": path}, mode=mode) as (base, _state):
            t0 = time.monotonic()
            proc = gguf_bench("inspect", f"{base}/f.gguf", "--url-timeout", f"{STATED_S:g}", timeout=60)
            return time.monotonic() - t0, proc, base

    _, good, good_base = inspect("range")
    assert good.returncode == 0, good.stderr
    _, nolength, base = inspect("nolength")
    assert nolength.returncode == 0, nolength.stderr
    assert nolength.stdout.replace(base, "URL") == good.stdout.replace(good_base, "URL")
    for mode in HOSTILE_HEADER_SERVERS:
        start_s = inspect("range")[0]  # the command's own time, measured just before each hostile run
        took, proc, _ = inspect(mode)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.strip().endswith(f"the header read took more than {STATED_S:g} s"), proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1
        # the deadline's 10 % is held in-process above; here the command must end with its read: the start of
        # Python on a busy machine varies by a second or two, another try or backoff would add whole deadlines
        assert took - start_s <= WITHIN_S + 2.0, (mode, took, start_s)
