"""``gguf-bench compare RUN_ID RUN_ID... [--json]``: stored runs side by side, as the window's Compare view shows
them (one entry per model per run; ratios against the first entry; the same figures from the same function)."""

from __future__ import annotations

import argparse
import os
from typing import Any

from app.cli.errors import EXIT_OK, UserError
from app.cli.json_docs import SCHEMA_VERSIONS, json_text
from app.compare.entries import CompareItem, tally_run
from app.compare.figures import MIN_REPETITIONS, CompareTable, compare_table
from app.model.facts import ModelFacts
from app.model.facts_cache import cached_facts
from app.model.gguf_facts import GGUFFileError
from app.results.store import ResultStore

HELP = "stored runs side by side: decode, TTFT, size and KV per token, with ratios (the window's Compare view)"


def compare_runs(store: ResultStore, run_ids: list[str]) -> list[CompareItem]:
    """The entries of each run (a unique prefix or ``last``), in the order given; a run named twice counts once."""
    items: list[CompareItem] = []
    seen: set[str] = set()
    for prefix in run_ids:
        run_id = store.resolve_run_id(prefix)
        if run_id in seen:
            continue
        seen.add(run_id)
        got = tally_run(store, run_id)  # summed as the rows stream from the store: memory per model, not per row
        if not got:
            raise UserError(f"run {run_id} has no results")
        items += got
    return items


def read_facts(items: list[CompareItem]) -> dict[str, ModelFacts]:
    """The facts of every entry's model file that can be read here (size and KV per token come from them, as in
    the window); a file that is gone or unreadable leaves its entry with the figures its rows carry."""
    out: dict[str, ModelFacts] = {}
    for path in dict.fromkeys(it.path for it in items if it.path):
        if os.path.isfile(path):
            try:
                out[path] = cached_facts(path)
            except (GGUFFileError, OSError, ValueError):
                continue
    return out


def footnotes(table: CompareTable) -> list[str]:
    """What the table's marks mean, as the window's note says them."""
    lines = [f"Ratios compare each entry with the first of its kind; TTFT at {table.prompt} prompt tokens; ± the "
             "ratio's noise from the repetitions."]
    if table.n_thin:
        lines.append(f"⚠ {table.n_thin} entr{'y has' if table.n_thin == 1 else 'ies have'} fewer than "
                     f"{MIN_REPETITIONS} repetitions: within noise.")
    return lines


def cmd_compare(args: argparse.Namespace) -> int:
    with ResultStore.open_read_only(args.store) as store:
        items = compare_runs(store, args.run_ids)
    table = compare_table(items, read_facts(items).get)
    if args.json:
        print(json_text(table.to_json(), SCHEMA_VERSIONS["compare"], indent=2, ensure_ascii=False))
    else:
        print(table.text())
        print()
        print("\n".join(footnotes(table)))
    return EXIT_OK


def add_compare_parser(sub: Any) -> None:
    """Register ``compare`` on the subcommand parsers of ``gguf-bench``."""
    p = sub.add_parser("compare", help=HELP, description=__doc__)
    p.add_argument("run_ids", nargs="+", metavar="RUN_ID", help="run ids (a unique prefix, or 'last'); the first "
                   "is the baseline")
    p.add_argument("--json", action="store_true", help="the figures, ratios and cells as one JSON object")
    p.set_defaults(func=cmd_compare)
