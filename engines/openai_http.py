"""Remote OpenAI-compatible inference servers: one streamed request, timed from its SSE stream, and a bounded load.

Standard library only. Works with llama.cpp's server, vLLM, SGLang, Ollama's OpenAI API and llama-cpp-python's
server: ``POST {base}/completions`` (or ``/chat/completions``) with ``stream: true``. Like every engine it reports
timestamps (``time.perf_counter_ns``) and token counts; rates and percentiles are the caller's. A request never
raises: a refused connection, a timeout, an HTTP error, a stream that stops half-way or a malformed SSE line
becomes a :class:`RequestResult` whose ``error`` says why. Every request has one total deadline
(``Endpoint.timeout_s``: connect, headers and the whole streamed body), held whatever the server sends
(:mod:`engines.http_deadline`); the side requests (``/models``, ``/tokenize``) get at most :data:`SIDE_REQUEST_S` of
it. The API key is read from the environment (:data:`API_KEY_ENVS`) and never appears in a result or an error
message.
"""

from __future__ import annotations

import dataclasses
import http.client
import json
import os
import random
import re
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from engines.http_deadline import Deadline

API_KEY_ENVS: tuple[str, ...] = ("GGUF_BENCH_API_KEY", "OPENAI_API_KEY")
Clock = Callable[[], int]
_SNIPPET = 80  # characters of a server's text quoted in an error


class EndpointError(ValueError):
    """The endpoint URL cannot be used (not http/https, no host)."""


#: The longest deadline of one request a caller may set (a day).
MAX_TIMEOUT_S = 86_400.0
#: The default deadline of one request: connect, headers and the whole streamed answer.
DEFAULT_REQUEST_TIMEOUT_S = 600.0
#: The longest wait for any one read within a request (a server silent this long is not answering).
IDLE_TIMEOUT_S = 60.0
#: The deadline of a side request (``GET /models``, a tokenize route): at most this, and at most the request's own.
SIDE_REQUEST_S = 30.0


@dataclass(frozen=True)
class Endpoint:
    """Where to send requests: ``base_url`` ends at the API root, e.g. ``http://127.0.0.1:8080/v1``."""

    base_url: str
    model: str
    timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S  # the whole of one request, whatever the server sends
    chat: bool = False  # /chat/completions instead of /completions
    ignore_eos: bool = True  # ask for exactly max_tokens (ignore_eos and min_tokens, where supported)

    def __post_init__(self) -> None:
        try:
            parts = urlsplit(self.base_url)
            _ = parts.port  # raises for a port out of 0-65535 or not a number
        except ValueError as e:  # "Invalid IPv6 URL", "Port out of range 0-65535"
            raise EndpointError(f"{self.base_url[:200]}: not a usable URL ({e})") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise EndpointError(f"{self.display}: not an http:// or https:// URL with a host")
        if not (isinstance(self.timeout_s, int | float) and 0 < self.timeout_s <= MAX_TIMEOUT_S):
            raise EndpointError(f"a request timeout of {self.timeout_s!r} s: must be above 0 and at most "
                                f"{MAX_TIMEOUT_S:g}")

    @property
    def display(self) -> str:
        """The URL as recorded in rows: no user:password, query or fragment."""
        p = urlsplit(self.base_url)
        host = p.hostname or ""
        port = f":{p.port}" if p.port else ""
        return f"{p.scheme}://{host}{port}{p.path.rstrip('/')}"

    @property
    def idle_s(self) -> float:
        """The longest wait for one read: :data:`IDLE_TIMEOUT_S`, never more than the whole request's deadline."""
        return min(IDLE_TIMEOUT_S, self.timeout_s)

    def _connection(self, deadline: Deadline) -> http.client.HTTPConnection:
        """A connection whose every read waits at most ``idle_s`` and which ``deadline`` cuts when it passes: its
        socket is watched from the moment it connects, so a response that outlives the connection's hold on it (an
        answer without Content-Length, or with ``Connection: close``: http.client then drops ``conn.sock``) is cut
        too."""
        p = urlsplit(self.base_url)
        cls = _WatchedHTTPS if p.scheme == "https" else _WatchedHTTP
        conn = cls(p.hostname or "", p.port, timeout=max(0.001, min(self.idle_s, deadline.left_s())))
        conn.deadline = deadline
        deadline.watch_connection(conn)
        return conn

    def _path(self, tail: str, root: bool = False) -> str:
        base = urlsplit(self.base_url).path.rstrip("/")
        if root and base.endswith("/v1"):
            base = base[: -len("/v1")]
        return f"{base}{tail}"


class _WatchedHTTP(http.client.HTTPConnection):
    """An HTTP connection that hands its socket to its :class:`Deadline` as soon as it connects."""

    deadline: Deadline | None = None

    def connect(self) -> None:
        try:
            super().connect()
        finally:
            if self.deadline is not None:
                self.deadline.watch_socket(self.sock)


class _WatchedHTTPS(http.client.HTTPSConnection):
    """The same over TLS."""

    deadline: Deadline | None = None

    def connect(self) -> None:
        try:
            super().connect()
        finally:
            if self.deadline is not None:
                self.deadline.watch_socket(self.sock)


def api_key() -> str | None:
    """The first non-empty key among :data:`API_KEY_ENVS`."""
    for name in API_KEY_ENVS:
        value = os.environ.get(name, "").strip()
        if value:
            return value
    return None


def _headers() -> dict[str, str]:
    headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
    key = api_key()
    if key:
        headers["Authorization"] = f"Bearer {key}"
    return headers


#: ``Authorization: <scheme> <credentials>`` and ``Bearer <token>`` as a server may echo them back (any key).
_CREDENTIALS = re.compile(r"(?i)(authorization\s*[:=]\s*)(\S+(?:\s+\S+)?)|(\bbearer\s+)(\S+)")


def scrub_secrets(text: str) -> str:
    """``text`` with the API key (if any) and every Authorization/Bearer credential blanked out: every string
    that leaves this engine (errors, reason phrases, server messages) passes through here."""
    key = api_key()
    if key:
        for part in {key, *key.split()}:
            if len(part) >= 4:
                text = text.replace(part, "***")
    return _CREDENTIALS.sub(lambda m: (m.group(1) or m.group(3)) + "***", text)


def _scrub(text: str) -> str:
    """``text`` without secrets (:func:`scrub_secrets`), cut to one short line."""
    text = " ".join(scrub_secrets(text).split())
    return text if len(text) <= _SNIPPET else text[:_SNIPPET] + "…"


@dataclass
class RequestResult:
    """One request's timestamps and token counts; ``error`` is "" when it finished."""

    start_ns: int
    end_ns: int = 0
    first_token_ns: int | None = None
    chunk_ns: list[int] = field(default_factory=list)  # arrival of each chunk that carried text
    prompt_tokens: int | None = None  # as the server reports them (usage)
    cached_tokens: int | None = None  # prompt tokens the server took from its prefix cache, where it says so
    completion_tokens: int | None = None  # as the server reports them (usage); None: count chunks
    finish_reason: str = ""
    error: str = ""
    text: str = ""  # the generated text (at most MAX_KEPT_TEXT characters), to count its tokens afterwards
    retokenized: bool = False  # completion_tokens is the server's tokenize count of ``text``, not its usage

    @property
    def ok(self) -> bool:
        return not self.error

    @property
    def output_tokens(self) -> int:
        return self.completion_tokens if self.completion_tokens is not None else len(self.chunk_ns)

    @property
    def counted_by(self) -> str:
        """``usage``: the server's count; ``tokenize``: the output text counted with the server's tokenizer;
        ``chunks``: neither could be had, stream chunks were counted (one chunk may carry several tokens)."""
        if self.completion_tokens is None:
            return "chunks"
        return "tokenize" if self.retokenized else "usage"


def request_body(endpoint: Endpoint, prompt: str, max_tokens: int, context: str = "") -> dict[str, Any]:
    """The JSON of one request. ``context`` (a depth's earlier text) goes first: before the prompt in
    /completions, as the system message in /chat/completions, so a prefix cache can hold it."""
    body: dict[str, Any] = {"model": endpoint.model, "max_tokens": max_tokens, "stream": True,
                            "stream_options": {"include_usage": True}, "temperature": 0.0}
    if endpoint.chat:
        body["messages"] = ([{"role": "system", "content": context}] if context else []) + [
            {"role": "user", "content": prompt}]
    else:
        body["prompt"] = f"{context} {prompt}" if context and prompt else context or prompt
    if endpoint.ignore_eos:
        body.update(ignore_eos=True, min_tokens=max_tokens)
    return body


#: Characters of generated text kept per request (to count its tokens when the server reports no usage).
MAX_KEPT_TEXT = 1 << 20
#: One SSE line at most (a chunk of a few tokens is under 1 KiB).
MAX_SSE_LINE_BYTES = 1 << 20


class _Stream:
    """Reads one SSE response into a RequestResult."""

    def __init__(self, result: RequestResult, chat: bool, clock: Clock, deadline_ns: int,
                 max_chunks: int = 1 << 20) -> None:
        self.result, self.chat, self.clock, self.deadline_ns = result, chat, clock, deadline_ns
        self.max_chunks = max_chunks
        self.done = False

    def read(self, resp: http.client.HTTPResponse, cancel: threading.Event | None) -> None:
        while not self.done:
            if cancel is not None and cancel.is_set():
                raise _Fail("cancelled")
            if self.clock() > self.deadline_ns:
                raise _Fail("timed out: the whole request took too long")
            raw = resp.readline(MAX_SSE_LINE_BYTES + 1)
            if len(raw) > MAX_SSE_LINE_BYTES:
                raise _Fail(f"an SSE line longer than {MAX_SSE_LINE_BYTES:,} bytes")
            if not raw:
                if cancel is not None and cancel.is_set():
                    raise _Fail("cancelled")
                break
            self.line(raw.decode("utf-8", errors="replace").rstrip("\r\n"))
        if not self.done and not self.result.finish_reason:
            raise _Fail(f"stream stopped after {len(self.result.chunk_ns)} chunks without [DONE]")

    def line(self, line: str) -> None:
        if not line or line.startswith(":") or line.split(":", 1)[0] in ("event", "id", "retry"):
            return
        if not line.startswith("data:"):
            raise _Fail(f"malformed SSE line {_scrub(line)!r}")
        data = line[5:].strip()
        if data == "[DONE]":
            self.done = True
            return
        try:
            chunk = json.loads(data)
        except (ValueError, RecursionError):  # not JSON, a number past Python's digit limit, nested too deep
            raise _Fail(f"malformed SSE data {_scrub(data)!r}") from None
        if not isinstance(chunk, dict):
            raise _Fail(f"malformed SSE data {_scrub(data)!r}")
        self.chunk(chunk)

    def chunk(self, chunk: dict[str, Any]) -> None:
        now = self.clock()
        if "error" in chunk:
            raise _Fail(f"server error in stream: {_scrub(json.dumps(chunk['error']))}")
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self.result.prompt_tokens = _int_or_none(usage.get("prompt_tokens"))
            self.result.completion_tokens = _int_or_none(usage.get("completion_tokens"))
            details = usage.get("prompt_tokens_details")  # OpenAI's, vLLM's and llama-server's cached count
            if isinstance(details, dict) and (cached := _int_or_none(details.get("cached_tokens"))) is not None:
                self.result.cached_tokens = cached
        timings = chunk.get("timings")  # llama-server: cache_n prompt tokens came from its cache
        if isinstance(timings, dict) and self.result.cached_tokens is None:
            self.result.cached_tokens = _int_or_none(timings.get("cache_n"))
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict):
                continue
            delta = choice.get("delta")
            text = (delta.get("content") if isinstance(delta, dict) else None) if self.chat else choice.get("text")
            if text is not None and not isinstance(text, str):  # an object, a list, a number: not generated text
                where = "choices[].delta.content" if self.chat else "choices[].text"
                raise _Fail(f"malformed reply: {where} is {_json_kind(text)}, not text")
            if text:
                if self.result.first_token_ns is None:
                    self.result.first_token_ns = now
                if len(self.result.chunk_ns) >= self.max_chunks:  # a flood of tiny chunks: memory, not tokens
                    raise _Fail(f"the server sent more than {self.max_chunks:,} chunks of text")
                self.result.chunk_ns.append(now)
                if len(self.result.text) < MAX_KEPT_TEXT:
                    self.result.text += text[: MAX_KEPT_TEXT - len(self.result.text)]
            if choice.get("finish_reason"):
                self.result.finish_reason = str(choice["finish_reason"])


def _json_kind(value: object) -> str:
    """``an object``, ``a list``, ``a number``, ``true``: what a JSON value is, for an error line."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return {dict: "an object", list: "a list", int: "a number", float: "a number"}.get(type(value), "not text")


class _Fail(Exception):
    """A request failed; str() is the reason."""


def _int_or_none(value: object) -> int | None:
    """A token count a server reported: a whole number from 0 to MAX_REPORTED_TOKENS, else None (not believed)."""
    ok = isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_REPORTED_TOKENS
    return value if ok else None  # type: ignore[return-value]


#: Chunks of text a request may bring per token asked (a chunk carries a token or more; a server streaming single
#: characters still stays under this): more is a flood, failed before its timestamps fill memory.
CHUNKS_PER_TOKEN_BOUND = 16
#: More tokens than any one request holds (a context of 16 million tokens).
MAX_REPORTED_TOKENS = 1 << 24


def stream_request(endpoint: Endpoint, prompt: str, max_tokens: int, *, context: str = "",
                   clock: Clock = time.perf_counter_ns, cancel: threading.Event | None = None,
                   on_socket: Callable[[socket.socket | None], None] | None = None) -> RequestResult:
    """Send one streamed request and time it. Never raises: a failure is ``result.error``.

    ``on_socket`` is told the connected socket (and None when done), so another thread can cut the stream.
    """
    result = RequestResult(start_ns=clock())
    total_s = endpoint.timeout_s  # the whole request, however the server trickles its bytes
    stream = _Stream(result, endpoint.chat, clock, result.start_ns + int(total_s * 1e9),
                     max_chunks=max(1024, CHUNKS_PER_TOKEN_BOUND * max_tokens))
    deadline = Deadline(total_s)  # a server sending a byte before each read's timeout cannot hold us longer
    conn = endpoint._connection(deadline)
    try:
        conn.connect()  # its socket is the deadline's from here (Endpoint._connection)
        if on_socket is not None and conn.sock is not None:
            on_socket(conn.sock)
        if cancel is not None and cancel.is_set():
            raise _Fail("cancelled")
        path = endpoint._path("/chat/completions" if endpoint.chat else "/completions")
        body = json.dumps(request_body(endpoint, prompt, max_tokens, context))
        conn.request("POST", path, body=body, headers=_headers())
        resp = conn.getresponse()
        if resp.status != 200:
            raise _Fail(f"HTTP {resp.status} {_scrub(str(resp.reason))}: "
                        f"{_scrub(resp.read(2048).decode('utf-8', 'replace'))}")
        stream.read(resp, cancel)
    except _Fail as e:
        result.error = str(e)
    except UnicodeEncodeError:  # http.client sends header values as Latin-1
        result.error = "the API key cannot be sent: it holds a character HTTP headers cannot carry (not Latin-1)"
    except ValueError as e:  # http.client refuses a header value: the key holds a newline or a control character
        result.error = ("the API key cannot be sent: it holds a newline or control character" if "header" in str(e)
                        else f"bad request: {type(e).__name__}")
    except ConnectionRefusedError:
        result.error = f"connection refused by {endpoint.display}"
    except TimeoutError:
        result.error = f"timed out: no data for {endpoint.idle_s:g} s"
    except (OSError, http.client.HTTPException) as e:
        result.error = f"connection error: {_scrub(type(e).__name__ + ' ' + str(e))}"
    except (ArithmeticError, LookupError, TypeError, RecursionError) as e:  # http.client on a hostile answer (a
        result.error = f"malformed answer: {type(e).__name__}"  # chunk size past 2**63 overflows its peek)
    finally:
        deadline.close()
        result.end_ns = clock()
        conn.close()
        if on_socket is not None:
            on_socket(None)
    if deadline.overdue and result.error and result.error != "cancelled":
        result.error = f"timed out: the whole request took more than {total_s:g} s"
    result.error = " ".join(scrub_secrets(result.error).split())  # the one boundary every error crosses, one line
    return result


def served_models(endpoint: Endpoint) -> list[str] | None:
    """The model ids the server's ``GET /models`` lists (OpenAI's route; llama-server, vLLM and llama-cpp-python
    have it), or None when it cannot say (no route, an error, not JSON). Bounded: 1 MiB, and a total deadline of
    :data:`SIDE_REQUEST_S` (at most the endpoint's own)."""
    deadline = Deadline(min(SIDE_REQUEST_S, endpoint.timeout_s))
    conn = endpoint._connection(deadline)
    try:
        conn.request("GET", endpoint._path("/models"), headers={k: v for k, v in _headers().items()
                                                                 if k != "Content-Type"})
        resp = conn.getresponse()
        payload = resp.read(1 << 20)
        if resp.status != 200 or deadline.overdue:
            return None
        data = json.loads(payload)
    except (OSError, http.client.HTTPException, ValueError, ArithmeticError, RecursionError):
        return None
    finally:
        deadline.close()
        conn.close()
    items = data.get("data") if isinstance(data, dict) else None
    if not isinstance(items, list):
        return None
    return [m["id"] for m in items if isinstance(m, dict) and isinstance(m.get("id"), str)
            and 0 < len(m["id"]) <= 1000][:1000]


def count_tokens(endpoint: Endpoint, text: str) -> int | None:
    """The server's token count for ``text`` (llama-cpp-python, llama.cpp and vLLM tokenize routes), or None. One
    total deadline of :data:`SIDE_REQUEST_S` (at most the endpoint's own) covers every route asked: a route that
    answers slowly leaves the next only what is left, and none is asked once it has passed."""
    tries = (("/extras/tokenize/count", {"input": text, "model": endpoint.model}),
             ("/tokenize", {"content": text, "prompt": text, "model": endpoint.model}))
    deadline = Deadline(min(SIDE_REQUEST_S, endpoint.timeout_s))
    try:
        for tail, body in tries:
            if deadline.overdue:
                return None
            conn = endpoint._connection(deadline)
            try:
                conn.request("POST", endpoint._path(tail, root=True), body=json.dumps(body), headers=_headers())
                resp = conn.getresponse()
                payload = resp.read(1 << 22)
                if resp.status != 200 or deadline.overdue:
                    continue
                data = json.loads(payload)
                if isinstance(data, dict) and isinstance(data.get("count"), int):
                    return int(data["count"])
                if isinstance(data, dict) and isinstance(data.get("tokens"), list):
                    return len(data["tokens"])
            except (OSError, http.client.HTTPException, ValueError, ArithmeticError, RecursionError):
                continue
            finally:
                conn.close()
        return None
    finally:
        deadline.close()


def poisson_arrivals_s(n: int, rate_rps: float | None, seed: int) -> list[float]:
    """Send times (s from the start) of ``n`` requests: all at 0 without a rate, else Poisson arrivals at the rate."""
    if not rate_rps or rate_rps <= 0:
        return [0.0] * n
    rng = random.Random(seed)
    t, out = 0.0, []
    for _ in range(n):
        out.append(t)
        t += rng.expovariate(rate_rps)
    return out


class LoadRun:
    """``len(prompts)`` requests, at most ``concurrency`` in flight, sent no earlier than their arrival times.

    ``contexts`` (one per prompt) is text sent before each prompt (a depth). With ``prime_contexts`` each request
    is preceded, on the same thread, by one that sends its context alone for one token (llama-benchy's context
    load): the timed request then finds the context in the server's prefix cache, if it keeps one. The loads'
    results are ``context_results``."""

    def __init__(self, endpoint: Endpoint, prompts: Sequence[str], max_tokens: int, concurrency: int,
                 arrivals_s: Sequence[float], clock: Clock = time.perf_counter_ns, *,
                 contexts: Sequence[str] | None = None, prime_contexts: bool = False) -> None:
        # prompts and contexts may be lazy sequences (a text made when its request is sent): never copied here, so
        # 100,000 requests of a million words each cost one text per request in flight, not all of them at once
        self.endpoint, self.prompts, self.max_tokens = endpoint, prompts, max_tokens
        self.concurrency, self.arrivals_s, self.clock = max(1, concurrency), list(arrivals_s), clock
        self.contexts: Sequence[str] = contexts if contexts is not None else [""] * len(self.prompts)
        if len(self.contexts) != len(self.prompts):
            raise ValueError(f"{len(self.contexts)} contexts for {len(self.prompts)} prompts")
        self.prime_contexts = prime_contexts
        self.results: list[RequestResult | None] = [None] * len(self.prompts)
        self.context_results: list[RequestResult | None] = [None] * len(self.prompts)
        self._next = 0
        self._lock = threading.Lock()
        self._cancel = threading.Event()
        self._socks: set[socket.socket] = set()
        self.start_ns = 0

    def cancel(self) -> None:
        """Safe from any thread: send nothing more and cut the streams in flight."""
        self._cancel.set()
        with self._lock:
            socks = list(self._socks)
        for sock in socks:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _take(self) -> int | None:
        with self._lock:
            if self._next >= len(self.prompts) or self._cancel.is_set():
                return None
            self._next += 1
            return self._next - 1

    def _worker(self) -> None:
        current: list[socket.socket] = []

        def track(sock: socket.socket | None) -> None:
            with self._lock:
                if sock is None:
                    self._socks.difference_update(current)
                    current.clear()
                else:
                    current.append(sock)
                    self._socks.add(sock)

        while (i := self._take()) is not None:
            try:
                if not self._send(i, track):
                    return
            except Exception as e:  # noqa: BLE001 - a request never raises: a bug here is its failed result
                self.results[i] = RequestResult(start_ns=self.clock(), end_ns=self.clock(),
                                                error=f"request not sent: {type(e).__name__}: {_scrub(str(e))}")

    def _send(self, i: int, track: Callable[[socket.socket | None], None]) -> bool:
        """Request ``i`` at its arrival time (its context first, with ``prime_contexts``); False when cancelled
        before it was sent."""
        delay_s = self.start_ns / 1e9 + self.arrivals_s[i] - self.clock() / 1e9
        if delay_s > 0 and self._cancel.wait(min(delay_s, MAX_TIMEOUT_S)):
            return False
        context = self.contexts[i]
        if self.prime_contexts and context:
            loaded = stream_request(self.endpoint, "", 1, context=context, clock=self.clock,
                                    cancel=self._cancel, on_socket=track)
            self.context_results[i] = loaded
            if not loaded.ok:  # the timed request would not find its context cached: it is not sent
                self.results[i] = dataclasses.replace(loaded, error=f"context load failed: {loaded.error}")
                return True
        self.results[i] = stream_request(self.endpoint, self.prompts[i], self.max_tokens, context=context,
                                         clock=self.clock, cancel=self._cancel, on_socket=track)
        return True

    def run(self) -> list[RequestResult]:
        """Send every request (or until cancelled); the results of the requests that were sent, in order."""
        self.start_ns = self.clock()
        threads = [threading.Thread(target=self._worker, daemon=True, name=f"openai-http-{k}")
                   for k in range(min(self.concurrency, len(self.prompts)))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return [r for r in self.results if r is not None]
