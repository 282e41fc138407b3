"""The predicted GPU/host split of weights, KV cache and compute buffers, by hand on a 4-layer model."""

from __future__ import annotations

import json

import pytest

from app.predict.device_split import SplitSettings, device_split, device_split_columns, largest_ctx_on_gpu
from app.predict.memory.buffers import compute_buffer_bytes_for, compute_stages, graph_inputs_bytes, kv_alloc_bytes
from app.predict.settings import PredictSettings
from app.results.row_types import ResultRow
from tests.predict.samples import MIB, TENSORS, make_facts

#: 4 layers of 100 bytes, token_embd 50 (host), output 42 (norm 2 + untied output 40), rope_freqs 1 (host);
#: 8 KV heads × 128 dims in f16: 4096 bytes per token per layer, so 1 MiB per layer at 256 cells.
FACTS = make_facts(n_layer=4, tensor_bytes=TENSORS)


@pytest.mark.parametrize(("ngl", "gpu_w", "cpu_w", "gpu_kv_mib"), [
    (0, 0, 493, 0), (1, 42, 451, 0), (3, 242, 251, 2), (5, 442, 51, 4), (99, 442, 51, 4),
])
def test_weights_and_kv_follow_the_layers(ngl: int, gpu_w: int, cpu_w: int, gpu_kv_mib: int) -> None:
    split = device_split(FACTS, SplitSettings(n_ctx=256, n_gpu_layers=ngl), TENSORS)
    assert (split.gpu_weights_bytes, split.cpu_weights_bytes) == (gpu_w, cpu_w)
    assert (split.gpu_kv_bytes, split.cpu_kv_bytes) == (gpu_kv_mib * MIB, (4 - gpu_kv_mib) * MIB)
    assert split.gpu_kv_bytes + split.cpu_kv_bytes == kv_alloc_bytes(FACTS, 256)


def test_compute_buffers_follow_the_output_layer_and_op_offload() -> None:
    full = compute_buffer_bytes_for(FACTS, 256)
    # a GPU device's buffer: its graph's stages without the KQ mask, an input that sits in the host's buffer
    logits, attention, ffn = compute_stages(512, 256, FACTS.n_vocab, FACTS.n_embd, FACTS.n_head, FACTS.n_ff,
                                            moe_mask=False)
    device = max(logits, attention, ffn)
    inputs = 8.0 * 4096 * 256 + 4.0 * 256 * 256  # two f32 input embeddings and the f32 KQ mask, u = 256 tokens
    assert graph_inputs_bytes(512, 256, FACTS.n_embd) == inputs

    def compute(ngl: int, op_offload: bool) -> tuple[float, float]:
        split = device_split(FACTS, SplitSettings(n_ctx=256, n_gpu_layers=ngl, op_offload=op_offload), TENSORS)
        return split.gpu_compute_bytes, split.cpu_compute_bytes

    assert compute(0, False) == (0, full)  # -nopo 1 at -ngl 0: everything on the host
    assert compute(0, True) == (device + 42, inputs)  # op offload: the GPU runs the graph, the LM head copied over
    assert compute(3, True) == compute(5, True) == compute(5, False) == (device, inputs)
    assert compute(3, False) == (device, inputs + max(attention, ffn))  # the host runs its own layers, no logits


def test_largest_context_on_the_gpu_is_the_boundary() -> None:
    s = SplitSettings(n_ctx=256, n_gpu_layers=99)
    limit = device_split(FACTS, SplitSettings(n_ctx=4096, n_gpu_layers=99), TENSORS).gpu_total_bytes + 1
    n = largest_ctx_on_gpu(FACTS, limit, s, TENSORS)
    assert n == 4096
    assert device_split(FACTS, SplitSettings(n_ctx=n + 256, n_gpu_layers=99), TENSORS).gpu_total_bytes > limit
    assert largest_ctx_on_gpu(FACTS, 100, s, TENSORS) == 0  # not even the weights fit


def test_row_columns_are_zero_without_a_gpu_device_and_carry_the_boundary_with_a_limit() -> None:
    settings = PredictSettings(n_ctx=256, n_gpu_layers=0)
    cpu_row = ResultRow(n_gpu_layers_effective=0, device_buffers=json.dumps({"CPU": {"layers": 5}}))
    cols = device_split_columns(cpu_row, FACTS, settings)
    assert cols == {"pred_gpu_weights_bytes": 0, "pred_gpu_kv_bytes": 0, "pred_gpu_compute_bytes": 0,
                    "pred_device_max_ctx": None}
    gpu_row = ResultRow(n_gpu_layers_effective=5, device_mem_limit_mib=2)
    cols = device_split_columns(gpu_row, FACTS, PredictSettings(n_ctx=256, n_gpu_layers=5))
    assert cols["pred_gpu_weights_bytes"] == 442 and cols["pred_gpu_kv_bytes"] == 4 * MIB
    assert cols["pred_device_max_ctx"] == largest_ctx_on_gpu(FACTS, 2 * MIB, SplitSettings(256, 5), TENSORS)
