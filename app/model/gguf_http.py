"""Facts of a GGUF file on a web server (a Hugging Face ``resolve`` URL...), read from its header alone.

HTTP range requests fetch growing prefixes until the header and tensor table parse (:func:`scan_gguf_stream`),
so a 5 GB model costs a few MiB. Bounded: ``max_header_bytes`` caps what is read, the whole read has one deadline
(``deadline_s``, held whatever the server sends: a trickled status line, header, chunk size or body is cut when it
passes, :mod:`engines.http_deadline`), every request has a timeout,
5xx answers, timeouts and truncated bodies are retried with backoff. A server that ignores ranges (200 with the
whole file) is read as a stream only up to the cap, then dropped. Split models (``-00001-of-00003.gguf``): every
shard's header is read and their tensors totalled. Facts are cached per URL and ETag in the data dir.
Standard library only; ``HF_TOKEN`` is sent as a Bearer token to Hugging Face hosts (never across redirects).
"""

from __future__ import annotations

import http.client
import io
import ipaddress
import os
import re
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.model.facts import ModelFacts
from app.model.gguf_facts import GGUF_MAGIC_BYTES, SUPPORTED_GGUF_VERSIONS, GGUFFileError, facts_from_scan
from app.model.gguf_http_cache import load_cached_facts, save_cached_facts, save_header_copy
from app.model.gguf_scan import CorruptHeader, Scan, ShortRead, scan_gguf_stream
from engines.http_deadline import Deadline

MIB = 1024**2
DEFAULT_MAX_HEADER_BYTES = 64 * MIB
#: The whole read of one URL (every shard, request and retry), whatever the server sends.
DEFAULT_DEADLINE_S = 120.0
SPLIT_RE = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$", re.IGNORECASE)
_HF_HOSTS = ("huggingface.co", "hf.co")
_USER_AGENT = "gguf-workbench (header reader)"


class RemoteGGUFError(GGUFFileError):
    """A remote GGUF that cannot be read: the URL and the cause in one line."""


@dataclass(frozen=True)
class RemoteOptions:
    """Bounds of one remote read."""

    max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES
    first_read_bytes: int = 1 * MIB
    #: One request's wait for a byte (huggingface_hub's download timeout is 10 s too); never past the deadline.
    timeout_s: float = 10.0
    retries: int = 3  # after the first try, for 5xx, 429, timeouts, resets and truncated bodies
    backoff_s: float = 0.5  # doubled after each retry; never past the deadline
    use_cache: bool = True
    deadline_s: float = DEFAULT_DEADLINE_S  # the whole read (every shard, every retry), whatever the server sends
    max_requests: int = 256  # in all: a server answering each range with one byte ends here, not after a million


#: More shards than any published split model has (the largest have tens): a file name saying more is refused.
MAX_SHARDS = 512


@dataclass
class _Budget:
    """What one remote read may still spend, shared by every shard: bytes (the header cap counts once, not once per
    shard), requests, and time."""

    opts: RemoteOptions
    url: str
    bytes_used: int = 0
    requests: int = 0
    deadline: float = 0.0
    watch: Deadline | None = None  # cuts every connection of this read when the deadline passes
    opener: urllib.request.OpenerDirector | None = None

    def __post_init__(self) -> None:
        self.deadline = time.monotonic() + self.opts.deadline_s
        self.watch = Deadline(self.opts.deadline_s)
        self.opener = _watched_opener(self.watch)

    def close(self) -> None:
        if self.watch is not None:
            self.watch.close()

    def overdue_error(self) -> RemoteGGUFError:
        return RemoteGGUFError(self.url, f"the header read took more than {self.opts.deadline_s:g} s")

    def spend_request(self) -> float:
        """Count one request; the socket timeout it may use (never past the deadline)."""
        self.requests += 1
        if self.requests > self.opts.max_requests:
            raise RemoteGGUFError(self.url, f"more than {self.opts.max_requests} requests for one header (the server "
                                            "answers with tiny pieces)")
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise self.overdue_error()
        return min(self.opts.timeout_s, left)

    def wait(self, delay_s: float) -> None:
        """Sleep ``delay_s`` before a retry, never past the deadline (the deadline's error once it has passed)."""
        time.sleep(max(0.0, min(delay_s, self.deadline - time.monotonic())))
        if time.monotonic() >= self.deadline:
            raise self.overdue_error()

    def spend_bytes(self, n: int) -> None:
        self.bytes_used += n
        if time.monotonic() > self.deadline:
            raise self.overdue_error()


def is_url(text: str | os.PathLike[str]) -> bool:
    """True for an http(s) URL (anything else is a local path)."""
    return isinstance(text, str) and text.lower().startswith(("http://", "https://"))


#: The longest URL read (browsers and servers stop near 8 KiB; a Hugging Face resolve URL is a few hundred bytes).
MAX_URL_CHARS = 8192


def check_url(url: str) -> None:
    """https anywhere; plain http only to this machine (tests, a local mirror); a URL that does not parse (a
    malformed IPv6 host, a port out of range, control characters) is one RemoteGGUFError line."""
    if len(url) > MAX_URL_CHARS:
        raise RemoteGGUFError(url[:100] + "…", f"a URL of {len(url):,} characters (at most {MAX_URL_CHARS:,})")
    if any(ord(c) < 0x21 or ord(c) == 0x7F for c in url):
        raise RemoteGGUFError(url, "not a usable URL (it holds a space or a control character)")
    try:
        parts = urllib.parse.urlsplit(url)
        _ = parts.port  # raises for a port that is not a number or is out of 0-65535
    except ValueError as e:  # "Invalid IPv6 URL", "Port out of range 0-65535"
        raise RemoteGGUFError(url, f"not a usable URL ({e})") from None
    if parts.username is not None or parts.password is not None:  # it would be written in the cache and errors
        shown = urllib.parse.urlunsplit(parts._replace(netloc=parts.hostname or ""))
        raise RemoteGGUFError(shown, "a URL with a user name or password is not read (for a gated Hugging Face "
                                     "repo, set HF_TOKEN)")
    if parts.scheme.lower() == "https" and parts.hostname:
        return
    host = (parts.hostname or "").lower()
    if parts.scheme.lower() == "http" and (host == "localhost" or _is_loopback(host)):
        return
    raise RemoteGGUFError(url, "only https URLs are read (plain http only on this machine)")


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def split_urls(url: str) -> list[str]:
    """Every shard's URL of a split model (``-0000k-of-0000N.gguf``, any k given), else ``[url]``."""
    parts = urllib.parse.urlsplit(url)
    m = SPLIT_RE.search(parts.path)
    if not m:
        return [url]
    n = int(m.group(2))
    if n < 1:
        raise RemoteGGUFError(url, "split file name says 0 shards")
    if n > MAX_SHARDS:
        raise RemoteGGUFError(url, f"split file name says {n:,} shards (at most {MAX_SHARDS} are read)")
    stem = parts.path[: m.start()]
    return [urllib.parse.urlunsplit(parts._replace(path=f"{stem}-{i:05d}-of-{n:05d}.gguf")) for i in range(1, n + 1)]


def _auth_token(url: str) -> str | None:
    host = (urllib.parse.urlsplit(url).hostname or "").lower()
    token = os.environ.get("HF_TOKEN", "").strip()
    hf = any(host == h or host.endswith("." + h) for h in _HF_HOSTS)
    return token if token and hf else None


def _watched_opener(watch: Deadline) -> urllib.request.OpenerDirector:
    """urllib's opener (redirects, proxies, errors as usual) whose every HTTP(S) connection ``watch`` cuts at its
    deadline: a server trickling its status line, headers or body cannot hold a read past it."""

    def watched(base: type[http.client.HTTPConnection]) -> type[http.client.HTTPConnection]:
        class Watched(base):  # type: ignore[valid-type,misc]
            def __init__(self, *args: object, **kwargs: object) -> None:
                super().__init__(*args, **kwargs)
                watch.watch_connection(self)  # its socket while connecting (a TLS handshake that trickles)

            def connect(self) -> None:
                try:
                    super().connect()
                finally:
                    watch.watch_socket(self.sock)  # the response reads it after the connection lets it go

        return Watched

    http_connection, https_connection = watched(http.client.HTTPConnection), watched(http.client.HTTPSConnection)

    class HTTP(urllib.request.HTTPHandler):
        def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
            return self.do_open(http_connection, req)

    class HTTPS(urllib.request.HTTPSHandler):
        def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
            return self.do_open(https_connection, req)

    class Redirect(urllib.request.HTTPRedirectHandler):
        """Every redirect is checked as the URL given was (https, or http on this machine; no user name): a server
        cannot send the read to ftp://, to plain http elsewhere, or to this machine's own services."""

        def redirect_request(self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any,
                             newurl: str) -> urllib.request.Request | None:
            check_url(newurl)
            if _is_local(newurl) and not _is_local(req.full_url):
                raise RemoteGGUFError(newurl, "a redirect from another host to this machine is not followed")
            return super().redirect_request(req, fp, code, msg, headers, newurl)

    return urllib.request.build_opener(HTTP(), HTTPS(), Redirect())


def _is_local(url: str) -> bool:
    host = (urllib.parse.urlsplit(url).hostname or "").lower()
    return host == "localhost" or _is_loopback(host)


class _Retry(Exception):
    """A failure worth another try; its text is the cause shown when the tries run out."""


def _http_error_cause(exc: urllib.error.HTTPError) -> str:
    cause = f"HTTP {exc.code} {exc.reason}"
    if exc.code in (401, 403, 404):
        cause += (" (a gated or private Hugging Face repo needs a token: set HF_TOKEN"
                  + (", which was sent)" if os.environ.get("HF_TOKEN") else ")"))
    return cause


class RemoteFile:
    """One remote file's leading bytes, fetched on demand: ranges when the server honours them, else a capped
    prefix of its single 200 response."""

    def __init__(self, url: str, opts: RemoteOptions, budget: _Budget | None = None) -> None:
        self.url = url
        self.opts = opts
        self.budget = budget if budget is not None else _Budget(opts, url)
        self.buf = bytearray()
        self.total_bytes = -1
        self.etag = ""
        self.ranged = True
        self._stream: http.client.HTTPResponse | None = None

    def close(self) -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream = None

    def prefix(self, n_bytes: int) -> bytes:
        """The first ``min(n_bytes, file size)`` bytes; RemoteGGUFError past the cap or when the server fails."""
        if n_bytes > self.opts.max_header_bytes or (
                self.budget.bytes_used + max(0, n_bytes - len(self.buf)) > self.opts.max_header_bytes):
            raise RemoteGGUFError(self.url, self._cap_cause())
        if self.total_bytes >= 0:
            n_bytes = min(n_bytes, self.total_bytes)
        while len(self.buf) < n_bytes:  # a server may answer a range with less than asked: ask for the rest
            had = len(self.buf)
            if self._stream is not None:
                self._read_stream(n_bytes)
            else:
                self._with_retries(lambda end=n_bytes: self._fetch(len(self.buf), end))
            if self.total_bytes >= 0:
                n_bytes = min(n_bytes, self.total_bytes)
            if len(self.buf) == had or self._stream is not None:
                break
        return bytes(self.buf[:n_bytes])

    def _cap_cause(self) -> str:
        cap = f"{self.opts.max_header_bytes / MIB:g} MiB"
        if not self.ranged:
            size = f" {self.total_bytes / MIB:,.0f} MiB" if self.total_bytes >= 0 else ""
            return (f"the server ignores HTTP range requests (answered 200 with the whole{size} file) and the "
                    f"GGUF header did not end within the first {cap}; not downloading the file")
        return f"the GGUF header does not end within the first {cap} (the header cap; raise it to read further)"

    def _with_retries(self, fetch: Callable[[], None]) -> None:
        delay = self.opts.backoff_s
        for attempt in range(self.opts.retries + 1):
            try:
                fetch()
                return
            except _Retry as exc:
                if attempt == self.opts.retries:
                    tries = self.opts.retries + 1
                    raise RemoteGGUFError(self.url, f"{exc} (after {tries} tr{'y' if tries == 1 else 'ies'})") from None
                self.budget.wait(delay)  # retries count against the read's deadline
                delay *= 2

    def _request(self, start: int, end: int) -> urllib.request.Request:
        req = urllib.request.Request(self.url, headers={
            "Range": f"bytes={start}-{end - 1}", "User-Agent": _USER_AGENT, "Accept-Encoding": "identity"})
        token = _auth_token(self.url)
        if token:
            req.add_unredirected_header("Authorization", f"Bearer {token}")
        return req

    def _fetch(self, start: int, end: int) -> None:
        """One GET of bytes [start, end); a 200 answer turns this file into a capped stream."""
        try:
            timeout_s = self.budget.spend_request()
            assert self.budget.opener is not None
            resp = self.budget.opener.open(self._request(start, end), timeout=timeout_s)
        except urllib.error.HTTPError as exc:
            if exc.code >= 500 or exc.code == 429:
                raise _Retry(f"HTTP {exc.code} {exc.reason}") from None
            if exc.code == 416:
                raise RemoteGGUFError(self.url, "empty file (the server has no byte 0), not a GGUF file") from None
            raise RemoteGGUFError(self.url, _http_error_cause(exc)) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            if isinstance(reason, socket.timeout | TimeoutError):
                raise _Retry(f"no answer within {timeout_s:g} s (one request's timeout)") from None
            if isinstance(reason, ConnectionError):
                raise _Retry(f"no answer ({reason})") from None
            raise RemoteGGUFError(self.url, f"cannot connect ({reason})") from None
        except http.client.HTTPException as exc:  # a status line or headers that are not HTTP
            raise RemoteGGUFError(self.url, f"not an HTTP answer ({type(exc).__name__}: {str(exc)[:80]})") from None
        self.etag = resp.headers.get("ETag", "") or self.etag
        if resp.status == 200:
            if start > 0:
                resp.close()
                raise RemoteGGUFError(self.url, "the server stopped honouring HTTP range requests")
            self.ranged = False
            self.total_bytes = _content_length(resp.headers.get("Content-Length"))
            self._stream = resp
            self._read_stream(end)
            return
        with resp:
            self._take_partial(resp, start, end, timeout_s)

    def _take_partial(self, resp: http.client.HTTPResponse, start: int, end: int, timeout_s: float) -> None:
        """Append a 206 answer's body after checking its Content-Range; a short body is retried."""
        m = re.fullmatch(r"bytes (\d+)-(\d+)/(\d+|\*)", (resp.headers.get("Content-Range") or "").strip())
        if resp.status != 206 or not m or int(m.group(1)) != start:
            raise RemoteGGUFError(self.url, f"unexpected answer to a range request (HTTP {resp.status}, "
                                            f"Content-Range {resp.headers.get('Content-Range')!r})")
        if m.group(3) != "*":
            self.total_bytes = int(m.group(3))
        expected = min(int(m.group(2)) - start + 1, end - start)  # never more than asked, whatever the server says
        if expected <= 0:
            raise RemoteGGUFError(self.url, f"unexpected answer to a range request (Content-Range "
                                            f"{resp.headers.get('Content-Range')!r})")
        try:
            data = self._read_up_to(resp, expected)
        except http.client.IncompleteRead as exc:
            data = exc.partial
        except TimeoutError:  # the server promised more (its Content-Length) and went silent
            raise _Retry(f"response stalled: no byte for {timeout_s:g} s (one request's timeout) before the "
                         f"{expected:,} bytes of the range at byte {start:,} came") from None
        except OSError as exc:
            raise _Retry(f"response cut off ({exc})") from None
        except (http.client.HTTPException, ArithmeticError, ValueError) as exc:  # a chunk size past 2**63...
            raise RemoteGGUFError(self.url, f"malformed answer ({type(exc).__name__})") from None
        if len(data) < expected:
            raise _Retry(f"response truncated: {len(data):,} of {expected:,} bytes at byte {start:,}")
        self.budget.spend_bytes(len(data))
        self.buf += data

    def _read_up_to(self, resp: http.client.HTTPResponse, n_bytes: int) -> bytes:
        """At most ``n_bytes`` of ``resp``'s body, read as it comes: a server that trickles stops at the read's
        deadline, not when the socket idles (each byte in time would keep a plain read() going for ever)."""
        chunks, got = [], 0
        while got < n_bytes:
            if time.monotonic() > self.budget.deadline:
                raise self.budget.overdue_error()
            chunk = resp.read1(min(n_bytes - got, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def _read_stream(self, n_bytes: int) -> None:
        """Read more of a 200 answer, up to ``n_bytes`` in all (never past the cap: prefix() checks it)."""
        assert self._stream is not None
        want = n_bytes - len(self.buf)
        try:
            data = self._read_up_to(self._stream, want)
            self.budget.spend_bytes(len(data))
        except http.client.IncompleteRead as exc:
            data = exc.partial
        except (TimeoutError, OSError) as exc:
            raise RemoteGGUFError(self.url, f"response cut off ({exc})") from None
        except (http.client.HTTPException, ArithmeticError, ValueError) as exc:  # a chunk size past 2**63...
            raise RemoteGGUFError(self.url, f"malformed answer ({type(exc).__name__})") from None
        self.buf += data
        if len(data) < want:
            if self.total_bytes < 0:  # a plain 200 without Content-Length ends with the file: now its size is known
                self.total_bytes = len(self.buf)
            elif len(self.buf) < self.total_bytes:
                raise RemoteGGUFError(self.url, f"response truncated ({len(self.buf):,} of {self.total_bytes:,} "
                                                "bytes)")


def _content_length(value: str | None) -> int:
    """A Content-Length header's byte count; -1 when it is missing or not a whole number."""
    value = (value or "").strip()
    return int(value) if value.isascii() and value.isdigit() and len(value) <= 20 else -1


def _check_start(url: str, head: bytes) -> None:
    if not head.startswith(GGUF_MAGIC_BYTES):
        raise RemoteGGUFError(url, f"not a GGUF file (starts with {head[:8]!r})")
    if len(head) < 24:
        raise RemoteGGUFError(url, f"truncated GGUF ({len(head)} bytes, needs at least 24)")
    version = int.from_bytes(head[4:8], "little")
    if version & 0xFFFF == 0:
        version = int.from_bytes(head[4:8], "big")
    if version not in SUPPORTED_GGUF_VERSIONS:
        raise RemoteGGUFError(url, f"unsupported GGUF version {version}")


def scan_remote(rf: RemoteFile) -> Scan:
    """Fetch growing prefixes of ``rf`` until its header and tensor table parse."""
    data = rf.prefix(rf.opts.first_read_bytes)
    _check_start(rf.url, data)
    while True:
        known = rf.total_bytes >= 0  # a plain 200 without Content-Length: unknown until its end is read
        try:
            scan = scan_gguf_stream(io.BytesIO(data), rf.total_bytes if known else rf.opts.max_header_bytes)
            if scan.header_bytes <= len(data):
                return scan
            needed = scan.header_bytes
        except ShortRead as short:
            needed = short.needed_bytes
            if known and (needed > rf.total_bytes or len(data) >= rf.total_bytes):
                raise RemoteGGUFError(rf.url, f"truncated GGUF ({rf.total_bytes} bytes, needs at least {needed})") \
                    from None
        except CorruptHeader as bad:
            raise RemoteGGUFError(rf.url, f"corrupt GGUF header ({bad})") from None
        cap = rf.opts.max_header_bytes
        want = max(needed + 64 * 1024, 2 * len(data))
        if want > cap:
            want = cap if len(data) < cap else needed  # one last read up to the cap, then prefix() refuses
        data = rf.prefix(want)


def _merge(scans: list[Scan]) -> Scan:
    merged = Scan()
    merged.fields = dict(scans[0].fields)
    merged.data_offset = scans[0].data_offset
    merged.header_bytes = scans[0].header_bytes
    merged.tensors = [t for s in scans for t in s.tensors]
    return merged


def remote_facts(url: str, opts: RemoteOptions | None = None) -> ModelFacts:
    """Facts of the GGUF at ``url`` (every shard's header for a split model); RemoteGGUFError for any failure."""
    opts = opts or RemoteOptions()
    check_url(url)
    urls = split_urls(url)
    budget = _Budget(opts, url)  # one for every shard: bytes, requests and time
    files = [RemoteFile(u, opts, budget) for u in urls]
    try:
        first = files[0]
        _check_start(first.url, first.prefix(opts.first_read_bytes))
        if opts.use_cache and first.etag:
            cached = load_cached_facts(url, first.etag, first.total_bytes)
            if cached is not None:
                return cached
        scans = []
        for rf in files:
            scan = scan_remote(rf)
            if rf.total_bytes < 0:  # no length given and the header ended before the answer: the tensors say it
                rf.total_bytes = scan.needed_bytes
            if scan.needed_bytes > rf.total_bytes:
                raise RemoteGGUFError(rf.url, f"truncated GGUF ({rf.total_bytes} bytes, needs at least "
                                              f"{scan.needed_bytes})")
            scans.append(scan)
        facts = facts_from_scan(url, sum(rf.total_bytes for rf in files), _merge(scans))
        facts.extra["remote_header_bytes"] = sum(len(rf.buf) for rf in files)
        facts.extra["split_count"] = len(files)
        if len(files) == 1 and opts.use_cache:  # a sparse local copy for llama.cpp's dry run (app.model.dry_run)
            copy = save_header_copy(url, bytes(first.buf[:scans[0].header_bytes]), first.total_bytes)
            if copy is not None:
                facts.extra["header_copy"] = str(copy)
    except RemoteGGUFError:
        if budget.watch is not None and budget.watch.overdue:  # whatever the cut read said: the deadline passed
            raise budget.overdue_error() from None
        raise
    finally:
        for rf in files:
            rf.close()
        budget.close()
    if opts.use_cache and first.etag:
        save_cached_facts(url, first.etag, first.total_bytes, facts)
    return facts


def read_facts(source: str | os.PathLike[str], opts: RemoteOptions | None = None) -> ModelFacts:
    """Facts of a local GGUF path (through the process-wide cache) or of a URL (header only)."""
    if is_url(source):
        return remote_facts(str(source), opts)
    from app.model.facts_cache import cached_facts

    return cached_facts(source)
