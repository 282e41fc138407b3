"""One result row per test: the one field table every printer, the store and the window read.

Names follow llama-bench where the meaning is the same (its CSV/JSON columns are the lingua
franca of llama.cpp benchmark posts); ours add the two phases separately, with units in the name.
The table's order is the CSV/markdown column order (:data:`FIELDS`); the compact markdown summary
(:data:`MD_FIELDS`) and the window's results table (:data:`WINDOW_FIELDS`) are chosen from it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from app.results.row_types import ResultRow

# groups: where a column comes from
LLAMA_BENCH = "llama-bench"  # llama-bench's own columns, same name and meaning
OURS = "ours"  # the run, the test and its two phases
MEMORY = "memory"  # memory and energy, measured in the worker
PREDICTED = "predicted"  # from the GGUF's metadata and the hardware, beside the measurement
REMOTE = "remote"  # remote server runs (app.remote.session): requests, their latency percentiles, goodput
QUALITY = "quality"  # a model file's measured quality (gguf-bench quality): rows of their own, QUALITY_TABLE
QUANTIZE = "quantize"  # an output file of gguf-bench quantize: rows of their own, QUANTIZE_TABLE

# kinds: what a value is (the window shades predicted values and fractions)
PLAIN = "plain"  # a setting, a name or a label
MEASURED = "measured"
PREDICTED_VALUE = "predicted"
FRACTION = "fraction"  # measured ÷ predicted



class RowStatus(StrEnum):
    """A row's ``status``: every kind of row (local, remote, quality, quantize) uses these words. A StrEnum, so a
    row read back from the store (plain strings) compares equal and exports the same text."""

    OK = "ok"
    FAILED = "failed"
    PENDING = "pending"  # not run yet (a remote test's base row, a plan's)
    CANCELLED = "cancelled"  # a quality or quantize item the user stopped

@dataclass(frozen=True)
class Field:
    """One result column: what it holds, in which unit, and where it is shown."""

    name: str
    type: type  # of the value in a row: str, int, float, list, or bool (a flag: 1/0 in CSV)
    unit: str  # "ms", "tok/s", "bytes", ...; "" for names, labels and plain numbers
    fmt: str  # str.format for one value where it is displayed ("{:.1f}")
    group: str  # LLAMA_BENCH | OURS | MEMORY | PREDICTED
    tip: str  # what the column means (the window's tooltip)
    kind: str = PLAIN  # PLAIN | MEASURED | PREDICTED_VALUE | FRACTION
    llama_bench: str = ""  # llama-bench's name for this column, when it is one of llama-bench's
    md: int | None = None  # position in the compact markdown summary, None: not in it
    window: int | None = None  # position among the window's results columns, None: not shown there
    header: str = ""  # short header in the window's results table
    summary: int | None = None  # position in the short "summary" CSV, None: not in it


def _group(group: str) -> Callable[..., Field]:
    """A Field maker for one group (llama-bench's columns carry their llama-bench name)."""

    def make(name: str, type_: type, unit: str, fmt: str, tip: str, **more: Any) -> Field:
        if group == LLAMA_BENCH:
            more.setdefault("llama_bench", name)
        return Field(name, type_, unit, fmt, group, tip, **more)

    return make


_bench, _ours, _mem, _pred = _group(LLAMA_BENCH), _group(OURS), _group(MEMORY), _group(PREDICTED)


def _remote(name: str, type_: type, unit: str, fmt: str, tip: str, more: dict[str, Any]) -> Field:
    return Field(name, type_, unit, fmt, REMOTE, tip, **more)


def _remote_all(specs: tuple[tuple[str, type, str, str, str, dict[str, Any]], ...]) -> tuple[Field, ...]:
    return tuple(_remote(*spec) for spec in specs)


#: ``host_other_cpu_pct`` above which a row was taken on a busy machine and is not learnt from: a quarter of one
#: CPU on average. llama.cpp's threads wait for the slowest at every operation, so a thread that others pre-empt
#: holds all of them up, and a share that small already lowers a rate measured on every core; the figure comes
#: from the OS's clock-tick accounting, which resolves a few percent over the half second a measured test lasts at
#: least, so the line stays well above that noise.
BUSY_OTHER_CPU_PCT = 25.0

FIELD_TABLE: tuple[Field, ...] = (
    _bench("build_commit", str, "", "{}", "llama.cpp build commit of the engine"),
    _bench("cpu_info", str, "", "{}", "CPU model of the machine the test ran on"),
    _bench("gpu_info", str, "", "{}", "GPU(s) of the machine the test ran on, empty without one"),
    _bench("backends", str, "", "{}", "llama.cpp backends the model ran on (CPU when no layer was offloaded)", md=6,
           summary=33),
    _bench("model_filename", str, "", "{}", "file name of the GGUF model", md=0, window=1, header="model", summary=2),
    _bench("model_type", str, "", "{}", "llama.cpp's description of the model (architecture, size class, "
           "quantization), as llama-bench writes it (llama_model_desc): the size class is llama.cpp's guess from the "
           "layer count, not a count (SmolLM2-135M's 30 layers read \"llama 256M\", as SmolDocling-256M's do); "
           "model_n_params is the count"),
    _bench("model_size", int, "bytes", "{}", "bytes of the model's weights, as llama.cpp reports them", summary=28),
    _bench("model_n_params", int, "params", "{}", "parameters of the model, as llama.cpp reports them"),
    _bench("n_batch", int, "tokens", "{}", "logical batch size"),
    _bench("n_ubatch", int, "tokens", "{}", "physical (micro) batch size"),
    _bench("n_threads", int, "threads", "{}", "CPU threads asked for (0: all; n_threads_effective: the count used)",
           window=24, header="threads", summary=13),
    _bench("type_k", str, "", "{}", "KV cache type (K/V)", md=7, window=22, header="KV", summary=11),
    _bench("type_v", str, "", "{}", "KV cache type of V", summary=31),
    _bench("n_gpu_layers", int, "layers", "{}", "GPU layers requested", md=5, window=21, header="ngl", summary=10),
    _bench("flash_attn", int, "", "{}", "flash attention", md=8, window=23, header="FA", summary=12),
    _bench("use_mmap", int, "", "{}", "1: the model file is memory-mapped"),
    _bench("n_prompt", int, "tokens", "{}", "prompt length (tokens)", md=1, window=4, header="prompt", summary=6),
    _bench("n_gen", int, "tokens", "{}", "generated tokens (decode steps)", md=2, window=5, header="gen", summary=7),
    _bench("n_depth", int, "tokens", "{}", "tokens already in the KV cache", md=3, window=6, header="depth", summary=8),
    _bench("test_time", str, "", "{}", "when the test started (ISO 8601)", summary=37),
    _bench("avg_ns", int, "ns", "{}", "mean time of one repetition, prefill and decode together", kind=MEASURED),
    _bench("stddev_ns", int, "ns", "{}", "standard deviation of the repetition times", kind=MEASURED),
    _bench("avg_ts", float, "tok/s", "{:.2f}", "(prompt + generated tokens) ÷ repetition time, mean", kind=MEASURED),
    _bench("stddev_ts", float, "tok/s", "{:.2f}", "standard deviation of avg_ts over repetitions", kind=MEASURED),
    _bench("samples_ns", list, "ns", "{}", "time of each repetition", kind=MEASURED),
    _bench("samples_ts", list, "tok/s", "{}", "tokens per second of each repetition", kind=MEASURED),
    _ours("run_id", str, "", "{}", "the sweep this row belongs to", summary=0),
    _ours("test_index", int, "", "{}", "test number in the sweep", window=0, header="#", summary=1),
    _ours("status", str, "", "{}", "ok, failed, or pending", md=15, window=3, header="status", summary=4),
    _ours("error", str, "", "{}", "why a test failed", window=26, header="error", summary=30),
    _ours("error_kind", str, "", "{}",
          "typed failure kind (a FailureKind value of app.run.events: load_error, out_of_memory, ...); empty when ok"),
    _ours("model_path", str, "", "{}", "full path of the GGUF model"),
    _ours("n_parallel", int, "sequences", "{}", "parallel sequences", md=4, window=25, header="par", summary=9),
    _ours("n_repetitions", int, "", "{}", "timed repetitions (a warmup runs before them)", summary=32),
    _ours("n_gpu_layers_effective", int, "layers", "{}", "layers llama.cpp really offloaded (0 on a CPU-only build)",
          summary=34),
    _ours("flash_attn_effective", int, "", "{}", "1: flash attention llama.cpp really used, 0: not"),
    _ours("llama_cpp_python_version", str, "", "{}", "llama-cpp-python version of the engine"),
    _ours("load_ms", float, "ms", "{:.1f}", "time to load the model", kind=MEASURED),
    _ours("ttft_ms", float, "ms", "{:.1f}", "measured time to first token (mean)", kind=MEASURED, md=9, window=7,
          header="TTFT ms", summary=14),
    _ours("ttft_ms_median", float, "ms", "{:.1f}", "median time to first token", kind=MEASURED),
    _ours("ttft_ms_stddev", float, "ms", "{:.1f}", "standard deviation of the time to first token", kind=MEASURED,
          summary=15),
    _ours("prefill_tps", float, "tok/s", "{:.1f}", "measured prompt tokens per second", kind=MEASURED, md=10,
          window=9, header="prefill tok/s", summary=17),
    _ours("prefill_tps_median", float, "tok/s", "{:.1f}", "median prompt tokens per second", kind=MEASURED),
    _ours("prefill_tps_stddev", float, "tok/s", "{:.1f}", "standard deviation of prompt tokens per second",
          kind=MEASURED),
    _ours("decode_tps", float, "tok/s", "{:.2f}", "measured decode tokens per second", kind=MEASURED, md=11,
          window=12, header="decode tok/s", summary=20),
    _ours("decode_tps_median", float, "tok/s", "{:.2f}", "median decode tokens per second", kind=MEASURED),
    _ours("decode_tps_stddev", float, "tok/s", "{:.2f}", "standard deviation of decode tokens per second",
          kind=MEASURED, summary=21),
    _ours("decode_tps_aggregate", float, "tok/s", "{:.2f}", "decode tokens per second of all sequences together",
          kind=MEASURED),
    _ours("tpot_ms", float, "ms", "{:.2f}", "time per output token: 1000 ÷ decode tok/s", kind=MEASURED, md=12,
          summary=24),
    _ours("itl_p50_ms", float, "ms", "{:.2f}", "median inter-token latency", kind=MEASURED),
    _ours("itl_p90_ms", float, "ms", "{:.2f}", "90th percentile inter-token latency", kind=MEASURED),
    _ours("itl_p99_ms", float, "ms", "{:.2f}", "99th percentile inter-token latency", kind=MEASURED, md=13,
          window=16, header="ITL p99 ms", summary=25),
    _ours("llama_prefill_tps", float, "tok/s", "{:.1f}", "llama.cpp's own prompt rate (single-sequence tests)",
          kind=MEASURED),
    _ours("llama_decode_tps", float, "tok/s", "{:.2f}", "llama.cpp's own decode rate (single-sequence tests)",
          kind=MEASURED),
    _ours("unstable", int, "", "{}", "1: a spread ≥ 10 % of the mean (unstable_metrics says which)", md=14,
          summary=5),
    _ours("unstable_metrics", str, "", "{}", "comma-separated metrics whose spread is ≥ 10 % of the mean",
          summary=29),
    _ours("ttft_samples_ms", list, "ms", "{}", "time to first token of each repetition", kind=MEASURED),
    _ours("prefill_samples_tps", list, "tok/s", "{}", "prompt tokens per second of each repetition", kind=MEASURED),
    _ours("decode_samples_tps", list, "tok/s", "{}", "decode tokens per second of each repetition", kind=MEASURED),
    _ours("warmup_ttft_ms", float, "ms", "{:.1f}", "time to first token of the warmup (not in the mean)",
          kind=MEASURED),
    _ours("warmup_decode_tps", float, "tok/s", "{:.2f}", "decode tokens per second of the warmup (not in the mean)",
          kind=MEASURED),
    _ours("prompt_file", str, "", "{}", "file name of the real-text prompt, empty for random token ids"),
    _ours("n_ctx", int, "tokens", "{}", "context size of the test"),
    _mem("mem_measured_bytes", int, "bytes", "{:.0f}", "memory the test took: VRAM or RSS growth of the worker",
         kind=MEASURED, window=17, header="mem MiB", summary=26),
    _mem("mem_source", str, "", "{}", "what mem_measured_bytes is: vram_delta or rss_delta"),
    _mem("mem_rss_delta_bytes", int, "bytes", "{}", "worker RSS growth since before any model", kind=MEASURED),
    _mem("vram_delta_bytes", int, "bytes", "{}", "VRAM growth since before any model", kind=MEASURED),
    _mem("mem_peak_rss_bytes", int, "bytes", "{}", "peak worker RSS during the test", kind=MEASURED),
    _mem("vram_peak_bytes", int, "bytes", "{}", "peak VRAM used during the test", kind=MEASURED),
    _mem("power_avg_w_prefill", float, "W", "{:.1f}", "mean GPU power during prefill", kind=MEASURED),
    _mem("power_avg_w_decode", float, "W", "{:.1f}", "mean GPU power during decode", kind=MEASURED),
    _mem("energy_j_prefill", float, "J", "{:.2f}", "GPU energy of all timed prefills", kind=MEASURED),
    _mem("energy_j_decode", float, "J", "{:.2f}", "GPU energy of all timed decodes", kind=MEASURED),
    _mem("energy_j_per_token", float, "J/token", "{:.4f}", "GPU decode energy per generated token", kind=MEASURED),
    _mem("llama_weights_bytes", int, "bytes", "{}", "llama.cpp's figure for the weights", kind=MEASURED),
    _mem("llama_kv_bytes", int, "bytes", "{}", "llama.cpp's figure for the KV cache", kind=MEASURED),
    _mem("llama_compute_bytes", int, "bytes", "{}", "llama.cpp's figure for the compute buffers", kind=MEASURED),
    _mem("llama_mem_bytes", int, "bytes", "{}", "llama.cpp's total: weights + KV cache + compute", kind=MEASURED),
    _pred("model_ftype", str, "", "{}", "file type (quantization) read from the GGUF", window=2, header="quant"),
    _pred("hw_profile", str, "", "{}", "hardware the predicted columns are for", window=20, header="hw", summary=3),
    _pred("pred_bandwidth_gbps", float, "GB/s", "{:.1f}", "peak memory bandwidth of that hardware",
          kind=PREDICTED_VALUE),
    _pred("pred_tflops", float, "TFLOPS", "{:.1f}",
          "compute the prefill ceiling divided by: a GPU's FP16 tensor peak; on a CPU the int8 dot-product "
          "peak (quantized weights) or the FMA peak (float weights)", kind=PREDICTED_VALUE),
    _pred("pred_decode_ceiling_tps", float, "tok/s", "{:.1f}",
          "memory-bound ceiling at the test's context position, on the hardware it ran on", kind=PREDICTED_VALUE,
          window=13, header="decode ceiling", summary=22),
    _pred("pred_prefill_ceiling_tps", float, "tok/s", "{:.0f}",
          "compute-bound ceiling on the hardware the test ran on (column hw)", kind=PREDICTED_VALUE, window=10,
          header="prefill ceiling", summary=18),
    _pred("pred_ttft_ms", float, "ms", "{:.1f}",
          "TTFT at the prefill ceiling (prompt ÷ ceiling): the least it can take, not an expected figure",
          kind=PREDICTED_VALUE, window=8, header="TTFT ceiling ms", summary=16),
    _pred("decode_achieved_frac", float, "fraction", "{:.0%}", "achieved fraction of the decode ceiling",
          kind=FRACTION, window=14, header="decode %", summary=23),
    _pred("prefill_achieved_frac", float, "fraction", "{:.0%}", "achieved fraction of the prefill ceiling",
          kind=FRACTION, window=11, header="prefill %", summary=19),
    _pred("effective_bandwidth_gbps", float, "GB/s", "{:.1f}",
          "bytes a decode step reads (weights + KV) × measured decode tok/s", kind=MEASURED),
    _pred("pred_weight_bytes", int, "bytes", "{}", "weights read from the GGUF", kind=PREDICTED_VALUE),
    _pred("pred_kv_bytes", int, "bytes", "{}", "predicted KV cache at the test's context", kind=PREDICTED_VALUE),
    _pred("pred_compute_buffer_bytes", int, "bytes", "{}", "predicted compute buffers", kind=PREDICTED_VALUE),
    _pred("pred_mem_bytes", int, "bytes", "{:.0f}", "predicted weights + KV cache + compute buffer",
          kind=PREDICTED_VALUE, window=18, header="mem pred MiB", summary=27),
    _pred("expected_decode_tps", float, "tok/s", "{:.1f}",
          "expected decode: from this machine's calibration fit, else the ceiling × the efficiency learned from "
          "other stored models (calibrated_from says which)",
          kind=PREDICTED_VALUE, window=15, header="decode expected", summary=35),
    _pred("expected_prefill_tps", float, "tok/s", "{:.1f}",
          "expected prefill: from this machine's calibration fit, else the ceiling × the efficiency learned "
          "from other stored models", kind=PREDICTED_VALUE, summary=36),
    _pred("calibrated_from", str, "", "{}",
          "where the expected_* columns came from: this machine's calibration fit, or the stored runs "
          "they learned from"),
    *_remote_all((
        ("endpoint", str, "", "{}", "remote server's API root (no credentials); empty for a local model", {}),
        ("n_requests", int, "requests", "{}", "requests sent in the test (remote)", {}),
        ("request_rate_rps", float, "req/s", "{:.2f}", "offered Poisson arrival rate; empty: all at once (remote)",
         {}),
        ("n_errors", int, "requests", "{}", "requests that failed (remote)", {"kind": MEASURED}),
        ("error_rate", float, "fraction", "{:.0%}", "failed ÷ sent requests (remote)", {"kind": MEASURED}),
        ("request_errors", str, "", "{}", "why requests failed, with counts (remote)", {}),
        ("duration_ms", float, "ms", "{:.1f}", "first request sent → last stream closed (remote)",
         {"kind": MEASURED}),
        ("req_per_s", float, "req/s", "{:.2f}", "finished requests per second (remote)", {"kind": MEASURED}),
        ("goodput_req_per_s", float, "req/s", "{:.2f}",
         "finished requests per second that met the TTFT/TPOT objective (remote)", {"kind": MEASURED}),
        ("slo_ttft_ms", float, "ms", "{:.0f}", "goodput objective: TTFT at most this (remote)", {}),
        ("slo_tpot_ms", float, "ms", "{:.0f}", "goodput objective: TPOT at most this (remote)", {}),
        *((f"{m}_p{q}_ms", float, "ms", "{:.1f}", f"{q}th percentile of {what} over requests (remote)",
           {"kind": MEASURED}) for m, what in (("ttft", "TTFT"), ("tpot", "TPOT"), ("e2e", "end-to-end latency"))
          for q in (50, 90, 99)),
        ("prompt_tokens_mean", float, "tokens", "{:.1f}", "prompt tokens per request, as the server counted them "
         "(remote)", {"kind": MEASURED}),
        ("prompt_tokens_by", str, "", "{}", "how the prompt length was checked: usage, tokenize or approximate", {}),
        ("tokens_counted_by", str, "", "{}",
         "usage: the server's token counts; tokenize: it reported none, the output was counted with its tokenize "
         "route; chunks: neither, stream chunks were counted (remote)", {}),
    )),
    # offload per device (appended: the columns above keep their order)
    _bench("no_op_offload", int, "", "{}", "1: host tensor ops stay on the CPU (llama.cpp's op_offload off; "
           "-nopo); 0: llama.cpp may send them to a GPU, the prompt too at -ngl 0"),
    _ours("device_mem_limit_mib", int, "MiB", "{}",
          "imposed limit on one GPU device's memory (--device-mem-limit); a test over it fails; 0: none"),
    _mem("device_buffers", str, "", "{}", "per device, as llama.cpp logged them: layers placed there and weights, "
         "KV cache and compute buffer bytes (JSON; CPU is host memory, pinned host buffers included)", kind=MEASURED),
    _mem("gpu_weights_bytes", int, "bytes", "{}", "llama.cpp's weights on GPU devices (0: none offloaded)",
         kind=MEASURED),
    _mem("gpu_kv_bytes", int, "bytes", "{}", "llama.cpp's KV cache on GPU devices", kind=MEASURED),
    _mem("gpu_compute_bytes", int, "bytes", "{}", "llama.cpp's compute buffers on GPU devices", kind=MEASURED),
    _pred("pred_gpu_weights_bytes", int, "bytes", "{}", "predicted weights on the GPU at the -ngl llama.cpp used",
          kind=PREDICTED_VALUE),
    _pred("pred_gpu_kv_bytes", int, "bytes", "{}", "predicted KV cache on the GPU (the offloaded layers' share)",
          kind=PREDICTED_VALUE),
    _pred("pred_gpu_compute_bytes", int, "bytes", "{}", "predicted compute buffer on the GPU", kind=PREDICTED_VALUE),
    _pred("pred_device_max_ctx", int, "tokens", "{}",
          "largest context predicted to fit device_mem_limit_mib at this -ngl (empty without a limit)",
          kind=PREDICTED_VALUE),
    # weight repacking (appended: the columns above keep their order)
    _bench("repack", int, "", "{}", "1: llama.cpp may repack weights into its CPU extra buffer types (AMX, CPU_REPACK; "
           "llama-bench --repack); 0: weights stay as in the file"),
    _ours("extra_buffers", str, "", "{}", "the CPU extra buffer types llama.cpp put weights in (AMX, CPU_REPACK…), "
          "empty: none; repacked weights run other kernels"),
    # remote depth and prefix-cache tests (appended: the columns above keep their order)
    *_remote_all((
        ("prefix_cache", int, "", "{}", "1: each request's n_depth context was sent alone first, so the timed "
         "request could find it in the server's prefix cache (remote; llama-benchy's ctx_pp step)", {}),
        ("prefill_tokens_mean", float, "tokens", "{:.1f}", "prompt tokens per request the prefill rate counts: "
         "the server's prompt count less what came from its cache (remote)", {"kind": MEASURED}),
        ("cached_tokens_mean", float, "tokens", "{:.1f}", "prompt tokens per request the server says it took from "
         "its prefix cache; empty: it does not say (remote)", {"kind": MEASURED}),
        ("ctx_ttft_ms", float, "ms", "{:.1f}", "mean TTFT of the context loads (prefix-cache tests): the "
         "uncached cost the timed requests' TTFT is compared with (remote)", {"kind": MEASURED}),
    )),
    # the memory the fit verdict counts (appended: the columns above keep their order)
    _pred("pred_needed_bytes", int, "bytes", "{:.0f}",
          "memory the test needs on the device it runs on, as the inspector and the chooser size it: the weights "
          "there, KV cache, compute buffers and, on a discrete GPU, the runtime allowance (pred_mem_bytes is "
          "llama.cpp's own total over all devices)", kind=PREDICTED_VALUE, window=19, header="needs MiB"),
    # the threads a test really ran with (appended: the columns above keep their order)
    _ours("n_threads_effective", int, "threads", "{}", "CPU threads the test really ran with (n_threads 0 resolved "
          "to the engine's count, as llama-bench's default is a count, never 0)", summary=38),
    # placement flags (appended: the columns above keep their order; issue #27)
    _bench("n_cpu_moe", int, "layers", "{}", "layers whose MoE expert tensors were kept in host memory (-ncmoe; "
           "all/half recorded as the count they were for the model)"),
    _bench("split_mode", str, "", "{}", "how the model was split across GPUs (-sm): none, layer, row or tensor"),
    _bench("main_gpu", int, "", "{}", "the GPU holding the whole model with split_mode none (-mg)"),
    _bench("no_kv_offload", int, "", "{}", "1: the KV cache stayed in host memory (-nkvo; llama.cpp's offload_kqv "
           "off)"),
    _bench("devices", str, "", "{}", "GPU devices the model could use (-dev): auto (all), none, or names joined by /"),
    _bench("tensor_split", str, "", "{}", "share of the model per GPU (-ts), as llama-bench writes it (0.00: "
           "llama.cpp's default)"),
    _bench("tensor_buft_overrides", str, "", "{}", "tensors placed by name (-ot): PATTERN=BUFT entries joined by ;, "
           "none without; -ncmoe's expert patterns are not listed here (as in llama-bench)"),
    _bench("no_host", int, "", "{}", "1: no pinned host buffers for weights kept in host memory (--no-host)"),
    _ours("n_tensors_overridden", int, "tensors", "{}", "tensors llama.cpp placed by a buffer type override "
          "(-ot, -ncmoe), as it logged them; 0: none matched"),
    # how busy the machine was (appended: the columns above keep their order; issue #27)
    _ours("host_other_cpu_pct", float, "%", "{:.0f}",
          "CPU time other processes used during the timed repetitions, in percent of one logical CPU (100: one "
          "CPU kept busy); empty: not measured (older rows, a test under half a second). Over "
          f"{BUSY_OTHER_CPU_PCT:.0f} % the row was taken on a busy machine, and expected figures do not learn from it",
          kind=MEASURED),
    # the laptop under the test (appended, issue #41): what powered it, the GPU's power limit, held-back clocks
    _mem("power_source", str, "", "{}", "what powered the machine: ac or battery (empty where the OS reports no "
         "battery)"),
    _mem("gpu_power_limit_w", float, "W", "{:.0f}", "the power limit the GPU's driver enforced (a laptop GPU's name "
         "covers parts from 35 to 115 W)", kind=MEASURED),
    _mem("gpu_power_limit_min_w", float, "W", "{:.0f}", "the lowest power limit the GPU can be set to"),
    _mem("gpu_power_limit_max_w", float, "W", "{:.0f}", "the highest power limit the GPU can be set to"),
    _ours("throttled", int, "", "{}", "1: the GPU's clocks were held back by power or temperature during the timed "
          "part (NVML clock-event reasons; throttle_reasons says which); empty without an NVIDIA GPU"),
    _ours("throttle_reasons", str, "", "{}", "why the GPU's clocks were held back during the timed part"),
)


def taken_while_busy(row: ResultRow) -> bool | None:
    """Whether ``row`` was measured while other processes used more than :data:`BUSY_OTHER_CPU_PCT`; None when
    the row does not say (rows from before the column, tests too short to tell)."""
    pct = row.host_other_cpu_pct
    if not isinstance(pct, (int, float)) or isinstance(pct, bool) or not math.isfinite(pct):
        return None
    return pct > BUSY_OTHER_CPU_PCT


FIELD_BY_NAME: dict[str, Field] = {f.name: f for f in FIELD_TABLE}

#: Column order for CSV and markdown. Rows may carry more keys; they follow in JSON only.
FIELDS: tuple[str, ...] = tuple(f.name for f in FIELD_TABLE)

#: Columns of the compact markdown table (the phases side by side, never one blended rate).
MD_FIELDS: tuple[str, ...] = tuple(f.name for f in sorted((f for f in FIELD_TABLE if f.md is not None),
                                                          key=lambda f: f.md or 0))

#: Columns of the short "summary" CSV (key columns first; byte counts are written in MiB there).
SUMMARY_FIELDS: tuple[Field, ...] = tuple(sorted((f for f in FIELD_TABLE if f.summary is not None),
                                                 key=lambda f: f.summary or 0))

#: The window's results columns, in order.
WINDOW_FIELDS: tuple[Field, ...] = tuple(sorted((f for f in FIELD_TABLE if f.window is not None),
                                                key=lambda f: f.window or 0))


def _quality(name: str, type_: type, unit: str, tip: str, kind: str = PLAIN) -> Field:
    return Field(name, type_, unit, "{}", QUALITY, tip, kind=kind)


#: A quality row's columns (``gguf-bench quality``), in CSV/JSON order: a file's quality measured against
#: ``reference_*`` on ``text_source``. Rows of their own (one per model file), printed by the same exporters.
QUALITY_TABLE: tuple[Field, ...] = (
    _quality("run_id", str, "", "the quality run"),
    _quality("model_index", int, "", "position of the file in the run (0: first given)"),
    _quality("model_filename", str, "", "file name of the GGUF model"),
    _quality("file_type", str, "", 'llama.cpp file type from the header: "Q4_K_M", "F16", ...'),
    _quality("bits_per_weight", float, "bits", "weight bytes × 8 ÷ parameters, from the header"),
    _quality("model_size", int, "bytes", "bytes of the file"),
    _quality("is_reference", bool, "", "1 for the reference file itself (its KLD is 0 by definition; JSON: true)"),
    _quality("ppl", float, "", "perplexity of the text under this file's own logits", MEASURED),
    _quality("ppl_err", float, "", "± one standard error of ppl (as llama.cpp's perplexity tool gives it)", MEASURED),
    _quality("mean_kld", float, "nats", "mean KL divergence from the reference's next-token distribution to this "
             "file's", MEASURED),
    _quality("mean_kld_err", float, "nats", "± one standard error of mean_kld", MEASURED),
    _quality("kld_p99", float, "nats", "99th percentile of the per-token KLD", MEASURED),
    _quality("same_top_rate", float, "fraction", "fraction of scored tokens where this file's top token is the "
             "reference's top token", MEASURED),
    _quality("n_tokens", int, "tokens", "tokens scored (the second half of each chunk)"),
    _quality("n_chunks", int, "", "chunks of the text scored"),
    _quality("n_ctx", int, "tokens", "chunk length"),
    _quality("reference_filename", str, "", "file name of the reference"),
    _quality("reference_is_dequantized", bool, "", "1: the reference is an F16/F32 file made from a quantized one "
             "(JSON: true)"),
    _quality("requantized_from", str, "", "the quantized type this file was made from (through any dequantized "
             "F16), or empty"),
    _quality("text_source", str, "", '"python-docs" (the built-in text) or the text file\'s path'),
    _quality("tokens_per_s", float, "tok/s", "tokens evaluated ÷ evaluation time (the quality pass's speed)",
             MEASURED),
    _quality("elapsed_s", float, "s", "seconds this file's quality pass took", MEASURED),
    _quality("status", str, "", "ok, failed or cancelled"),
    _quality("error", str, "", "why the file was not scored"),
    _quality("model_path", str, "", "path of the model file"),
    _quality("model_key", str, "", "size and modification time of the file: a file replaced under its name is "
             "measured anew"),
    _quality("reference_path", str, "", "path of the reference"),
    _quality("created_at", str, "", "when the row was made (UTC)"),
    # appended: the columns above keep their order
    _quality("reference_requantized_from", str, "", "the quantized type the reference was made from (its header's "
             "lineage), empty for an original file; when set, the KLDs are measured against a copy of that type "
             "(every file of the set was requantized, or --ref named this one)"),
)
QUALITY_BY_NAME: dict[str, Field] = {f.name: f for f in QUALITY_TABLE}


def _quantize(name: str, type_: type, unit: str, tip: str, kind: str = PLAIN) -> Field:
    return Field(name, type_, unit, "{}", QUANTIZE, tip, kind=kind)


#: A quantize row's columns (``gguf-bench quantize``, one row per output file), in CSV/JSON order.
QUANTIZE_TABLE: tuple[Field, ...] = (
    _quantize("model_filename", str, "", "file name of the output"),
    _quantize("type", str, "", "the type asked for (--types: q4_k_m, ...)"),
    _quantize("file_type", str, "", "llama.cpp file type read back from the output's header"),
    _quantize("bits_per_weight", float, "bits", "weight bytes × 8 ÷ parameters, from the output's header"),
    _quantize("model_size", int, "bytes", "bytes of the output"),
    _quantize("source_file_type", str, "", "file type of the source (the output's workbench.quantized_from)"),
    _quantize("requantized_from", str, "", "the quantized type at the start of the output's lineage, or empty"),
    _quantize("reference_is_dequantized", bool, "", "1: an F16/F32 output made from a quantized file (JSON: true)"),
    _quantize("elapsed_s", float, "s", "seconds this output took", MEASURED),
    _quantize("status", str, "", "ok, failed or cancelled"),
    _quantize("error", str, "", "why the output was not written"),
    _quantize("model_path", str, "", "path of the output"),
    _quantize("source_path", str, "", "path of the source"),
    _quantize("run_id", str, "", "the quantize run"),
    _quantize("output_index", int, "", "position of the output in the run (0: first)"),
)
QUANTIZE_BY_NAME: dict[str, Field] = {f.name: f for f in QUANTIZE_TABLE}


def check_row(row: dict[str, Any], table: dict[str, Field] = FIELD_BY_NAME) -> list[str]:
    """What in ``row`` does not match ``table``: one line per value of the wrong type (None is always allowed, an
    int where a float is expected too; keys the table does not know are not checked)."""
    problems = []
    for name, value in row.items():
        f = table.get(name)
        if f is None or value is None:
            continue
        want = (int, float) if f.type is float else f.type
        if not isinstance(value, want) or (f.type in (int, float) and isinstance(value, bool)):
            problems.append(f"{name}: {type(value).__name__} {value!r:.40} where the field table has {f.type.__name__}")
    return problems


def whole_numbers(row: dict[str, Any], table: dict[str, Field] = FIELD_BY_NAME) -> dict[str, Any]:
    """``row`` with the floats of its int fields rounded to ints, so it matches the field table (:func:`check_row`):
    byte counts come from llama.cpp's MiB figures (two decimals: 92.10 MiB is 96573849.6 bytes) or a float probe."""
    for name, value in row.items():
        f = table.get(name)
        if f is not None and f.type is int and isinstance(value, float) and math.isfinite(value):
            row[name] = round(value)
    return row

