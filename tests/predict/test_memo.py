"""Pure work on one file's facts done once (app.predict.memo): the memo answers what the function answers, per
facts object and argument values, and keeps at most its bound."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from app.model.gguf_facts import read_model_facts
from app.predict.ceilings import decode, offload
from app.predict.ceilings.offload import Placement, split_weights
from app.predict.memo import by_identity
from app.predict.memory import buffers, repack
from tests.arch_ggufs import write_all

#: dense, MoE, MLA, sliding window, a hybrid, a recurrent model
LABELS = ("llama-3.1-8b", "qwen3-30b-a3b", "deepseek-v2-lite", "gemma-3-12b", "granite-4.0-h-micro", "rwkv7-1.5b")


def test_the_memo_answers_per_object_and_argument_values() -> None:
    calls: list[tuple[int, int]] = []

    @by_identity(1, max_entries=3)
    def width(table: dict[str, int], extra: int) -> int:
        calls.append((id(table), extra))
        return sum(table.values()) + extra

    a, b = {"x": 1}, {"x": 1}  # equal, but two objects: two entries
    assert [width(a, 1), width(a, 1), width(b, 1), width(a, 2)] == [2, 2, 2, 3]
    assert calls == [(id(a), 1), (id(b), 1), (id(a), 2)]
    for extra in range(3, 6):  # three more entries push the first ones out
        width(a, extra)
    width(a, 1)
    assert calls[-1] == (id(a), 1)


def test_memoised_splits_kv_and_repacking_equal_the_work_done_afresh(tmp_path: Path) -> None:
    """For real shapes, at several layer counts, placements and contexts."""
    (tmp_path / "m").mkdir()
    for label, path in write_all(tmp_path / "m", LABELS).items():
        facts = read_model_facts(path)
        fresh = dataclasses.replace(facts)  # another object: nothing memoised for it yet
        for ngl in (0, 1, facts.n_layer // 2, facts.n_layer + 1):
            for placement in (Placement(), Placement(n_cpu_moe=2)):
                got = split_weights(facts, ngl, facts.tensor_bytes, placement)
                assert got == offload._split_weights.__wrapped__(fresh, fresh.tensor_bytes, ngl, placement), label
                for offload_kqv in (True, False):
                    assert decode.device_crossings(got, offload_kqv) == \
                        decode._device_crossings.__wrapped__(got, offload_kqv), label
        for n_ctx in (1, 4096, 40_000):
            for type_k, flash in (("f16", True), ("q8_0", False)):
                assert buffers.kv_alloc_bytes_per_layer(facts, n_ctx, type_k, None, 512, False, flash) == list(
                    buffers._kv_alloc_per_layer.__wrapped__(fresh, n_ctx, type_k, None, 512, False, flash)), label
                assert buffers.compute_buffer_bytes_for(facts, n_ctx, 512, flash) == \
                    buffers._compute_buffer_bytes_for.__wrapped__(fresh, n_ctx, 512, flash, None), label
            assert decode.kv_read_per_layer(facts, n_ctx / 2, "f16", None) == list(
                decode._kv_read_per_layer.__wrapped__(fresh, n_ctx / 2, "f16", None)), label
        flags = ("avx2", "avx512f", "amx_int8")
        assert repack.repacked_weights(facts.tensor_shapes, facts.tensor_bytes, ("AMX", "CPU_REPACK"), flags) == \
            repack._repacked_weights.__wrapped__(fresh.tensor_shapes, fresh.tensor_bytes, ("AMX", "CPU_REPACK"),
                                                 flags, None), label
