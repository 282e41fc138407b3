"""One result row per test: the field table every printer, the store and the GUI read.

Names follow llama-bench where the meaning is the same (its CSV/JSON columns are the lingua
franca of llama.cpp benchmark posts); ours add the two phases separately, with units in the name.
"""

from __future__ import annotations

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
