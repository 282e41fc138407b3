"""Tests checked against their model and this machine before anything is loaded.

Plan validation (:meth:`app.run.plan.SweepSpec.validate`) bounds every count without knowing the model; here the
model's facts and the machine's memory are known:

* past the trained context (``n_ctx_train``): llama.cpp runs such a test (it only warns in its log), so we run it
  too and print one warning line per model naming the model and its trained context;
* a KV cache larger than all of this machine's memory (RAM plus every GPU's VRAM): no setting can make llama.cpp
  allocate it, so the test becomes a failed row (out of memory) without starting a worker.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from app.model.facts import ModelFacts
from app.predict.answer import kv_cache_bytes
from app.predict.settings import PredictSettings
from app.run.plan import TestSpec

GIB = 2**30


def memory_budget_bytes(machine: Mapping[str, Any]) -> int | None:
    """RAM plus the VRAM of every GPU the machine record lists, or None when the RAM is unknown."""
    ram = machine.get("ram_total_bytes")
    if not isinstance(ram, int) or ram <= 0:
        return None
    vram = sum(int(g.get("vram_total_bytes") or 0) for g in machine.get("gpus") or () if isinstance(g, dict))
    return ram + vram


def kv_bytes_for(test: TestSpec, facts: ModelFacts) -> float:
    """KV-cache bytes llama.cpp allocates for ``test`` (its n_ctx, cache types and micro-batch)."""
    return kv_cache_bytes(facts, PredictSettings(n_ctx=test.n_ctx, type_k=test.type_k, type_v=test.type_v,
                                                 n_ubatch=min(test.n_ubatch, test.n_batch)))


def too_big_for_memory(tests: Iterable[TestSpec], facts: Mapping[str, ModelFacts],
                       machine: Mapping[str, Any]) -> dict[TestSpec, str]:
    """Tests whose KV cache alone exceeds RAM + VRAM, each with a one-line reason naming the model."""
    budget = memory_budget_bytes(machine)
    out: dict[TestSpec, str] = {}
    if budget is None:
        return out
    for t in tests:
        model = facts.get(t.model_path)
        if model is None:
            continue
        need = kv_bytes_for(t, model)
        if need > budget:
            out[t] = (f"cannot allocate a context for {os.path.basename(t.model_path)}: its KV cache at "
                      f"{t.n_ctx:,} tokens needs {need / GIB:,.1f} GiB, more than this machine's "
                      f"{budget / GIB:,.1f} GiB of memory (RAM + GPU); not started")
    return out


def context_warnings(tests: Iterable[TestSpec], facts: Mapping[str, ModelFacts]) -> list[str]:
    """One line per model whose tests go past its trained context (depth + prompt + generated tokens)."""
    longest: dict[str, int] = {}
    for t in tests:
        longest[t.model_path] = max(longest.get(t.model_path, 0), t.n_depth + t.n_prompt + t.n_gen)
    lines = []
    for path, n_tokens in longest.items():
        model = facts.get(path)
        if model is not None and 0 < model.n_ctx_train < n_tokens:
            lines.append(f"{os.path.basename(path)}: tests reach {n_tokens:,} tokens (depth + prompt + generated), "
                         f"past the model's trained context of {model.n_ctx_train:,}; llama.cpp runs them, but "
                         f"the model was not trained that far")
    return lines
