"""Every architecture against llama.cpp's own memory figures (issue #41, item 1 and its first acceptance point).

Header-only GGUFs of 19 published models' shapes (tests/arch_ggufs.py: dense, MoE, sliding windows, sinks with MXFP4
experts, MLA, attention/recurrent hybrids, pure recurrent) are read by ``inspect``'s reader (none refused) and sized
by llama.cpp's dry run (``no_alloc``, a child process) at 8k and 32k tokens with flash attention on. The answer for
this machine's CPU takes the dry run's memory (weights within 1 %, KV + recurrent state within 2 %, compute within
10 % of llama.cpp's: equal, as it takes them); our formulas, which speak for a GPU not owned, are checked against the
same figures: weights 1 %, KV + state 2 % (the same KV on a GPU profile), compute buffers within their stated
tolerance (app.predict.memory_truth.COMPUTE_TOLERANCE). ``pytest -s`` prints the table.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from app.model.gguf_facts import read_model_facts
from app.predict.answer import Machine, MemoryCheck, answer, memory_checks
from app.predict.memory_truth import COMPUTE_TOLERANCE
from app.predict.profiles import find_profile, load_profiles
from app.predict.settings import at_context
from tests.arch_ggufs import MODELS, write_all
from tests.cli_helpers import main_json
from tests.predict.answer_helpers import HOST

pytestmark = pytest.mark.heavy

CONTEXTS = (8192, 32768)
MIB = 2**20


def test_every_architecture_matches_llama_cpps_dry_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GGUF_WORKBENCH_DATA_DIR", str(tmp_path / "data"))
    paths = write_all(tmp_path)
    gpu = find_profile("RTX 4060 Laptop", load_profiles())
    table: list[str] = []
    failures: list[str] = []
    kinds: set[str] = set()
    for m in MODELS:
        facts = read_model_facts(paths[m.label])  # inspect's reader: no architecture refused
        settings = [at_context(n) for n in CONTEXTS]
        machine = Machine(cpu=HOST, cpu_model="test host").with_dry_run(facts, settings)
        run = machine.dry_run_of(facts)
        assert run is not None and not run.problem, f"{m.label}: {run.problem if run else 'no dry run'}"
        checks = memory_checks(facts, settings, machine)
        cells: list[str] = []
        for s, check in zip(settings, checks, strict=True):
            assert isinstance(check, MemoryCheck), f"{m.label} at {s.n_ctx}: {check}"
            truth = machine.memory_truth(facts, s)
            assert truth is not None
            ctx, size = truth
            here = answer(facts, HOST, s, machine).prediction  # this CPU: llama.cpp's memory
            elsewhere = answer(facts, gpu, s, Machine()).prediction  # a GPU not owned: the formulas
            got = {"weights (this CPU)": (here.weight_bytes / size - 1, 0.01),
                   "KV+state (this CPU)": (here.kv_bytes / ctx.context_bytes - 1 if ctx.context_bytes else 0, 0.02),
                   "compute (this CPU)": (here.compute_buffer_bytes / (ctx.compute_bytes + ctx.output_bytes) - 1,
                                          0.10),
                   "KV+state (GPU profile)": (elsewhere.kv_bytes / ctx.context_bytes - 1 if ctx.context_bytes else 0,
                                              0.02),
                   "formula weights": (check.weights_dev or 0.0, 0.01),
                   "formula KV+state": (check.context_dev, 0.02),
                   "formula compute": (check.compute_dev, COMPUTE_TOLERANCE)}
            failures += [f"{m.label} at {s.n_ctx}: {what} {dev:+.1%} (limit {limit:.0%})"
                         for what, (dev, limit) in got.items() if abs(dev) > limit]
            cells.append(f"{check.context / MIB:9,.1f} {check.context_llama / MIB:9,.1f} {check.context_dev:+6.1%}"
                         f" | {check.compute / MIB:7,.1f} {check.compute_llama / MIB:7,.1f} {check.compute_dev:+6.1%}")
        kinds.add(m.arch)
        table.append(f"{m.label:<20} {m.arch:<13} {' || '.join(cells)} || {facts.weight_bytes / MIB:9,.1f} "
                     f"{run.size_bytes / MIB:9,.1f}")  # type: ignore[operator]
    head = ("KV+state MiB: ours, llama.cpp, ours vs theirs | compute MiB: the same (flash attention on, ubatch 512)")
    print(f"\n{'model':<20} {'arch':<13} {'8k: ' + head:<58} || 32k: the same || weights MiB: ours, llama.cpp")
    print("\n".join(table))
    assert len(MODELS) >= 15 and len(kinds) >= 15
    assert not failures, "\n".join(failures)


def test_inspect_dry_run_prints_ours_beside_llama_cpps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("GGUF_WORKBENCH_DATA_DIR", str(tmp_path / "data"))
    path = write_all(tmp_path, ["granite-4.0-h-micro"])["granite-4.0-h-micro"]
    doc = main_json("inspect", [str(path), "--dry-run", "--ctx", "4096"], capsys)
    [check] = doc["dry_run"]
    assert check["n_ctx"] == 4096 and check["context"] == pytest.approx(check["context_llama"], rel=0.001)
    assert check["state_llama"] == pytest.approx(doc["state_bytes"], rel=0.001)
    assert doc["recurrent_layers"] and doc["extra"]["memory_rule"].startswith("granitehybrid: hybrid")
