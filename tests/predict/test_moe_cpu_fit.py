"""Issue #27 point 2 on the CPU: a mixture of experts' decode reads its active experts' bytes, all from host memory,
at every -ncmoe of a CPU build (``gguf-bench predict``'s ``decode_host_read_bytes``). Had the prediction counted every
expert, it would be about 3x too slow.

The check against measurements (calibrate, predict, run each placement, the median inside the band) is
``benchmarks/moe_cpu_fit.py``: it takes minutes of quiet machine, a benchmark's work, not the suite's."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.model.facts_cache import cached_facts
from app.predict.ceilings.offload import active_weight_bytes
from tests.cli_helpers import main_json
from tests.gguf_synth import write_synthetic_moe_gguf

PLACEMENTS = ("0", "half", "all")


@pytest.mark.heavy  # predict for this machine probes its CPU (cached after the first)
def test_a_moe_decode_reads_its_active_experts_from_host_memory_at_every_placement(
        tmp_path: Path, isolated_data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    moe = write_synthetic_moe_gguf(tmp_path / "synth-moe.gguf", n_layer=4, n_embd=256, n_ff=512)
    facts = cached_facts(str(moe))
    active_share = active_weight_bytes(facts, facts.tensor_bytes) / facts.weight_bytes
    assert active_share < 0.4  # 2 of 8 experts: about a third of the weights
    decode = {}
    for placement in PLACEMENTS:
        doc = main_json("predict", ["-m", str(moe), "-p", "32", "-n", "16", "-ncmoe", placement], capsys)
        assert doc["decode_gpu_read_bytes"] == 0, placement
        assert doc["decode_host_read_bytes"] == pytest.approx(active_share * facts.weight_bytes, rel=0.05)
        decode[placement] = doc["decode_ceiling_tps"]
    # on a CPU build every placement stays in host memory: one ceiling whatever -ncmoe says
    assert decode["0"] == pytest.approx(decode["half"], rel=0.01) == pytest.approx(decode["all"], rel=0.01)

