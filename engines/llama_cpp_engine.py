"""The llama.cpp engine, through llama-cpp-python's low-level C API. The only importer of llama_cpp.

Timing follows llama-bench: the prompt goes in ``n_batch``-sized llama_decode calls with logits for
the last token only, then one llama_decode per generated token, fed pre-drawn token ids. We also
sample the first token (greedy, in C), so it is really available when TTFT is stamped. Batches are
built before the clock starts; the timed path is llama_decode, llama_synchronize and perf_counter_ns.
"""

from __future__ import annotations

import ctypes
import os
import random
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from engines.base import (
    FLASH_ATTN_AUTO,
    FLASH_ATTN_OFF,
    FLASH_ATTN_ON,
    HOST_DEVICE,
    ContextAllocError,
    ContextConfig,
    ContextInfo,
    DecodeError,
    EngineInfo,
    EngineUnavailable,
    LoadConfig,
    LoadedModel,
    MemoryReport,
    ModelLoadError,
    RunSpec,
    RunTimings,
    SettingsError,
    TokenCallback,
    resolve_n_threads,
)
from engines.device_buffers import memory_report
from engines.ggml_devices import ggml_libraries, query_registry
from engines.llama_cpp_placement import OVERRIDDEN, Placement, build_placement, note_log_line
from engines.llama_log import (
    clear_lines,
    context_memory,
    device_buffers,
    flash_attn_used,
    keep_line,
    last_error,
    layers_per_device,
    offloaded_layers,
    settings_refused,
    weight_extra_buffers,
)

try:
    import llama_cpp as lc
except Exception as e:  # pragma: no cover - depends on the install
    raise EngineUnavailable(f"llama-cpp-python is not usable: {e}") from e

GGML_TYPES: dict[str, int] = {
    "f32": lc.GGML_TYPE_F32,
    "f16": lc.GGML_TYPE_F16,
    "bf16": 30,  # GGML_TYPE_BF16
    "q8_0": lc.GGML_TYPE_Q8_0,
    "q4_0": lc.GGML_TYPE_Q4_0,
    "q4_1": lc.GGML_TYPE_Q4_1,
    "q5_0": lc.GGML_TYPE_Q5_0,
    "q5_1": lc.GGML_TYPE_Q5_1,
}

_log_file = None
_backend_ready = False


@lc.llama_log_callback
def _on_log(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:  # pragma: no cover - C callback
    msg = text.decode("utf-8", "replace") if text else ""
    note_log_line(msg)
    if keep_line(level, msg) and _log_file is not None:
        _log_file.write(msg)


def _init_backend(log_path: str | None = None) -> None:
    """Start llama.cpp once per process, with its log captured instead of printed."""
    global _backend_ready, _log_file
    if _backend_ready:
        return
    if log_path:
        _log_file = open(log_path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115 - process lifetime
    lc.llama_log_set(_on_log, ctypes.c_void_p(0))
    lc.llama_backend_init()
    _backend_ready = True


_FLASH_ATTN_TYPES: dict[int, int] = {
    FLASH_ATTN_AUTO: lc.LLAMA_FLASH_ATTN_TYPE_AUTO,
    FLASH_ATTN_OFF: lc.LLAMA_FLASH_ATTN_TYPE_DISABLED,
    FLASH_ATTN_ON: lc.LLAMA_FLASH_ATTN_TYPE_ENABLED,
}
_FLASH_ATTN_NAMES = {FLASH_ATTN_AUTO: "auto", FLASH_ATTN_OFF: "0", FLASH_ATTN_ON: "1"}


def _lib_dir() -> Path:
    """The folder of the libraries llama_cpp loaded (its LLAMA_CPP_LIB_PATH override too)."""
    return Path(os.environ.get("LLAMA_CPP_LIB_PATH") or Path(lc.__file__).parent / "lib")


def _ggml_build() -> tuple[str, str]:
    """(commit, version) of the ggml this llama-cpp-python was built with."""
    try:
        lib = ctypes.CDLL(str(ggml_libraries(_lib_dir())[1]))  # libllama's own copy, not a second one
        lib.ggml_commit.restype = ctypes.c_char_p
        lib.ggml_version.restype = ctypes.c_char_p
        return lib.ggml_commit().decode(), lib.ggml_version().decode()
    except (OSError, AttributeError):
        return "unknown", "unknown"


def _backends(gpu_offload: bool) -> str:
    """The GPU backends ggml's registry holds, then CPU ("Vulkan,CPU"; llama-bench's backends column, CPU added)."""
    if not gpu_offload:
        return "CPU"
    try:  # the libraries llama_cpp loaded, already initialised in this process
        names = query_registry(_lib_dir()).backends
    except (OSError, AttributeError):
        names = []
    gpu = [n for n in names if n not in ("CPU", "BLAS", "RPC")]
    return ",".join([*gpu, "CPU"]) if gpu else "GPU,CPU"


class LlamaCppEngine:
    """Engine over llama.cpp; one model and one context at a time."""

    def __init__(self, log_path: str | None = None) -> None:
        _init_backend(log_path)
        self._model = None
        self._ctx = None
        self._vocab = None
        self._sampler = None
        self._ctx_cfg: ContextConfig | None = None
        self._filled: tuple[int, int] | None = None  # (depth, sequences) now in the KV cache
        self._n_vocab = 0
        self._model_path = ""
        self._load_reported: dict[str, dict[str, float]] = {}  # per device, as logged (engines.device_buffers)
        self._ctx_reported: dict[str, dict[str, float]] = {}
        self._layers: dict[str, int] = {}
        self._placement: Placement | None = None  # the C arrays of the loaded model's placement, kept alive

    # --- facts -------------------------------------------------------------------------------
    def info(self) -> EngineInfo:
        commit, version = _ggml_build()
        system_info = lc.llama_print_system_info().decode("utf-8", "replace").strip()
        gpu = bool(lc.llama_supports_gpu_offload())
        return EngineInfo(
            name="llama.cpp",
            version=f"llama-cpp-python {lc.__version__}, ggml {version}",
            build_commit=commit,
            backends=_backends(gpu),
            gpu_offload=gpu,
            system_info=system_info,
        )

    # --- model and context -----------------------------------------------------------------------
    def _model_params(self, cfg: LoadConfig, load_mode: int,
                      no_alloc: bool = False) -> tuple[Path, lc.llama_model_params, Placement]:
        """After closing any model: the file (ModelLoadError if it is not there), llama.cpp's model parameters for
        ``cfg`` with its placement applied (SettingsError for a device or buffer type not here), and the placement;
        llama.cpp's log lines cleared, so what it logs next is this load's."""
        self.close()
        path = Path(cfg.model_path)
        if not path.is_file():
            raise ModelLoadError(f"{path}: file not found")
        params = lc.llama_model_default_params()
        params.n_gpu_layers = cfg.n_gpu_layers
        params.main_gpu = cfg.main_gpu
        params.load_mode = load_mode
        params.no_alloc = no_alloc
        params.use_extra_bufts = cfg.use_extra_bufts
        params.no_host = cfg.no_host
        placement = build_placement(cfg, _lib_dir())
        placement.apply(params)
        clear_lines()
        return path, params, placement

    def load(self, cfg: LoadConfig) -> LoadedModel:
        path, params, self._placement = self._model_params(
            cfg, lc.LLAMA_LOAD_MODE_MMAP if cfg.use_mmap else lc.LLAMA_LOAD_MODE_NONE)
        OVERRIDDEN.clear()
        t0 = time.perf_counter_ns()
        model = lc.llama_model_load_from_file(str(path).encode("utf-8"), params)
        load_ms = (time.perf_counter_ns() - t0) / 1e6
        if not model:
            raise ModelLoadError(f"{path}: llama.cpp could not load it: {last_error('unknown reason')}")
        self._model = model
        self._model_path = str(path)
        self._load_reported, self._layers, offloaded = device_buffers(), layers_per_device(), offloaded_layers()
        self._vocab = lc.llama_model_get_vocab(model)
        self._n_vocab = lc.llama_vocab_n_tokens(self._vocab)
        n_layer = lc.llama_model_n_layer(model)
        desc = ctypes.create_string_buffer(256)
        lc.llama_model_desc(model, desc, ctypes.sizeof(desc))
        gpu = bool(lc.llama_supports_gpu_offload())
        ngl = cfg.n_gpu_layers if cfg.n_gpu_layers >= 0 else n_layer + 1
        if self._layers:  # where llama.cpp put each layer: "offloaded N/M layers" counts -ngl even with -dev none
            offloaded = sum(n for device, n in self._layers.items() if device != HOST_DEVICE)
        return LoadedModel(
            load_ms=load_ms,
            n_gpu_layers_effective=offloaded if offloaded is not None else min(ngl, n_layer + 1) if gpu else 0,
            n_vocab=self._n_vocab,
            n_layer=n_layer,
            size_bytes=int(lc.llama_model_size(model)),
            n_params=int(lc.llama_model_n_params(model)),
            description=desc.value.decode("utf-8", "replace"),
            extra_buffers=tuple(weight_extra_buffers()),
            n_tensors_overridden=len(OVERRIDDEN),
        )

    def dry_run(self, cfg: LoadConfig, contexts: Sequence[ContextConfig],
                on_context: Callable[[dict[str, object]], None] | None = None) -> dict[str, object]:
        """llama.cpp's dry run of a model file: loaded with ``no_alloc`` (no weight read, nothing allocated; it needs
        load mode none) and a context created at each of ``contexts``, as llama.cpp's ``--fit`` measures: what the
        KV cache, the recurrent state and the compute and output buffers of each would take (llama_log.context_memory,
        with ``n_ctx`` and the request added), handed to ``on_context`` as each is known. Returns the model's own
        figures: ``size_bytes`` (llama_model_size: the weights it loads), ``n_params``, ``n_layer``, ``description``.
        The weights' buffers log 0 under no_alloc; a context llama.cpp refuses is an entry with ``error``."""
        path, params, _placement = self._model_params(cfg, lc.LLAMA_LOAD_MODE_NONE, no_alloc=True)  # no_alloc needs
        # load mode none: nothing is mapped
        model = lc.llama_model_load_from_file(str(path).encode("utf-8"), params)
        if not model:
            raise ModelLoadError(f"{path}: llama.cpp could not load it: {last_error('unknown reason')}")
        try:
            desc = ctypes.create_string_buffer(256)
            lc.llama_model_desc(model, desc, ctypes.sizeof(desc))
            facts: dict[str, object] = {"size_bytes": int(lc.llama_model_size(model)),
                                        "n_params": int(lc.llama_model_n_params(model)),
                                        "n_layer": int(lc.llama_model_n_layer(model)),
                                        "description": desc.value.decode("utf-8", "replace")}
            for c in contexts:
                params_c = lc.llama_context_default_params()
                params_c.n_ctx, params_c.n_batch, params_c.n_ubatch = c.n_ctx, c.n_batch, c.n_ubatch
                params_c.n_seq_max = c.n_seq_max
                params_c.n_threads = params_c.n_threads_batch = resolve_n_threads(c.n_threads)
                params_c.type_k, params_c.type_v = GGML_TYPES[c.type_k], GGML_TYPES[c.type_v]
                params_c.flash_attn_type = _FLASH_ATTN_TYPES[c.flash_attn]
                params_c.swa_full, params_c.op_offload, params_c.offload_kqv = c.swa_full, c.op_offload, c.offload_kqv
                clear_lines()
                ctx = lc.llama_init_from_model(model, params_c)
                got: dict[str, object] = {"n_ctx": c.n_ctx, "n_batch": c.n_batch, "n_ubatch": c.n_ubatch,
                                          "type_k": c.type_k, "type_v": c.type_v, "flash_attn": c.flash_attn,
                                          "swa_full": c.swa_full}
                if ctx:
                    got.update(context_memory())
                    got["flash_attn_used"] = flash_attn_used(c.flash_attn)
                    lc.llama_free(ctx)
                else:
                    got["error"] = last_error("llama.cpp refused the context")
                if on_context is not None:
                    on_context(got)
            return facts
        finally:
            lc.llama_model_free(model)

    def new_context(self, cfg: ContextConfig) -> ContextInfo:
        if self._model is None:
            raise ModelLoadError("no model loaded")
        self._free_context()
        params = lc.llama_context_default_params()
        params.n_ctx = cfg.n_ctx
        params.n_batch = cfg.n_batch
        params.n_ubatch = cfg.n_ubatch
        params.n_seq_max = cfg.n_seq_max
        threads = resolve_n_threads(cfg.n_threads)
        params.n_threads = threads
        params.n_threads_batch = threads
        params.type_k = GGML_TYPES[cfg.type_k]
        params.type_v = GGML_TYPES[cfg.type_v]
        params.flash_attn_type = _FLASH_ATTN_TYPES[cfg.flash_attn]
        params.no_perf = False
        params.swa_full = cfg.swa_full  # the C default is true; llama-bench passes false, and so do we
        params.op_offload = cfg.op_offload
        params.offload_kqv = cfg.offload_kqv
        clear_lines()
        ctx = lc.llama_init_from_model(self._model, params)
        if not ctx:
            error = SettingsError if settings_refused() else ContextAllocError
            raise error(
                f"{self._model_path}: cannot allocate a context of {cfg.n_ctx} tokens "
                f"(type_k={cfg.type_k}, type_v={cfg.type_v}, flash_attn={_FLASH_ATTN_NAMES[cfg.flash_attn]}): "
                f"{last_error('out of memory or unsupported settings')}"
            )
        self._ctx = ctx
        self._ctx_cfg = cfg
        self._ctx_reported = device_buffers()
        self._sampler = lc.llama_sampler_init_greedy()
        return ContextInfo(flash_attn=flash_attn_used(cfg.flash_attn), n_threads=threads)

    def tokenize(self, text: str) -> list[int]:
        if self._vocab is None:
            raise ModelLoadError("no model loaded")
        data = text.encode("utf-8")
        n_max = len(data) + 16
        buf = (lc.llama_token * n_max)()
        n = lc.llama_tokenize(self._vocab, data, len(data), buf, n_max, True, False)
        if n < 0:
            buf = (lc.llama_token * -n)()
            n = lc.llama_tokenize(self._vocab, data, len(data), buf, -n, True, False)
        return list(buf[:n])

    def memory_report(self) -> MemoryReport | None:
        """What llama.cpp logged allocating for the loaded model and context (bytes), in all and per device."""
        if self._model is None:
            return None
        return memory_report(self._load_reported, self._ctx_reported if self._ctx is not None else {}, self._layers)

    # --- the timed run ---------------------------------------------------------------------------
    def _batches(self, items: list[tuple[int, int, int, bool]], size: int) -> list[lc.llama_batch]:
        """Pre-built llama_batch chunks of (token, pos, seq, want_logits)."""
        out = []
        for start in range(0, len(items), size):
            chunk = items[start : start + size]
            b = lc.llama_batch_init(len(chunk), 0, 1)
            for i, (tok, pos, seq, want) in enumerate(chunk):
                b.token[i] = tok
                b.pos[i] = pos
                b.n_seq_id[i] = 1
                b.seq_id[i][0] = seq
                b.logits[i] = 1 if want else 0
            b.n_tokens = len(chunk)
            out.append(b)
        return out

    def _decode_all(self, batches: list[lc.llama_batch], what: str) -> None:
        for b in batches:
            rc = lc.llama_decode(self._ctx, b)
            if rc != 0:
                raise DecodeError(f"llama_decode failed during {what} (code {rc}): {last_error('no detail')}")

    def _prepare_cache(self, spec: RunSpec, rand_tokens: Callable[[int], list[int]]) -> None:
        """Leave exactly ``n_depth`` tokens per sequence in the KV cache, and nothing else.

        Everything past the depth is removed before every repetition, so no prefix-cache hit can fake a
        fast TTFT; the depth fill itself (untimed) is kept between repetitions of the same test.
        """
        ctx, n_seq = self._ctx, spec.n_parallel
        mem = lc.llama_get_memory(ctx)
        lc.llama_sampler_reset(self._sampler)
        if spec.n_depth and self._filled == (spec.n_depth, n_seq):
            for s in range(n_seq):
                if not lc.llama_memory_seq_rm(mem, s, spec.n_depth, -1):
                    break
            else:
                return
        lc.llama_memory_clear(mem, True)
        self._filled = None
        if not spec.n_depth:
            return
        items = [(t, pos, s, False) for s in range(n_seq) for pos, t in enumerate(rand_tokens(spec.n_depth))]
        batches = self._batches(items, self._ctx_cfg.n_batch)
        try:
            self._decode_all(batches, f"the depth fill of {spec.n_depth} tokens")
        finally:
            for b in batches:
                lc.llama_batch_free(b)
        lc.llama_synchronize(ctx)
        self._filled = (spec.n_depth, n_seq)

    def run(self, spec: RunSpec, on_token: TokenCallback | None = None) -> RunTimings:
        if self._ctx is None or self._ctx_cfg is None:
            raise DecodeError("no context")
        ctx, n_seq = self._ctx, spec.n_parallel
        rng = random.Random(spec.seed)
        n_vocab = self._n_vocab

        def rand_tokens(n: int) -> list[int]:
            return [rng.randrange(n_vocab) for _ in range(n)]

        self._prepare_cache(spec, rand_tokens)
        prompt_items = self._prompt_items(spec, rand_tokens)
        prompt_batches = self._batches(prompt_items, self._ctx_cfg.n_batch)
        step = lc.llama_batch_init(n_seq, 0, 1)
        cur = rand_tokens(n_seq)  # the first decode input when there is no prompt (a pure decode test)
        # decode steps feed pre-drawn token ids (as llama-bench does): each step computes the full forward
        # pass and its logits, and no sampler work sits in the timed loop; only the first token is sampled
        feed = rand_tokens(spec.n_gen * n_seq)
        token_ns: list[int] = []
        try:
            lc.llama_perf_context_reset(ctx)
            start_ns = time.perf_counter_ns()
            self._timed_prefill(prompt_batches, prompt_items, cur)
            prefill_end_ns = time.perf_counter_ns()
            self._timed_decode(step, spec, cur, feed, token_ns, on_token)
            perf = lc.llama_perf_context(ctx)
        finally:
            for b in prompt_batches:
                lc.llama_batch_free(b)
            lc.llama_batch_free(step)
        return RunTimings(
            start_ns=start_ns,
            prefill_end_ns=prefill_end_ns,
            token_ns=token_ns,
            engine_counters={
                "t_p_eval_ms": perf.t_p_eval_ms,
                "n_p_eval": perf.n_p_eval,
                "t_eval_ms": perf.t_eval_ms,
                "n_eval": perf.n_eval,
            },
        )

    @staticmethod
    def _prompt_items(spec: RunSpec, rand_tokens: Callable[[int], list[int]]) -> list[tuple[int, int, int, bool]]:
        """(token, position, sequence, wants logits) for every prompt token of every sequence; logits for the last."""
        items: list[tuple[int, int, int, bool]] = []
        for s in range(spec.n_parallel):
            toks = list(spec.prompt_tokens[: spec.n_prompt]) if spec.prompt_tokens else rand_tokens(spec.n_prompt)
            for i, t in enumerate(toks):
                items.append((t, spec.n_depth + i, s, i == len(toks) - 1))
        return items

    def _timed_prefill(self, batches: list[lc.llama_batch], items: list[tuple[int, int, int, bool]],
                       cur: list[int]) -> None:
        """The prompt in n_batch-sized llama_decode calls; the first token of each sequence is sampled into ``cur``."""
        ctx, done = self._ctx, 0
        for b in batches:
            rc = lc.llama_decode(ctx, b)
            if rc != 0:
                raise DecodeError(f"llama_decode failed during the prompt (code {rc}): {last_error('no detail')}")
            for i in range(b.n_tokens):
                if b.logits[i]:
                    cur[items[done + i][2]] = lc.llama_sampler_sample(self._sampler, ctx, i)
            done += b.n_tokens

    def _timed_decode(self, step: lc.llama_batch, spec: RunSpec, cur: list[int], feed: list[int],
                      token_ns: list[int], on_token: TokenCallback | None) -> None:
        """``n_gen`` single-step llama_decode calls for all sequences, a timestamp after each step's logits exist."""
        ctx, n_seq = self._ctx, spec.n_parallel
        n_past = spec.n_depth + spec.n_prompt
        for s in range(n_seq):
            step.pos[s] = 0
            step.n_seq_id[s] = 1
            step.seq_id[s][0] = s
            step.logits[s] = 1
        step.n_tokens = n_seq
        for k in range(spec.n_gen):
            for s in range(n_seq):
                step.token[s] = cur[s]
                step.pos[s] = n_past
            rc = lc.llama_decode(ctx, step)
            if rc != 0:
                raise DecodeError(f"llama_decode failed at decode step {k} (code {rc}): {last_error('no detail')}")
            lc.llama_synchronize(ctx)  # the step's logits exist: the next token is available
            token_ns.append(time.perf_counter_ns())
            cur = feed[k * n_seq : (k + 1) * n_seq]
            n_past += 1
            if on_token is not None:
                on_token(k, n_past)

    # --- cleanup ---------------------------------------------------------------------------------
    def _free_context(self) -> None:
        if self._sampler is not None:
            lc.llama_sampler_free(self._sampler)
            self._sampler = None
        if self._ctx is not None:
            lc.llama_free(self._ctx)
            self._ctx = None
            self._filled = None
            self._ctx_cfg = None

    def close(self) -> None:
        self._free_context()
        if self._model is not None:
            lc.llama_model_free(self._model)
            self._model = None
            self._vocab = None
        self._placement = None

