"""``gguf-bench run --url`` against the misbehaving test server: rows, store, exit codes, no leaked key."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.results import export
from app.results.fields import FIELD_BY_NAME, REMOTE
from app.results.store import ResultStore
from tests.cli_helpers import gguf_bench
from tests.remote.fake_server import FakeServer, fake_server

pytestmark = pytest.mark.heavy  # the CLI in a subprocess and a worker

KEY = "sk-cli-secret-never-in-a-row-5678"


@pytest.fixture(scope="module")
def server() -> Iterator[FakeServer]:
    with fake_server() as s:
        yield s


def _run(*args: str, store: Path) -> tuple[int, list[dict], str]:
    os.environ["GGUF_BENCH_API_KEY"] = KEY
    try:
        proc = gguf_bench("--store", str(store), "run", *args, "-o", "json", timeout=60)
    finally:
        del os.environ["GGUF_BENCH_API_KEY"]
    return proc.returncode, json.loads(proc.stdout or "[]"), proc.stderr


def test_a_flaky_server_counts_errors_and_the_sweep_goes_on(server: FakeServer, tmp_path: Path) -> None:
    store = tmp_path / "r.sqlite3"
    rc, rows, err = _run("--url", server.url("flaky"), "--served-model", "fake", "-p", "16", "-n", "4",
                         "--concurrency", "1,2", "--requests", "4", "--slo-ttft-ms", "10000", store=store)
    assert rc == 0, err
    assert [r["n_parallel"] for r in rows] == [1, 2]
    for r in rows:
        assert r["status"] == "ok" and r["backends"] == "remote" and r["endpoint"] == server.url("flaky")
        assert r["model_filename"] == "fake" and r["n_requests"] == 4
        assert r["n_errors"] + round(r["req_per_s"] * r["duration_ms"] / 1000) == 4
        assert "HTTP 500" in r["request_errors"]
        assert r["tokens_counted_by"] == "usage" and r["prompt_tokens_by"] == "usage"
        assert r["goodput_req_per_s"] == pytest.approx(r["req_per_s"])
    assert sum(r["n_errors"] for r in rows) >= 3  # every other request of the server fails (+ warmup)
    assert "fake p16 n4 c2" in err
    with ResultStore(store) as s:
        run = s.runs()[0]
        stored = s.rows(run.run_id)
    assert [r.n_errors for r in stored] == [r["n_errors"] for r in rows]
    text = store.read_bytes().decode("latin-1") + json.dumps(rows) + err
    assert KEY not in text


def test_a_refused_server_gives_failed_rows_for_every_test(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    rc, rows, err = _run("--url", url, "--served-model", "m", "-p", "8", "-n", "2", "--concurrency", "1,4",
                         "--requests", "2", store=tmp_path / "r.sqlite3")
    assert rc == 1
    assert [r["status"] for r in rows] == ["failed", "failed"]
    assert rows[1]["error"] == f"all 2 requests failed: 2× connection refused by {url}"
    assert rows[0]["error_rate"] == 1.0 and rows[0]["prompt_tokens_by"] == "approximate"
    assert "2 failed" in err


def test_remote_columns_are_in_the_csv(server: FakeServer, tmp_path: Path) -> None:
    rc, rows, _ = _run("--url", server.url("nousage"), "--served-model", "fake", "-p", "8", "-n", "3",
                       "--requests", "2", "--rate", "50", store=tmp_path / "r.sqlite3")
    assert rc == 0
    assert rows[0]["tokens_counted_by"] == "chunks" and rows[0]["request_rate_rps"] == 50
    header = export.to_csv(rows).splitlines()[0].split(",")
    for name in ("endpoint", "n_requests", "error_rate", "req_per_s", "goodput_req_per_s", "ttft_p99_ms",
                 "tpot_p50_ms", "e2e_p90_ms", "tokens_counted_by"):
        assert name in header and FIELD_BY_NAME[name].group == REMOTE


@pytest.mark.parametrize(("args", "message"), [
    (["--url", "http://127.0.0.1:1/v1"], "--url needs --served-model"),
    (["--url", "ftp://x/v1", "--served-model", "m"], "not an http:// or https:// URL"),
    (["--url", "http://127.0.0.1:1/v1", "--served-model", "m", "-ngl", "99"], "--n-gpu-layers only apply"),
    (["--url", "http://127.0.0.1:1/v1", "--served-model", "m", "--concurrency", "0"], "outside 1-256"),
])
def test_flags_that_do_not_fit_are_one_line_errors(args: list[str], message: str, tmp_path: Path) -> None:
    proc = gguf_bench("--store", str(tmp_path / "r.sqlite3"), "run", *args, timeout=30)
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr


def test_a_key_echoed_in_the_reason_phrase_is_written_nowhere(server, tmp_path: Path,  # noqa: ANN001
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue #29 case 2: a server whose HTTP reason phrase echoes the Authorization header put ``Bearer sk-…`` into
    stderr, the CSV, the stored row and the gzipped event log. Everything written is searched for the key."""
    import gzip

    key = "sk-reason-echo-secret-5678"
    monkeypatch.setenv("GGUF_BENCH_API_KEY", key)
    data = Path(os.environ["GGUF_WORKBENCH_DATA_DIR"])
    store = tmp_path / "r.sqlite3"
    out = tmp_path / "rows.csv"
    proc = gguf_bench("--store", str(store), "run", "--url", server.url("echoreason"), "--served-model", "fake",
                      "-p", "8", "-n", "2", "-o", "csv", "--out", str(out), timeout=60)
    assert proc.returncode == 1 and "HTTP 401" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    written = [proc.stdout, proc.stderr]
    for p in [*tmp_path.rglob("*"), *data.rglob("*")]:
        if p.is_file():
            raw = p.read_bytes()
            written.append((gzip.decompress(raw) if p.suffix == ".gz" else raw).decode("utf-8", "replace"))
    assert len(written) > 3 and not any(key in w or "Bearer sk" in w for w in written)
    monkeypatch.setenv("GGUF_BENCH_API_KEY", "sk-two\nlines")  # a key no HTTP header can carry: one line, no key
    proc = gguf_bench("--store", str(store), "run", "--url", server.url("usage"), "--served-model", "fake",
                      "-p", "8", "-n", "2", "-o", "csv", timeout=60)
    assert "Traceback" not in proc.stderr and "sk-two" not in proc.stderr + proc.stdout, proc.stderr
    assert "the API key cannot be sent" in proc.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["--concurrency", "4"], "--concurrency: only apply to a remote server (--url)"),
    (["--prefix-cache", "-d", "64"], "--prefix-cache: only apply to a remote server (--url)"),
    (["--url", "http://127.0.0.1:1/v1", "--served-model", "m", "--prefix-cache"], "--prefix-cache needs a context"),
])
def test_server_flags_are_refused_where_they_do_not_apply(args: list[str], message: str, tmp_path: Path) -> None:
    """Server-only flags on a local run were silently ignored; --prefix-cache without a depth measures nothing."""
    proc = gguf_bench("--store", str(tmp_path / "r.sqlite3"), "run", *args, "-p", "4", "-n", "1", timeout=30)
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_depth_runs_through_the_cli_and_lands_in_the_csv(server: FakeServer, tmp_path: Path) -> None:
    rc, rows, err = _run("--url", server.url("prefix"), "--served-model", "fake", "-p", "8", "-n", "2", "-d",
                         "0,64", "--prefix-cache", "--requests", "2", store=tmp_path / "r.sqlite3")
    assert rc == 0, err
    assert [(r["n_depth"], r["prefix_cache"]) for r in rows] == [(0, 0), (64, 1)]
    assert rows[1]["cached_tokens_mean"] == 64 and rows[1]["ctx_ttft_ms"] > 0
    header = export.to_csv(rows).splitlines()[0].split(",")
    at = header.index("prefix_cache")  # appended in this order (issue #29), before later appended columns
    assert header[at:at + 4] == ["prefix_cache", "prefill_tokens_mean", "cached_tokens_mean", "ctx_ttft_ms"]
