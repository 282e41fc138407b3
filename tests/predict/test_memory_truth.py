"""llama.cpp's dry run as this CPU's memory (app.predict.memory_truth), what a token reads per architecture, and the
dry run's log and cache formats; no child process here (tests/predict/test_arch_dry_run.py runs llama.cpp)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.model.dry_run import ContextMemory, DryRun, DryRunSettings
from app.model.gguf_facts import read_model_facts
from app.predict.answer import Machine, answer, memory_checks
from app.predict.ceilings.decode import kv_bytes_read_at_depth
from app.predict.memory.buffers import compute_buffer_bytes_for, kv_alloc_bytes
from app.predict.memory_truth import dry_run_settings
from app.predict.settings import PredictSettings, at_context
from engines import llama_log
from tests.arch_ggufs import by_label
from tests.predict.answer_helpers import HOST

MIB = 2**20


def test_a_token_reads_and_writes_the_recurrent_state(tmp_path: Path) -> None:
    mamba = read_model_facts(by_label("mamba2-2.7b").write(tmp_path))
    assert kv_bytes_read_at_depth(mamba, 1000) == kv_bytes_read_at_depth(mamba, 30000) == 2 * mamba.state_bytes
    granite = read_model_facts(by_label("granite-4.0-h-micro").write(tmp_path))
    assert kv_bytes_read_at_depth(granite, 1000) == 1000 * 4 * 2048 + 2 * granite.state_bytes
    mla = read_model_facts(by_label("deepseek-v2-lite").write(tmp_path))
    assert kv_bytes_read_at_depth(mla, 1000) == 1000 * 27 * 576 * 2  # the compressed K only: V is part of it
    gemma = read_model_facts(by_label("gemma-3-12b").write(tmp_path))
    per_layer = 8 * 256 * 2 * 2
    assert kv_bytes_read_at_depth(gemma, 8000) == per_layer * (8 * 8000 + 40 * 1024)  # windowed layers: 1024


def _truth(facts_path: Path, s: PredictSettings, kv: float, compute: float, size: int) -> DryRun:
    ctx = ContextMemory(dry_run_settings(s), kv_bytes=kv, kv_k_bytes=kv / 2, kv_v_bytes=kv / 2,
                        compute={"CPU": compute}, output_bytes=0.5 * MIB)
    return DryRun(str(facts_path), (ctx,), size_bytes=size)


def test_this_cpus_answer_takes_llama_cpps_memory_and_says_how_the_formulas_compare(tmp_path: Path) -> None:
    facts = read_model_facts(by_label("llama-3.1-8b").write(tmp_path))
    s = at_context(8192)
    ours_kv, ours_compute = kv_alloc_bytes(facts, 8192), compute_buffer_bytes_for(facts, 8192, flash_attn=True)
    run = _truth(Path(facts.path), s, ours_kv * 1.01, ours_compute * 0.9, facts.weight_bytes)
    machine = Machine(cpu=HOST, cpu_model="test host", dry_runs=(run,))
    got = answer(facts, HOST, s, machine).prediction
    assert got.kv_bytes == round(ours_kv * 1.01)
    assert got.compute_buffer_bytes == round(ours_compute * 0.9 + 0.5 * MIB)  # the output buffer counted
    assert got.fit.needed_bytes == got.fit.weight_bytes + got.kv_bytes + got.compute_buffer_bytes
    assert any("llama.cpp's dry run at 8,192 tokens" in n and "the formulas agree" in n for n in got.notes)
    plain = answer(facts, HOST, s, Machine(cpu=HOST, cpu_model="test host")).prediction  # no dry run: formulas
    assert plain.kv_bytes == round(ours_kv)
    other = answer(facts, HOST, at_context(4096), machine).prediction  # a context it did not size: formulas
    assert other.kv_bytes == round(kv_alloc_bytes(facts, 4096))
    [check] = memory_checks(facts, [s], machine)
    assert not isinstance(check, str) and check.context_dev == pytest.approx(1 / 1.01 - 1)


def test_a_disagreeing_dry_run_is_said_and_still_used(tmp_path: Path) -> None:
    facts = read_model_facts(by_label("qwen3-8b").write(tmp_path))
    s = at_context(8192)
    run = _truth(Path(facts.path), s, kv_alloc_bytes(facts, 8192) * 2, 100 * MIB, facts.weight_bytes)
    got = answer(facts, HOST, s, Machine(cpu=HOST, cpu_model="test host", dry_runs=(run,))).prediction
    assert got.kv_bytes == round(kv_alloc_bytes(facts, 8192) * 2)
    assert any("the formulas DISAGREE" in n for n in got.notes)


def test_the_dry_runs_log_lines_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    lines = [  # as llama.cpp 0.3.36 logs them (no_alloc): an iSWA model's two caches, then a hybrid's state
        "llama_kv_cache:        CPU KV buffer size =     0.00 MiB\n",
        "llama_kv_cache: size = 1344.00 MiB (  8192 cells,  21 layers,  1/1 seqs), K (f16):  672.00 MiB, "
        "V (f16):  672.00 MiB\n",
        "llama_kv_cache: size =  756.00 MiB (  4608 cells,  21 layers,  1/1 seqs), K (f16):  378.00 MiB, "
        "V (f16):  378.00 MiB\n",
        "llama_memory_recurrent:        CPU RS buffer size =    73.79 MiB\n",
        "llama_memory_recurrent: size =   73.79 MiB (     1 cells,  40 layers,  1 seqs  0 rs_seq), R (f32):    1.79 "
        "MiB, S (f32):   72.00 MiB, P (f32):    0.00 MiB\n",
        "llama_context:        CPU  output buffer size =     0.98 MiB\n",
        "sched_reserve:        CPU compute buffer size =   500.00 MiB\n",
        "sched_reserve:        CPU compute buffer size =   514.00 MiB\n",
    ]
    monkeypatch.setattr(llama_log, "LINES", llama_log.collections.deque((2, x) for x in lines))
    got = llama_log.context_memory()
    assert got["kv_bytes"] == (1344 + 756) * MIB and got["kv_k_bytes"] == (672 + 378) * MIB
    assert got["kv_caches"] == [{"cells": 8192, "layers": 21, "bytes": 1344 * MIB},
                                {"cells": 4608, "layers": 21, "bytes": 756 * MIB}]
    assert (got["state_bytes"], got["state_s_bytes"]) == (73.79 * MIB, 72 * MIB)
    assert got["compute"] == {"CPU": 514 * MIB} and got["output"] == {"CPU": 0.98 * MIB}  # the last reservation


def test_a_context_memory_round_trips_through_the_cache_format() -> None:
    c = ContextMemory(DryRunSettings(32768, flash_attn=0), kv_bytes=3.0, kv_k_bytes=2.0, kv_v_bytes=1.0,
                      kv_caches=((32768, 4, 3.0),), state_bytes=5.0, state_r_bytes=1.0, state_s_bytes=4.0,
                      compute={"CPU": 7.0}, output_bytes=0.5, flash_attn_used=False)
    assert ContextMemory.from_json(c.to_json()) == c
    run = DryRun("x.gguf", (c,))
    assert run.context(DryRunSettings(32768, flash_attn=0)) == c and run.context(DryRunSettings(32768)) is None
