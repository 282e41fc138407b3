"""Issue #54 item 5: the dry run bounded. A header's claims are checked before llama.cpp's dry run sees them, and the
child runs under a memory limit, so a crafted header (a 24 KB sparse file claiming ``ssm.state_size`` 4,194,304 made
``inspect --dry-run`` allocate 2 GiB per context, 4.1 GB at its peak) is refused in one line with the child's peak
RSS under 1 GB, read from a file or over HTTP."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest

from app.model.dry_run import DryRunSettings, dry_run
from app.model.dry_run_bounds import (
    MAX_CONTEXT_TOKENS,
    MAX_STATE_BYTES,
    MAX_TENSORS,
    MAX_VOCAB,
    child_memory_limit_bytes,
    claims_problem,
)
from app.model.facts import TensorTypeStat
from app.model.gguf_facts import read_model_facts
from tests.arch_ggufs import ArchModel, _Builder

GB = 10**9
CRAFTED_STATE = 4_194_304  # the claim: 2 GiB of recurrent state for one Mamba layer of 128 channels


def crafted_mamba(folder: Path, d_state: int = CRAFTED_STATE, n_layer: int = 1) -> Path:
    """A Mamba header whose tensors agree with its ``ssm.state_size`` (llama.cpp checks the shapes) and whose data is
    a sparse hole: a few KB on disk whatever the claim."""
    n_embd, d_inner, dt_rank, n_vocab = 64, 128, 4, 256

    def build(b: _Builder) -> None:
        b.embd(n_embd, n_vocab, output=False)
        for i in range(n_layer):
            b.mamba1(i, n_embd, d_inner, d_state, dt_rank)

    keys: dict[str, object] = {
        "block_count": n_layer, "context_length": 4096, "embedding_length": n_embd, "feed_forward_length": 0,
        "attention.head_count": 0, "ssm.conv_kernel": 4, "ssm.inner_size": d_inner, "ssm.state_size": d_state,
        "ssm.time_step_rank": dt_rank, "attention.layer_norm_rms_epsilon": 1e-5, "vocab_size": n_vocab}
    return ArchModel(f"crafted-mamba-{d_state}", "mamba", "crafted", keys, build).write(folder)


#: Runs ``gguf-bench ARGS...`` and prints its exit status, output, and the peak RSS of it and of every process it
#: waited for (its dry run's child): measured in a process of its own, so no other test's children count.
_MEASURED_CLI = """
import json, resource, subprocess, sys
proc = subprocess.run([sys.executable, "-m", "app.cli.main", *sys.argv[1:]], capture_output=True, text=True)
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps({"rc": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr,
                  "peak_rss_bytes": peak if sys.platform == "darwin" else peak * 1024}))
"""
#: Runs the dry run's child on ARGV[1] under the limit ARGV[2] (bytes), with no check before it; prints the problem the
#: parent reports and the child's peak RSS.
_MEASURED_CHILD = """
import json, resource, sys
from app.model.dry_run import DryRunSettings, _run_child
run = _run_child(sys.argv[1], [DryRunSettings(n_ctx=8192)], 120.0, None, int(sys.argv[2]))
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps({"problem": run.problem, "peak_rss_bytes": peak if sys.platform == "darwin" else peak * 1024}))
"""


def _measured(code: str, *args: str) -> dict[str, object]:
    import json
    import subprocess

    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_a_crafted_recurrent_state_is_refused_before_any_child(tmp_path: Path) -> None:
    """The fast tier's guard fails a test that starts a child: this one shows none is started."""
    path = crafted_mamba(tmp_path)
    assert path.stat().st_blocks * 512 < 64 * 1024  # a few KB on disk, whatever the claim
    run = dry_run(path, [DryRunSettings(n_ctx=8192), DryRunSettings(n_ctx=32768)], cache=False)
    assert run.problem.startswith("not dry-run: the header claims a recurrent state of 2,048 MiB per sequence"), \
        run.problem
    assert "\n" not in run.problem and run.contexts == ()


def test_every_claim_has_a_limit_far_above_published_models(tmp_path: Path) -> None:
    facts = read_model_facts(crafted_mamba(tmp_path, d_state=16))
    assert claims_problem(facts) == ""
    cases = {
        "tensors": replace(facts, tensor_types={"F32": TensorTypeStat(n_tensors=MAX_TENSORS + 1, n_bytes=0,
                                                                       n_elements=0)}),
        "vocabulary of": replace(facts, n_vocab=MAX_VOCAB + 1),
        "token_embd.weight has 256 rows": replace(facts, n_vocab=1000),
        "context_length": replace(facts, n_ctx_train=MAX_CONTEXT_TOKENS + 1),
        "recurrent state": replace(facts, state_s=MAX_STATE_BYTES),  # f32 values: four times the bytes
    }
    for says, bad in cases.items():
        problem = claims_problem(bad)
        assert says in problem and "\n" not in problem, (says, problem)


def test_the_childs_limit_holds_the_claimed_state_and_the_largest_context() -> None:
    from app.model.dry_run_bounds import CELL_BYTES, CHILD_BASE_BYTES

    assert child_memory_limit_bytes(None, []) == CHILD_BASE_BYTES + MAX_STATE_BYTES
    largest = 1 << 24
    assert child_memory_limit_bytes(None, [8192, largest]) == CHILD_BASE_BYTES + MAX_STATE_BYTES + CELL_BYTES * largest


@pytest.mark.heavy  # llama.cpp's dry run in a child process
def test_the_child_stops_at_its_memory_limit_when_a_check_would_let_a_claim_through(tmp_path: Path) -> None:
    """The limit, on its own: the crafted header given straight to the child (no check before it) fails the state's
    allocation inside it, and the parent says so in one line; the child's peak RSS stays under 1 GB."""
    limit = child_memory_limit_bytes(None, [8192])  # the most a header that passed the checks could get
    got = _measured(_MEASURED_CHILD, str(crafted_mamba(tmp_path)), str(limit))
    problem = str(got["problem"])
    assert problem.startswith(f"llama.cpp's dry run stopped at its memory limit of {limit / 2**20:,.0f} MiB ("), problem
    assert "\n" not in problem
    assert int(got["peak_rss_bytes"]) < GB  # type: ignore[call-overload]


@pytest.mark.heavy  # the CLI in a subprocess, which starts the dry run's child
def test_inspect_dry_run_of_a_crafted_header_refuses_in_one_line_under_1_gb(tmp_path: Path) -> None:
    got = _measured(_MEASURED_CLI, "inspect", "--dry-run", str(crafted_mamba(tmp_path)))
    assert got["rc"] == 0, got["stderr"]
    refusals = [line for line in str(got["stdout"]).splitlines() if "not dry-run" in line]
    assert len(refusals) == 1 and "recurrent state of 2,048 MiB" in refusals[0], got["stdout"]
    assert int(got["peak_rss_bytes"]) < GB  # type: ignore[call-overload]


@pytest.mark.heavy  # the CLI in a subprocess, against a header served over HTTP
def test_predict_dry_run_of_a_crafted_header_over_http_refuses_in_one_line_under_1_gb(tmp_path: Path) -> None:
    from tests.model.range_server import serve

    with serve({"/crafted.gguf": crafted_mamba(tmp_path)}) as (base, _state):
        got = _measured(_MEASURED_CLI, "predict", "--dry-run", "-m", f"{base}/crafted.gguf")
    assert got["rc"] == 0, got["stderr"]
    warnings = [line for line in str(got["stderr"]).splitlines() if "not dry-run" in line]
    assert len(warnings) == 1 and "recurrent state of 2,048 MiB" in warnings[0], got["stderr"]
    assert int(got["peak_rss_bytes"]) < GB  # type: ignore[call-overload]
