"""Prefill ceilings: FLOPs per prompt token (matmuls and causal attention) over TFLOPS."""

from __future__ import annotations

import dataclasses

import pytest

from app.predict.ceilings.offload import split_weights
from app.predict.ceilings.prefill import (
    attention_flops_per_token,
    expert_params,
    matmul_params,
    prefill_ceiling_tps,
    prefill_flops_per_token,
)
from tests.predict.samples import make_facts, smollm2_facts


def test_prefill_ceiling() -> None:
    assert prefill_ceiling_tps(100, 7e9) == pytest.approx(1e14 / 1.4e10)  # 2 FLOPs per weight
    # 4096-token prompt: average 2048 keys × 32 layers × 4 × 4096 = 1,073,741,824 FLOPs per token more
    assert prefill_ceiling_tps(100, 7e9, n_prompt=4096, n_layer=32, n_embd_attn=4096) == pytest.approx(
        1e14 / (1.4e10 + 1_073_741_824)
    )
    assert prefill_flops_per_token(0, n_prompt=0, n_layer=1, n_embd_attn=1, depth=100) == 400
    with pytest.raises(ValueError):
        prefill_ceiling_tps(0, 7e9)


def test_attention_flops_sliding_window() -> None:
    assert attention_flops_per_token(32, 4096, 2048) == 4 * 4096 * 32 * 2048
    assert attention_flops_per_token(32, 4096, 2048, n_swa_layers=16, swa_window=512) == 4 * 4096 * (
        16 * 2048 + 16 * 512
    )


def test_matmul_params() -> None:
    facts = make_facts()
    assert matmul_params(facts) == facts.n_params - 32000 * 4096  # the embedding table is looked up
    assert matmul_params(smollm2_facts()) == 134_515_008  # tied: the LM head multiplies through it
    moe = make_facts(n_layer=1, n_expert=8, n_expert_used=2, n_params=1_000_000_000, n_vocab=1000, n_embd=100)
    tensors = {"blk.0.ffn_up_exps.weight": 800, "blk.0.attn_q.weight": 200, "output.weight": 0}
    split = split_weights(moe, 999, tensors)
    # experts are 80 % of the bytes, so 8e8 of the 1e9 parameters without their shapes; 2 of 8 are used: 6e8 idle
    assert matmul_params(moe, split, tensors) == pytest.approx(1_000_000_000 - 100_000 - 0.8e9 * 0.75)
    assert matmul_params(moe) == 1_000_000_000 - 100_000  # no map: all experts counted


def test_matmul_params_count_experts_by_their_shapes() -> None:
    """A MXFP4 expert holds 4.25 bits a weight beside Q8_0's 8.5: by bytes the experts would be 2/3 of the
    parameters, by their shapes they are 8e8 of the 1e9 (so 6e8 idle with 2 of 8 used)."""
    moe = make_facts(n_layer=1, n_expert=8, n_expert_used=2, n_params=1_000_000_000, n_vocab=1000, n_embd=100)
    moe = dataclasses.replace(moe, tensor_shapes={"blk.0.ffn_up_exps.weight": ("MXFP4", (1000, 100_000, 8)),
                                                  "blk.0.attn_q.weight": ("Q8_0", (1000, 200_000))},
                              tensor_bytes={"blk.0.ffn_up_exps.weight": 425_000_000,
                                            "blk.0.attn_q.weight": 212_500_000})
    assert expert_params(moe) == 800_000_000
    assert matmul_params(moe) == pytest.approx(1_000_000_000 - 100_000 - 600_000_000)
