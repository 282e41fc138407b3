"""Imported rows → ``[[result]]`` tables of the public reference table (schema: app/predict/public/data.py).

A reference result is one model file on one GPU: a prompt rate (pp, from an empty cache) and a generation rate
(tg, from an empty cache) with their standard deviations. Each file's rows are grouped by everything that makes a
configuration (model, backend, layers, batch sizes, KV types, flash attention, build); a group's first pp test and
first tg test at depth 0 make its result, and what is left out is said. ``weight_type`` and ``ggml_type`` come from
llama.cpp's description of the model (``llama_model_ftype_name`` in src/llama-model-loader.cpp): "llama 8B Q4_K -
Medium" → Q4_K_M, whose weights are mostly Q4_K.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from app.bench_import.rows import llama_bench_test
from app.results.row_types import ResultRow

GIB = 1024**3
#: Every layer offloaded, as the reference table writes it: llama-bench's default -ngl (99 in older builds, -1 now,
#: which llama.cpp reads as every layer). A markdown table of a backend llama-bench counts as CPU (Metal,BLAS) hides
#: the ngl column.
DEFAULT_N_GPU_LAYERS = 99

#: llama_model_ftype_name's text (without "mostly ") → (llama.cpp's file type name, the ggml type of most weights).
_FTYPES: dict[str, tuple[str, str]] = {
    "all F32": ("F32", "F32"), "F32": ("F32", "F32"), "F16": ("F16", "F16"), "BF16": ("BF16", "BF16"),
    **{t: (t, t) for t in ("Q1_0", "Q2_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q6_K", "NVFP4", "Q4_0_4_4",
                           "Q4_0_4_8", "Q4_0_8_8")},
    "MXFP4 MoE": ("MXFP4_MOE", "MXFP4"),
    "Q2_K": ("Q2_K", "Q2_K"), "Q2_K - Medium": ("Q2_K", "Q2_K"), "Q2_K - Small": ("Q2_K_S", "Q2_K"),
    **{f"Q{b}_K - {size}": (f"Q{b}_K_{size[0]}", f"Q{b}_K") for b, sizes in ((3, ("Small", "Medium", "Large")),
                                                                             (4, ("Small", "Medium")),
                                                                             (5, ("Small", "Medium")))
       for size in sizes},
    "IQ3_S mix - 3.66 bpw": ("IQ3_M", "IQ3_S"),
}
_BPW_RE = re.compile(r"^(?P<name>T?I?Q\d_[0-9A-Z_]+)\s*-\s*[\d.]+\s*bpw(?: ternary)?$")
#: Registry names of llama-bench's ``backends`` → the reference table's backend words.
_BACKEND_WORDS = {"MTL": "Metal", "HIP": "ROCm"}
_NOT_A_GPU_BACKEND = {"CPU", "BLAS", "RPC"}

#: The columns that make one configuration: rows that share them are one model file run one way.
SETTING_COLUMNS = ("model_type", "model_size", "model_n_params", "model_filename", "backends", "gpu_info",
                   "n_gpu_layers", "n_batch", "n_ubatch", "n_threads", "type_k", "type_v", "flash_attn",
                   "no_kv_offload", "split_mode", "main_gpu", "devices", "tensor_split", "tensor_buft_overrides",
                   "n_cpu_moe", "use_mmap", "no_op_offload", "no_host", "repack", "embeddings", "build_commit",
                   "build_number")
_SHOWN = (("n_gpu_layers", "ngl"), ("flash_attn", "fa"), ("type_k", "ctk"), ("type_v", "ctv"),
          ("n_ubatch", "ub"), ("n_batch", "b"), ("n_threads", "t"), ("no_kv_offload", "nkvo"))
_ABOUT_THE_MODEL = ("model_type", "model_size", "model_n_params", "backends")


class PublicTomlError(ValueError):
    """Rows that cannot make a reference result; the message is one line."""


@dataclass(frozen=True)
class ModelType:
    """llama.cpp's description of a model split into its parts: "llama 8B Q4_K - Medium"."""

    name: str  # architecture and size: "llama 8B"
    weight_type: str  # "Q4_K_M"
    ggml_type: str  # "Q4_K"


def parse_model_type(text: str) -> ModelType:
    """``llama_model_desc``'s "ARCH SIZE FTYPE" (older builds: "ARCH SIZE mostly FTYPE"; "(guessed)" after)."""
    parts = text.replace("(guessed)", "").split()
    if len(parts) < 3:
        raise PublicTomlError(f"model {text!r}: not llama.cpp's 'architecture size type' description")
    name, ftype = " ".join(parts[:2]), " ".join(parts[2:]).removeprefix("mostly ").strip()
    if ftype in _FTYPES:
        weight, ggml = _FTYPES[ftype]
        return ModelType(name, weight, ggml)
    m = _BPW_RE.match(ftype)
    if m is not None:
        return ModelType(name, m["name"], m["name"])
    raise PublicTomlError(f"model {text!r}: {ftype!r} is no llama.cpp file type this knows")


def backend_word(backends: str) -> str:
    """The reference table's backend for llama-bench's ``backends`` ("Metal,BLAS" → Metal, "ROCm,RPC" → ROCm)."""
    gpu = [_BACKEND_WORDS.get(b.strip(), b.strip()) for b in backends.split(",")
           if b.strip() and b.strip() not in _NOT_A_GPU_BACKEND]
    return ",".join(gpu) or "CPU"


def _settings(row: ResultRow) -> str:
    return ", ".join(f"{flag} {row.value(k)}" for k, flag in _SHOWN if row.value(k) is not None)


def _configuration(row: ResultRow) -> tuple[Any, ...]:
    """What makes the row's configuration (:data:`SETTING_COLUMNS`: table fields and llama-bench's extra keys)."""
    columns = row.to_mapping()
    return tuple(columns.get(k) for k in SETTING_COLUMNS)


def _rounded(value: float) -> float:
    return round(float(value), 2)


def public_results(files: Sequence[tuple[str, list[ResultRow]]], gpu: str, source_url: str
                   ) -> tuple[list[dict[str, Any]], list[str]]:
    """(reference results, notes): each file's pp and tg rows at depth 0 paired per configuration.

    ``files`` holds (label, rows) per imported file; ``gpu`` is a hardware profile name, ``source_url`` where the
    figures were published. A configuration with a pp test only (or a tg test only) gives a row of that test
    alone; one with neither, or without the model's size, is left out with a note; PublicTomlError when nothing is
    left at all.
    """
    results: list[dict[str, Any]] = []
    notes: list[str] = []
    for label, rows in files:
        groups: dict[tuple[Any, ...], list[ResultRow]] = {}
        for row in rows:
            groups.setdefault(_configuration(row), []).append(row)
        for group in groups.values():
            first = group[0]
            what = f"{label}: {first.model_type or first.model_filename or 'a model'}" + \
                (f" ({_settings(first)})" if _settings(first) else "")
            pp = [r for r in group if r.n_prompt and not r.n_gen and not r.n_depth and r.avg_ts is not None]
            tg = [r for r in group if r.n_gen and not r.n_prompt and not r.n_depth and r.avg_ts is not None]
            if not pp and not tg:
                notes.append(f"{what}: left out, no pp or tg test from an empty cache")
                continue
            missing = [k for k in _ABOUT_THE_MODEL if first.value(k) is None]
            if missing or first.model_type is None or first.model_size is None or first.model_n_params is None:
                notes.append(f"{what}: left out, the file does not give {', '.join(missing)}")
                continue
            backend = backend_word(str(first.backends))
            if backend == "CPU":
                notes.append(f"{what}: left out, it ran on the CPU backend ({first.backends}), not a GPU")
                continue
            model = parse_model_type(first.model_type)
            taken = [t[0] for t in (pp, tg) if t]
            left = [llama_bench_test(r) for r in group if not any(r is t for t in taken)]
            took = " and ".join(llama_bench_test(t) for t in taken)
            if left:
                notes.append(f"{what}: took {took}; left out {', '.join(left)}")
            ngl = first.n_gpu_layers
            only = "" if pp and tg else f" (the source has no {'pp' if not pp else 'tg'} test of it)"
            section = f"{label}: llama-bench row{'s' if len(taken) > 1 else ''} {took}{only} of " \
                      f"{first.model_type}" + (f" ({_settings(first)})" if _settings(first) else "")
            if ngl is None:
                section += f"; ngl not shown: llama-bench's default, every layer ({DEFAULT_N_GPU_LAYERS})"
            elif ngl < 0:
                section += f"; ngl {ngl}: every layer ({DEFAULT_N_GPU_LAYERS})"
            build = first.build_commit or ""
            build_number = first.extra.get("build_number")  # llama-bench's column the field table lacks
            if build and build_number is not None:
                build += f" ({build_number})"
            results.append({
                "gpu": gpu, "model": model.name, "weight_type": model.weight_type, "ggml_type": model.ggml_type,
                "file_size_gib": _rounded(first.model_size / GIB),
                "n_params_b": _rounded(first.model_n_params / 1e9),
                "backend": backend,
                "n_gpu_layers": int(ngl) if ngl is not None and ngl >= 0 else DEFAULT_N_GPU_LAYERS,
                "n_prompt": pp[0].n_prompt or 0 if pp else 0,
                **({"pp_tps": _rounded(pp[0].avg_ts or 0.0), "pp_sd_tps": _rounded(pp[0].stddev_ts or 0.0)}
                   if pp else {}),
                "n_gen": tg[0].n_gen or 0 if tg else 0,
                **({"tg_tps": _rounded(tg[0].avg_ts or 0.0), "tg_sd_tps": _rounded(tg[0].stddev_ts or 0.0)}
                   if tg else {}),
                "build": build, "source_url": source_url, "source_section": section,
            })
    if not results:
        raise PublicTomlError("no configuration has a pp or tg test from an empty cache on a GPU"
                              + (f" ({notes[0]})" if notes else ""))
    return results, notes


def _toml_value(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # JSON's string escapes are TOML basic-string escapes
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)


def to_toml(results: Sequence[dict[str, Any]]) -> str:
    """``[[result]]`` tables, keys in the schema's order, ready to paste into the reference table."""
    out = ["# [[result]] tables written by `gguf-bench import --public-toml`; each `model` is llama.cpp's own",
           "# description (architecture and size): give it a [[model]] table of that name, or rename it to one."]
    for r in results:
        out += ["", "[[result]]", *(f"{k} = {_toml_value(v)}" for k, v in r.items())]
    return "\n".join(out) + "\n"
