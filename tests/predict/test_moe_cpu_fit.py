"""Issue #27 point 2 on the CPU: a fit of this machine made from dense synthetic models only predicts a mixture of
experts it never saw, at -ncmoe 0, half and all (on a CPU build every placement stays in host memory), by the
bytes of its *active* experts. The model is large enough (about 400 MB, 2 of 8 experts used) that decode streams
its weights, as a real MoE's does; had the prediction counted every expert, it would be about 3x too slow."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.calibrate.synth_models import SynthShape, write_synth_model
from app.model.facts_cache import cached_facts
from app.predict.calibration_fit import fit_machine, samples_from_rows
from app.predict.expected_sources import ExpectedSources
from app.predict.hardware_context import HardwareContext
from app.predict.offload import active_weight_bytes
from app.predict.profiles import cpu_profile
from app.predict.row_predictions import RowPredictor
from tests.cli_helpers import gguf_bench
from tests.gguf_synth import write_synthetic_moe_gguf

LADDER = (SynthShape(768, 4, "F16", gqa=4), SynthShape(1024, 3, "F16", gqa=4), SynthShape(1024, 6, "F16", gqa=2),
          SynthShape(1536, 3, "F16", gqa=4))
#: Measured over 4 runs on 2 otherwise idle cores: the expected figure came within -6 % .. +37 % of the MoE's
#: decode (the fit's own band was ±12-28 %, as noisy as its ladder); with a second test process on the other core
#: +71 % (band ±41 %). The bound holds on a busy machine and still tells the active experts from all of them
#: (measured at least ALL_EXPERTS_MARGIN times what an all-experts count would expect).
FACTOR = 2.0
ALL_EXPERTS_MARGIN = 1.5


def _json_rows(*args: str) -> list[dict]:
    proc = gguf_bench("run", *args, "--no-store", "--no-predict", "-o", "json", timeout=1200)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.slow
def test_a_dense_fit_predicts_the_moes_decode_by_its_active_experts(tmp_path: Path) -> None:
    ladder = [write_synth_model(tmp_path / f"{s.name}.gguf", s) for s in LADDER]
    rows = _json_rows(*(a for m in ladder for a in ("-m", str(m))), "-p", "8,32", "-n", "32", "-d", "0,64", "-r", "3")
    if {r["backends"] for r in rows} != {"CPU"}:
        pytest.skip("this llama.cpp build has a GPU device: the split is tests/gpu_vulkan's")
    fit = fit_machine(samples_from_rows(rows, lambda p: cached_facts(p)), cpu_info="cpu", gpu_info="", build="test",
                      created="2026-12-03")
    moe = write_synthetic_moe_gguf(tmp_path / "synth-moe-400mb.gguf", n_layer=4, n_embd=1024, n_ff=2048)
    facts = cached_facts(str(moe))
    assert facts is not None
    active_share = active_weight_bytes(facts, facts.tensor_bytes) / facts.weight_bytes
    assert active_share < 0.4  # 2 of 8 experts: a third of the bytes
    predictor = RowPredictor(HardwareContext(cpu=cpu_profile("CPU", 20.0, 100.0, 2**34)),
                             ExpectedSources(machine_fit=fit))
    band = fit.fits["CPU"]["decode"].band_frac
    moe_rows = _json_rows("-m", str(moe), "-p", "32", "-n", "16", "-r", "3", "-ncmoe", "0,half,all")
    assert sorted(int(r["n_cpu_moe"]) for r in moe_rows) == [0, 2, 4]
    for row in moe_rows:
        cols = predictor(row)
        expected, measured = cols["expected_decode_tps"], row["decode_tps"]
        assert expected is not None and cols["calibrated_from"].startswith("fit of this machine"), cols
        inside = expected / (1 + band) <= measured <= expected * (1 + band)
        print(f"-ncmoe {row['n_cpu_moe']}: decode measured {measured:.1f} tok/s, expected {expected:.1f} "
              f"(band ±{band:.0%}: {'inside' if inside else 'outside'}); all experts counted: "
              f"{expected * active_share:.1f}")
        assert expected / FACTOR < measured < expected * FACTOR, (row["n_cpu_moe"], expected, measured)
        assert measured > ALL_EXPERTS_MARGIN * expected * active_share  # an all-experts count: far too slow
