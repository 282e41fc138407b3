"""llama.cpp's own memory figures for a model file: its dry run (``no_alloc``), in a crash-safe child, remembered.

llama.cpp is the memory truth where it can load a file: loaded with ``llama_model_params.no_alloc`` nothing is read
or allocated, yet creating a context sizes its KV cache, its recurrent state and its compute and output buffers for
whatever architecture it knows, and logs them (the measurement its ``--fit`` makes). A child process
(``python -m app.worker.dry_run_probe``, like the repack guard's probe) does it on this machine's CPU, so a crash in
llama.cpp takes only the child. Results are kept in the cache folder per (file, size, mtime, this machine and build,
settings): asked again, nothing runs. The weights' buffers log 0 under no_alloc; llama.cpp's own count of the
weights it loads (``llama_model_size``) comes back beside the contexts. What llama.cpp does allocate for real (the
recurrent state, the vocabulary) is bounded first: the header's claims are checked and the child runs under a
memory limit (:mod:`app.model.dry_run_bounds`).

This module starts the child and reads its answer; it never loads llama.cpp itself.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from app.atomic import write_text_atomic
from app.bounded_read import read_bounded_text
from app.model.dry_run_bounds import child_memory_limit_bytes, claims_problem
from app.model.facts_cache import cached_facts
from app.model.gguf_facts import GGUFFileError
from app.paths import REPO_ROOT, cache_dir
from app.telemetry.repack_guard import machine_key

CACHE_FILE = "dry-run-cache.json"
FORMAT_VERSION = 1
#: Entries kept in the cache (the oldest go first).
MAX_ENTRIES = 400
#: The child's limit: importing llama_cpp, reading the header (a 150k-token vocabulary takes a fraction of a second)
#: and reserving each context's graphs; a few seconds where it works, on a busy 2-core machine.
TIMEOUT_S = 120.0
_MAX_OUTPUT = 1 << 20


@dataclass(frozen=True)
class DryRunSettings:
    """A context to size: as llama-bench would create it (flash_attn: 1 on, 0 off, -1 llama.cpp's auto)."""

    n_ctx: int
    type_k: str = "f16"
    type_v: str = "f16"
    flash_attn: int = 1
    n_ubatch: int = 512
    n_batch: int = 2048
    swa_full: bool = False

    def key(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


@dataclass(frozen=True)
class ContextMemory:
    """What one context takes, as llama.cpp sized it (bytes): the KV cache (K and V), the recurrent state (R and S),
    the compute buffers per device and the output (logits) buffer."""

    settings: DryRunSettings
    kv_bytes: float = 0.0
    kv_k_bytes: float = 0.0
    kv_v_bytes: float = 0.0
    kv_caches: tuple[tuple[int, int, float], ...] = ()  # per cache: (cells, layers, bytes)
    state_bytes: float = 0.0
    state_r_bytes: float = 0.0
    state_s_bytes: float = 0.0
    compute: dict[str, float] = field(default_factory=dict)  # device ("CPU", "CUDA0") -> bytes
    output_bytes: float = 0.0
    flash_attn_used: bool | None = None
    error: str = ""  # llama.cpp refused the context (the rest is empty)

    @property
    def context_bytes(self) -> float:
        """The context's memory: KV cache and recurrent state."""
        return self.kv_bytes + self.state_bytes

    @property
    def compute_bytes(self) -> float:
        return sum(self.compute.values())

    @classmethod
    def from_json(cls, d: dict[str, object]) -> ContextMemory:
        s = DryRunSettings(n_ctx=int(d["n_ctx"]), type_k=str(d.get("type_k", "f16")),  # type: ignore[call-overload]
                           type_v=str(d.get("type_v", "f16")), flash_attn=int(d.get("flash_attn", 1)),  # type: ignore[call-overload]
                           n_ubatch=int(d.get("n_ubatch", 512)), n_batch=int(d.get("n_batch", 2048)),  # type: ignore[call-overload]
                           swa_full=bool(d.get("swa_full", False)))
        output = d.get("output") or {}
        used = d.get("flash_attn_used")
        return cls(settings=s, kv_bytes=_f(d, "kv_bytes"), kv_k_bytes=_f(d, "kv_k_bytes"),
                   kv_v_bytes=_f(d, "kv_v_bytes"),
                   kv_caches=tuple((int(c["cells"]), int(c["layers"]), float(c["bytes"]))  # type: ignore[index]
                                   for c in d.get("kv_caches") or ()),  # type: ignore[union-attr]
                   state_bytes=_f(d, "state_bytes"), state_r_bytes=_f(d, "state_r_bytes"),
                   state_s_bytes=_f(d, "state_s_bytes"),
                   compute={str(k): float(v) for k, v in dict(d.get("compute") or {}).items()},  # type: ignore[call-overload]
                   output_bytes=sum(float(v) for v in dict(output).values()),  # type: ignore[call-overload]
                   flash_attn_used=used if isinstance(used, bool) else None, error=str(d.get("error") or ""))

    def to_json(self) -> dict[str, object]:
        d = asdict(self)
        d.update(asdict(self.settings))
        del d["settings"]
        d["kv_caches"] = [{"cells": c, "layers": n, "bytes": b} for c, n, b in self.kv_caches]
        d["output"] = {"CPU": self.output_bytes}
        return d


def _f(d: dict[str, object], key: str) -> float:
    value = d.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


@dataclass(frozen=True)
class DryRun:
    """llama.cpp's dry run of one file: the weights it loads (``size_bytes``, llama_model_size) and each context's
    memory; ``problem`` says why there is nothing (or less than asked): the child crashed, timed out, llama.cpp
    could not load the file."""

    path: str
    contexts: tuple[ContextMemory, ...] = ()
    size_bytes: int | None = None
    n_params: int | None = None
    description: str = ""
    problem: str = ""
    seconds: float = 0.0

    def context(self, settings: DryRunSettings) -> ContextMemory | None:
        """The memory of the context at ``settings`` (None: not sized, or llama.cpp refused it)."""
        for c in self.contexts:
            if c.settings == settings and not c.error:
                return c
        return None


def _file_key(path: Path) -> str | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}"


def _cache_path() -> Path | None:
    """The cache file in the cache folder (what can be made again: app.paths.cache_dir)."""
    try:
        return cache_dir() / CACHE_FILE
    except OSError:
        return None


def _read_cache(path: Path | None) -> dict[str, dict[str, object]]:
    """The entries that can be read back; a damaged one is left out (its run is made again and written over it)."""
    if path is None:
        return {}
    try:
        d = json.loads(read_bounded_text(path, 16 << 20))
    except (OSError, ValueError, UnicodeDecodeError, RecursionError):
        return {}
    if not isinstance(d, dict) or d.get("version") != FORMAT_VERSION or not isinstance(d.get("entries"), dict):
        return {}
    entries = {}
    for k, v in d["entries"].items():
        try:
            _from_entry("", v)
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError):
            continue
        entries[str(k)] = v
    return entries


def _saved_s(entry: dict[str, object]) -> float:
    saved = entry.get("saved")
    return float(saved) if isinstance(saved, int | float) and not isinstance(saved, bool) else 0.0


def _write_cache(path: Path | None, entries: dict[str, dict[str, object]]) -> None:
    if path is None:
        return
    newest = dict(sorted(entries.items(), key=lambda kv: _saved_s(kv[1]))[-MAX_ENTRIES:])
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(path, json.dumps({"version": FORMAT_VERSION, "entries": newest}, allow_nan=False),
                          own_file=True)
    except (OSError, ValueError):
        pass


def probe_command(path: str, settings: Sequence[DryRunSettings], python: str | None = None,
                  max_memory_bytes: int | None = None) -> list[str]:
    limit = ["--max-memory-bytes", str(max_memory_bytes)] if max_memory_bytes else []
    return [python or sys.executable, "-m", "app.worker.dry_run_probe", "--json", path,
            "--contexts", json.dumps([asdict(s) for s in settings]), *limit]


#: What llama.cpp says when an allocation fails (the child's memory limit, or the machine's memory).
_ALLOCATION_FAILED = ("insufficient memory", "failed to allocate", "bad_alloc", "MemoryError", "Cannot allocate")


def _run_child(path: str, settings: Sequence[DryRunSettings], timeout_s: float, python: str | None,
               max_memory_bytes: int | None = None) -> DryRun:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(REPO_ROOT), os.environ.get("PYTHONPATH")))),
           "OPENBLAS_NUM_THREADS": "1"}  # numpy's BLAS would reserve buffers per core under the memory limit
    t0 = time.monotonic()
    try:
        proc = subprocess.run(probe_command(path, settings, python, max_memory_bytes), capture_output=True, text=True,
                              timeout=timeout_s, env=env, stdin=subprocess.DEVNULL, cwd=str(REPO_ROOT))
    except subprocess.TimeoutExpired:
        return DryRun(path, problem=f"llama.cpp's dry run took more than {timeout_s:.0f} s",
                      seconds=time.monotonic() - t0)
    except OSError as e:
        return DryRun(path, problem=f"llama.cpp's dry run did not start ({e})", seconds=time.monotonic() - t0)
    contexts: list[ContextMemory] = []
    model: dict[str, object] = {}
    for line in proc.stdout[-_MAX_OUTPUT:].splitlines():
        try:
            d = json.loads(line)
        except ValueError:
            continue
        if isinstance(d, dict) and isinstance(d.get("context"), dict):
            try:
                contexts.append(ContextMemory.from_json(d["context"]))
            except (KeyError, TypeError, ValueError):
                continue
        elif isinstance(d, dict) and isinstance(d.get("model"), dict):
            model = d["model"]
    problem = ""
    refused = next((c.error for c in contexts if any(m in c.error for m in _ALLOCATION_FAILED)), "")
    if not refused and proc.returncode != 0 and any(m in proc.stderr[-2000:] for m in _ALLOCATION_FAILED):
        refused = (proc.stderr.strip().splitlines() or [""])[-1]
    if refused and max_memory_bytes:
        problem = (f"llama.cpp's dry run stopped at its memory limit of {max_memory_bytes / 2**20:,.0f} MiB "
                   f"({' '.join(refused.split())[:200]})")
    elif proc.returncode < 0:
        problem = f"llama.cpp's dry run died by signal {-proc.returncode} (after {len(contexts)} of {len(settings)} " \
                  f"contexts)"
    elif proc.returncode != 0:
        lines = proc.stderr.strip().splitlines()
        problem = (lines[-1] if lines else f"llama.cpp's dry run exited {proc.returncode}")[:300]
    size = model.get("size_bytes")
    n_params = model.get("n_params")
    return DryRun(path, tuple(contexts), size_bytes=size if isinstance(size, int) else None,
                  n_params=n_params if isinstance(n_params, int) else None,
                  description=str(model.get("description") or ""), problem=problem, seconds=time.monotonic() - t0)


def _to_entry(run: DryRun) -> dict[str, object]:
    return {"contexts": [c.to_json() for c in run.contexts], "size_bytes": run.size_bytes,
            "n_params": run.n_params, "description": run.description, "seconds": run.seconds, "saved": time.time()}


def _from_entry(path: str, e: dict[str, object]) -> DryRun:
    """An entry read back; KeyError, TypeError or ValueError when it is damaged."""
    if not isinstance(e, dict) or not isinstance(e.get("contexts") or [], list):
        raise TypeError("not a dry-run entry")
    size, n_params = e.get("size_bytes"), e.get("n_params")
    return DryRun(path, tuple(ContextMemory.from_json(c) for c in e.get("contexts") or ()),  # type: ignore[union-attr]
                  size_bytes=size if isinstance(size, int) else None,
                  n_params=n_params if isinstance(n_params, int) else None,
                  description=str(e.get("description") or ""), seconds=float(e.get("seconds") or 0.0))  # type: ignore[arg-type]


def dry_run(path: str | os.PathLike[str], settings: Sequence[DryRunSettings], *, timeout_s: float = TIMEOUT_S,
            python: str | None = None, cache: bool = True) -> DryRun:
    """llama.cpp's dry run of the local file ``path`` at each of ``settings`` (at most 16): from the cache where
    every context was sized before for this file, machine and build, else from a child process (and remembered when
    it ran to the end). Never raises for llama.cpp's sake: ``problem`` says what went wrong."""
    p = Path(path)
    settings = list(dict.fromkeys(settings))[:16]
    file_key = _file_key(p)
    if file_key is None or not p.is_file():
        return DryRun(str(p), problem="no local file to dry-run (a URL's header is not written locally)")
    if not settings:
        return DryRun(str(p))
    build = machine_key()[0]
    keys = {s: f"{file_key}|{build}|{s.key()}" for s in settings}
    store = _cache_path() if cache else None
    entries = _read_cache(store)
    if cache and all(k in entries for k in keys.values()):  # a damaged entry was left out: its run is made again
        runs = [_from_entry(str(p), entries[k]) for k in keys.values()]
        contexts = tuple(c for r, s in zip(runs, settings, strict=True) for c in r.contexts if c.settings == s)
        return DryRun(str(p), contexts, size_bytes=runs[0].size_bytes, n_params=runs[0].n_params,
                      description=runs[0].description)
    try:
        facts = cached_facts(p)
    except GGUFFileError as e:
        return DryRun(str(p), problem=f"not dry-run: {e.cause}")
    refused = claims_problem(facts)
    if refused:
        return DryRun(str(p), problem=f"not dry-run: {refused}")
    run = _run_child(str(p), settings, timeout_s, python, child_memory_limit_bytes(facts, [s.n_ctx for s in settings]))
    if cache and not run.problem:
        for s, k in keys.items():
            mine = [c for c in run.contexts if c.settings == s]
            entries[k] = {**_to_entry(DryRun(run.path, tuple(mine), run.size_bytes, run.n_params, run.description,
                                             seconds=run.seconds))}
        _write_cache(store, entries)
    return run
