"""The one field table: CSV column order, units and formats, the markdown summary and the window's columns."""

from __future__ import annotations

import pytest

from app.results import export
from app.results.fields import (
    FIELD_BY_NAME,
    FIELD_TABLE,
    FIELDS,
    FRACTION,
    LLAMA_BENCH,
    MD_FIELDS,
    MEASURED,
    PLAIN,
    PREDICTED_VALUE,
    WINDOW_FIELDS,
    check_row,
    whole_numbers,
)

#: The CSV header, written out so that a reorder, a rename or a lost column fails here.
EXPECTED_CSV_COLUMNS = [
    # llama-bench's names, same meaning
    "build_commit", "cpu_info", "gpu_info", "backends", "model_filename", "model_type", "model_size",
    "model_n_params", "n_batch", "n_ubatch", "n_threads", "type_k", "type_v", "n_gpu_layers", "flash_attn",
    "use_mmap", "n_prompt", "n_gen", "n_depth", "test_time", "avg_ns", "stddev_ns", "avg_ts", "stddev_ts",
    "samples_ns", "samples_ts",
    # ours
    "run_id", "test_index", "status", "error", "error_kind", "model_path", "n_parallel", "n_repetitions",
    "n_gpu_layers_effective", "flash_attn_effective", "llama_cpp_python_version", "load_ms",
    "ttft_ms", "ttft_ms_median", "ttft_ms_stddev",
    "prefill_tps", "prefill_tps_median", "prefill_tps_stddev",
    "decode_tps", "decode_tps_median", "decode_tps_stddev", "decode_tps_aggregate",
    "tpot_ms", "itl_p50_ms", "itl_p90_ms", "itl_p99_ms",
    "llama_prefill_tps", "llama_decode_tps", "unstable", "unstable_metrics",
    "ttft_samples_ms", "prefill_samples_tps", "decode_samples_tps",
    "warmup_ttft_ms", "warmup_decode_tps", "prompt_file", "n_ctx",
    # memory and energy
    "mem_measured_bytes", "mem_source", "mem_rss_delta_bytes", "vram_delta_bytes", "mem_peak_rss_bytes",
    "vram_peak_bytes", "power_avg_w_prefill", "power_avg_w_decode", "energy_j_prefill", "energy_j_decode",
    "energy_j_per_token", "llama_weights_bytes", "llama_kv_bytes", "llama_compute_bytes", "llama_mem_bytes",
    # predicted
    "model_ftype", "hw_profile", "pred_bandwidth_gbps", "pred_tflops", "pred_decode_ceiling_tps",
    "pred_prefill_ceiling_tps",
    "pred_ttft_ms", "decode_achieved_frac", "prefill_achieved_frac", "effective_bandwidth_gbps",
    "pred_weight_bytes", "pred_kv_bytes", "pred_compute_buffer_bytes", "pred_mem_bytes",
    "expected_decode_tps", "expected_prefill_tps", "calibrated_from",
    # remote servers (gguf-bench run --url)
    "endpoint", "n_requests", "request_rate_rps", "n_errors", "error_rate", "request_errors", "duration_ms",
    "req_per_s", "goodput_req_per_s", "slo_ttft_ms", "slo_tpot_ms",
    "ttft_p50_ms", "ttft_p90_ms", "ttft_p99_ms", "tpot_p50_ms", "tpot_p90_ms", "tpot_p99_ms",
    "e2e_p50_ms", "e2e_p90_ms", "e2e_p99_ms", "prompt_tokens_mean", "prompt_tokens_by", "tokens_counted_by",
    # offload per device (appended)
    "no_op_offload", "device_mem_limit_mib", "device_buffers", "gpu_weights_bytes", "gpu_kv_bytes",
    "gpu_compute_bytes", "pred_gpu_weights_bytes", "pred_gpu_kv_bytes", "pred_gpu_compute_bytes",
    "pred_device_max_ctx",
    # weight repacking (appended, issue #24)
    "repack", "extra_buffers",
    # remote depth and prefix-cache tests (appended, issue #29)
    "prefix_cache", "prefill_tokens_mean", "cached_tokens_mean", "ctx_ttft_ms",
    # the memory the fit verdict counts (appended, issue #28)
    "pred_needed_bytes",
    # the threads a test really ran with (appended, issue #28)
    "n_threads_effective",
    # placement flags, llama-bench's names (appended, issue #27)
    "n_cpu_moe", "split_mode", "main_gpu", "no_kv_offload", "devices", "tensor_split", "tensor_buft_overrides",
    "no_host", "n_tensors_overridden",
    # how busy the machine was during the timed repetitions (appended, issue #27)
    "host_other_cpu_pct",
    # the laptop under the test: power source, the GPU's power limit, held-back clocks (appended, issue #41)
    "power_source", "gpu_power_limit_w", "gpu_power_limit_min_w", "gpu_power_limit_max_w", "throttled",
    "throttle_reasons",
]

#: The unit a name's suffix promises (units in names).
SUFFIX_UNITS = {"_ms": "ms", "_ns": "ns", "_tps": "tok/s", "_ts": "tok/s", "_bytes": "bytes", "_gbps": "GB/s",
                "_frac": "fraction"}

SAMPLE = {str: "text", int: 3, float: 0.25, list: [1, 2]}


def test_csv_header_is_todays_order_with_error_kind_and_flash_attn_effective() -> None:
    header = export.to_csv([{"status": "ok", "backends": "remote"}]).splitlines()[0].split(",")
    assert header == EXPECTED_CSV_COLUMNS
    assert export.render([{"status": "ok"}], "csv-all").splitlines()[0].split(",") == EXPECTED_CSV_COLUMNS
    local = export.to_csv([{"status": "ok", "backends": "CPU"}]).splitlines()[0].split(",")
    remote_only = {f.name for f in FIELD_TABLE if f.group == "remote"}
    assert local == [c for c in EXPECTED_CSV_COLUMNS if c not in remote_only]  # same order, no blank remote columns
    assert "endpoint" in remote_only and "ttft_p99_ms" in remote_only and "n_prompt" not in remote_only
    assert list(FIELDS) == EXPECTED_CSV_COLUMNS
    assert header[header.index("error") + 1] == "error_kind"
    assert header[header.index("n_gpu_layers_effective") + 1] == "flash_attn_effective"


def test_every_field_has_a_unit_or_format_and_a_tip() -> None:
    assert set(FIELD_BY_NAME) == set(FIELDS) and len(FIELD_TABLE) == len(FIELDS)
    for name in FIELDS:
        f = FIELD_BY_NAME[name]
        assert f.unit or f.fmt, name
        assert f.tip, name
        assert f.kind in (PLAIN, MEASURED, PREDICTED_VALUE, FRACTION), name
        assert f.fmt.format(SAMPLE[f.type]), name  # the format suits the value's type


@pytest.mark.parametrize("name", FIELDS)
def test_unit_matches_the_name(name: str) -> None:
    unit = FIELD_BY_NAME[name].unit
    for suffix, expected in SUFFIX_UNITS.items():
        if name.endswith(suffix):
            assert unit == expected, name
    if "_w_" in name:
        assert unit == "W", name
    if name.startswith("energy_j_"):
        assert unit == ("J/token" if name.endswith("_per_token") else "J"), name


def test_llama_bench_columns_keep_llama_benchs_names() -> None:
    bench = [f for f in FIELD_TABLE if f.group == LLAMA_BENCH]
    assert [f.name for f in bench] == EXPECTED_CSV_COLUMNS[:26] + [
        "no_op_offload", "repack", "n_cpu_moe", "split_mode", "main_gpu", "no_kv_offload", "devices", "tensor_split",
        "tensor_buft_overrides", "no_host"]
    assert all(f.llama_bench == f.name for f in bench)
    assert not any(f.llama_bench for f in FIELD_TABLE if f.group != LLAMA_BENCH)


def test_new_fields_are_documented() -> None:
    assert "FailureKind" in FIELD_BY_NAME["error_kind"].tip
    assert FIELD_BY_NAME["error_kind"].type is str
    assert FIELD_BY_NAME["flash_attn_effective"].type is int


def test_markdown_summary_columns() -> None:
    assert MD_FIELDS == (
        "model_filename", "n_prompt", "n_gen", "n_depth", "n_parallel", "n_gpu_layers", "backends", "type_k",
        "flash_attn", "ttft_ms", "prefill_tps", "decode_tps", "tpot_ms", "itl_p99_ms", "unstable", "status",
    )
    assert sorted(f.md for f in FIELD_TABLE if f.md is not None) == list(range(len(MD_FIELDS)))


def test_window_columns_come_from_the_table_in_order() -> None:
    assert [f.header for f in WINDOW_FIELDS] == [
        "#", "model", "quant", "status", "prompt", "gen", "depth", "TTFT ms", "TTFT ceiling ms", "prefill tok/s",
        "prefill ceiling", "prefill %", "decode tok/s", "decode ceiling", "decode %", "decode expected",
        "ITL p99 ms", "mem MiB", "mem pred MiB", "needs MiB", "hw", "ngl", "KV", "FA", "threads", "par", "error",
    ]
    assert [f.window for f in WINDOW_FIELDS] == list(range(len(WINDOW_FIELDS)))
    assert not any(f.header for f in FIELD_TABLE if f.window is None)
    kinds = {f.header: f.kind for f in WINDOW_FIELDS}
    assert kinds["TTFT ceiling ms"] == kinds["decode expected"] == PREDICTED_VALUE
    assert kinds["prefill %"] == kinds["decode %"] == FRACTION
    assert kinds["decode tok/s"] == MEASURED and kinds["hw"] == PLAIN


def test_every_kind_of_row_matches_the_field_table() -> None:
    """Issue #25: rows were untyped dicts end to end. A local sweep's rows (as a real run recorded them) and a remote
    server's rows hold each value in the type the field table gives; a wrong one is named."""
    from app.gui.bridge import read_event_stream
    from app.remote.session import RemoteSession, build_remote_spec
    from tests.gui.conftest import RECORDED
    from tests.remote.fake_server import fake_server

    recorded = [e.row for e in read_event_stream(RECORDED) if e.type in ("test_finished", "test_failed")]
    # the recording predates whole_numbers (its byte counts are floats, as the worker sent them then): decoding an
    # event rounds them, so a recorded row matches the table as a new one does
    assert '"mem_rss_delta_bytes":' in RECORDED.read_text() and all(check_row(r.to_mapping()) == [] for r in recorded)
    local = [whole_numbers(r.to_mapping()) for r in recorded]  # as the worker now sends them (a real run's: test_run_…)
    with fake_server() as server:
        spec = build_remote_spec(server.url("prefix"), "fake", n_prompt="8", n_gen="2", n_depth="0,16",
                                 n_requests=2, prefix_cache=True)
        remote = [r.to_mapping() for r in RemoteSession(spec).run().rows]
    assert local and remote
    for row in [*local, *remote]:
        assert check_row(row) == [], row.get("test_index")
    assert check_row({"n_prompt": "512", "decode_tps": 3, "endpoint": None, "not_a_field": object()}) == [
        "n_prompt: str '512' where the field table has int"]  # an int is a float; None and unknown keys pass
    assert check_row({"n_gen": True}) == ["n_gen: bool True where the field table has int"]


def test_csv_writes_whole_byte_counts_in_full() -> None:
    text = export.to_csv([{"status": "ok", "mem_measured_bytes": 128057344.0, "decode_tps": 12.345678}])
    row = export.read_csv(text)[0]
    assert row["mem_measured_bytes"] == "128057344" and row["decode_tps"] == "12.3457"


def test_the_summary_leaves_a_single_repetitions_spread_empty() -> None:
    one = export.read_csv(export.to_summary_csv([{"status": "ok", "n_repetitions": 1, "decode_tps": 50.0,
                                                  "decode_tps_stddev": 0.0}]))[0]
    three = export.read_csv(export.to_summary_csv([{"status": "ok", "n_repetitions": 3, "decode_tps": 50.0,
                                                    "decode_tps_stddev": 0.0}]))[0]
    spread = next(k for k in one if k.startswith("decode_tps_stddev"))
    assert one[spread] == "" and three[spread] == "0.00"
    for wanted in ("type_v", "n_repetitions", "backends", "n_gpu_layers_effective", "expected_decode_tps",
                   "test_time"):
        assert any(k.startswith(wanted) for k in one), wanted
