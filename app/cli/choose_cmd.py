"""``gguf-bench choose``: which file of a set (files, folders, URLs) to run on a GPU at a context, and how."""

from __future__ import annotations

import argparse
import json
import sys

from app.choose.chooser import ChooseReport, ChooseRequest, run_choose
from app.choose.verdicts import NOT_MEASURED, FileChoice
from app.cli.arg_types import count, finite
from app.cli.errors import EXIT_OK, UserError
from app.cli.url_options import add_url_options, max_header_bytes
from app.run.params import MAX_TOKENS

_FIT = {"fits": "fits", "partial": "partial", "does_not_fit": "no fit"}


def add_choose_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("choose", help="which quantization to run on a GPU at a context (files, folders or URLs)")
    p.add_argument("models", nargs="+", metavar="MODEL_OR_DIR_OR_URL")
    p.add_argument("--hw", help='GPU profile, e.g. "RTX 4060 Laptop" (default: this machine)')
    p.add_argument("--ctx", type=count(1, MAX_TOKENS), default=8192,
                   help="context the file must hold (tokens, default 8192)")
    p.add_argument("--min-decode-tps", type=finite(0.0), help="speed floor: decode tok/s at that context")
    p.add_argument("--max-kld", type=finite(0.0), help="quality floor: the largest mean KLD accepted (where measured)")
    p.add_argument("-p", "--n-prompt", dest="n_prompt", type=count(1, MAX_TOKENS),
                   help="prompt tokens for the TTFT (default: the context less the generated tokens)")
    p.add_argument("-n", "--n-gen", dest="n_gen", type=count(0, MAX_TOKENS), default=128,
                   help="generated tokens (default 128)")
    add_url_options(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_choose)


def cmd_choose(args: argparse.Namespace) -> int:
    req = ChooseRequest(
        sources=tuple(args.models), hw=args.hw, n_ctx=args.ctx, min_decode_tps=args.min_decode_tps,
        max_kld=args.max_kld, n_prompt=args.n_prompt, n_gen=args.n_gen, store_path=args.store,
        max_header_bytes=max_header_bytes(args),
    )
    try:
        report = run_choose(req)
    except ValueError as e:
        raise UserError(str(e)) from None
    if not report.choices:
        raise UserError("no file could be read: " + "; ".join(f"{s}: {e}" for s, e in report.errors))
    if args.json:
        print(json.dumps(report.to_json_dict(), indent=2, default=str))
    else:
        print(format_report(report))
    for source, error in report.errors:
        print(f"skipped {source}: {error}", file=sys.stderr)
    return EXIT_OK


def quality_text(c: FileChoice) -> str:
    q = c.quality
    if q is None or q.mean_kld is None:
        return NOT_MEASURED
    parts = [f"KLD {q.mean_kld:.4f}"]
    if q.ppl is not None:
        parts.append(f"PPL {q.ppl:.2f}")
    if q.same_top_rate is not None:
        parts.append(f"same-top {q.same_top_rate * 100:.1f}%")
    return ", ".join(parts)


def measured_text(c: FileChoice) -> str:
    m = c.measured
    if m is None or m.decode_tps is None:
        return ""
    ttft = f", TTFT {m.ttft_ms:.0f} ms" if m.ttft_ms is not None else ""
    return f"measured here: {m.decode_tps:.1f} tok/s{ttft} ({m.settings})"


def format_report(r: ChooseReport) -> str:
    gib = 2**30
    where = "this machine" if r.this_machine else "profile"
    lines = [f"{r.profile.name} ({where}, {r.profile.vram_bytes / gib:.1f} GiB) at {r.n_ctx:,} tokens", ""]
    head = f"{'file':<34} {'type':<8} {'bpw':>5} {'MiB':>7}  {'fit':<7} {'-ngl':>4} {'KV fits':<16} " \
           f"{'memory GiB':>10}  {'TTFT ms':>9}  {'decode tok/s':<22}"
    lines += [head, "-" * len(head)]
    for c in r.choices:
        kv = ",".join(c.kv_types_fitting) or "none"
        lines.append(
            f"{c.filename[:34]:<34} {c.file_type[:8]:<8} {c.bits_per_weight:5.2f} {c.size_bytes / 2**20:7.0f}  "
            f"{_FIT[c.status]:<7} {c.n_gpu_layers:>4} {kv:<16} {c.memory_bytes / gib:10.2f}  "
            f"{c.ttft_ms.value:9.0f}  {c.decode_tps.text():<22}")
        extra = [quality_text(c), measured_text(c)]
        lines.append("    " + "; ".join(e for e in extra if e))
    sources = sorted({f"{c.decode_tps.kind} ({c.decode_tps.source})" for c in r.choices})
    lines += ["", *(f"speeds: {s}" for s in sources), *(f"note: {n}" for n in r.notes), ""]
    lines.append(r.recommendation.sentence)
    if r.recommendation.command:
        lines.append(f"  {r.recommendation.command}")
    return "\n".join(lines)
