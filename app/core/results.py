"""One result row per test: the field table every printer, the store and the GUI read.

Names follow llama-bench where the meaning is the same (its CSV/JSON columns are the lingua
franca of llama.cpp benchmark posts); ours add the two phases separately, with units in the name.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Sequence
from typing import Any

from app.core import stats
from app.core.plan import TestSpec

#: Column order for CSV and markdown. Rows may carry more keys; they follow in JSON only.
FIELDS: tuple[str, ...] = (
    # llama-bench's names, same meaning
    "build_commit", "cpu_info", "gpu_info", "backends", "model_filename", "model_type", "model_size",
    "model_n_params", "n_batch", "n_ubatch", "n_threads", "type_k", "type_v", "n_gpu_layers", "flash_attn",
    "use_mmap", "n_prompt", "n_gen", "n_depth", "test_time", "avg_ns", "stddev_ns", "avg_ts", "stddev_ts",
    "samples_ns", "samples_ts",
    # ours
    "run_id", "test_index", "status", "error", "model_path", "n_parallel", "n_repetitions",
    "n_gpu_layers_effective", "llama_cpp_python_version", "load_ms",
    "ttft_ms", "ttft_ms_median", "ttft_ms_stddev",
    "prefill_tps", "prefill_tps_median", "prefill_tps_stddev",
    "decode_tps", "decode_tps_median", "decode_tps_stddev", "decode_tps_aggregate",
    "tpot_ms", "itl_p50_ms", "itl_p90_ms", "itl_p99_ms",
    "llama_prefill_tps", "llama_decode_tps", "unstable", "unstable_metrics",
    "ttft_samples_ms", "prefill_samples_tps", "decode_samples_tps",
    "warmup_ttft_ms", "warmup_decode_tps", "prompt_file", "n_ctx",
    # memory and energy, measured in the worker
    "mem_measured_bytes", "mem_source", "mem_rss_delta_bytes", "vram_delta_bytes", "mem_peak_rss_bytes",
    "vram_peak_bytes", "power_avg_w_prefill", "power_avg_w_decode", "energy_j_prefill", "energy_j_decode",
    "energy_j_per_token", "llama_weights_bytes", "llama_kv_bytes", "llama_compute_bytes", "llama_mem_bytes",
    # predicted from the GGUF's metadata and the hardware, beside the measurement
    "model_ftype", "hw_profile", "pred_bandwidth_gbps", "pred_tflops", "pred_decode_ceiling_tps",
    "pred_prefill_ceiling_tps",
    "pred_ttft_ms", "decode_achieved_frac", "prefill_achieved_frac", "effective_bandwidth_gbps",
    "pred_weight_bytes", "pred_kv_bytes", "pred_compute_buffer_bytes", "pred_mem_bytes",
    "expected_decode_tps", "expected_prefill_tps", "calibrated_from",
)


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def base_row(test: TestSpec, test_index: int, run_id: str = "") -> dict[str, Any]:
    """The columns known before anything runs; a failed test keeps exactly these plus the error."""
    return {
        "run_id": run_id,
        "test_index": test_index,
        "status": "pending",
        "error": "",
        "model_path": test.model_path,
        "model_filename": os.path.basename(test.model_path),
        "n_prompt": test.n_prompt,
        "n_gen": test.n_gen,
        "n_depth": test.n_depth,
        "n_batch": test.n_batch,
        "n_ubatch": test.n_ubatch,
        "n_threads": test.n_threads,
        "type_k": test.type_k,
        "type_v": test.type_v,
        "n_gpu_layers": test.n_gpu_layers,
        "flash_attn": int(test.flash_attn),
        "use_mmap": 1,
        "n_parallel": test.n_parallel,
        "n_repetitions": test.repetitions,
        "prompt_file": os.path.basename(test.prompt_file) if test.prompt_file else "",
        "n_ctx": test.n_ctx,
        "test_time": now_iso(),
    }


def summarise_phases(
    test: TestSpec,
    start_ns: Sequence[int],
    prefill_end_ns: Sequence[int],
    token_ns: Sequence[Sequence[int]],
) -> dict[str, Any]:
    """Phase figures from per-repetition timestamps (warmups excluded by the caller).

    TTFT is request start → first token available; prefill tok/s counts every sequence's prompt;
    decode tok/s is per sequence (N steps ÷ decode time), ``decode_tps_aggregate`` multiplies by
    the number of sequences; inter-token latencies pool every step of every repetition.
    """
    n_seq = test.n_parallel
    ttft_ms: list[float] = []
    prefill_tps: list[float] = []
    decode_tps: list[float] = []
    itl_ms: list[float] = []
    total_ns: list[int] = []
    for s, p, toks in zip(start_ns, prefill_end_ns, token_ns, strict=True):
        if test.n_prompt > 0:
            ttft_ms.append((p - s) / 1e6)
            prefill_tps.append(test.n_prompt * n_seq / ((p - s) / 1e9))
        if toks:
            decode_tps.append(len(toks) / ((toks[-1] - p) / 1e9))
            prev = p
            for t in toks:
                itl_ms.append((t - prev) / 1e6)
                prev = t
        total_ns.append((toks[-1] if toks else p) - s)
    n_tokens = (test.n_prompt + test.n_gen) * n_seq
    samples_ts = [n_tokens / (t / 1e9) for t in total_ns if t > 0]
    row: dict[str, Any] = {
        "avg_ns": round(stats.mean(total_ns) or 0),
        "stddev_ns": round(stats.stddev(total_ns) or 0),
        "avg_ts": stats.mean(samples_ts),
        "stddev_ts": stats.stddev(samples_ts),
        "samples_ns": list(total_ns),
        "samples_ts": samples_ts,
        "ttft_ms": stats.mean(ttft_ms),
        "ttft_ms_median": stats.median(ttft_ms),
        "ttft_ms_stddev": stats.stddev(ttft_ms),
        "prefill_tps": stats.mean(prefill_tps),
        "prefill_tps_median": stats.median(prefill_tps),
        "prefill_tps_stddev": stats.stddev(prefill_tps),
        "decode_tps": stats.mean(decode_tps),
        "decode_tps_median": stats.median(decode_tps),
        "decode_tps_stddev": stats.stddev(decode_tps),
        "decode_tps_aggregate": (stats.mean(decode_tps) or 0) * n_seq if decode_tps else None,
        "tpot_ms": 1000.0 / stats.mean(decode_tps) if decode_tps else None,
        "itl_p50_ms": stats.percentile(itl_ms, 50),
        "itl_p90_ms": stats.percentile(itl_ms, 90),
        "itl_p99_ms": stats.percentile(itl_ms, 99),
        "ttft_samples_ms": ttft_ms,
        "prefill_samples_tps": prefill_tps,
        "decode_samples_tps": decode_tps,
    }
    unstable = [name for name, xs in (("ttft_ms", ttft_ms), ("decode_tps", decode_tps))
                if (c := stats.cv(xs)) is not None and c >= stats.UNSTABLE_CV]
    row["unstable"] = int(bool(unstable))
    row["unstable_metrics"] = ",".join(unstable)
    return row
