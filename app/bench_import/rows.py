"""llama-bench records → this project's result rows (app.results.fields), deriving only what the figures give.

llama-bench's columns keep their names and values (the field table's llama-bench group has the same names; the few
it lacks, such as ``build_number``, ride along as extra keys, which the CSV and JSON exports keep). A test of
n_prompt tokens and no generation is a prefill: ``prefill_tps`` is its avg_ts and ``ttft_ms`` its mean time. A test
of n_gen tokens and no prompt is a decode from n_depth tokens: ``decode_tps`` is its avg_ts. A ``pp+tg`` test
blends both and keeps avg_ts only. A markdown table names no file: ``model_filename`` holds its model column
(llama.cpp's description, "llama 8B Q4_K - Medium"), so History and Compare keep its models apart. What a record
does not hold (a markdown table shows no samples, no test time, often no thread count) stays empty: nothing is
guessed.
"""

from __future__ import annotations

from pathlib import PurePosixPath, PureWindowsPath
from typing import Any

from app.bench_import.formats import Record
from app.results.fields import FIELD_BY_NAME, LLAMA_BENCH, RowStatus
from app.results.row_types import ResultRow, RowError

#: llama-bench columns the field table does not have: kept in the row under their own names.
EXTRA_BENCH_FIELDS = ("build_number", "cpu_mask", "cpu_strict", "poll", "embeddings", "load_mode", "lazy_mode",
                      "fit_target", "fit_min_ctx")
_BENCH_COLUMNS = tuple(f.name for f in FIELD_BY_NAME.values() if f.group == LLAMA_BENCH)


def llama_bench_test(row: ResultRow) -> str:
    """The test as llama-bench's markdown names it: pp512, tg128, pp512+tg128, with `` @ d4096`` at a depth."""
    return _test_name(row.n_prompt or 0, row.n_gen or 0, row.n_depth or 0)


def _test_name(n_prompt: int, n_gen: int, n_depth: int) -> str:
    name = f"pp{n_prompt}" if not n_gen else f"tg{n_gen}" if not n_prompt else f"pp{n_prompt}+tg{n_gen}"
    return name + (f" @ d{n_depth}" if n_depth else "")


def _count(value: Any) -> int:
    """A record's token count for a message about it (0 where it is not a number)."""
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def _file_name(path: str) -> str:
    """The file name of a path written on any system (llama-bench writes ``-m`` as given)."""
    return PureWindowsPath(path).name if "\\" in path else PurePosixPath(path).name


def _typed(name: str, value: Any) -> Any:
    """A record's value in the field table's type: booleans become 1/0 (as llama-bench's CSV writes them)."""
    if isinstance(value, bool):
        return int(value)
    return value


def row_from_record(record: Record, test_index: int, run_id: str = "", gpu_info: str = "") -> ResultRow:
    """One result row for one llama-bench record; ``gpu_info`` fills the GPU where the record names none. RowError
    when a value is not of its field's type."""
    columns: dict[str, Any] = {"run_id": run_id, "test_index": test_index, "status": RowStatus.OK, "error": "",
                               "n_parallel": 1}  # llama-bench runs one sequence
    for name in (*_BENCH_COLUMNS, *EXTRA_BENCH_FIELDS):
        if record.get(name) is not None:
            columns[name] = _typed(name, record[name])
    columns.setdefault("n_depth", 0)  # a llama-bench without depths ran every test from an empty cache
    row = ResultRow.from_mapping(columns)  # the llama-bench record decoded: from here on, a typed row
    path = str(record.get("model_filename") or "")
    if path:
        row = row.replace(model_filename=_file_name(path))
        if row.model_filename != path:
            row = row.replace(model_path=path)
    elif row.model_type:  # a markdown table names no file: its model column names the model
        row = row.replace(model_filename=row.model_type)
    if gpu_info and not row.gpu_info:
        row = row.replace(gpu_info=gpu_info)
    samples_ns = record.get("samples_ns")
    samples_ts = record.get("samples_ts")
    if samples_ns:
        row = row.replace(n_repetitions=len(samples_ns))
    n_prompt, n_gen, avg_ts = row.n_prompt or 0, row.n_gen or 0, float(row.avg_ts or 0.0)
    if n_prompt and not n_gen:  # a prefill of n_prompt tokens after n_depth
        row = row.replace(prefill_tps=avg_ts, prefill_tps_stddev=row.stddev_ts,
                          ttft_ms=row.avg_ns / 1e6 if row.avg_ns else 1000.0 * n_prompt / avg_ts)
        if row.stddev_ns is not None:
            row = row.replace(ttft_ms_stddev=row.stddev_ns / 1e6)
        if samples_ns:
            row = row.replace(ttft_samples_ms=[t / 1e6 for t in samples_ns])
        if samples_ts:
            row = row.replace(prefill_samples_tps=list(samples_ts))
    elif n_gen and not n_prompt:  # a decode of n_gen tokens from n_depth
        row = row.replace(decode_tps=avg_ts, decode_tps_stddev=row.stddev_ts, tpot_ms=1000.0 / avg_ts)
        if samples_ts:
            row = row.replace(decode_samples_tps=list(samples_ts))
    return ResultRow.from_mapping({k: v for k, v in row.to_mapping().items() if v is not None})


def rows_from_records(records: list[Record], first_index: int = 0, run_id: str = "",
                      gpu_info: str = "") -> list[ResultRow]:
    """Rows numbered from ``first_index``; ValueError (one line) if one does not match the field table."""
    rows = []
    for i, record in enumerate(records):
        try:
            rows.append(row_from_record(record, first_index + i, run_id, gpu_info))
        except RowError as e:
            test = _test_name(*(_count(record.get(k)) for k in ("n_prompt", "n_gen", "n_depth")))
            raise ValueError(f"test {first_index + i} ({test}): {str(e).removeprefix('result row: ')}") from None
    return rows
