"""Reading llama-bench output files and storing them as one run of the results store.

Every file is read whole before anything is stored (bounded: app.bounded_read), so a bad file stops the import
with one line naming it and the cause, and nothing is half-stored. The run is marked as an import: its sweep name
is ``import: <name>`` (with the source when given), its command the command line, and its machine record names the
files and the source, so History, the window's Past runs and Compare show where the rows came from.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from app.bench_import.formats import detect_format, parse_text
from app.bench_import.rows import rows_from_records
from app.bounded_read import MAX_SMALL_FILE_BYTES, FileTooLarge, NotARegularFile, read_bounded
from app.results.row_types import ResultRow
from app.results.store import ResultStore, new_run_id

#: Far above any llama-bench output (a thousand-test JSON is a few MB).
MAX_BENCH_FILE_BYTES = MAX_SMALL_FILE_BYTES
IMPORT_PREFIX = "import: "


class BenchImportError(ValueError):
    """A file that cannot be imported; the message is one line naming the file and the cause."""


@dataclass
class ImportedFile:
    """One llama-bench output read: its rows (test_index counted over the whole import) and notes."""

    path: str
    format: str
    rows: list[ResultRow]
    notes: list[str] = field(default_factory=list)


def read_text(path: str | Path) -> str:
    """The UTF-8 text of a file given from outside; BenchImportError (naming it) for anything else."""
    p = Path(path)
    try:
        data = read_bounded(p, MAX_BENCH_FILE_BYTES)
    except FileNotFoundError:
        raise BenchImportError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise BenchImportError(f"{path}: is a directory, not a llama-bench output") from None
    except (NotARegularFile, FileTooLarge) as e:
        raise BenchImportError(str(e)) from None
    except OSError as e:
        raise BenchImportError(f"{path}: cannot read ({e.strerror or e})") from None
    if not data.strip():
        raise BenchImportError(f"{path}: empty file")
    if b"\0" in data:
        raise BenchImportError(f"{path}: a binary file (NUL bytes), not a llama-bench output")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise BenchImportError(f"{path}: not UTF-8 text (byte {e.start}), not a llama-bench output") from None


def read_bench_file(path: str | Path, fmt: str = "auto", first_index: int = 0, gpu_info: str = "") -> ImportedFile:
    """One llama-bench output as rows numbered from ``first_index``; ``fmt`` "auto" tells it by suffix or text."""
    text = read_text(path)
    found = ""
    try:
        found = detect_format(text, Path(path).suffix) if fmt == "auto" else fmt
        records, notes = parse_text(text, found)
        rows = rows_from_records(records, first_index, gpu_info=gpu_info)
    except ValueError as e:  # BenchFormatError, or a row the field table refuses
        told = f" (read as {found})" if fmt == "auto" and found else ""
        raise BenchImportError(f"{path}{told}: {e}") from None
    return ImportedFile(str(path), found, rows, [f"{path}: {n}" for n in notes])


def read_bench_files(paths: Sequence[str | Path], fmt: str = "auto", gpu_info: str = "") -> list[ImportedFile]:
    """Every file read and parsed, rows numbered across them; the first bad one raises BenchImportError."""
    files: list[ImportedFile] = []
    for path in paths:
        files.append(read_bench_file(path, fmt, sum(len(f.rows) for f in files), gpu_info))
    return files


def sweep_name_for(name: str, source_url: str = "") -> str:
    """How the run is named in History and Compare: ``import: NAME`` and where the figures came from."""
    return IMPORT_PREFIX + name + (f" ({source_url})" if source_url else "")


def store_import(store: ResultStore, files: Sequence[ImportedFile], name: str, source_url: str = "",
                 command: str = "", gpu_info: str = "") -> tuple[str, list[ResultRow]]:
    """The imported rows stored as one finished run: (run id, the rows as stored)."""
    run_id = new_run_id()
    rows = [row.replace(run_id=run_id) for f in files for row in f.rows]
    machine = {"imported_from": [f.path for f in files], "formats": [f.format for f in files],
               "source_url": source_url, "gpu_info": gpu_info}
    tests = [{"model_filename": row.model_filename, "model_type": row.model_type, "n_prompt": row.n_prompt,
              "n_gen": row.n_gen, "n_depth": row.n_depth} for row in rows]
    store.begin_run(run_id, sweep_name=sweep_name_for(name, source_url), command=command, tests=tests,
                    machine=machine)
    for row in rows:
        store.add_result(run_id, row)
    store.finish_run(run_id, "finished")
    return run_id, rows
