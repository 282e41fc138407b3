"""``gguf-bench choose``: which file of a set (files, folders, URLs) to run on a GPU at a context, and how."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from app.choose.choice_text import measured_text, placement_flags, quality_text
from app.choose.chooser import (
    CHOOSE_SCHEMA_VERSION,
    DEFAULT_MARGIN_MIB,
    THIS_MACHINE,
    ChooseReport,
    ChooseRequest,
    context_problem,
    run_choose,
)
from app.choose.measure_search import (
    MEASURE_N_GEN,
    MEASURE_N_PROMPT,
    MEASURE_REPETITIONS,
    MeasuredAnswer,
    Measurer,
    measure_toward_floor,
    step_line,
)
from app.choose.verdicts import kv_fits_text
from app.cli.arg_types import add_margin_option, count, counts, finite, ram_gib_arg
from app.cli.errors import EXIT_CANCELLED, EXIT_OK, UserError, print_line
from app.cli.json_docs import json_text
from app.cli.power_options import add_power_options
from app.cli.url_options import add_url_options, max_header_bytes, url_deadline_s
from app.model.gguf_http import is_url
from app.model.library import MAX_FILES_PER_FOLDER
from app.paths import DataDirError, absolute_path
from app.predict.answer import Machine
from app.predict.expected_quality import EXCHANGE_KLD, PREFERENCES
from app.run.params import MAX_TOKENS
from app.telemetry.machine import ProbeMode, scan_machine

_FIT = {"fits": "fits", "partial": "partial", "does_not_fit": "no fit"}


def add_choose_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("choose", help="which quantization to run on a GPU at a context (files, folders or URLs)")
    p.add_argument("models", nargs="+", metavar="MODEL_OR_DIR_OR_URL")
    p.add_argument("--hw", help='GPU profile, e.g. "RTX 4060 Laptop" (default: this machine)')
    p.add_argument("--ctx", type=counts(1, MAX_TOKENS), default=(8192,),
                   help="context the file must hold (tokens, default 8192); several, comma-separated "
                        "(4096,8192,32768), give one answer each")
    p.add_argument("--min-decode-tps", type=finite(0.0), help="speed floor: decode tok/s at that context")
    p.add_argument("--max-kld", type=finite(0.0), help="quality floor: the largest mean KLD accepted (where measured)")
    p.add_argument("--ram", dest="ram_gib", type=ram_gib_arg, metavar="GiB",
                   help="system RAM of the machine around the GPU, for placements that keep layers or experts in it "
                        "(default: this machine's for its own hardware; for a GPU named by --hw an assumption: 16 "
                        "GiB beside a laptop GPU, 32 beside a desktop one, said so); the OS's share is held back")
    add_margin_option(p)
    p.add_argument("--prefer", choices=PREFERENCES, default="balanced",
                   help="how the pick weighs expected quality against speed: 1.5x of decode speed is worth "
                        + ", ".join(f"{v:g} KLD ({k})" for k, v in EXCHANGE_KLD.items()) + "; default balanced")
    p.add_argument("-p", "--n-prompt", dest="n_prompt", type=count(1, MAX_TOKENS),
                   help="prompt tokens for the TTFT (default: the context less the generated tokens)")
    p.add_argument("-n", "--n-gen", dest="n_gen", type=count(0, MAX_TOKENS), default=128,
                   help="generated tokens (default 128)")
    add_power_options(p)
    add_url_options(p)
    p.add_argument("--measure", action="store_true",
                   help=f"measure on this machine, best quality first, until a file meets --min-decode-tps: short "
                        f"tests (-p {MEASURE_N_PROMPT} -n {MEASURE_N_GEN} -r {MEASURE_REPETITIONS}) in a worker, "
                        f"stored and cached; files the prediction rules out are not run")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_choose)


def check_measure_flags(args: argparse.Namespace) -> None:
    """--measure needs a speed floor and this machine: one UserError line otherwise."""
    if not args.measure:
        return
    if args.min_decode_tps is None:
        raise UserError("--measure needs --min-decode-tps: the speed floor the search measures toward")
    if (args.hw or "").strip().lower() not in THIS_MACHINE:
        raise UserError(f"--measure runs on this machine only; --hw {args.hw!r} is a profile, not this machine "
                        f"(drop --hw, or drop --measure for a prediction)")


def cmd_choose(args: argparse.Namespace) -> int:
    contexts = tuple(args.ctx) if isinstance(args.ctx, (tuple, list)) else (int(args.ctx),)
    for n_ctx in contexts:  # before anything is read or measured
        problem = context_problem(n_ctx, args.n_prompt, args.n_gen)
        if problem:
            raise UserError(problem)
    if len(contexts) > 1:
        return _choose_contexts(args, contexts)
    args.ctx = contexts[0]
    check_measure_flags(args)
    req = _request(args, contexts[0])
    scan = scan_machine(ProbeMode.RUN) if args.measure else None  # one look: the chooser's and the cache's hardware
    try:
        report = run_choose(req, scan=scan)
    except ValueError as e:
        raise UserError(str(e)) from None
    if not report.choices:
        raise none_read(report.errors)
    say_skipped(report.errors, len(report.choices) + len(report.errors))
    measured = _measure(args, report, scan.run_facts()) if scan is not None else None
    if args.json:
        doc = report.to_json_dict()
        if measured is not None:
            doc["measure"] = measured.to_json_dict()
        print(json_text(doc, CHOOSE_SCHEMA_VERSION, indent=2, default=str))
    else:
        print(format_report(report))
        if measured is not None:
            print("\n" + format_measured(measured))
    return EXIT_CANCELLED if measured is not None and measured.result.cancelled else EXIT_OK


def _request(args: argparse.Namespace, n_ctx: int) -> ChooseRequest:
    return ChooseRequest(
        sources=tuple(_absolute(s) for s in args.models), hw=args.hw, n_ctx=n_ctx, min_decode_tps=args.min_decode_tps,
        max_kld=args.max_kld, n_prompt=args.n_prompt, n_gen=args.n_gen, store_path=args.store,
        max_header_bytes=max_header_bytes(args), url_deadline_s=url_deadline_s(args),
        ram_gib=getattr(args, "ram_gib", None),
        prefer=getattr(args, "prefer", "balanced"), margin_mib=getattr(args, "margin_mib", DEFAULT_MARGIN_MIB),
        power_limit_w=getattr(args, "power_limit_w", None), on_battery=bool(getattr(args, "on_battery", False)),
    )


#: Files a choose names as skipped, one line each; the rest are counted (a folder of 10,000 files once printed 4,999
#: lines), and --json lists every one.
MAX_SKIPPED_SHOWN = 5


def say_skipped(errors: list[tuple[str, str]], n_files: int = 0) -> None:
    """The files that could not be read: the first few, one line each, then how many more; and that a folder is
    read up to its first MAX_FILES_PER_FOLDER files, when ``n_files`` (read and skipped) reached it."""
    for source, error in errors[:MAX_SKIPPED_SHOWN]:
        print_line(f"skipped {source}: {error}")  # a source's name: one line, whatever it holds
    if len(errors) > MAX_SKIPPED_SHOWN:
        print(f"skipped {len(errors) - MAX_SKIPPED_SHOWN:,} more files that could not be read (--json lists every "
              "one)", file=sys.stderr)
    if n_files >= MAX_FILES_PER_FOLDER:
        print(f"note: a folder is read up to its first {MAX_FILES_PER_FOLDER:,} GGUF files (in name order)",
              file=sys.stderr)


def none_read(errors: list[tuple[str, str]]) -> UserError:
    """The one line saying no file could be read: the first causes, and how many more."""
    shown = "; ".join(f"{s}: {e}" for s, e in errors[:3])
    more = f"; and {len(errors) - 3:,} more" if len(errors) > 3 else ""
    return UserError(f"no file could be read: {shown}{more}")


def _absolute(source: str) -> str:
    """A file or folder made absolute (the measured search's worker runs in another folder); a URL as given."""
    if is_url(source):
        return source
    try:
        return str(absolute_path(source, "choose"))
    except DataDirError as e:
        raise UserError(str(e)) from None


def _choose_contexts(args: argparse.Namespace, contexts: tuple[int, ...]) -> int:
    """One answer per context (--ctx 4096,8192,…): the reports in turn, then a line per context; JSON: a list."""
    if args.measure:
        raise UserError(f"--measure takes one --ctx (got {len(contexts)}: {','.join(map(str, contexts))})")
    this = (args.hw or "").strip().lower() in THIS_MACHINE
    # one look at the machine for every context (its profiles, fit, stored rows and the public fit were read again
    # for each); none of this machine for a GPU named by --hw
    machine = Machine.load(scan_machine(ProbeMode.RUN), store_path=args.store) if this else Machine.elsewhere()
    reports = []
    for n_ctx in contexts:
        try:
            report = run_choose(_request(args, n_ctx), machine=machine)
        except ValueError as e:
            raise UserError(str(e)) from None
        if not report.choices:
            raise none_read(report.errors)
        reports.append(report)
    say_skipped(reports[0].errors, len(reports[0].choices) + len(reports[0].errors))
    if args.json:
        print(json_text({"contexts": [r.to_json_dict() for r in reports]}, CHOOSE_SCHEMA_VERSION, indent=2,
                        default=str))
        return EXIT_OK
    print("\n\n".join(format_report(r) for r in reports))
    print("\nBy context:")
    for r in reports:
        c = r.recommendation.choice
        pick = (f"{c.filename}, {c.placement or 'on the CPU'}, {c.type_k} KV, {c.decode_tps.text()} tok/s"
                if c is not None else "no file")
        print(f"  {r.n_ctx:>7,} tokens: {pick}")
    return EXIT_OK


def _say(line: str) -> None:
    print_line(f"gguf-bench: {line}")


def _measure(args: argparse.Namespace, report: ChooseReport, machine: dict[str, Any]) -> MeasuredAnswer:
    """The measured search on this machine, its progress on stderr; Ctrl-C (or SIGTERM) stops the test under way."""
    start = time.perf_counter()
    n_prompt = args.n_prompt or max(1, report.n_ctx - args.n_gen)
    measurer = Measurer(report.n_ctx, machine, ttft_prompt_tokens=n_prompt, store_path=args.store,
                        progress=_say, command=" ".join(sys.argv))
    _say(f"measuring toward {args.min_decode_tps:g} tok/s at {report.n_ctx:,} tokens, best quality first "
         f"(-p {MEASURE_N_PROMPT} -n {MEASURE_N_GEN} -r {MEASURE_REPETITIONS} each)")
    restore = _cancel_on_signals(measurer.cancel)
    try:
        measured = measure_toward_floor(
            report.choices, args.min_decode_tps, measurer, max_kld=args.max_kld, profile_kind=report.profile.kind,
            on_step=lambda step: _say(step_line(step)))
    finally:
        restore()
    _say(f"{measured.counts} in {time.perf_counter() - start:,.2f} s")
    return measured


def _cancel_on_signals(cancel: Callable[[], None]) -> Callable[[], None]:
    """Ctrl-C and SIGTERM stop the test under way (the worker is killed) and end the search with what it has; a
    second signal interrupts at once. Returns what puts the previous handlers back."""
    asked: list[int] = []

    def interrupt(signum: int, frame: object) -> None:
        if asked:
            raise KeyboardInterrupt
        asked.append(signum)
        threading.Thread(target=cancel, name="cancel", daemon=True).start()  # never take a lock in a handler

    old = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGINT, signal.SIGTERM)}

    def restore() -> None:
        for sig, handler in old.items():
            signal.signal(sig, handler)

    return restore


def format_measured(m: MeasuredAnswer) -> str:
    """The measured answer: the tests (measured now or from the cache), the count, the pick and its command."""
    lines = [f"Measured toward {m.result.min_decode_tps:g} tok/s at {m.n_ctx:,} tokens "
             f"(-p {MEASURE_N_PROMPT} -n {MEASURE_N_GEN} -r {MEASURE_REPETITIONS} per test):"]
    for t in m.tests:
        where = "from cache" if t.from_cache else "measured"
        depth = f"; {t.depth_note}, scaled to the context" if t.depth_note else ""
        lines.append(f"  {t.candidate.label}: {t.at_context_tps:,.1f} tok/s at the context ({where}: "
                     f"{t.decode_tps:,.1f} at depth {t.n_depth:,}{depth}){' ⚠ unstable' if t.unstable else ''}")
    if m.result.placement_note:
        lines.append(f"  note: {m.result.placement_note}")
    lines += [m.counts, m.sentence]
    if m.command:
        lines.append(f"  {m.command}")
    return "\n".join(lines)


def format_report(r: ChooseReport) -> str:
    """The files' table at one context (decode at the context and from an empty cache, each labelled), each
    file's placement, quality and measurement, where each file's speed comes from, and the answer."""
    gib = 2**30
    where = "this machine" if r.this_machine else "profile"
    lines = [f"{r.profile.name} ({where}, {r.profile.vram_bytes / gib:.1f} GiB) at {r.n_ctx:,} tokens", ""]
    depth = max((c.decode_depth for c in r.choices), default=0)
    places = {id(c): placement_flags(c) for c in r.choices}
    pw = max([18, *map(len, places.values())])  # "-ngl 49 -ncmoe 30 q8_0" must not push the columns after it
    head = f"{'file':<34} {'type':<8} {'bpw':>5} {'MiB':>7}  {'fit':<7} {'placement':<{pw}} {'KV fits':<16} " \
           f"{'memory GiB':>10}  {'TTFT ms':<26} {f'decode tok/s @{depth:,}':<24} {'empty cache':>11} " \
           f"{'expected KLD':<16}"
    lines += [head, "-" * len(head)]
    for c in r.choices:
        empty = f"{c.decode_empty_tps.value:11.1f}" if c.decode_empty_tps is not None else f"{'':>11}"
        q = c.total_quality
        kld = f"{q.kld:.4f} {q.kind}" if q is not None else ""
        lines.append(
            f"{c.filename[:34]:<34} {c.file_type[:8]:<8} {c.bpw_text:>5} {c.size_bytes / 2**20:7.0f}  "
            f"{_FIT[c.status]:<7} {places[id(c)]:<{pw}} {kv_fits_text(c):<16} {c.memory_bytes / gib:10.2f}  "
            f"{c.ttft_ms.text('{:,.0f}'):<26} {c.decode_tps.text():<24} {empty} {kld:<16}")
        extra = [c.placement, quality_text(c), measured_text(c),
                 f"requantized from {c.requantized_from}" if c.requantized_from else ""]
        lines.append("    " + "; ".join(e for e in extra if e))
    by_source: dict[str, list[str]] = {}
    for c in r.choices:
        by_source.setdefault(f"{c.decode_tps.kind} ({c.decode_tps.source.text()})", []).append(c.filename)
    lines.append("")
    for source, names in by_source.items():
        who = "every file" if len(names) == len(r.choices) > 1 else ", ".join(names)
        lines.append(f"speed of {who}: {source}")
    margin = next((c.margin_bytes for c in r.choices if c.margin_bytes), 0)
    lines += [f"decode is at depth {depth:,} (the prompt and half the generated tokens); 'empty cache' is "
              f"llama-bench's tg128, from an empty cache (depth 64 on average); a TTFT or decode marked 'ceiling' is "
              "the least (TTFT) or most (decode) the hardware allows, not an expected figure",
              *([f"memory: every placement keeps {margin / gib:.1f} GiB of the GPU free (--margin; llama.cpp's "
                 "--fit-target default)"] if margin else []),
              *(f"note: {n}" for n in r.notes), ""]
    rec = r.recommendation
    if rec.per_model:  # one answer per model, each with its command
        lines.append(rec.sentence.split(" Per model: ")[0])
        for name, one in rec.per_model:
            lines.append(f"- {name}: {one.sentence}")
            if one.command:
                lines.append(f"    {one.command}")
        if rec.command:
            lines.append(f"  {rec.command}")
        return "\n".join(lines)
    lines.append(rec.sentence)
    if rec.command:
        lines.append(f"  {rec.command}")
    return "\n".join(lines)
