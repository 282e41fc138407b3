"""Reading GGUF headers over HTTP from a loopback server: ranges, no ranges, truncation, retries, splits, cache."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import gguf
import pytest

from app.model.gguf_facts import read_model_facts
from app.model.gguf_http import (
    RemoteGGUFError,
    RemoteOptions,
    check_url,
    is_url,
    read_facts,
    remote_facts,
    split_urls,
)
from tests.model.range_server import serve

FAST = RemoteOptions(backoff_s=0.01, use_cache=False)


def _same_facts(remote: object, local: object, url: str) -> None:
    r, loc = remote.to_json_dict(), local.to_json_dict()  # type: ignore[attr-defined]
    for d in (r, loc):
        d.pop("path")
        d["extra"] = {k: v for k, v in d["extra"].items() if not k.startswith(("remote_", "split_"))}
    assert r == loc
    assert remote.path == url  # type: ignore[attr-defined]
    assert remote.tensor_bytes == local.tensor_bytes  # type: ignore[attr-defined]


@pytest.mark.heavy  # the real model
def test_smollm2_header_read_with_ranges_only(smollm2_path: Path) -> None:
    with serve({"/m/model.gguf": smollm2_path}) as (base, state):
        url = f"{base}/m/model.gguf?download=true"
        facts = remote_facts(url, FAST)
    _same_facts(facts, read_model_facts(smollm2_path), url)
    size = smollm2_path.stat().st_size
    assert state.statuses and set(state.statuses) == {206}
    assert state.bytes_sent < size / 10  # the header, not the weights
    assert facts.extra["remote_header_bytes"] == state.bytes_sent


def test_synthetic_model_and_small_first_read(make_gguf: Callable[..., Path]) -> None:
    path = make_gguf(n_layer=3, n_vocab=3000)
    with serve({"/a.gguf": path}) as (base, state):
        facts = remote_facts(f"{base}/a.gguf", RemoteOptions(first_read_bytes=4096, backoff_s=0.01, use_cache=False))
    _same_facts(facts, read_model_facts(path), f"{base}/a.gguf")
    assert state.requests >= 2  # grew the prefix


@pytest.mark.heavy  # the real model
def test_server_without_ranges_is_read_only_up_to_the_cap(smollm2_path: Path) -> None:
    cap = 256 * 1024
    with serve({"/m.gguf": smollm2_path}, mode="norange") as (base, _):
        with pytest.raises(RemoteGGUFError) as err:
            remote_facts(f"{base}/m.gguf", RemoteOptions(max_header_bytes=cap, first_read_bytes=64 * 1024,
                                                          backoff_s=0.01, use_cache=False))
        text = str(err.value)
        assert text.startswith(f"{base}/m.gguf: ") and "\n" not in text
        assert "ignores HTTP range requests" in text and "not downloading" in text
        # with room for the header, a prefix of the 200 body is enough
        facts = remote_facts(f"{base}/m.gguf", FAST)
    assert facts.n_params == read_model_facts(smollm2_path).n_params


def test_truncated_responses_fail_after_retries(make_gguf: Callable[..., Path]) -> None:
    path = make_gguf()
    with serve({"/t.gguf": path}, mode="truncate") as (base, state):
        with pytest.raises(RemoteGGUFError, match=r"response truncated: .* \(after 3 tries\)"):
            remote_facts(f"{base}/t.gguf", RemoteOptions(retries=2, backoff_s=0.01, use_cache=False))
    assert state.requests == 3


def test_server_errors_are_retried_then_succeed(make_gguf: Callable[..., Path]) -> None:
    path = make_gguf()
    with serve({"/f.gguf": path}, mode="flaky", fail_first=2) as (base, state):
        facts = remote_facts(f"{base}/f.gguf", FAST)
    assert state.statuses[:2] == [500, 500] and state.statuses[2] == 206
    assert facts.n_layer == 2


def test_persistent_server_errors_name_the_cause(make_gguf: Callable[..., Path]) -> None:
    with serve({"/f.gguf": make_gguf()}, mode="flaky", fail_first=99) as (base, _):
        with pytest.raises(RemoteGGUFError, match=r"HTTP 500 .*\(after 2 tries\)"):
            remote_facts(f"{base}/f.gguf", RemoteOptions(retries=1, backoff_s=0.01, use_cache=False))


def test_not_found_mentions_the_token(make_gguf: Callable[..., Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_TOKEN", raising=False)
    with serve({"/f.gguf": make_gguf()}) as (base, _):
        with pytest.raises(RemoteGGUFError, match=r"/nope\.gguf: HTTP 404 .*set HF_TOKEN"):
            remote_facts(f"{base}/nope.gguf", FAST)


def test_not_a_gguf_and_truncated_file(tmp_path: Path, make_gguf: Callable[..., Path]) -> None:
    text = tmp_path / "x.gguf"
    text.write_bytes(b"<html>not a model</html>" * 10)
    short = tmp_path / "short.gguf"
    short.write_bytes(make_gguf().read_bytes()[:2000])
    with serve({"/x.gguf": text, "/s.gguf": short}) as (base, _):
        with pytest.raises(RemoteGGUFError, match="not a GGUF file"):
            remote_facts(f"{base}/x.gguf", FAST)
        with pytest.raises(RemoteGGUFError, match=r"truncated GGUF \(2000 bytes"):
            remote_facts(f"{base}/s.gguf", FAST)


def test_split_model_totals_every_shard(make_gguf: Callable[..., Path], monkeypatch: pytest.MonkeyPatch) -> None:
    whole = make_gguf("whole.gguf", n_layer=4)

    class SplitWriter(gguf.GGUFWriter):
        def __init__(self, path: object, arch: str) -> None:
            super().__init__(path, arch, split_max_tensors=14)  # type: ignore[arg-type]

    monkeypatch.setattr(gguf, "GGUFWriter", SplitWriter)
    make_gguf("split.gguf", n_layer=4)
    shards = sorted(whole.parent.glob("split-0000*-of-*.gguf"))
    assert len(shards) == 3
    assert split_urls("https://h/r/resolve/main/m-00002-of-00003.gguf") == [
        f"https://h/r/resolve/main/m-0000{i}-of-00003.gguf" for i in (1, 2, 3)]
    with serve({f"/{p.name}": p for p in shards}) as (base, _):
        url = f"{base}/{shards[1].name}"
        facts = remote_facts(url, FAST)
    local = read_model_facts(whole)
    assert facts.n_params == local.n_params and facts.weight_bytes == local.weight_bytes
    assert facts.tensor_bytes == local.tensor_bytes
    assert facts.file_bytes == sum(p.stat().st_size for p in shards)
    assert facts.extra["split_count"] == 3


def test_facts_cached_per_url_and_etag(make_gguf: Callable[..., Path]) -> None:
    path = make_gguf(n_vocab=3000)
    opts = RemoteOptions(first_read_bytes=4096, backoff_s=0.01)
    with serve({"/c.gguf": path}) as (base, state):
        first = read_facts(f"{base}/c.gguf", opts)
        n = state.requests
        again = read_facts(f"{base}/c.gguf", opts)
        assert state.requests == n + 1  # one small read to learn the ETag, no header parse
        assert again == first
        make_gguf(n_vocab=3000, n_layer=3)  # the file changes: a new ETag
        changed = read_facts(f"{base}/c.gguf", opts)
    assert changed.n_layer == 3


def test_url_checks() -> None:
    assert is_url("https://huggingface.co/a/b/resolve/main/x.gguf") and not is_url("/models/x.gguf")
    check_url("https://huggingface.co/x.gguf")
    check_url("http://127.0.0.1:8000/x.gguf")
    with pytest.raises(RemoteGGUFError, match="only https"):
        check_url("http://example.com/x.gguf")


def test_token_sent_only_to_hugging_face(make_gguf: Callable[..., Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", "secret")
    with serve({"/f.gguf": make_gguf()}) as (base, state):
        remote_facts(f"{base}/f.gguf", FAST)
    assert state.auth_headers and all(h == "" for h in state.auth_headers)


def test_redirects_keep_the_range(make_gguf: Callable[..., Path]) -> None:
    path = make_gguf()
    with serve({"/store/f.gguf": path}) as (base, state):
        facts = remote_facts(f"{base}/resolve/store/f.gguf", FAST)
    assert facts.n_layer == 2 and state.statuses == [302, 206]


def test_token_hosts(monkeypatch: pytest.MonkeyPatch) -> None:
    from app.model.gguf_http import _auth_token

    monkeypatch.setenv("HF_TOKEN", "secret")
    assert _auth_token("https://huggingface.co/o/r/resolve/main/x.gguf") == "secret"
    assert _auth_token("https://hf.co/o/r/resolve/main/x.gguf") == "secret"
    assert _auth_token("https://cdn-lfs.example.com/x.gguf") is None
    assert _auth_token("https://evilhuggingface.co/x.gguf") is None


def test_timeouts_are_retried(make_gguf: Callable[..., Path]) -> None:
    with serve({"/f.gguf": make_gguf()}, mode="stall", fail_first=1) as (base, state):
        facts = remote_facts(f"{base}/f.gguf", RemoteOptions(timeout_s=0.3, backoff_s=0.01, use_cache=False))
    assert facts.n_layer == 2 and state.requests == 2


@pytest.mark.heavy  # waits out a trickling server's deadline
def test_hostile_servers_cannot_set_the_memory_or_the_time(make_gguf: Callable[..., Path]) -> None:
    """Issue #29 cases 7 and 8: a huge Content-Range (a MemoryError traceback, or GBs with an endless body), a server
    answering every range with one byte (one request per byte), one trickling a byte at a time (waiting for ever):
    each now ends within the read's own bounds, with one line."""
    import resource
    import time

    path = make_gguf("m.gguf", n_layer=4)
    opts = RemoteOptions(backoff_s=0.01, use_cache=False, retries=0, deadline_s=3.0, timeout_s=2.0,
                         max_header_bytes=4 << 20)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for mode, says in (("hugerange", ""), ("onebyte", "requests for one header"), ("trickle", "took more than 3 s")):
        with serve({"/m.gguf": path}, mode=mode) as (base, state):
            t0 = time.monotonic()
            try:
                facts = remote_facts(f"{base}/m.gguf", opts)
            except RemoteGGUFError as e:
                assert says in str(e) and "\n" not in str(e), (mode, str(e))
            else:
                assert mode == "hugerange" and facts.n_layer == 4  # it asked for what it needed and read only that
            assert time.monotonic() - t0 < opts.deadline_s + opts.timeout_s + 2, mode
            assert state.requests <= opts.max_requests + 1, mode
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before < 200 * 1024  # KiB: under 200 MiB more


def test_split_names_cannot_multiply_the_requests_or_the_cap(make_gguf: Callable[..., Path],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(RemoteGGUFError, match="99,999 shards"):
        remote_facts("http://127.0.0.1:9/m-00001-of-99999.gguf", FAST)

    class SplitWriter(gguf.GGUFWriter):
        def __init__(self, p: object, arch: str) -> None:
            super().__init__(p, arch, split_max_tensors=14)  # type: ignore[arg-type]

    monkeypatch.setattr(gguf, "GGUFWriter", SplitWriter)
    make_gguf("split.gguf", n_layer=4)
    shards = sorted(make_gguf("x.gguf").parent.glob("split-0000*-of-*.gguf"))
    one_header = max(p.stat().st_size for p in shards)
    cap = RemoteOptions(backoff_s=0.01, use_cache=False, first_read_bytes=one_header,
                        max_header_bytes=int(one_header * 1.5))  # one shard's header fits, three do not
    with serve({f"/{p.name}": p for p in shards}) as (base, state):
        with pytest.raises(RemoteGGUFError, match="header"):
            remote_facts(f"{base}/{shards[0].name}", cap)
        assert state.bytes_sent <= cap.max_header_bytes + one_header


def test_a_plain_200_without_content_length_is_read(make_gguf: Callable[..., Path]) -> None:
    """Issue #54 item 3: a valid model served as a plain 200 with no Content-Length (legal: the body ends when the
    connection closes) was refused as "truncated GGUF (-1 bytes, needs at least 4)"; it is read up to the header."""
    path = make_gguf(n_vocab=5000)
    with serve({"/f.gguf": path}, mode="nolength") as (base, _state):
        url = f"{base}/f.gguf"
        _same_facts(remote_facts(url, FAST), read_model_facts(path), url)


def test_a_header_bigger_than_the_first_read_without_content_length_is_read(make_gguf: Callable[..., Path]) -> None:
    path = make_gguf(n_vocab=2000)
    with serve({"/f.gguf": path}, mode="nolength") as (base, _state):
        url = f"{base}/f.gguf"
        _same_facts(remote_facts(url, RemoteOptions(first_read_bytes=4096, backoff_s=0.01, use_cache=False)),
                    read_model_facts(path), url)


def test_a_file_cut_short_without_content_length_says_how_short(make_gguf: Callable[..., Path]) -> None:
    path = make_gguf(n_vocab=5000)
    with path.open("r+b") as f:
        f.truncate(3000)  # inside the vocabulary
    with serve({"/f.gguf": path}, mode="nolength") as (base, _state):
        with pytest.raises(RemoteGGUFError, match=r"truncated GGUF \(3000 bytes, needs at least \d+\)$"):
            remote_facts(f"{base}/f.gguf", FAST)
