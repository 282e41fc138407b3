"""``choose`` end to end: files, folders and URLs; this machine and two GPU profiles; quality and measured speed from
the store; and its memory figure for SmolLM2 at 8k against what llama.cpp itself allocates."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from app.choose.chooser import ChooseRequest, expand_sources, run_choose
from app.cli.main import main
from app.results.quality_store import model_key, save_quality_rows
from app.results.row_types import QualityRow, ResultRow
from app.results.store import ResultStore
from app.telemetry.cpu_probe import CpuProbe, save_probe
from app.telemetry.machine import ProbeMode, scan_machine
from tests.model.range_server import serve

pytestmark = pytest.mark.heavy  # the real model in a worker and the repack probe's child process

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def probed() -> None:
    """A cached CPU probe, so no test measures the CPU."""
    save_probe(CpuProbe(bandwidth_gbps=20.0, gflops_f32=200.0, n_threads=2, measured_at="test fixture"))


def _two_files(make_gguf: Callable[..., Path]) -> list[str]:
    """Two quantizations of one (synthetic) model: F16 and Q8_0."""
    return [str(make_gguf("synthetic-q8_0.gguf", n_layer=2, tensor_dtype="Q8_0")),
            str(make_gguf("synthetic-f16.gguf", n_layer=2))]


@pytest.mark.parametrize("hw", ["RTX 4060 Laptop", "RTX 4090", None])
def test_recommendation_for_two_gpus_and_this_machine(hw: str | None, make_gguf: Callable[..., Path]) -> None:
    report = run_choose(ChooseRequest(sources=tuple(_two_files(make_gguf)), hw=hw, n_ctx=8192))
    assert report.this_machine is (hw is None)
    assert not report.errors and len(report.choices) == 2
    assert all(c.status == "fits" for c in report.choices)
    rec = report.recommendation
    assert not rec.per_model  # one model: one answer
    assert rec.choice is not None and rec.sentence.startswith(f"Run {rec.choice.filename}")
    # no quality measured: the published figures for the types (F16 the reference itself, Q8_0 0.0014 KLD); the
    # pick is the better score of speed against that loss (balanced), and the sentence names what it trades
    from app.predict.expected_quality import preference_score

    def score(c):  # type: ignore[no-untyped-def]
        return preference_score(c.decode_tps.value, c.total_quality.kld)
    assert rec.choice is max(report.choices, key=score)
    other = next(c for c in report.choices if c is not rec.choice)
    assert "weighs speed against expected quality best (balanced)" in rec.sentence
    assert other.filename in rec.sentence and "It trades" in rec.sentence
    assert rec.command.startswith("llama-server -m ") and " -c 8192 -ctk f16 -ctv f16 -fa on" in rec.command
    assert f"-ngl {0 if hw is None else rec.choice.n_layer + 1}" in rec.command
    if hw == "RTX 4060 Laptop":  # a GPU profile: expected figures from the public llama-bench fit, with a band
        d = rec.choice.decode_tps
        assert d.kind == "public" and d.low < d.value < d.high and "public" in d.source.text()
        assert rec.choice.ttft_ms.low < rec.choice.ttft_ms.value < rec.choice.ttft_ms.high
    if hw is None:  # not calibrated here: the ceiling, labelled
        assert rec.choice.decode_tps.kind == "ceiling"


def test_files_of_two_models_get_one_answer_each(smollm2_path: Path, make_gguf: Callable[..., Path]) -> None:
    """Bits per weight say nothing across models: SmolLM2 and the synthetic model are answered apart, each with its
    own command, and no file of one is ranked against the other's."""
    files = (str(smollm2_path), *_two_files(make_gguf))
    rec = run_choose(ChooseRequest(sources=files, hw="RTX 4060 Laptop", n_ctx=4096)).recommendation
    assert rec.choice is None and len(rec.per_model) == 2
    picked = {r.choice.filename for _, r in rec.per_model if r.choice is not None}
    assert smollm2_path.name in picked and len(picked & {"synthetic-q8_0.gguf", "synthetic-f16.gguf"}) == 1
    assert "which to run is a choice of model" in rec.sentence
    commands = {c.filename: rec.command_for(c) for c in rec.picks()}
    assert all(name in commands[name] for name in picked)


def test_quality_and_measured_speed_from_the_store(smollm2_path: Path, make_gguf: Callable[..., Path]) -> None:
    files = _two_files(make_gguf)
    machine = scan_machine(ProbeMode.CACHED).run_facts()
    with ResultStore() as store:
        save_quality_rows(store, [
            QualityRow(run_id="q1", model_index=i, model_path=f, model_filename=Path(f).name,
                       model_key=model_key(f), status="ok", mean_kld=kld, ppl=20.0 + i, same_top_rate=0.9)
            for i, (f, kld) in enumerate(zip(files, (0.04, 0.0), strict=True))])
        store.begin_run("r1", machine=machine)
        store.add_result("r1", ResultRow(model_filename=smollm2_path.name, status="ok", decode_tps=55.5,
                                         ttft_ms=120.0, n_prompt=512, n_gen=32, n_depth=0,
                                         n_gpu_layers_effective=0, cpu_info=machine.get("cpu_model", "")))
        store.finish_run("r1", "ok")
    report = run_choose(ChooseRequest(sources=(*files, str(smollm2_path)), n_ctx=4096, max_kld=0.05))
    q8 = next(c for c in report.choices if c.filename == "synthetic-q8_0.gguf")
    assert q8.quality is not None and q8.quality.mean_kld == 0.04 and q8.quality.ppl == 20.0
    smol = next(c for c in report.choices if c.filename == smollm2_path.name)
    assert smol.measured is not None and smol.measured.decode_tps == 55.5 and smol.measured.settings.startswith("p512")
    synthetic = next(r for _, r in report.recommendation.per_model if r.choice and r.choice.model_key == q8.model_key)
    assert synthetic.choice.filename == "synthetic-f16.gguf"  # type: ignore[union-attr]  # KLD 0 < 0.04
    assert "KLD 0.0000, measured here" in synthetic.sentence
    other_gpu = run_choose(ChooseRequest(sources=(*files, str(smollm2_path)), hw="RTX 4090", n_ctx=4096))
    assert all(c.measured is None for c in other_gpu.choices)  # measured here, not on that GPU


def test_cli_text_json_folder_and_url(smollm2_path: Path, make_gguf: Callable[..., Path],
                                      capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    make_gguf("a.gguf")
    make_gguf("b-00002-of-00002.gguf")  # a later shard: skipped in a folder
    assert [Path(p).name for p in expand_sources([str(tmp_path)])] == ["a.gguf"]
    assert main(["choose", "--hw", "RTX 4060 Laptop", "--ctx", "8192", "--min-decode-tps", "20",
                 str(smollm2_path), str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "RTX 4060 Laptop (profile, 8.0 GiB) at 8,192 tokens" in out
    assert "not measured — run gguf-bench quality" in out and "llama-server -m " in out
    with serve({"/r/smol.gguf": smollm2_path}) as (base, _):
        assert main(["choose", "--json", "--ctx", "2048", f"{base}/r/smol.gguf"]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert main(["inspect", "--json", f"{base}/r/smol.gguf"]) == 0
        assert json.loads(capsys.readouterr().out)["n_layer"] == 30
        assert main(["predict", "--json", "-m", f"{base}/r/smol.gguf", "--hw", "RTX 4060 Laptop"]) == 0
        assert json.loads(capsys.readouterr().out)["fit_status"] == "fits"
        assert main(["inspect", f"{base}/r/missing.gguf"]) == 2
        assert "missing.gguf: HTTP 404" in capsys.readouterr().err
    assert doc["files"][0]["source"] == f"{base}/r/smol.gguf" and doc["recommendation"]["command"].startswith(
        f"llama-server -mu {base}/r/smol.gguf -ngl 0 -c 2048")


def test_unreadable_files_are_listed_not_fatal(make_gguf: Callable[..., Path], tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"nope")
    report = run_choose(ChooseRequest(sources=(str(make_gguf()), str(bad)), hw="RTX 4060 Laptop"))
    assert len(report.choices) == 1 and report.errors[0][0] == str(bad)
    assert main(["choose", str(bad)]) == 2
    assert "no file could be read" in capsys.readouterr().err
    assert main(["choose", "--hw", "no such gpu", str(bad)]) == 2


_LLAMA_ALLOCATES = textwrap.dedent("""
    import json, sys
    from engines.base import ContextConfig, LoadConfig
    from engines.llama_cpp_engine import LlamaCppEngine
    from engines.llama_log import named_buffers
    eng = LlamaCppEngine()
    eng.load(LoadConfig(model_path=sys.argv[1], use_extra_bufts=sys.argv[3] == "1"))
    by_name = named_buffers()  # the model's buffers, by buffer type (CPU_Mapped, CPU_REPACK, AMX...)
    eng.new_context(ContextConfig(n_ctx=int(sys.argv[2]), n_threads=1))  # llama-server's defaults: ubatch 512, -fa auto
    mem = eng.memory_report()
    print(json.dumps({"weights": mem.weights_bytes, "kv": mem.kv_bytes, "compute": mem.compute_bytes,
                      "weights_by_buffer": {k: v["weights"] for k, v in by_name.items()}}))
    eng.close()
""")


def llama_allocates(model: Path, n_ctx: int, repack: int) -> dict:
    """What llama.cpp allocates for ``model`` at ``n_ctx`` in a child process (model, KV and compute bytes, and the
    weights per buffer type), with weight repacking ``repack``."""
    done = subprocess.run([sys.executable, "-c", _LLAMA_ALLOCATES, str(model), str(n_ctx), str(repack)], cwd=REPO,
                          capture_output=True, text=True, timeout=120, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.cpu_identity
def test_memory_at_8k_within_5_percent_of_llama_cpp(smollm2_path: Path) -> None:
    """llama.cpp loads SmolLM2 at n_ctx 8192 in a child process with this machine's repacking (what the chooser's
    llama-server command runs: --no-repack where the repack guard found it crashes here); the buffers it logs
    (model + KV + compute) are compared with choose's figure for this machine (the CPU: no GPU allowance)."""
    from app.telemetry.repack_guard import default_repack

    choice = run_choose(ChooseRequest(sources=(str(smollm2_path),), hw=None, n_ctx=8192)).choices[0]
    assert choice.repack == default_repack()
    logged = llama_allocates(smollm2_path, 8192, choice.repack)
    assert logged["kv"] == 180 * 2**20  # 8192 cells × 30 layers × 3 KV heads × 64 × 2 × f16
    llama_total = logged["weights"] + logged["kv"] + logged["compute"]
    assert choice.overhead_bytes == 0
    assert choice.memory_bytes == pytest.approx(llama_total, rel=0.05)
    assert choice.kv_bytes == logged["kv"]


def test_memory_with_repacking_on_within_5_percent_of_llama_cpp(smollm2_path: Path, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """Issue #45: with repacking on, llama.cpp copies the weights its CPU extra buffer types take (AMX on a Xeon
    with AMX, CPU_REPACK elsewhere) beside the mapped file. ``predict --repack 1`` for this machine's CPU must count
    those copies: per extra buffer and in all, within 5 % of what llama.cpp allocates. A Q4_0 file (repacked on
    x86 with AVX2, on ARM with dot products, and by AMX) and SmolLM2's Q4_1 (AMX only; nothing elsewhere). Not run
    under a stand-in CPU identity: llama.cpp allocates for the real CPU."""
    from tests.cli_helpers import main_json

    assert main(["quantize", "-m", str(smollm2_path), "--types", "q4_0", "--allow-requantize",
                 "--out", str(tmp_path)]) == 0
    capsys.readouterr()
    q4_0 = next(tmp_path.glob("*Q4_0.gguf"))
    for model in (q4_0, smollm2_path):
        logged = llama_allocates(model, 2048, 1)
        extra_logged = sum(v for k, v in logged["weights_by_buffer"].items() if k not in ("CPU", "CPU_Mapped"))
        doc = main_json("predict", ["-m", str(model), "--ctx", "2048", "--repack", "1", "-ngl", "0"], capsys)
        if model == q4_0:
            assert extra_logged > 0.3 * logged["weights"], logged  # most of it is repacked wherever it runs
        assert doc["repacked_weight_bytes"] == pytest.approx(extra_logged, rel=0.05, abs=0.5 * 2**20), logged
        host = doc["memory_per_device"]["host"]
        assert host["weights_bytes"] == pytest.approx(logged["weights"], rel=0.05)
        total = host["weights_bytes"] + host["kv_bytes"] + host["compute_bytes"]
        assert total == pytest.approx(logged["weights"] + logged["kv"] + logged["compute"], rel=0.05)


@pytest.mark.cpu_identity
def test_choose_says_no_repack_where_the_guard_found_repacking_crashes(smollm2_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue #45: on a CPU where repacked weights crash llama.cpp (AMX, llama.cpp #20824; here the crash double,
    GGUF_WORKBENCH_TEST_DOUBLE=amx-crash, which dies where AMX does), the command the chooser prints carries
    --no-repack, and its memory is for repacking off; where repacking is safe the command leaves it out."""
    from app.telemetry import repack_guard

    monkeypatch.setenv(repack_guard.TEST_DOUBLE_ENV, "amx-crash")
    verdict, _ = repack_guard.ensure_verdict()
    assert verdict.safe is False and verdict.default_repack == 0, verdict.detail
    report = run_choose(ChooseRequest(sources=(str(smollm2_path),), hw=None, n_ctx=4096))
    assert report.recommendation.command.endswith(" -fa on --no-repack"), report.recommendation.command
    assert report.choices[0].repack == 0
    monkeypatch.delenv(repack_guard.TEST_DOUBLE_ENV)
    if repack_guard.ensure_verdict()[0].default_repack == 1:  # this machine's own llama.cpp repacks safely
        command = run_choose(ChooseRequest(sources=(str(smollm2_path),), hw=None, n_ctx=4096)).recommendation.command
        assert "--no-repack" not in command
