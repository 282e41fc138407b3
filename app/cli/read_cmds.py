"""The commands that only read: ``inspect``, ``history``, ``export`` and ``hw``."""

from __future__ import annotations

import argparse
from dataclasses import asdict

from app.cli.errors import EXIT_OK, EXIT_USAGE, UserError
from app.cli.json_docs import SCHEMA_VERSIONS, json_text
from app.cli.output import check_output_path, write_results
from app.cli.url_options import remote_options
from app.model.facts import ModelFacts
from app.model.format import format_facts_text
from app.model.gguf_http import read_facts
from app.predict.answer import Machine, MemoryCheck, memory_checks
from app.predict.questions import memory_at
from app.results import export
from app.results.quality_store import QUALITY_FORMATS, quality_rows, quality_run_ids, quality_runs, render_quality
from app.results.store import ResultStore, StoreError


# --- inspect ---------------------------------------------------------------------------------------
def cmd_inspect(args: argparse.Namespace) -> int:
    facts = read_facts(args.model, remote_options(args))  # a path or an https URL (header only)
    checks = _dry_run_checks(facts, args) if getattr(args, "dry_run", False) else None
    if args.json:
        doc = facts.to_json_dict()
        if checks is not None:
            doc["dry_run"] = [c if isinstance(c, str) else asdict(c) for c in checks]
        print(json_text(doc, SCHEMA_VERSIONS["inspect"], indent=2, ensure_ascii=False))
    else:
        print(format_facts_text(facts))
        if checks is not None:
            print("\nMemory: ours and llama.cpp's dry run on this CPU (f16 KV, flash attention on, ubatch 512)")
            print(f"  {'context':>9} {'KV+state MiB':>22} {'compute MiB':>22} {'weights MiB':>24}")
            said: set[str] = set()
            for c in checks:
                if not isinstance(c, str):
                    print("  " + _check_row(c))
                elif c not in said:  # one reason for every context (a header refused) is said once
                    print(f"  {c}")
                    said.add(c)
    return EXIT_OK


#: the contexts ``inspect --dry-run`` sizes when no --ctx is given
DRY_RUN_CONTEXTS = (8192, 32768)


def _dry_run_checks(facts: ModelFacts, args: argparse.Namespace) -> list[MemoryCheck | str]:
    """Our memory formulas beside llama.cpp's dry run of the file at each --ctx (a child process; cached)."""
    settings = [memory_at(n) for n in (args.ctx or DRY_RUN_CONTEXTS)]
    return memory_checks(facts, settings, Machine().with_dry_run(facts, settings))


def _check_row(c: MemoryCheck) -> str:
    mib = 2**20

    def pair(ours: float, theirs: float | None) -> str:
        if theirs is None:
            return f"{ours / mib:>10,.1f} / {'-':>9}"
        return f"{ours / mib:>8,.1f} / {theirs / mib:>8,.1f} {ours / theirs - 1 if theirs else 0:+6.1%}"

    return (f"{c.n_ctx:>9,} {pair(c.context, c.context_llama):>22} {pair(c.compute, c.compute_llama):>22} "
            f"{pair(c.weights, c.weights_llama):>24}" + ("" if c.agrees else "  (formulas disagree)"))


# --- history / export ------------------------------------------------------------------------------
def cmd_history(args: argparse.Namespace) -> int:
    with ResultStore.open_read_only(args.store) as store:
        runs = store.runs(limit=args.limit)
        quality = quality_runs(store, limit=args.limit)
    if args.json:
        print(json_text([r.__dict__ for r in runs], SCHEMA_VERSIONS["history"], indent=2))
        return EXIT_OK
    if not runs and not quality:
        print(f"no runs stored yet in {store.path}")
        return EXIT_OK
    if runs:
        print(f"{'run_id':<24} {'created':<20} {'status':<10} {'ok':>4} {'fail':>4}  sweep / models")
    for r in runs:
        print(f"{r.run_id:<24} {r.created_at:<20} {r.status:<10} {r.n_ok:>4} {r.n_failed:>4}  "
              f"{r.sweep_name or '-'}: {r.models}")
    if quality:
        if runs:
            print()
        print(f"{'quality run_id':<24} {'created':<20} {'files':>5} {'ok':>4}  models")
    for run_id, created, n_files, n_ok, models in quality:
        print(f"{run_id:<24} {created:<20} {n_files:>5} {n_ok:>4}  {models}")
    return EXIT_OK


def cmd_export(args: argparse.Namespace) -> int:
    """One stored run as ``args.output``: a sweep (``run``) or a quality run (``quality``), by a prefix of its id."""
    with ResultStore.open_read_only(args.store) as store:
        if args.out:
            check_output_path(args.out, "--out", store.path)
        quality = [] if args.run_id == "last" else quality_run_ids(store, args.run_id)
        if quality and store.run_ids(args.run_id):
            raise StoreError(f"{store.path}: run id {args.run_id!r} is ambiguous (a sweep and a quality run match)")
        if not quality:  # a sweep, or no run at all: as before
            rows = [r.to_mapping() for r in store.rows(store.resolve_run_id(args.run_id))]
            return EXIT_OK if write_results(export.render(rows, args.output), args.out) else EXIT_USAGE
        if len(quality) > 1:
            raise StoreError(f"{store.path}: run id {args.run_id!r} is ambiguous ({len(quality)} quality runs match)")
        if args.output not in QUALITY_FORMATS:
            raise UserError(f"-o {args.output}: a quality run exports as {', '.join(QUALITY_FORMATS)}")
        scored = quality_rows(store, quality[0])
    return EXIT_OK if write_results(render_quality(scored, args.output), args.out) else EXIT_USAGE


# --- hw --------------------------------------------------------------------------------------------
def cmd_hw(args: argparse.Namespace) -> int:
    from app.doctor.report import extra_buffers_json, repack_lines
    from app.telemetry.hw_report import format_hw_report
    from app.telemetry.machine import ProbeMode, scan_machine
    from app.telemetry.repack_guard import ensure_verdict, remembered

    mode = ProbeMode.NONE if args.no_probe else ProbeMode.REFRESH if args.reprobe else ProbeMode.RUN
    report = scan_machine(mode).report()
    verdict = remembered() if args.no_probe else ensure_verdict()[0]
    report["extra_buffers"] = extra_buffers_json(verdict)
    text = "\n".join([format_hw_report(report), "Weight repacking (--repack)", *repack_lines(verdict)])
    print(json_text(report, SCHEMA_VERSIONS["hw"], indent=2, default=str) if args.json else text)
    return EXIT_OK
