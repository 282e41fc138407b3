"""Issue #27 point 2 on the CPU, as a user meets it: ``gguf-bench calibrate`` (its synthetic ladder cut to Q8_0 and
F16, two passes, so its band holds the spread between runs of one test here), then ``gguf-bench predict`` for a
mixture of experts of a shape the calibration never saw, at -ncmoe 0, half and all (on a CPU build every placement
stays in host memory), and ``gguf-bench run`` of each. The model is large enough (about 400 MB, 2 of 8 experts
used) that decode streams its weights, as a real MoE's does; had the prediction counted every expert, it would be
about 3x too slow.

The MoE is measured in rounds, interleaved over the placements, and each placement's figure is the median of its
stable rows taken on a quiet machine (the rule every fit learns by): that figure must lie inside the band
``predict`` states, for every placement, in one of ``--trials`` calibrations. Prints the figures; exit 0 when a
trial holds, 1 when none does, 3 when calibrate refused every time (a busy machine: nothing to judge).

It ran in the test suite until it took 4.5 of its 21 minutes; tests/predict/test_moe_cpu_fit.py keeps the part that
needs no measurement (a token reads its active experts' bytes, all from host memory, at every -ncmoe).

    python benchmarks/moe_cpu_fit.py [--trials 2] [--rounds 4]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PLACEMENTS = ("0", "half", "all")
#: ... and up to this many more rounds while a placement has fewer than MIN_RUNS trustworthy rows.
EXTRA_ROUNDS = 2
MIN_RUNS = 2


def _cli_json(*args: str) -> Any:
    import subprocess

    proc = subprocess.run([sys.executable, "-m", "app.cli.main", *args], capture_output=True, text=True,
                          timeout=1200, check=False, cwd=Path(__file__).resolve().parents[1])
    if proc.returncode != 0:
        raise SystemExit(f"gguf-bench {' '.join(args[:2])}: {proc.stderr.strip()[-400:]}")
    return json.loads(proc.stdout)


def trial(moe: Path, rounds: int) -> tuple[bool, list[str]]:
    """Calibrate, predict the MoE at each placement, measure it: (every placement's median inside its band and
    beyond an all-experts count, the figures)."""
    from app.calibrate.ladder import CalibrateOptions, Calibration
    from app.model.facts_cache import cached_facts
    from app.predict.ceilings.offload import active_weight_bytes
    from app.predict.machine_fit.store_efficiency import untrustworthy
    from app.results.row_types import ResultRow

    result = Calibration(CalibrateOptions(types=("Q8_0", "F16"), passes=2, use_store=False)).run()
    if set(result.fit.fits) != {"CPU"}:
        raise SystemExit("this llama.cpp build has a GPU device: the split is tests/gpu_vulkan's")
    facts = cached_facts(str(moe))
    active_share = active_weight_bytes(facts, facts.tensor_bytes) / facts.weight_bytes
    predicted = {p: _cli_json("predict", "-m", str(moe), "-p", "32", "-n", "16", "-ncmoe", p, "--json")
                 for p in PLACEMENTS}
    n_cpu_moe = dict(zip(PLACEMENTS, (0, facts.n_layer // 2, facts.n_layer), strict=True))
    measured: dict[int, list[float]] = {n: [] for n in n_cpu_moe.values()}
    n_rounds = n_left_out = 0
    while n_rounds < rounds or (min(map(len, measured.values())) < MIN_RUNS and n_rounds < rounds + EXTRA_ROUNDS):
        n_rounds += 1
        for row in _cli_json("run", "-m", str(moe), "-p", "32", "-n", "16", "-r", "3", "-ncmoe", ",".join(PLACEMENTS),
                             "--no-store", "--no-predict", "-o", "json"):
            if untrustworthy(ResultRow.from_mapping(row)):
                n_left_out += 1
            else:
                measured[int(row["n_cpu_moe"])].append(float(row["decode_tps_median"]))
    lines = [f"calibrated in {result.wall_s:.0f} s, decode band ±{result.fit.fits['CPU']['decode'].band_frac:.0%}; "
             f"{n_left_out} of {n_rounds * len(PLACEMENTS)} MoE rows left out (unstable or busy)"]
    holds = True
    for placement, doc in predicted.items():
        runs = measured[n_cpu_moe[placement]]
        low, high, expected = doc["decode"]["low"], doc["decode"]["high"], doc["decode"]["value"]
        if len(runs) < MIN_RUNS:
            holds = False
            lines.append(f"-ncmoe {placement}: only {len(runs)} stable rows")
            continue
        figure = statistics.median(runs)
        inside = low <= figure <= high
        holds &= inside and figure > 1.5 * expected * active_share  # an all-experts count would be far too slow
        lines.append(f"-ncmoe {placement}: measured {figure:.1f} tok/s (median of "
                     f"{', '.join(f'{x:.1f}' for x in runs)}); expected {expected:.1f} ({low:.1f}-{high:.1f}) "
                     f"[{doc['decode']['source']}]: {'inside' if inside else 'OUTSIDE'}; all experts counted: "
                     f"{expected * active_share:.1f}")
    return holds, lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=2, help="calibrations, each with its own measurements")
    ap.add_argument("--rounds", type=int, default=4, help="interleaved rounds of the three placements")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="moe-cpu-fit-") as tmp:
        os.environ["GGUF_WORKBENCH_DATA_DIR"] = str(Path(tmp) / "data")  # never the user's own fit or store
        os.environ["GGUF_WORKBENCH_CACHE_DIR"] = str(Path(tmp) / "cache")
        from app.predict.machine_fit.fitted_model import FitError
        from tests.gguf_synth import write_synthetic_moe_gguf

        moe = write_synthetic_moe_gguf(Path(tmp) / "synth-moe-400mb.gguf", n_layer=4, n_embd=1024, n_ff=2048)
        refusals = 0
        print(f"load average {os.getloadavg()[0]:.1f}")
        for k in range(1, args.trials + 1):
            try:
                holds, lines = trial(moe, args.rounds)
            except FitError as exc:
                holds, lines = False, [f"calibrate refused: {exc}"]
                refusals += 1
            print(f"trial {k}:\n  " + "\n  ".join(lines), flush=True)
            if holds:
                print("held")
                return 0
        print(f"load average {os.getloadavg()[0]:.1f}")
        return 3 if refusals == args.trials else 1


if __name__ == "__main__":
    raise SystemExit(main())
