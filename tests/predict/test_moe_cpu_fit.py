"""Issue #27 point 2 on the CPU, as a user meets it: ``gguf-bench calibrate`` (its synthetic ladder, one small
mixture of experts among them, two passes, so its band holds the spread between runs of one test here), then
``gguf-bench predict`` for a mixture of experts of a shape the calibration never saw, at -ncmoe 0, half and all (on
a CPU build every placement stays in host memory), and ``gguf-bench run`` of each. The model is large enough (about
400 MB, 2 of 8 experts used) that decode streams its weights, as a real MoE's does; had the prediction counted every
expert, it would be about 3x too slow.

The MoE is measured in rounds, interleaved over the placements, and each placement's figure is the median of its
stable rows taken on a quiet machine (the rule every fit learns by; on this shared 2-core machine one run in four
lands 20-50 % off the others): that figure must lie inside the band ``predict`` states, for every placement, in
one of two calibrations (TRIALS). Run with -s for the figures."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from app.calibrate.ladder import CalibrateOptions, Calibration
from app.model.facts_cache import cached_facts
from app.predict.ceilings.offload import active_weight_bytes
from app.predict.machine_fit.fitted_model import FitError
from app.predict.machine_fit.store_efficiency import untrustworthy
from app.results.row_types import ResultRow
from tests.cli_helpers import gguf_bench, main_json
from tests.gguf_synth import write_synthetic_moe_gguf

#: calibrate's default ladder cut to the two types it needs here: Q8_0 (the anchor: every shape and depth) and F16,
#: the MoE's weight type; each test in two passes, as calibrate's default.
OPTIONS = CalibrateOptions(types=("Q8_0", "F16"), passes=2, use_store=False)
PLACEMENTS = ("0", "half", "all")
ROUNDS = 4
#: ... and up to this many more while a placement has fewer than MIN_RUNS trustworthy rows.
EXTRA_ROUNDS = 2
MIN_RUNS = 2
#: Calibrations (each with its own measurements of the MoE): the band is a 90 % one, and between calibrations a
#: fit here moved the MoE's expected figure 206-307 tok/s, so one trial in ten or so lands outside; two in a row
#: say the band does not hold.
TRIALS = 2


def _run_rows(*args: str) -> list[dict]:
    proc = gguf_bench("run", *args, "--no-store", "--no-predict", "-o", "json", timeout=1200)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _trial(moe: Path, capsys: pytest.CaptureFixture[str]) -> tuple[bool, list[str]]:
    """Calibrate, predict the MoE at each placement, measure it: (every placement's median inside its band and
    beyond an all-experts count, the figures)."""
    result = Calibration(OPTIONS).run()
    if set(result.fit.fits) != {"CPU"}:
        pytest.skip("this llama.cpp build has a GPU device: the split is tests/gpu_vulkan's")
    facts = cached_facts(str(moe))
    active_share = active_weight_bytes(facts, facts.tensor_bytes) / facts.weight_bytes
    predicted = {p: main_json("predict", ["-m", str(moe), "-p", "32", "-n", "16", "-ncmoe", p], capsys)
                 for p in PLACEMENTS}
    for doc in predicted.values():  # a token reads its active experts' bytes, all from host memory
        assert doc["decode"]["source"].startswith("fit of this machine"), doc["decode"]["source"]
        assert doc["decode_gpu_read_bytes"] == 0
        assert doc["decode_host_read_bytes"] == pytest.approx(active_share * facts.weight_bytes, rel=0.05)

    n_cpu_moe = dict(zip(PLACEMENTS, (0, facts.n_layer // 2, facts.n_layer), strict=True))
    measured: dict[int, list[float]] = {n: [] for n in n_cpu_moe.values()}
    n_rounds = n_left_out = 0
    while n_rounds < ROUNDS or (min(map(len, measured.values())) < MIN_RUNS and n_rounds < ROUNDS + EXTRA_ROUNDS):
        n_rounds += 1
        for row in _run_rows("-m", str(moe), "-p", "32", "-n", "16", "-r", "3", "-ncmoe", ",".join(PLACEMENTS)):
            if untrustworthy(ResultRow.from_mapping(row)):  # a row of the CLI's JSON output
                n_left_out += 1
            else:
                measured[int(row["n_cpu_moe"])].append(float(row["decode_tps_median"]))

    lines = [f"calibrated in {result.wall_s:.0f} s, decode band ±{result.fit.fits['CPU']['decode'].band_frac:.0%}; "
             f"{n_left_out} of {n_rounds * len(PLACEMENTS)} MoE rows left out (unstable or busy)"]
    holds = True
    for placement, doc in predicted.items():
        runs = measured[n_cpu_moe[placement]]
        assert len(runs) >= MIN_RUNS, (placement, lines)
        low, high, expected = doc["decode"]["low"], doc["decode"]["high"], doc["decode"]["value"]
        figure = statistics.median(runs)
        inside = low <= figure <= high
        # an all-experts count would be far too slow: the measurement tells the active experts from all of them
        holds &= inside and figure > 1.5 * expected * active_share
        lines.append(f"-ncmoe {placement}: measured {figure:.1f} tok/s (median of "
                     f"{', '.join(f'{x:.1f}' for x in runs)}); expected {expected:.1f} "
                     f"({low:.1f}-{high:.1f}): {'inside' if inside else 'OUTSIDE'}; all experts counted: "
                     f"{expected * active_share:.1f}")
    return holds, lines


@pytest.mark.slow
def test_a_calibrated_cpu_predicts_a_moe_within_its_band_by_its_active_experts(
        tmp_path: Path, isolated_data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    moe = write_synthetic_moe_gguf(tmp_path / "synth-moe-400mb.gguf", n_layer=4, n_embd=1024, n_ff=2048)
    facts = cached_facts(str(moe))
    assert facts is not None
    assert active_weight_bytes(facts, facts.tensor_bytes) / facts.weight_bytes < 0.4  # 2 of 8 experts: a third
    report: list[str] = []
    refusals = 0
    for trial in range(1, TRIALS + 1):
        try:
            holds, lines = _trial(moe, capsys)
        except FitError as exc:  # calibrate refused: too few of its tests were stable and quiet on this machine now
            holds, lines = False, [f"calibrate refused: {exc}"]
            refusals += 1
        report += [f"trial {trial}:", *lines]
        if holds:
            print("\n" + "\n".join(report))  # after the last command's JSON was read from the captured output
            return
    if refusals == TRIALS:  # nothing to judge: a busy neighbour, not the band (test_calibrate_trust pins the rule)
        pytest.skip("\n".join(report))
    raise AssertionError("\n".join(report))
