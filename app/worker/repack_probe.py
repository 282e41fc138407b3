"""The repack crash guard's probe: a tiny Q4_0 model, loaded with weight repacking on, prefills 32 tokens.

Run by app.telemetry.repack_guard as ``python -m app.worker.repack_probe --json`` in a child process: where
llama.cpp's repacked kernels crash (AMX, llama.cpp issue #20824) the child dies by a signal and only it. Q4_0 has
kernels in every extra buffer type of ggml's CPU backend (AMX, CPU_REPACK on AVX2 and arm64, KleidiAI), so its
weights go to whichever this build and CPU would use. The weights are random (blocks with a small fp16 scale),
as in a real model. With ``--json`` it prints one JSON object a line as it goes: the candidate extra buffer types,
the ones the weights went into, and at the end ``ok`` with both.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import gguf
import numpy as np

from app.calibrate.synth_models import SynthShape, write_synth_model
from engines.base import ContextConfig, EngineError, LoadConfig, RunSpec

#: 2 layers, 256 wide: every matrix's rows and columns are multiples of the AMX tile and repack block sizes.
PROBE_SHAPE = SynthShape(n_embd=256, n_layer=2, weight_type="Q4_0", n_vocab=512, gqa=2)
PROBE_PROMPT = 32


def write_probe_model(path: Path, seed: int = 0) -> Path:
    """PROBE_SHAPE at ``path`` with random Q4_0 blocks (each block's fp16 scale set to a small finite value)."""
    write_synth_model(path, PROBE_SHAPE, seed=seed)
    reader = gguf.GGUFReader(path, "r+")
    rng = np.random.default_rng(seed)
    block_bytes = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType.Q4_0][1]
    scale = np.frombuffer(np.float16(0.01).tobytes(), dtype=np.uint8)
    for t in reader.tensors:
        if t.tensor_type == gguf.GGMLQuantizationType.Q4_0:
            raw = t.data.reshape(-1, block_bytes)
            raw[:] = rng.integers(0, 256, raw.shape, dtype=np.uint8)
            raw[:, :2] = scale
    reader.data.flush()
    return path


def probe(n_threads: int = 0, say: Callable[[dict[str, object]], None] | None = None) -> dict[str, object]:
    """Load the probe model with repacking on and run one 32-token prefill; what was used. Raises EngineError.

    ``say`` gets what is known at each step before the next one (the candidate buffer types, then the ones the
    weights went into), so a parent still learns them when the prefill kills this process."""
    from app.worker.engines import new_llama_engine
    from engines.ggml_devices import query_registry

    say = say or (lambda _facts: None)
    engine = new_llama_engine()
    try:
        extra = query_registry().cpu_extra_buffers
    except (OSError, AttributeError):
        extra = []
    simulated = list(getattr(engine, "simulated_extra_buffers", ()))  # a test double's, first as the registry's
    extra = [*simulated, *(b for b in extra if b not in simulated)]
    say({"extra_buffers": extra})
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="gguf-repack-probe-") as tmp:
        model = write_probe_model(Path(tmp) / "probe-q4_0.gguf")
        loaded = engine.load(LoadConfig(model_path=str(model), n_gpu_layers=0, use_extra_bufts=True))
        say({"used_buffers": list(loaded.extra_buffers)})
        engine.new_context(ContextConfig(n_ctx=128, n_batch=PROBE_PROMPT, n_ubatch=PROBE_PROMPT, n_threads=n_threads))
        engine.run(RunSpec(n_prompt=PROBE_PROMPT, n_gen=1))
        engine.close()
    return {"ok": True, "extra_buffers": extra, "used_buffers": list(loaded.extra_buffers),
            "seconds": round(time.perf_counter() - t0, 3)}


def _say_json(facts: dict[str, object]) -> None:
    print(json.dumps(facts), flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m app.worker.repack_probe", description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="one JSON object on stdout")
    ap.add_argument("-t", "--threads", type=int, default=0, help="CPU threads (0: all)")
    args = ap.parse_args(argv)
    try:
        result = probe(args.threads, _say_json if args.json else None)
    except EngineError as e:
        print(f"repack probe: {e}", file=sys.stderr)
        return 1
    print(json.dumps(result) if args.json else
          f"repacking ran: weights in {', '.join(result['used_buffers']) or 'no extra buffer'} "  # type: ignore[arg-type]
          f"(extra buffer types: {', '.join(result['extra_buffers']) or 'none'})")  # type: ignore[arg-type]
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
