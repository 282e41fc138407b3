"""llama.cpp's dry run of a model file, in a child process: what its contexts would take, nothing allocated.

Run by app.model.dry_run as ``python -m app.worker.dry_run_probe --json FILE --contexts JSON``: the file is loaded
with ``llama_model_params.no_alloc`` (no weight is read; a header-only file will do) on this machine's CPU alone, and
a context is created at each setting of the JSON list (``n_ctx``, ``n_batch``, ``n_ubatch``, ``type_k``,
``type_v``, ``flash_attn``, ``swa_full``). llama.cpp still sizes the KV cache, the recurrent state and the compute
and output buffers, and logs them (engines.llama_log.context_memory). Where llama.cpp dies on a file (an assertion
in an architecture's graph), only this child dies. With ``--json`` it prints one JSON object a line as it goes:
``{"context": {...}}`` per setting, then ``{"model": {...}, "ok": true}``. ``--max-memory-bytes N`` limits the
child's data segment before llama.cpp is loaded (what a crafted header makes it allocate then fails inside it).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from engines.base import FLASH_ATTN_AUTO, ContextConfig, EngineError, LoadConfig

_FIELDS = ("n_ctx", "n_batch", "n_ubatch", "type_k", "type_v", "flash_attn", "swa_full")


def context_configs(text: str) -> list[ContextConfig]:
    """The ``--contexts`` JSON list as ContextConfigs (unknown keys ignored); ValueError for anything else."""
    items = json.loads(text)
    if not isinstance(items, list) or not items or len(items) > 16:
        raise ValueError("--contexts: a JSON list of 1 to 16 settings")
    out = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("n_ctx"), int) or not 0 < item["n_ctx"] <= 1 << 24:
            raise ValueError(f"--contexts: {item!r} has no n_ctx in 1..16M")
        kw: dict[str, Any] = {k: item[k] for k in _FIELDS if k in item}
        kw.setdefault("flash_attn", FLASH_ATTN_AUTO)
        kw["n_batch"] = min(int(kw.get("n_batch", 2048)), kw["n_ctx"])
        kw["n_ubatch"] = min(int(kw.get("n_ubatch", 512)), kw["n_batch"])
        out.append(ContextConfig(**kw))
    return out


def limit_memory(max_bytes: int) -> str:
    """Limit this process's data segment (``RLIMIT_DATA``: the heap and private writable mappings, which is where
    llama.cpp's buffers go) to ``max_bytes``; "" when done, else why not. ``RLIMIT_AS`` would count address space
    only reserved (a dry run reserves several times what it writes, more with every core) and refuse good files."""
    try:
        import resource
    except ImportError:  # not a POSIX system
        return "no resource limits on this system"
    try:
        _soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
        limit = max_bytes if hard == resource.RLIM_INFINITY else min(max_bytes, hard)
        resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))
    except (ValueError, OSError) as e:
        return f"the memory limit could not be set ({e})"
    return ""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m app.worker.dry_run_probe", description=__doc__.splitlines()[0])
    ap.add_argument("model", help="a GGUF file")
    ap.add_argument("--contexts", required=True, help="JSON list of context settings")
    ap.add_argument("--json", action="store_true", help="one JSON object a line")
    ap.add_argument("--max-memory-bytes", type=int, default=0, help="limit the data segment to this many bytes")
    args = ap.parse_args(argv)
    if args.max_memory_bytes > 0:
        why_not = limit_memory(args.max_memory_bytes)
        if why_not:
            print(f"dry run: {why_not}", file=sys.stderr)
    try:
        contexts = context_configs(args.contexts)
    except (ValueError, TypeError) as e:
        print(f"dry run: {e}", file=sys.stderr)
        return 2
    from app.worker.engines import new_llama_engine

    def say(got: dict[str, object]) -> None:
        print(json.dumps({"context": got}) if args.json else got, flush=True)

    try:
        engine = new_llama_engine()
        model = engine.dry_run(LoadConfig(model_path=args.model, n_gpu_layers=0, devices=()), contexts, say)
    except EngineError as e:
        print(f"dry run: {e}", file=sys.stderr)
        return 1
    print(json.dumps({"model": model, "ok": True}) if args.json else model, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
