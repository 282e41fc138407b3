"""Figures for the chooser (issue #10): what a remote header read costs, and choose's memory against llama.cpp's.

1. Header reads: each file is served from a loopback HTTP server with Range support; the header is read cold
   (no cache), then again (cache hit on URL + ETag). Prints the file size, the bytes and requests the header took,
   and the wall time of each read, beside the time of reading the same header from the local file.
2. Memory: for each context and KV-cache type, llama.cpp loads the model in a child process (CPU, flash attention
   auto, ubatch 512, as llama-server) and the buffers it logs (model + KV + compute) are compared with choose's
   figure for this machine. Target: within 5 %.

    python benchmarks/choose_figures.py [-m FILE.gguf ...] [--ctx 2048,8192,16384] [--types f16,q8_0] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.model.gguf_facts import read_model_facts  # noqa: E402
from app.model.gguf_http import RemoteOptions, remote_facts  # noqa: E402
from app.paths import default_model_path  # noqa: E402
from app.predict.hardware_context import detect_hardware_context  # noqa: E402
from app.predict.prediction import predict  # noqa: E402
from app.predict.settings import PredictSettings  # noqa: E402
from app.telemetry.repack_guard import default_repack  # noqa: E402
from tests.model.range_server import serve  # noqa: E402

MIB = 2**20
_LLAMA = textwrap.dedent("""
    import json, sys
    from engines.base import ContextConfig, LoadConfig
    from engines.llama_cpp_engine import LlamaCppEngine
    eng = LlamaCppEngine()
    eng.load(LoadConfig(model_path=sys.argv[1], use_extra_bufts=sys.argv[4] == "1"))
    eng.new_context(ContextConfig(n_ctx=int(sys.argv[2]), type_k=sys.argv[3], type_v=sys.argv[3], n_threads=1))
    m = eng.memory_report()
    print(json.dumps([m.weights_bytes, m.kv_bytes, m.compute_bytes]))
    eng.close()
""")


def _ms(t0: float) -> float:
    return (time.perf_counter() - t0) * 1000.0


def header_reads(models: list[Path], repeat: int) -> list[str]:
    lines = ["| file | size MiB | header KiB read | requests | cold ms | cached ms | local ms |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for m in models:
        cold, warm, local = [], [], []
        with serve({f"/{m.name}": m}) as (base, state):
            url = f"{base}/{m.name}"
            for _ in range(repeat):
                state.requests = 0
                t0 = time.perf_counter()
                facts = remote_facts(url, RemoteOptions(use_cache=False))
                cold.append(_ms(t0))
                requests = state.requests
            remote_facts(url)  # fill the cache
            for _ in range(repeat):
                t0 = time.perf_counter()
                remote_facts(url)
                warm.append(_ms(t0))
        for _ in range(repeat):
            t0 = time.perf_counter()
            read_model_facts(m)
            local.append(_ms(t0))
        lines.append(f"| {m.name} | {m.stat().st_size / MIB:,.0f} | {facts.extra['remote_header_bytes'] / 1024:,.0f} "
                     f"| {requests} | {statistics.median(cold):.0f} | {statistics.median(warm):.0f} "
                     f"| {statistics.median(local):.0f} |")
    return lines


def memory(model: Path, contexts: list[int], types: list[str]) -> list[str]:
    facts = read_model_facts(model)
    cpu = detect_hardware_context().cpu
    lines = [f"{model.name} on {cpu.name}",
             "| n_ctx | KV type | llama.cpp MiB (model+KV+compute) | choose MiB | ratio |", "|---:|---|---:|---:|---:|"]
    for n_ctx in contexts:
        for t in types:
            # choose's sizing of this configuration (flash attention on, as it predicts every configuration), with
            # this machine's repacking (off where the repack guard found it crashes llama.cpp here), as llama.cpp's
            settings = PredictSettings(n_ctx=n_ctx, n_gpu_layers=0, type_k=t, type_v=t,
                                       flash_attn=True).resolved(default_repack())
            out = subprocess.run([sys.executable, "-c", _LLAMA, str(model), str(n_ctx), t, str(settings.repack)],
                                 capture_output=True, text=True, timeout=300, cwd=Path(__file__).resolve().parents[1],
                                 check=True)
            logged = sum(json.loads(out.stdout.strip().splitlines()[-1]))
            c_bytes = predict(facts, cpu, settings, tensor_bytes=facts.tensor_bytes).fit.needed_bytes
            lines.append(f"| {n_ctx} | {t} | {logged / MIB:,.1f} | {c_bytes / MIB:,.1f} | {c_bytes / logged:.3f} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-m", "--model", action="append", type=Path)
    ap.add_argument("--ctx", default="2048,8192,16384")
    ap.add_argument("--types", default="f16,q8_0")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    models = args.model or [default_model_path()]
    if not models or models[0] is None:
        print("no model: pass -m FILE.gguf", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as data:
        os.environ.setdefault("GGUF_WORKBENCH_DATA_DIR", data)
        print("\n".join(header_reads(models, args.repeat)))
        print()
        print("\n".join(memory(models[0], [int(c) for c in args.ctx.split(",")], args.types.split(","))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
