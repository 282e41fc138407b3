"""Sliding-window attention layers, following llama.cpp's rules per architecture."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from app.model.format import format_facts_text
from app.model.gguf_facts import read_model_facts, sliding_window_layers, swa_layers_for_period
from app.model.kv_cache import kv_bytes_at_context

MakeGGUF = Callable[..., Path]


def test_gemma2_every_other_layer(make_gguf: MakeGGUF) -> None:
    facts = read_model_facts(make_gguf(arch="gemma2", n_layer=6, sliding_window=256))
    assert facts.swa_window == 256
    assert facts.swa_layers == (0, 2, 4)
    assert "period 2" in str(facts.extra["swa_rule"])


def test_gemma2_default_window_is_4096(make_gguf: MakeGGUF) -> None:
    facts = read_model_facts(make_gguf(arch="gemma2", n_layer=4))
    assert (facts.swa_window, facts.swa_layers) == (4096, (0, 2))
    assert "default window 4096" in str(facts.extra["swa_rule"])


def test_gemma3_period_six(make_gguf: MakeGGUF) -> None:
    facts = read_model_facts(make_gguf(arch="gemma3", n_layer=12, n_embd=32, n_ff=64, sliding_window=128))
    assert facts.swa_window == 128
    assert facts.swa_layers == (0, 1, 2, 3, 4, 6, 7, 8, 9, 10)  # layers 5 and 11 are global
    text = format_facts_text(facts)
    assert "128 tokens on 10 of 12 layers: 0-4, 6-10" in text


def test_gemma3_without_window_has_no_swa(make_gguf: MakeGGUF) -> None:
    facts = read_model_facts(make_gguf(arch="gemma3", n_layer=6))
    assert (facts.swa_window, facts.swa_layers) == (0, ())
    assert "Sliding window    none" in format_facts_text(facts)


def test_explicit_period_pattern(make_gguf: MakeGGUF) -> None:
    facts = read_model_facts(make_gguf(n_layer=6, sliding_window=64, swa_pattern=3))
    assert facts.swa_layers == (0, 1, 3, 4)


def test_explicit_bool_array_pattern(make_gguf: MakeGGUF) -> None:
    facts = read_model_facts(make_gguf(n_layer=4, sliding_window=64, swa_pattern=[True, False, True, True]))
    assert (facts.swa_window, facts.swa_layers) == (64, (0, 2, 3))
    assert "per-layer" in str(facts.extra["swa_rule"])


def test_window_without_pattern_on_unknown_arch_counts_full(make_gguf: MakeGGUF) -> None:
    facts = read_model_facts(make_gguf(n_layer=4, sliding_window=4096))
    assert (facts.swa_window, facts.swa_layers) == (0, ())
    assert facts.extra["sliding_window_key"] == 4096
    assert "full attention" in str(facts.extra["swa_rule"])


def test_kv_bytes_cap_sliding_layers(make_gguf: MakeGGUF) -> None:
    facts = read_model_facts(make_gguf(arch="gemma3", n_layer=12, n_embd=32, n_ff=64, sliding_window=128))
    per_layer = 2 * (8 * 2 + 8 * 2)  # 2 KV heads x head dim 32/4 = 8, K + V at f16
    assert facts.kv_bytes(4096) == per_layer * (2 * 4096 + 10 * 128)
    assert facts.kv_bytes(4096) == kv_bytes_at_context(4096, 12, 2, 8, 8, swa_layers=10, swa_window=128)
    assert facts.kv_bytes(4096, swa_full=True) == per_layer * 12 * 4096


@pytest.mark.heavy  # the real window's background jobs
@pytest.mark.parametrize(
    ("arch", "n_layer", "window", "pattern", "expected"),
    [
        ("gemma2", 5, 4096, None, (0, 2, 4)),
        ("gemma3", 7, 512, None, (0, 1, 2, 3, 4, 6)),
        ("gemma3n", 5, 512, None, (0, 1, 2, 3)),
        ("cohere2", 8, 4096, None, (0, 1, 2, 4, 5, 6)),
        ("gpt-oss", 4, 128, None, (0, 2)),
        ("llama", 4, 128, 0, (0, 1, 2, 3)),
        ("llama", 4, 128, 1, ()),
        ("gemma2", 4, 4096, 4, (0, 1, 2)),
        ("llama", 3, 128, [False, True, True, True], (1, 2)),
        ("llama", 4, 0, 2, ()),
        ("llama", 4, None, None, ()),
    ],
)
def test_sliding_window_rules(
    arch: str, n_layer: int, window: int | None, pattern: int | list[bool] | None, expected: tuple[int, ...]
) -> None:
    got_window, layers, rule = sliding_window_layers(arch, n_layer, window, pattern)
    assert layers == expected
    assert got_window == (window if expected else 0)
    assert rule


def test_period_rule_matches_gemma_convention() -> None:
    for period in (2, 3, 6):
        for i in swa_layers_for_period(24, period):
            assert (i + 1) % period != 0
        assert len(swa_layers_for_period(24, period)) == 24 - 24 // period
