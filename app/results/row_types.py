"""The row types: every key a result row or a quality row may hold, typed as the field table says.

``ResultRow`` mirrors :data:`app.results.fields.FIELD_TABLE` and ``QualityRow``
:data:`app.results.fields.QUALITY_TABLE`, key for key and type for type (``tests/results/test_row_types.py`` fails
when they drift apart), so a type checker knows each column's type where rows are made and read. At run time rows
stay plain dicts (they cross the worker's pipe and the store as JSON), and :func:`app.results.fields.check_row`
checks their values against the same table where they enter. Every key is optional (``total=False``): a failed
test's row holds only what was known before it ran, and a value is None where nothing was measured. ``status``
holds a :class:`~app.results.fields.RowStatus` (a ``str`` enum, so rows read back from the store compare equal).
"""

from __future__ import annotations

from typing import Any, TypedDict


class ResultRow(TypedDict, total=False):
    """One test's row: llama-bench's columns, ours, the predictions and the remote servers' (field groups)."""

    build_commit: str | None
    cpu_info: str | None
    gpu_info: str | None
    backends: str | None
    model_filename: str | None
    model_type: str | None
    model_size: int | None
    model_n_params: int | None
    n_batch: int | None
    n_ubatch: int | None
    n_threads: int | None
    type_k: str | None
    type_v: str | None
    n_gpu_layers: int | None
    flash_attn: int | None
    use_mmap: int | None
    n_prompt: int | None
    n_gen: int | None
    n_depth: int | None
    test_time: str | None
    avg_ns: int | None
    stddev_ns: int | None
    avg_ts: float | None
    stddev_ts: float | None
    samples_ns: list[Any] | None
    samples_ts: list[Any] | None
    run_id: str | None
    test_index: int | None
    status: str | None
    error: str | None
    error_kind: str | None
    model_path: str | None
    n_parallel: int | None
    n_repetitions: int | None
    n_gpu_layers_effective: int | None
    flash_attn_effective: int | None
    llama_cpp_python_version: str | None
    load_ms: float | None
    ttft_ms: float | None
    ttft_ms_median: float | None
    ttft_ms_stddev: float | None
    prefill_tps: float | None
    prefill_tps_median: float | None
    prefill_tps_stddev: float | None
    decode_tps: float | None
    decode_tps_median: float | None
    decode_tps_stddev: float | None
    decode_tps_aggregate: float | None
    tpot_ms: float | None
    itl_p50_ms: float | None
    itl_p90_ms: float | None
    itl_p99_ms: float | None
    llama_prefill_tps: float | None
    llama_decode_tps: float | None
    unstable: int | None
    unstable_metrics: str | None
    ttft_samples_ms: list[Any] | None
    prefill_samples_tps: list[Any] | None
    decode_samples_tps: list[Any] | None
    warmup_ttft_ms: float | None
    warmup_decode_tps: float | None
    prompt_file: str | None
    n_ctx: int | None
    mem_measured_bytes: int | None
    mem_source: str | None
    mem_rss_delta_bytes: int | None
    vram_delta_bytes: int | None
    mem_peak_rss_bytes: int | None
    vram_peak_bytes: int | None
    power_avg_w_prefill: float | None
    power_avg_w_decode: float | None
    energy_j_prefill: float | None
    energy_j_decode: float | None
    energy_j_per_token: float | None
    llama_weights_bytes: int | None
    llama_kv_bytes: int | None
    llama_compute_bytes: int | None
    llama_mem_bytes: int | None
    model_ftype: str | None
    hw_profile: str | None
    pred_bandwidth_gbps: float | None
    pred_tflops: float | None
    pred_decode_ceiling_tps: float | None
    pred_prefill_ceiling_tps: float | None
    pred_ttft_ms: float | None
    decode_achieved_frac: float | None
    prefill_achieved_frac: float | None
    effective_bandwidth_gbps: float | None
    pred_weight_bytes: int | None
    pred_kv_bytes: int | None
    pred_compute_buffer_bytes: int | None
    pred_mem_bytes: int | None
    expected_decode_tps: float | None
    expected_prefill_tps: float | None
    calibrated_from: str | None
    endpoint: str | None
    n_requests: int | None
    request_rate_rps: float | None
    n_errors: int | None
    error_rate: float | None
    request_errors: str | None
    duration_ms: float | None
    req_per_s: float | None
    goodput_req_per_s: float | None
    slo_ttft_ms: float | None
    slo_tpot_ms: float | None
    ttft_p50_ms: float | None
    ttft_p90_ms: float | None
    ttft_p99_ms: float | None
    tpot_p50_ms: float | None
    tpot_p90_ms: float | None
    tpot_p99_ms: float | None
    e2e_p50_ms: float | None
    e2e_p90_ms: float | None
    e2e_p99_ms: float | None
    prompt_tokens_mean: float | None
    prompt_tokens_by: str | None
    tokens_counted_by: str | None
    no_op_offload: int | None
    device_mem_limit_mib: int | None
    device_buffers: str | None
    gpu_weights_bytes: int | None
    gpu_kv_bytes: int | None
    gpu_compute_bytes: int | None
    pred_gpu_weights_bytes: int | None
    pred_gpu_kv_bytes: int | None
    pred_gpu_compute_bytes: int | None
    pred_device_max_ctx: int | None
    repack: int | None
    extra_buffers: str | None
    prefix_cache: int | None
    prefill_tokens_mean: float | None
    cached_tokens_mean: float | None
    ctx_ttft_ms: float | None
    pred_needed_bytes: int | None
    n_threads_effective: int | None
    n_cpu_moe: int | None
    split_mode: str | None
    main_gpu: int | None
    no_kv_offload: int | None
    devices: str | None
    tensor_split: str | None
    tensor_buft_overrides: str | None
    no_host: int | None
    n_tensors_overridden: int | None
    host_other_cpu_pct: float | None
    power_source: str | None
    gpu_power_limit_w: float | None
    gpu_power_limit_min_w: float | None
    gpu_power_limit_max_w: float | None
    throttled: int | None
    throttle_reasons: str | None


class QualityRow(TypedDict, total=False):
    """One file's quality against its reference (``gguf-bench quality``)."""

    run_id: str | None
    model_index: int | None
    model_filename: str | None
    file_type: str | None
    bits_per_weight: float | None
    model_size: int | None
    is_reference: bool | None
    ppl: float | None
    ppl_err: float | None
    mean_kld: float | None
    mean_kld_err: float | None
    kld_p99: float | None
    same_top_rate: float | None
    n_tokens: int | None
    n_chunks: int | None
    n_ctx: int | None
    reference_filename: str | None
    reference_is_dequantized: bool | None
    requantized_from: str | None
    text_source: str | None
    tokens_per_s: float | None
    elapsed_s: float | None
    status: str | None
    error: str | None
    model_path: str | None
    model_key: str | None
    reference_path: str | None
    created_at: str | None
    reference_requantized_from: str | None
