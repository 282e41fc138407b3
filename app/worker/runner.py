"""The runner: drives an engine through a list of tests and emits events. Runs inside the worker.

A failed test becomes a failed row with its reason and the sweep goes on (llama-bench's rule).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from app.bounded_read import FileTooLarge, NotARegularFile, read_bounded_text
from app.model.facts_cache import cached_facts
from app.results import stats
from app.results.fields import RowStatus
from app.results.phases import summarise_phases
from app.results.row_types import ResultRow
from app.run.events import (
    Event,
    FailureKind,
    ModelLoaded,
    Notice,
    PhaseResult,
    RepetitionStarted,
    SweepFinished,
    SweepStarted,
    TestFailed,
    TestFinished,
    TestStarted,
    TokenTick,
)
from app.run.params import NCMOE_ALL, NCMOE_HALF, device_names, override_pairs, tensor_split_values
from app.run.plan import TestSpec
from app.run.rows import base_row
from app.telemetry.cpu_load import LoadWindow, others_cpu_pct, row_load_window
from app.worker.device_columns import check_device_limit, device_columns
from app.worker.telemetry import TestTelemetry
from engines.base import (
    ContextAllocError,
    ContextConfig,
    DecodeError,
    Engine,
    EngineError,
    InputError,
    LoadConfig,
    LoadedModel,
    ModelLoadError,
    RunSpec,
    RunTimings,
    SettingsError,
)

Emit = Callable[[Event], None]
WARMUP_MAX_GEN = 16
#: A prompt file's bytes at most (a prompt of MAX_TOKENS tokens is far smaller).
MAX_PROMPT_FILE_BYTES = 256 << 20
#: Status of a row cut short by a cancel: the repetitions timed before it, summarised as usual.
PARTIAL = "partial"


class CancelRequested(BaseException):
    """Raised by ``Runner.request_cancel`` inside the timed loop (a BaseException: no ``except Exception`` eats it)."""


def _now() -> int:
    return time.perf_counter_ns()


class Runner:
    """Runs tests in order on one engine, reusing the loaded model and context where settings allow."""

    def __init__(self, engine: Engine, emit: Emit, run_id: str = "", token_ticks: bool = True,
                 telemetry_interval_s: float | None = 0.1) -> None:
        self.engine = engine
        self.telemetry = TestTelemetry(emit, telemetry_interval_s)
        self.emit = emit
        self.run_id = run_id
        self.token_ticks = token_ticks
        self._info = engine.info()
        self._load_key: tuple[Any, ...] | None = None
        self._ctx_key: tuple[Any, ...] | None = None
        self._loaded: LoadedModel | None = None
        self._flash_attn_used: bool | None = None  # what llama.cpp chose for the context now built
        self._n_threads_used = 0  # the threads the context now built runs with (0: unknown)
        self._bad_models: dict[tuple[Any, ...], str] = {}
        self._prompt_cache: dict[str, list[int]] = {}
        self._cancel_requested = False
        self._timing = False  # inside a test's timed repetitions, where a cancel interrupts at once

    def software_facts(self) -> dict[str, Any]:
        return {
            "engine": self._info.name,
            "engine_version": self._info.version,
            "build_commit": self._info.build_commit,
            "backends": self._info.backends,
            "gpu_offload": self._info.gpu_offload,
            "system_info": self._info.system_info,
        }

    def run(self, tests: list[TestSpec], first_index: int = 0) -> tuple[int, int]:
        """Run ``tests``, numbering them from ``first_index`` (a restarted worker goes on counting)."""
        self.emit(SweepStarted(t_ns=_now(), n_tests=len(tests), tests=list(tests),
                               software=self.software_facts()))
        if not self._info.gpu_offload and any(t.n_gpu_layers != 0 for t in tests):
            gpu_only = sorted({flag for t in tests for flag in _gpu_only_settings(t)})
            also = f" ({', '.join(gpu_only)} likewise change nothing here)" if gpu_only else ""
            self.emit(Notice(t_ns=_now(), message=(
                "this llama-cpp-python build has no GPU backend (CPU only): -ngl is recorded as requested, "
                f"every layer runs on the CPU, and rows say backends=CPU, n_gpu_layers_effective=0{also}")))
        n_ok = n_failed = 0
        self.telemetry.start()
        try:
            for i, test in enumerate(tests, start=first_index):
                if self._cancel_requested:
                    break
                if self.run_test(i, test):
                    n_ok += 1
                else:
                    n_failed += 1
        except CancelRequested:
            pass  # the partial row (if any) is out; the process ends without tearing llama.cpp down
        finally:
            self.telemetry.stop()
        if not self._cancel_requested:
            self.engine.close()
        self.emit(SweepFinished(t_ns=_now(), n_ok=n_ok, n_failed=n_failed, cancelled=self._cancel_requested))
        return n_ok, n_failed

    def request_cancel(self) -> None:
        """From a signal handler: stop after this test, or at once (keeping the repetitions done) if timing one."""
        self._cancel_requested = True
        if self._timing:
            self._timing = False
            raise CancelRequested

    def _backends(self) -> str:
        """The row's ``backends``: the build's GPU backends where a layer went to a GPU, else CPU."""
        m = self._loaded
        return self._info.backends if (m and m.n_gpu_layers_effective) else "CPU"

    def _row_facts(self) -> dict[str, Any]:
        m = self._loaded
        facts: dict[str, Any] = {
            "build_commit": self._info.build_commit,
            "backends": self._backends(),
            "llama_cpp_python_version": self._info.version,
        }
        if m is not None:
            facts.update(model_type=m.description, model_size=m.size_bytes, model_n_params=m.n_params,
                         n_gpu_layers_effective=m.n_gpu_layers_effective, load_ms=m.load_ms,
                         extra_buffers=",".join(m.extra_buffers), n_tensors_overridden=m.n_tensors_overridden)
        return facts

    def _n_cpu_moe(self, test: TestSpec) -> tuple[int, int]:
        """(the row's n_cpu_moe, the layers whose expert patterns go to llama.cpp) for ``test``.

        ``all``/``half`` become a count from the GGUF's block count, recorded as that count; a count beyond the
        model's layers is recorded as asked (as llama-bench does) and sent as the layer count, since patterns for
        layers that do not exist match nothing but are still compiled against every tensor.
        """
        asked = test.n_cpu_moe
        if asked == 0:
            return 0, 0
        try:
            n_layer = cached_facts(test.model_path).n_layer
        except (OSError, ValueError) as e:
            if asked < 0:
                raise ModelLoadError(f"{test.model_path}: cannot read its layer count for -ncmoe "
                                     f"{'all' if asked == NCMOE_ALL else 'half'}: {e}") from None
            return asked, asked
        if asked == NCMOE_ALL:
            return n_layer, n_layer
        if asked == NCMOE_HALF:
            return n_layer // 2, n_layer // 2
        return asked, min(asked, n_layer)

    def _prepare(self, test: TestSpec) -> None:
        key = test.load_key()
        if key in self._bad_models:
            raise ModelLoadError(self._bad_models[key])
        if key != self._load_key:
            self._load_key = self._ctx_key = None
            self._loaded = None
            try:
                self._loaded = self.engine.load(LoadConfig(
                    model_path=test.model_path, n_gpu_layers=test.n_gpu_layers, use_extra_bufts=bool(test.repack),
                    n_cpu_moe=self._n_cpu_moe(test)[1], split_mode=test.split_mode, main_gpu=test.main_gpu,
                    tensor_split=tensor_split_values(test.tensor_split), devices=device_names(test.devices),
                    tensor_buft_overrides=override_pairs(test.tensor_buft_overrides), no_host=bool(test.no_host)))
            except ModelLoadError as e:
                self._bad_models[key] = str(e)
                raise
            self._load_key = key
            self.emit(ModelLoaded(t_ns=_now(), model_path=test.model_path, load_ms=self._loaded.load_ms,
                                  n_gpu_layers_requested=test.n_gpu_layers,
                                  n_gpu_layers_effective=self._loaded.n_gpu_layers_effective,
                                  backends=self._backends(),
                                  extra_buffers=list(self._loaded.extra_buffers)))
        ckey = test.context_key()
        if ckey != self._ctx_key:
            self._ctx_key = None
            built = self.engine.new_context(ContextConfig(
                n_ctx=test.n_ctx, n_batch=test.n_batch, n_ubatch=test.n_ubatch, n_threads=test.n_threads,
                type_k=test.type_k, type_v=test.type_v, flash_attn=test.flash_attn, n_seq_max=test.n_parallel,
                op_offload=not test.no_op_offload, offload_kqv=not test.no_kv_offload))
            self._flash_attn_used = built.flash_attn
            self._n_threads_used = built.n_threads
            self._ctx_key = ckey

    def _context_facts(self, test: TestSpec) -> dict[str, int | None]:
        """What the context really ran with: flash attention (auto resolved) and the CPU threads (0 resolved)."""
        built = self._ctx_key == test.context_key()
        return {"flash_attn_effective": self._flash_attn_effective(test),
                "n_threads_effective": (self._n_threads_used or None) if built else None}

    def _flash_attn_effective(self, test: TestSpec) -> int | None:
        """1/0: whether flash attention ran for ``test`` (auto resolved by llama.cpp); None if no context was built."""
        if self._ctx_key != test.context_key() or self._flash_attn_used is None:
            return None
        return int(self._flash_attn_used)

    def _prompt_tokens(self, test: TestSpec) -> tuple[int, ...] | None:
        if not test.prompt_file:
            return None
        if test.prompt_file not in self._prompt_cache:
            try:
                text = read_bounded_text(test.prompt_file, MAX_PROMPT_FILE_BYTES)  # a FIFO would block the worker
            except (NotARegularFile, FileTooLarge) as e:
                raise InputError(str(e)) from None
            except (OSError, UnicodeDecodeError) as e:
                raise InputError(f"{test.prompt_file}: cannot read prompt file ({e.__class__.__name__})") from None
            toks = self.engine.tokenize(text)
            if not toks:
                raise InputError(f"{test.prompt_file}: prompt file gives no tokens")
            self._prompt_cache[test.prompt_file] = toks
        toks = self._prompt_cache[test.prompt_file]
        reps = -(-test.n_prompt // len(toks))
        return tuple((toks * reps)[: test.n_prompt])

    def run_test(self, index: int, test: TestSpec) -> bool:
        self.emit(TestStarted(t_ns=_now(), test_index=index, test=test))
        row = base_row(test, index, self.run_id)
        self.telemetry.begin_test()
        try:
            row = row.replace(n_cpu_moe=self._n_cpu_moe(test)[0])
            self._prepare(test)
            check_device_limit(self.engine.memory_report(), test.device_mem_limit_mib)
            prompt = self._prompt_tokens(test)
            spec = RunSpec(n_prompt=test.n_prompt, n_gen=test.n_gen, n_depth=test.n_depth,
                           n_parallel=test.n_parallel, prompt_tokens=prompt)
            starts, prefill_ends, tokens, counters = [], [], [], []
            self._timing = not self._cancel_requested
            load: LoadWindow | None = None
            try:
                warm = self._one(index, -1, replace(spec, n_gen=min(spec.n_gen, WARMUP_MAX_GEN), seed=spec.seed - 1))
                load = row_load_window().start()  # others' CPU use over the timed repetitions: two readings a test
                for rep in range(test.repetitions):
                    if self._cancel_requested:
                        raise CancelRequested
                    t = self._one(index, rep, replace(spec, seed=spec.seed + rep))
                    starts.append(t.start_ns)
                    prefill_ends.append(t.prefill_end_ns)
                    tokens.append(t.token_ns)
                    counters.append(t.engine_counters)
            finally:
                self._timing = False
        except CancelRequested:
            if starts:
                row = row.replace(host_other_cpu_pct=others_cpu_pct(load.stop()) if load is not None else None)
                self._emit_partial(index, test, row, (starts, prefill_ends, tokens))
            raise
        except EngineError as e:
            facts = self._context_facts(test)
            self._ctx_key = None  # rebuild the context before the next test: its state is unknown now
            kind = failure_kind(e)
            row = row.replace(**self._row_facts(), **facts)
            row = row.replace(status=RowStatus.FAILED, error=str(e), error_kind=kind)
            row = row.replace(**device_columns(self.engine.memory_report()))
            self.emit(TestFailed(t_ns=_now(), test_index=index, reason=str(e), row=row, kind=kind))
            return False
        row = row.replace(host_other_cpu_pct=others_cpu_pct(load.stop()) if load is not None else None)
        row = row.replace(**self._row_facts(), **self._context_facts(test))
        row = row.replace(**summarise_phases(test, starts, prefill_ends, tokens))
        # llama.cpp counts a multi-token batch as prompt work, so with several sequences its decode steps land in
        # its prompt counter: its rates only cross-check single-sequence tests
        row = row.replace(**(_engine_rates(counters) if test.n_parallel == 1 else
                             {"llama_prefill_tps": None, "llama_decode_tps": None}))
        row = row.replace(**self.telemetry.end_test(test))
        mem = self.engine.memory_report()
        if mem is not None:
            row = row.replace(llama_weights_bytes=mem.weights_bytes, llama_kv_bytes=mem.kv_bytes,
                              llama_compute_bytes=mem.compute_bytes, llama_mem_bytes=mem.total_bytes)
            row = row.replace(**device_columns(mem))
        wt = warm.prefill_end_ns - warm.start_ns
        row = row.replace(
            warmup_ttft_ms=wt / 1e6 if test.n_prompt else None,
            warmup_decode_tps=(len(warm.token_ns) / ((warm.token_ns[-1] - warm.prefill_end_ns) / 1e9)
                               if warm.token_ns else None),
            status=RowStatus.OK)
        self.emit(TestFinished(t_ns=_now(), test_index=index, row=row))
        return True

    def _emit_partial(self, index: int, test: TestSpec, row: ResultRow,
                      phases: tuple[list[int], list[int], list[list[int]]]) -> None:
        """A test cancelled mid-way keeps the repetitions it timed: status 'partial', and how many in the error."""
        done = len(phases[0])
        row = row.replace(**self._row_facts(), **self._context_facts(test))
        row = row.replace(**summarise_phases(test, *phases))
        row = row.replace(n_repetitions=done, status=PARTIAL, error_kind=FailureKind.CANCELLED,
                          error=f"cancelled after {done} of {test.repetitions} repetitions")
        self.emit(TestFinished(t_ns=_now(), test_index=index, row=row))

    def _one(self, index: int, rep: int, spec: RunSpec) -> RunTimings:
        self.emit(RepetitionStarted(t_ns=_now(), test_index=index, rep=rep))
        on_token = None
        if self.token_ticks:
            def on_token(k: int, n_past: int) -> None:
                self.emit(TokenTick(t_ns=_now(), test_index=index, rep=rep, token_index=k, n_past=n_past,
                                    n_seq=spec.n_parallel))
        t = self.engine.run(spec, on_token)
        if rep >= 0:
            self.telemetry.add_phases(t, spec.n_gen * spec.n_parallel)
        if spec.n_prompt:
            self.emit(PhaseResult(t_ns=_now(), test_index=index, rep=rep, phase="prefill",
                                  n_tokens=spec.n_prompt * spec.n_parallel, start_ns=t.start_ns,
                                  end_ns=t.prefill_end_ns))
        if t.token_ns:
            self.emit(PhaseResult(t_ns=_now(), test_index=index, rep=rep, phase="decode",
                                  n_tokens=len(t.token_ns) * spec.n_parallel, start_ns=t.prefill_end_ns,
                                  end_ns=t.token_ns[-1]))
        return t


def _gpu_only_settings(test: TestSpec) -> list[str]:
    """The flags of ``test`` that place work on GPUs and so do nothing on a CPU-only build (set to a non-default)."""
    return [flag for flag, on in (("-ncmoe", test.n_cpu_moe != 0), ("-sm", test.split_mode != "layer"),
                                  ("-mg", test.main_gpu != 0),
                                  ("-ts", bool(tensor_split_values(test.tensor_split))),
                                  ("-nkvo", bool(test.no_kv_offload)), ("--no-host", bool(test.no_host))) if on]


def failure_kind(error: EngineError) -> FailureKind:
    """The typed kind of an engine error, from its class (never from its message)."""
    for cls, kind in ((ModelLoadError, FailureKind.LOAD_ERROR), (ContextAllocError, FailureKind.OUT_OF_MEMORY),
                      (DecodeError, FailureKind.DECODE_ERROR), (InputError, FailureKind.BAD_INPUT),
                      (SettingsError, FailureKind.UNSUPPORTED_SETTINGS)):
        if isinstance(error, cls):
            return kind
    return FailureKind.ENGINE_ERROR


def _engine_rates(counters: list[dict[str, float]]) -> dict[str, float | None]:
    """llama.cpp's own prompt and generation rates (llama_perf_context), averaged over repetitions."""
    pp = [c["n_p_eval"] / (c["t_p_eval_ms"] / 1e3) for c in counters if c.get("n_p_eval") and c.get("t_p_eval_ms")]
    tg = [c["n_eval"] / (c["t_eval_ms"] / 1e3) for c in counters if c.get("n_eval") and c.get("t_eval_ms")]
    return {"llama_prefill_tps": stats.mean(pp), "llama_decode_tps": stats.mean(tg)}
