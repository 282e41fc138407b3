"""llama-bench's printers read back: CSV, JSON, JSONL and markdown text → one record per test.

A record holds llama-bench's own field names (``test::get_fields`` in tools/llama-bench/llama-bench.cpp) with
Python values of the field's type (``test::get_field_type``: INT, BOOL, FLOAT, STRING), plus ``samples_ns`` and
``samples_ts`` where the JSON printers wrote them. A markdown table shows less: its record has only what the table
shows (the columns that appear only when a setting is not the default, the ``build:`` line under it, the GPU named
in a ``Device 0: …`` line above it). Older llama-bench versions' columns (``pp 512``, boolean ``flash_attn``,
``use_mmap``) are read too. Bad text raises :class:`BenchFormatError`, one line without the file name.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from typing import Any

from app.shown_text import cell_text

Record = dict[str, Any]

FORMATS = ("csv", "json", "jsonl", "md")

# test::get_field_type (current llama-bench), with the fields older versions wrote
INT_FIELDS = frozenset({
    "build_number", "n_batch", "n_ubatch", "n_threads", "poll", "model_size", "model_n_params", "n_gpu_layers",
    "main_gpu", "n_prompt", "n_gen", "n_depth", "avg_ns", "stddev_ns", "no_op_offload", "n_cpu_moe", "fit_target",
    "fit_min_ctx", "flash_attn"})
BOOL_FIELDS = frozenset({
    "f16_kv", "no_kv_offload", "cpu_strict", "embeddings", "no_host", "repack", "use_mmap", "mul_mat_q", "cuda",
    "vulkan", "kompute", "metal", "sycl", "rpc", "gpu_blas", "blas", "opencl"})
FLOAT_FIELDS = frozenset({"avg_ts", "stddev_ts"})
STRING_FIELDS = frozenset({
    "build_commit", "cpu_info", "gpu_info", "backends", "model_filename", "model_type", "cpu_mask", "type_k",
    "type_v", "split_mode", "devices", "tensor_split", "tensor_buft_overrides", "load_mode", "lazy_mode",
    "test_time"})
LIST_FIELDS = frozenset({"samples_ns", "samples_ts"})
KNOWN_FIELDS = INT_FIELDS | BOOL_FIELDS | FLOAT_FIELDS | STRING_FIELDS | LIST_FIELDS
#: Without these a row says nothing: which test ran and how fast.
REQUIRED_FIELDS = ("n_prompt", "n_gen", "avg_ts")

#: markdown_printer::get_field_display_name reversed (a column shows the field's own name otherwise), with the
#: names older versions printed.
MD_COLUMNS: dict[str, str] = {
    "model": "model_type", "backend": "backends", "ngl": "n_gpu_layers", "sm": "split_mode",
    "threads": "n_threads", "nkvo": "no_kv_offload", "fa": "flash_attn", "lm": "load_mode", "embd": "embeddings",
    "nopo": "no_op_offload", "noh": "no_host", "rpk": "repack", "dev": "devices", "ts": "tensor_split",
    "ot": "tensor_buft_overrides", "fitt": "fit_target", "fitc": "fit_min_ctx", "mmap": "use_mmap", "mg": "main_gpu",
    **{name: name for name in ("n_cpu_moe", "cpu_mask", "cpu_strict", "poll", "n_batch", "n_ubatch", "type_k",
                               "type_v", "main_gpu", "split_mode", "devices", "lazy_mode", "load_mode",
                               "embeddings", "no_op_offload", "no_host", "repack", "n_threads", "n_gpu_layers",
                               "flash_attn", "tensor_split", "use_mmap")},
}
_MD_SPECIAL = ("size", "params", "test", "t/s")

_TEST_RE = re.compile(r"^(?:pp\s*(?P<pp>\d+))?\s*\+?\s*(?:tg\s*(?P<tg>\d+))?\s*(?:@\s*d\s*(?P<depth>\d+))?$")
_TS_RE = re.compile(r"^(?P<avg>\d+(?:\.\d+)?)\s*(?:(?:±|\+/-|\+-)\s*(?P<sd>\d+(?:\.\d+)?))?$")
_SIZE_RE = re.compile(r"^(?P<n>\d+(?:\.\d+)?)\s*(?P<unit>KiB|MiB|GiB|TiB)$")
_PARAMS_RE = re.compile(r"^(?P<n>\d+(?:\.\d+)?)\s*(?P<unit>[KMBT])$")
_BUILD_RE = re.compile(r"build:\s*(?P<commit>[0-9a-fA-F]+|unknown)\s*\((?P<number>-?\d+)\)")
_DEVICE_RE = re.compile(r"^\s*Device \d+:\s*(?P<name>[^,]+),")  # ggml_cuda_init's (CUDA, ROCm, MUSA) and SYCL's
_VULKAN_RE = re.compile(r"^\s*ggml_vulkan:\s*\d+\s*=\s*(?P<name>[^|]+?)\s*(?:\||$)")
#: Bounds a value must keep: llama-bench's counts are C ints, its other integers 64-bit.
MAX_TOKENS = 2**31 - 1
_INT64 = 2**63
_UNITS = {"KiB": 1024, "MiB": 1024**2, "GiB": 1024**3, "TiB": 1024**4, "K": 1e3, "M": 1e6, "B": 1e9, "T": 1e12}


class BenchFormatError(ValueError):
    """The text is not a llama-bench output of the format asked for; the message is one line (no file name)."""


# --- values ---------------------------------------------------------------------------------------------------
def _int(text: str, field: str, where: str) -> int:
    t = text.strip().lower()
    if t in ("true", "false"):  # flash_attn and the like were booleans before they took -1 (auto)
        return int(t == "true")
    try:
        value = int(t)
    except ValueError:
        raise BenchFormatError(f"{where}: {field} {text!r:.40} is not a whole number") from None
    return _bounded_int(value, field, where)


def _bounded_int(value: int, field: str, where: str) -> int:
    if not -_INT64 <= value < _INT64:
        raise BenchFormatError(f"{where}: {field} {value!r:.40} is out of range")
    return value


def _finite(value: object) -> float | None:
    """``value`` as a finite float, None when it is not a number or not finite (a 400-digit integer too)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        f = float(value)
    except OverflowError:
        return None
    return f if math.isfinite(f) else None


def _bool(text: str, field: str, where: str) -> bool:
    t = text.strip().lower()
    if t in ("1", "true"):
        return True
    if t in ("0", "false"):
        return False
    raise BenchFormatError(f"{where}: {field} {text!r:.40} is not 0/1 or true/false")


def _float(text: str, field: str, where: str) -> float:
    try:
        value = _finite(float(text))
    except ValueError:
        raise BenchFormatError(f"{where}: {field} {text!r:.40} is not a number") from None
    if value is None:
        raise BenchFormatError(f"{where}: {field} is {text!r:.40}, not a finite number")
    return value


def value_from_text(field: str, text: str, where: str) -> Any:
    """One CSV or markdown cell as the field's type (llama-bench writes every value as text there)."""
    if field in INT_FIELDS:
        return _int(text, field, where)
    if field in BOOL_FIELDS:
        return _bool(text, field, where)
    if field in FLOAT_FIELDS:
        return _float(text, field, where)
    return text


def _check_json_value(field: str, value: Any, where: str) -> Any:
    """A JSON value of a known field, checked against its type (booleans accepted where older versions wrote them)."""
    def bad(want: str) -> BenchFormatError:
        return BenchFormatError(f"{where}: {field} is {type(value).__name__} {value!r:.40}, not {want}")

    if value is None:
        return None
    if field in INT_FIELDS:
        if isinstance(value, bool):
            return int(value)
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int):
            raise bad("a whole number")
        return _bounded_int(value, field, where)
    elif field in BOOL_FIELDS:
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        raise bad("true/false")
    elif field in FLOAT_FIELDS:
        number = _finite(value)
        if number is None:
            raise bad("a finite number")
        return number
    elif field in LIST_FIELDS:
        numbers = [_finite(v) for v in value] if isinstance(value, list) else [None]
        if any(v is None or v < 0 or v >= _INT64 for v in numbers):
            raise bad("a list of finite numbers ≥ 0")
        return [round(v) for v in numbers] if field == "samples_ns" else numbers
    elif not isinstance(value, str):
        raise bad("text")
    return value


def _check_record(record: Record, where: str) -> Record:
    missing = [f for f in REQUIRED_FIELDS if record.get(f) is None]
    if missing:
        raise BenchFormatError(f"{where}: no {', '.join(missing)} (not a llama-bench result)")
    n_prompt, n_gen, avg_ts = record["n_prompt"], record["n_gen"], record["avg_ts"]
    for name in ("n_prompt", "n_gen", "n_depth"):
        if record.get(name) is not None and not 0 <= record[name] <= MAX_TOKENS:
            raise BenchFormatError(f"{where}: {name} {record[name]} is not a token count (0 to {MAX_TOKENS})")
    if n_prompt + n_gen == 0:
        raise BenchFormatError(f"{where}: n_prompt {n_prompt} and n_gen {n_gen} name no test")
    if avg_ts <= 0:
        raise BenchFormatError(f"{where}: avg_ts {avg_ts} is not a positive rate")
    return record


# --- the printers ---------------------------------------------------------------------------------------------
def parse_csv(text: str) -> list[Record]:
    """csv_printer: a header of field names, then one line per test, every value quoted text."""
    reader = csv.reader(io.StringIO(text))
    try:
        header = next(reader, None)
        if header is None:
            raise BenchFormatError("no header line")
        header = [h.strip() for h in header]
        missing = [f for f in REQUIRED_FIELDS if f not in header]
        if missing or not ({"model_filename", "model_type"} & set(header)):
            shown = ", ".join(repr(h)[:40] for h in header[:4]) + (", …" if len(header) > 4 else "")
            raise BenchFormatError(f"its header ({shown}) is not llama-bench's: it has no "
                                   f"{', '.join(missing) or 'model_filename or model_type'} column")
        records = []
        for cells in reader:
            where = f"line {reader.line_num}"
            if not cells or all(not c.strip() for c in cells):
                continue
            if len(cells) != len(header):
                raise BenchFormatError(f"{where}: {len(cells)} cells where the header has {len(header)}")
            record = {f: value_from_text(f, cell_text(c), where) for f, c in zip(header, cells, strict=True)
                      if f in KNOWN_FIELDS}  # cell_text: a CSV of ours, its spreadsheet escapes undone
            records.append(_check_record(record, where))
    except csv.Error as e:
        raise BenchFormatError(f"not valid CSV ({e})") from None
    return records


def _record_from_json(obj: Any, where: str) -> Record:
    if not isinstance(obj, dict):
        raise BenchFormatError(f"{where}: a {type(obj).__name__} where llama-bench writes an object")
    return _check_record({k: _check_json_value(k, v, where) for k, v in obj.items() if k in KNOWN_FIELDS}, where)


def _json_error(e: json.JSONDecodeError) -> BenchFormatError:
    return BenchFormatError(f"not valid JSON ({e.msg} at line {e.lineno} column {e.colno}; cut short?)")


def parse_json(text: str) -> list[Record]:
    """json_printer: an array of objects, one per test."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise _json_error(e) from None
    except RecursionError:
        raise BenchFormatError("its JSON is nested too deeply") from None
    if isinstance(doc, dict):
        doc = [doc]
    if not isinstance(doc, list):
        raise BenchFormatError(f"a JSON {type(doc).__name__} where llama-bench writes an array of results")
    return [_record_from_json(obj, f"result #{i + 1}") for i, obj in enumerate(doc)]


def parse_jsonl(text: str) -> list[Record]:
    """jsonl_printer: one object per line."""
    records = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise BenchFormatError(f"line {n}: not valid JSON ({e.msg} at column {e.colno}; cut short?)") from None
        except RecursionError:
            raise BenchFormatError(f"line {n}: its JSON is nested too deeply") from None
        records.append(_record_from_json(obj, f"line {n}"))
    return records


def _md_cells(line: str) -> list[str]:
    """The cells of one markdown table line (``\\|`` is a bar inside a cell)."""
    inner = line.strip()
    inner = inner[1:] if inner.startswith("|") else inner
    inner = inner[:-1] if inner.endswith("|") and not inner.endswith("\\|") else inner
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", inner)]


def _is_separator(cells: list[str]) -> bool:
    return bool(cells) and all(re.fullmatch(r":?-+:?", c) for c in cells)


def _md_test(cell: str, where: str) -> tuple[int, int, int]:
    m = _TEST_RE.match(cell.strip())
    if not cell.strip() or m is None or (m["pp"] is None and m["tg"] is None):
        raise BenchFormatError(f"{where}: test {cell!r:.40} is not llama-bench's (pp512, tg128, pp512+tg128, "
                               "pp512 @ d4096)")
    return int(m["pp"] or 0), int(m["tg"] or 0), int(m["depth"] or 0)


def _scaled(number: str, unit: str, field: str, where: str) -> int:
    """"92.10" "MiB" → bytes, "8.03" "B" → parameters, as a whole number."""
    value = _float(number, field, where) * _UNITS[unit]
    if not value < _INT64:
        raise BenchFormatError(f"{where}: {field} {number} {unit} is out of range")
    return round(value)


def _md_row(header: list[str], cells: list[str], where: str) -> Record:
    record: Record = {}
    for name, cell in zip(header, cells, strict=True):
        if name == "test":
            record["n_prompt"], record["n_gen"], record["n_depth"] = _md_test(cell, where)
        elif name == "t/s":
            m = _TS_RE.match(cell)
            if m is None:
                raise BenchFormatError(f"{where}: t/s {cell!r:.40} is not 'mean ± sd'")
            record["avg_ts"] = _float(m["avg"], "t/s", where)
            record["stddev_ts"] = _float(m["sd"], "t/s", where) if m["sd"] is not None else None
        elif name == "size":
            m = _SIZE_RE.match(cell)
            if m is None:
                raise BenchFormatError(f"{where}: size {cell!r:.40} is not '92.10 MiB' or '4.58 GiB'")
            record["model_size"] = _scaled(m["n"], m["unit"], "size", where)
        elif name == "params":
            m = _PARAMS_RE.match(cell)
            if m is None:
                raise BenchFormatError(f"{where}: params {cell!r:.40} is not '134.52 M' or '8.03 B'")
            record["model_n_params"] = _scaled(m["n"], m["unit"], "params", where)
        elif name in MD_COLUMNS:
            field = MD_COLUMNS[name]
            record[field] = value_from_text(field, cell, where) if cell else None
    return _check_record(record, where)


def parse_markdown(text: str) -> tuple[list[Record], list[str]]:
    """markdown_printer's tables in a text (a post may hold several, with other text between): (records, notes).

    A table is a header with ``model``, ``test`` and ``t/s`` and its rows; the ``build: <commit> (<number>)`` line
    after it (or before it, when none follows) gives its build; ``Device 0: NAME, …`` or ``ggml_vulkan: 0 = NAME |``
    lines before it give its GPUs. Columns llama-bench does not print are left out, with one note each.
    """
    lines = text.splitlines()
    records: list[Record] = []
    notes: list[str] = []
    without_build: list[Record] = []  # rows of tables since the last build line
    carried_build: tuple[str, int] | None = None  # a build line seen before any table it could follow
    devices: list[str] = []
    devices_used = False
    i = 0
    while i < len(lines):
        line = lines[i]
        build = _BUILD_RE.search(line)
        if build is not None:
            value = (build["commit"], int(build["number"]))
            if without_build:
                for r in without_build:
                    r["build_commit"], r["build_number"] = value
                without_build = []
                carried_build = None
            else:
                carried_build = value
            i += 1
            continue
        device = _DEVICE_RE.match(line) or _VULKAN_RE.match(line)
        if device is not None:
            if devices_used:
                devices, devices_used = [], False
            devices.append(device["name"].strip())
            i += 1
            continue
        cells = _md_cells(line) if line.lstrip().startswith("|") else []
        header = [c.lower() for c in cells]
        if not ({"model", "test", "t/s"} <= set(header)) or i + 1 >= len(lines) \
                or not _is_separator(_md_cells(lines[i + 1])):
            i += 1
            continue
        unknown = [c for c in header if c not in MD_COLUMNS and c not in _MD_SPECIAL]
        if unknown:
            notes.append(f"line {i + 1}: columns llama-bench does not print, left out: {', '.join(unknown)}")
        i += 2
        table: list[Record] = []
        while i < len(lines) and lines[i].lstrip().startswith("|"):
            row_cells = _md_cells(lines[i])
            where = f"line {i + 1}"
            if len(row_cells) != len(header):
                raise BenchFormatError(f"{where}: {len(row_cells)} cells where the table's header has {len(header)}")
            table.append(_md_row(header, row_cells, where))
            i += 1
        for r in table:
            if devices:
                r["gpu_info"] = ", ".join(devices)
            if carried_build is not None:
                r["build_commit"], r["build_number"] = carried_build
        devices_used = devices_used or bool(devices)
        if carried_build is None:
            without_build += table
        records += table
    if not records:
        raise BenchFormatError("no llama-bench table (a header with model, test and t/s columns)")
    return records, notes


def detect_format(text: str, suffix: str = "") -> str:
    """The printer that wrote ``text``: by the file's suffix when it names one, else by the text itself."""
    by_suffix = {".csv": "csv", ".json": "json", ".jsonl": "jsonl", ".ndjson": "jsonl", ".md": "md",
                 ".markdown": "md"}.get(suffix.lower())
    if by_suffix:
        return by_suffix
    head = text.lstrip()
    if head.startswith("["):
        return "json"
    if head.startswith("{"):
        first = head.split("\n", 1)[0].strip()
        return "jsonl" if first.endswith("}") else "json"
    if re.search(r"^\s*\|.*\bt/s\b", text, re.MULTILINE):
        return "md"
    if "n_prompt" in head.split("\n", 1)[0] and "," in head.split("\n", 1)[0]:
        return "csv"
    raise BenchFormatError("not a llama-bench output that this recognises (CSV, JSON, JSONL or a markdown table); "
                           "name it with --format")


def parse_text(text: str, fmt: str) -> tuple[list[Record], list[str]]:
    """(records, notes) of one output in format ``fmt`` (one of :data:`FORMATS`)."""
    if fmt == "csv":
        records, notes = parse_csv(text), []
    elif fmt == "json":
        records, notes = parse_json(text), []
    elif fmt == "jsonl":
        records, notes = parse_jsonl(text), []
    elif fmt == "md":
        records, notes = parse_markdown(text)
    else:
        raise BenchFormatError(f"unknown format {fmt!r} (valid: {', '.join(FORMATS)})")
    if not records:
        raise BenchFormatError("holds no results")
    return records, notes
