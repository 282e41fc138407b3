"""The typed rows: a test's result row, a model file's quality row and a quantize output's row.

Each is a frozen record of one field table (:mod:`app.results.fields`): every field is an attribute of the table's
type, None where the row does not hold it (a failed test's row holds only what was known before it ran). Features
read attributes (``row.decode_tps``); a row has no mapping interface. Only the printers the field table drives (the
exports, the results table) read a field by its name, with :meth:`Row.value`.

The attributes are declared in the class bodies, so a type checker and an editor see them;
``tests/results/test_row_types.py`` holds each declaration to its table key for key and type for type (a field added
to the table and not here fails there), and each class makes its attributes from the table itself.

Rows cross the worker's pipe, the store, the side file of pending writes and the exports as JSON objects. Where one
enters, :meth:`Row.from_mapping` decodes it: the whole numbers of int fields that came as floats are rounded
(older recordings kept byte counts as floats), each value must be of its field's type (:class:`RowError`, one line
naming the field, if not), and keys the table does not know (an older or newer build's) are kept as they are, for
:meth:`Row.to_mapping` to write back: a stored row round-trips unchanged, key for key and in its order.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Self

from app.results.fields import (
    FIELD_BY_NAME,
    QUALITY_BY_NAME,
    QUANTIZE_BY_NAME,
    Field,
    check_row,
    whole_numbers,
)


class RowError(ValueError):
    """A row that is not of its field table: str() is one line naming the field and what it holds."""


def _field_property(name: str) -> property:
    """The attribute of one field: the row's value, None where the row does not hold it."""

    def read(self: Row) -> Any:
        return self._values.get(name)

    return property(read)


class Row:
    """A frozen record of one field table (:attr:`TABLE`); see the module.

    Made by keywords (``ResultRow(status=RowStatus.OK, decode_tps=42.0)``: names outside the table are a
    TypeError), by :meth:`from_mapping` where a row enters, and by :meth:`replace`. Every way checks the values.
    """

    __slots__ = ("_values",)
    _values: dict[str, Any]
    TABLE: ClassVar[Mapping[str, Field]]
    KIND: ClassVar[str]  # how an event names the table of the row it carries: result, quality or quantize

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in cls.TABLE:  # an attribute per field, read from the row's values (None when absent)
            setattr(cls, name, _field_property(name))

    def __init__(self, **values: Any) -> None:
        self._unknown(values)
        object.__setattr__(self, "_values", self._checked(values))

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> Self:
        """Decode a row where it enters (the store, an event, a file): see the module. RowError if it is not a
        table of the field table's types."""
        if not isinstance(data, Mapping):
            raise RowError(f"a {cls.KIND} row is {type(data).__name__}, not a table")
        row = cls.__new__(cls)
        object.__setattr__(row, "_values", cls._checked(dict(data)))
        return row

    def to_mapping(self) -> dict[str, Any]:
        """The row as a JSON-ready table, every key it holds (unknown ones too) in its order: for the store, the
        exports and the events."""
        return dict(self._values)

    def replace(self, **changes: Any) -> Self:
        """This row with ``changes`` (checked as the constructor checks them); a key it held keeps its place."""
        self._unknown(changes)
        row = type(self).__new__(type(self))
        object.__setattr__(row, "_values", self._checked({**self._values, **changes}))
        return row

    def merged(self, other: Row) -> Self:
        """This row with every key ``other`` holds (its values win; unknown keys kept as they are)."""
        row = type(self).__new__(type(self))
        object.__setattr__(row, "_values", self._checked({**self._values, **other._values}))
        return row

    def value(self, name: str) -> Any:
        """The field ``name`` (None where the row does not hold it), for the printers the field table drives: the
        exports and the results table. KeyError for a name outside the table (features read attributes)."""
        if name not in self.TABLE:
            raise KeyError(f"{type(self).__name__} has no field {name!r} (app.results.fields)")
        return self._values.get(name)

    def holds(self, name: str) -> bool:
        """Whether the row holds ``name`` at all (a value of None included): older rows lack newer fields."""
        return name in self._values

    @property
    def extra(self) -> dict[str, Any]:
        """The keys the field table does not know (an older or newer build's), as the row came with them."""
        return {k: v for k, v in self._values.items() if k not in self.TABLE}

    @classmethod
    def _checked(cls, values: dict[str, Any]) -> dict[str, Any]:
        problems = check_row(whole_numbers(values), dict(cls.TABLE))
        if problems:
            raise RowError(f"{cls.KIND} row: {problems[0]}")
        return values

    @classmethod
    def _unknown(cls, values: Mapping[str, Any]) -> None:
        unknown = [k for k in values if k not in cls.TABLE]
        if unknown:
            raise TypeError(f"{cls.__name__} has no field {unknown[0]!r} (app.results.fields)")

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen: use replace()")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Row) and type(other) is type(self) and self._values == other._values

    __hash__ = None  # type: ignore[assignment]  # rows hold lists

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self._values.items())})"

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self).from_mapping, (self._values,)


class ResultRow(Row):
    """One test's row: llama-bench's columns, ours, the predictions and the remote servers'
    (:data:`app.results.fields.FIELD_TABLE`). ``status`` holds a :class:`~app.results.fields.RowStatus` word."""

    __slots__ = ()
    TABLE: ClassVar[Mapping[str, Field]] = FIELD_BY_NAME
    KIND: ClassVar[str] = "result"

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


class QualityRow(Row):
    """One file's quality against its reference (``gguf-bench quality``; :data:`app.results.fields.QUALITY_TABLE`)."""

    __slots__ = ()
    TABLE: ClassVar[Mapping[str, Field]] = QUALITY_BY_NAME
    KIND: ClassVar[str] = "quality"

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


class QuantizeRow(Row):
    """One output of ``gguf-bench quantize`` (:data:`app.results.fields.QUANTIZE_TABLE`)."""

    __slots__ = ()
    TABLE: ClassVar[Mapping[str, Field]] = QUANTIZE_BY_NAME
    KIND: ClassVar[str] = "quantize"

    model_filename: str | None
    type: str | None
    file_type: str | None
    bits_per_weight: float | None
    model_size: int | None
    source_file_type: str | None
    requantized_from: str | None
    reference_is_dequantized: bool | None
    elapsed_s: float | None
    status: str | None
    error: str | None
    model_path: str | None
    source_path: str | None
    run_id: str | None
    output_index: int | None


#: The row class of each table an event can name (:attr:`Row.KIND`).
ROW_KINDS: dict[str, type[Row]] = {cls.KIND: cls for cls in (ResultRow, QualityRow, QuantizeRow)}
