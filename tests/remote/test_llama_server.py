"""A real llama-cpp-python server (``llama_cpp.server``) on 127.0.0.1 with SmolLM2, swept through the real CLI.

The server decodes one request at a time (it queues the rest), so TTFT grows with concurrency while the
aggregate rate stays about flat: the rows must say so honestly.
"""

from __future__ import annotations

import http.client
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.results.store import ResultStore
from tests.cli_helpers import gguf_bench

pytestmark = pytest.mark.cpu_identity  # reads this CPU (tests/test_other_cpu.py runs it as the other kind)

START_TIMEOUT_S = 90
REPO = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _answers(port: int) -> bool:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
    try:
        conn.request("GET", "/v1/models")
        return conn.getresponse().status == 200
    except OSError:
        return False
    finally:
        conn.close()


@pytest.fixture(scope="module")
def llama_server(smollm2_path: Path, repack_verdict_file: Path,
                 tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """llama-cpp-python's server on SmolLM2, with this machine's repacking: off where the repack crash guard found
    that repacked weights crash llama.cpp here (as the chooser's llama-server command says --no-repack there)."""
    from app.telemetry.repack_guard import remembered

    verdict = remembered(repack_verdict_file)
    assert verdict is not None, "the session's repack verdict is not this machine's"
    port = _free_port()
    log = tmp_path_factory.mktemp("server") / "server.log"
    cmd = [sys.executable, "-m", "tests.remote.llama_server_launcher", "--repack", str(verdict.default_repack),
           "--model", str(smollm2_path), "--host", "127.0.0.1",
           "--port", str(port), "--n_ctx", "2048", "--n_threads", "1", "--interrupt_requests", "False"]
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=REPO)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _answers(port):
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"llama_cpp.server did not start (rc {proc.poll()}): {log.read_text()[-2000:]}")
            time.sleep(0.5)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@pytest.mark.slow
def test_concurrency_sweep_against_a_real_server(llama_server: str, tmp_path: Path) -> None:
    store = tmp_path / "r.sqlite3"
    proc = gguf_bench("--store", str(store), "run", "--url", llama_server, "--served-model", "smollm2",
                      "-p", "32", "-n", "8", "--concurrency", "1,2,4,8", "--requests", "8", "-o", "json",
                      timeout=240)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert [r["n_parallel"] for r in rows] == [1, 2, 4, 8]
    for r in rows:
        assert r["status"] == "ok" and r["n_errors"] == 0 and r["n_requests"] == 8, r.get("request_errors")
        assert r["backends"] == "remote" and r["endpoint"] == llama_server
        # this server reports no usage in a stream: its tokenize route counts the output (not the chunks)
        assert r["tokens_counted_by"] == "tokenize"
        assert r["prompt_tokens_by"] == "tokenize"  # its /extras/tokenize/count sized the prompt
        assert r["prompt_tokens_mean"] == 32
        assert 0 < r["ttft_p50_ms"] <= r["ttft_p99_ms"] and 0 < r["tpot_p50_ms"] <= r["tpot_p99_ms"]
        assert r["decode_tps_aggregate"] > 0 and r["req_per_s"] > 0
        assert r["e2e_p50_ms"] > r["ttft_p50_ms"]
    # one request at a time: with 8 in flight most wait behind the others
    assert rows[3]["ttft_p50_ms"] > 2 * rows[0]["ttft_p50_ms"]
    with ResultStore(store) as s:
        run = s.runs()[0]
        stored = s.rows(run.run_id)
    assert run.status == "finished"
    assert [r.ttft_p50_ms for r in stored] == [r["ttft_p50_ms"] for r in rows]


@pytest.mark.slow
def test_depth_and_prefix_cache_against_a_real_server(llama_server: str, tmp_path: Path) -> None:
    """Issue #29, llama-benchy's depth tests: llama-cpp-python's server keeps one prefix cache (the longest
    prefix shared with the previous prompt). At depth 512 every request's own context makes each prefill the
    whole 528 tokens; with --prefix-cache the context load pays that, and the timed prompt finds it cached."""
    runs = {}
    for flag in ((), ("--prefix-cache",)):
        proc = gguf_bench("--store", str(tmp_path / "r.sqlite3"), "run", "--url", llama_server, "--served-model",
                          "smollm2", "-p", "16", "-n", "2", "-d", "512", "--requests", "3", *flag, "-o", "json",
                          timeout=240)
        assert proc.returncode == 0, proc.stderr
        (runs[bool(flag)],) = json.loads(proc.stdout)
    plain, cached = runs[False], runs[True]
    for r in (plain, cached):
        assert r["status"] == "ok" and r["n_errors"] == 0 and r["n_depth"] == 512, r.get("request_errors")
    assert plain["prefix_cache"] == 0 and plain["ctx_ttft_ms"] is None
    assert cached["prefix_cache"] == 1 and cached["prefill_tokens_mean"] == 16  # no usage: the prompt, estimated
    # the cached context is not prefilled again: the timed TTFT is well under the load's and the plain run's
    assert cached["ttft_p50_ms"] < 0.5 * cached["ctx_ttft_ms"]
    assert cached["ttft_p50_ms"] < 0.5 * plain["ttft_p50_ms"]
