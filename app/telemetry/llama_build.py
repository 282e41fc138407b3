"""Which GPU backends the installed llama.cpp was built with, from its shared libraries, without loading it.

llama-cpp-python installs ggml's backends as separate libraries beside ``libllama`` (``llama_cpp/lib/``):
``libggml-cpu.so`` always, ``libggml-cuda.so``, ``libggml-vulkan.so``, ``libggml-hip.so``, ``libggml-metal``…
when built with that backend. Reading the folder is enough to tell a CPU-only build from a GPU build in the
window's process, which never imports ``llama_cpp`` (the worker does, and its rows' ``backends`` column says
what a model really ran on).
"""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

from engines.ggml_devices import find_lib_dir as llama_lib_dir  # finds llama_cpp/lib without importing it

#: ggml's library name part → the backend's usual name.
GPU_BACKENDS = {"cuda": "CUDA", "vulkan": "Vulkan", "hip": "ROCm", "metal": "Metal", "sycl": "SYCL",
                "opencl": "OpenCL", "musa": "MUSA", "cann": "CANN"}
_LIBRARY = re.compile(r"^(?:lib)?ggml-([a-z]+)[.-]")


def installed_gpu_backends(lib_dir: Path | None = None) -> list[str] | None:
    """The GPU backends whose libraries are in ``lib_dir`` (default: the installed llama-cpp-python's), e.g.
    ``["CUDA"]``; ``[]`` for a CPU-only build; None when there is no llama.cpp library folder to look at."""
    lib = lib_dir if lib_dir is not None else llama_lib_dir()
    if lib is None or not lib.is_dir():
        return None
    found = {GPU_BACKENDS[m.group(1)] for f in lib.iterdir() if (m := _LIBRARY.match(f.name))
             and m.group(1) in GPU_BACKENDS}
    return sorted(found)


def engine_version() -> str:
    """The installed llama-cpp-python's version (rows' ``llama_cpp_python_version``), "" when not installed."""
    try:
        return metadata.version("llama_cpp_python")
    except metadata.PackageNotFoundError:
        return ""


def llama_build() -> str:
    """"llama-cpp-python 0.3.36 (CPU)": the installed engine and its GPU backends (what a fit is valid for)."""
    backends = installed_gpu_backends()
    return f"llama-cpp-python {engine_version() or '?'} ({', '.join(backends) if backends else 'CPU'})"
