"""The engine a worker runs tests on: llama.cpp, or a labelled test double chosen by the environment."""

from __future__ import annotations

import os

from engines.llama_cpp_engine import LlamaCppEngine  # only under app.worker: the worker owns the native library

#: ``amx-crash``: engines.amx_crash_double (tests of the repack crash guard on CPUs without AMX); unset: llama.cpp.
TEST_DOUBLE_ENV = "GGUF_WORKBENCH_TEST_DOUBLE"


def new_llama_engine(log_path: str | None = None) -> LlamaCppEngine:
    """The llama.cpp engine, or its AMX-crash test double where ``GGUF_WORKBENCH_TEST_DOUBLE=amx-crash``."""
    if os.environ.get(TEST_DOUBLE_ENV) == "amx-crash":
        from engines.amx_crash_double import AmxCrashDouble

        return AmxCrashDouble(log_path)
    return LlamaCppEngine(log_path)
