"""Weight placement for n_gpu_layers, as llama.cpp does it, with and without a per-tensor byte map."""

from __future__ import annotations

import pytest

from app.predict.ceilings.offload import effective_n_gpu_layers, guess_tied_embeddings, split_weights
from tests.predict.samples import TENSORS, make_facts, smollm2_facts


def test_effective_n_gpu_layers_follows_llama_cpp() -> None:
    assert effective_n_gpu_layers(-1, 32) == 33
    assert effective_n_gpu_layers(999, 32) == 33
    assert effective_n_gpu_layers(33, 32) == 33
    assert effective_n_gpu_layers(10, 32) == 10


@pytest.mark.parametrize(
    ("ngl", "gpu", "cpu", "gpu_read", "cpu_read", "n_rep", "output_on_gpu"),
    [
        (0, 0, 493, 0, 443, 0, False),  # all on the CPU; the token embedding is looked up, not read
        (1, 42, 451, 42, 401, 0, True),  # -ngl 1: the output layer only
        (3, 242, 251, 242, 201, 2, True),  # output + the LAST two repeating layers
        (5, 442, 51, 442, 1, 4, True),  # everything; token_embd stays on the CPU
        (999, 442, 51, 442, 1, 4, True),
        (-1, 442, 51, 442, 1, 4, True),
    ],
)
def test_split_weights_with_tensor_map(
    ngl: int, gpu: int, cpu: int, gpu_read: int, cpu_read: int, n_rep: int, output_on_gpu: bool
) -> None:
    s = split_weights(make_facts(n_layer=4), ngl, TENSORS)
    assert (s.gpu_bytes, s.cpu_bytes, s.gpu_read_bytes, s.cpu_read_bytes) == (gpu, cpu, gpu_read, cpu_read)
    assert (s.n_gpu_repeating, s.output_on_gpu, s.exact, s.tied_embeddings) == (n_rep, output_on_gpu, True, False)
    assert s.first_gpu_layer == 4 - n_rep


def test_split_weights_tied_embeddings_copy_to_the_gpu() -> None:
    tied = {k: v for k, v in TENSORS.items() if k != "output.weight"}  # 453 bytes
    s = split_weights(make_facts(n_layer=4), 999, tied)
    assert s.tied_embeddings
    assert (s.gpu_bytes, s.cpu_bytes) == (400 + 2 + 50, 50 + 1)  # llama.cpp duplicates token_embd for the output
    s0 = split_weights(make_facts(n_layer=4), 0, tied)
    assert (s0.gpu_bytes, s0.cpu_bytes, s0.cpu_read_bytes) == (0, 453, 453)  # stored once; LM head reads it all


def test_split_weights_moe_reads_only_the_used_experts() -> None:
    facts = make_facts(n_layer=1, n_expert=8, n_expert_used=2)
    tensors = {"blk.0.ffn_up_exps.weight": 800, "blk.0.attn_q.weight": 100, "token_embd.weight": 10,
               "output.weight": 10}
    s = split_weights(facts, 999, tensors)
    assert s.gpu_bytes == 910
    assert s.gpu_read_bytes == 100 + 800 * 2 // 8 + 10


def test_tied_embedding_guess() -> None:
    assert guess_tied_embeddings(smollm2_facts())
    llama3_8b = make_facts(n_params=8_030_261_248, n_vocab=128256, weight_bytes=4_920_000_000)
    assert not guess_tied_embeddings(llama3_8b)
    assert not guess_tied_embeddings(make_facts(n_expert=8, n_expert_used=2))


def test_split_weights_estimated_without_a_map() -> None:
    facts = make_facts()  # untied: head = n_vocab × n_embd × average bytes per param
    head = 32000 * 4096 * facts.weight_bytes / facts.n_params
    s = split_weights(facts, 999)
    assert not s.exact and not s.tied_embeddings
    assert s.cpu_bytes == pytest.approx(head, abs=1)
    assert s.gpu_bytes + s.cpu_bytes == pytest.approx(facts.weight_bytes, abs=2)
    half = split_weights(facts, 17)  # output + 16 of 32 layers
    per_layer = (facts.weight_bytes - 2 * head) / 32
    assert half.gpu_bytes == pytest.approx(head + 16 * per_layer, abs=2)
    tied = split_weights(smollm2_facts(), 999)
    assert tied.tied_embeddings and tied.gpu_bytes == pytest.approx(96_576_768, abs=2)
