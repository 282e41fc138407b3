"""``gguf-bench import``: llama-bench's CSV, JSON, JSONL or markdown outputs into the results store as one run, or
as ``[[result]]`` tables of the public reference table (``--public-toml``). The logic is app.bench_import."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from app.bench_import.formats import FORMATS as BENCH_FORMATS
from app.bench_import.load import BenchImportError, ImportedFile, read_bench_files, store_import
from app.bench_import.public_toml import PublicTomlError, public_results, to_toml
from app.cli.errors import EXIT_OK, UserError, print_line
from app.results import export
from app.results.store import ResultStore


def add_import_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("import", help="load llama-bench outputs (CSV, JSON, JSONL, markdown) into the results store",
                       description="Read llama-bench's CSV, JSON, JSONL or markdown outputs (yours, or tables others "
                       "published) and store them as one run: History, export and the window's Compare show it. "
                       "--public-toml prints reference-table results instead.")
    p.add_argument("files", nargs="+", metavar="FILE", help="llama-bench output files (-o csv|json|jsonl|md)")
    p.add_argument("--format", choices=("auto", *BENCH_FORMATS), default="auto",
                   help="format of every FILE (default: by suffix, else by content)")
    p.add_argument("--name", help="name of the imported run (default: the first file's name)")
    p.add_argument("--source", metavar="URL", help="where the figures were published (thread, comment, file)")
    p.add_argument("--gpu", metavar="NAME", help="the GPU the figures are for, where the files name none "
                   "(with --public-toml: a hardware profile name)")
    p.add_argument("-o", "--output", choices=export.FORMATS, default="md", help="how the imported rows are printed")
    p.add_argument("--dry-run", action="store_true", help="parse and print the rows; store nothing")
    p.add_argument("--public-toml", action="store_true",
                   help="print [[result]] tables for profiles/reference/llama_bench_public.toml instead of storing "
                   "(needs --gpu and --source)")
    p.set_defaults(func=cmd_import)


def _read(args: argparse.Namespace) -> list[ImportedFile]:
    try:
        files = read_bench_files(args.files, args.format, args.gpu or "")
    except BenchImportError as e:
        raise UserError(str(e)) from None
    for f in files:
        for note in f.notes:
            print_line(f"note: {note}")
    return files


def cmd_import(args: argparse.Namespace) -> int:
    if args.public_toml and not (args.gpu and args.source):
        raise UserError("--public-toml needs --gpu (a hardware profile name) and --source (where the figures were "
                        "published)")
    files = _read(args)
    rows = [row for f in files for row in f.rows]
    if args.public_toml:
        try:
            results, notes = public_results([(Path(f.path).name, f.rows) for f in files], args.gpu, args.source)
        except PublicTomlError as e:
            raise UserError(str(e)) from None
        for note in notes:
            print_line(f"note: {note}")
        sys.stdout.write(to_toml(results))
        return EXIT_OK
    n_files = f"{len(files)} file" + ("s" if len(files) != 1 else "")
    if args.dry_run:
        sys.stdout.write(export.render([r.to_mapping() for r in rows], args.output))
        print(f"parsed {len(rows)} rows from {n_files} (dry run: nothing stored)", file=sys.stderr)
        return EXIT_OK
    name = args.name or Path(args.files[0]).name
    with ResultStore.recover(args.store) as store:
        run_id, rows = store_import(store, files, name, args.source or "", shlex.join(["gguf-bench", *sys.argv[1:]]),
                                    args.gpu or "")
    sys.stdout.write(export.render([r.to_mapping() for r in rows], args.output))
    print_line(f"imported {len(rows)} rows from {n_files} as run {run_id} (gguf-bench export {run_id})")
    return EXIT_OK
