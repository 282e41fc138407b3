"""TEST DOUBLE, for a crash only some CPUs have: llama.cpp's AMX matmul segfault (llama.cpp issue #20824).

On an Intel Xeon with AMX, llama.cpp puts the weights of every type with AMX kernels into its ``AMX`` extra
buffer type when weight repacking is on (``use_extra_bufts``), and the first prefill of more than one token dies
by SIGSEGV in ``ggml_backend_amx_mul_mat``. Machines without AMX cannot show it, so the crash guard is tested
with this engine: the real llama.cpp engine, which says its weights sit in an ``AMX`` buffer whenever repacking
is on, and kills its own process with SIGSEGV where the real crash comes (a prompt or depth fill of more than
one token). With repacking off it is the real engine, unchanged.

Chosen only through ``GGUF_WORKBENCH_TEST_DOUBLE=amx-crash`` in a worker's environment (app.worker.engines).
"""

from __future__ import annotations

import os
import signal
from dataclasses import replace

from engines.base import LoadConfig, LoadedModel, RunSpec, RunTimings, TokenCallback
from engines.llama_cpp_engine import LlamaCppEngine

#: The buffer type this double says its weights sit in (ggml-cpu/amx/amx.cpp's name for its buffer type).
SIMULATED_BUFFER = "AMX"


class AmxCrashDouble(LlamaCppEngine):
    """The llama.cpp engine, crashing as AMX's repacked matmul does (see the module docstring)."""

    #: the extra buffer types this double says ggml's CPU backend offers (AMX first, as ggml-cpu.cpp registers it)
    simulated_extra_buffers: tuple[str, ...] = (SIMULATED_BUFFER,)

    def __init__(self, log_path: str | None = None) -> None:
        super().__init__(log_path)
        self._repacked = False

    def load(self, cfg: LoadConfig) -> LoadedModel:
        loaded = super().load(cfg)
        self._repacked = cfg.use_extra_bufts
        if not cfg.use_extra_bufts:
            return loaded
        return replace(loaded, extra_buffers=(SIMULATED_BUFFER, *(b for b in loaded.extra_buffers
                                                                  if b != SIMULATED_BUFFER)))

    def run(self, spec: RunSpec, on_token: TokenCallback | None = None) -> RunTimings:
        if self._repacked and (spec.n_prompt > 1 or spec.n_depth > 1):
            os.kill(os.getpid(), signal.SIGSEGV)
        return super().run(spec, on_token)
