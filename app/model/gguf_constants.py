"""The tables the header reader needs from the ``gguf`` package (ggml types and their block sizes, llama.cpp's file
types, the architecture names), without importing the package, and only when a header is read.

``import gguf`` runs the package's ``__init__``, which imports its reader and writer and with them numpy and yaml
(a quarter of a second); ``gguf/constants.py`` itself needs only the standard library. This module loads that one
file of the installed package, so the tables stay the installed gguf's own and a header can be read without numpy.
Where the whole package is already imported, its own ``gguf.constants`` is used.
"""

from __future__ import annotations

import functools
import importlib.util
import sys
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path
from types import ModuleType

_PRIVATE_NAME = "app.model._gguf_constants_file"


def constants_source() -> Path | None:
    """The installed gguf package's ``constants.py`` (found, not imported); None when there is none."""
    loaded = sys.modules.get("gguf.constants")
    if loaded is not None and getattr(loaded, "__file__", None):
        return Path(loaded.__file__)  # type: ignore[arg-type]
    package = importlib.util.find_spec("gguf")  # a top-level package: found, not imported
    for folder in (package.submodule_search_locations or []) if package is not None else []:
        source = Path(folder) / "constants.py"
        if source.is_file():
            return source
    return None


def _load_constants() -> ModuleType:
    loaded = sys.modules.get("gguf.constants") or sys.modules.get(_PRIVATE_NAME)
    if loaded is not None:
        return loaded
    source = constants_source()
    spec = importlib.util.spec_from_file_location(_PRIVATE_NAME, source) if source is not None else None
    if spec is None or spec.loader is None:
        raise ImportError("the gguf package (its constants.py) is not installed")
    module = importlib.util.module_from_spec(spec)
    sys.modules[_PRIVATE_NAME] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[_PRIVATE_NAME]
        raise
    return module


@dataclass(frozen=True)
class GGUFTables:
    """What the reader takes from gguf: the ggml type enum and its (values per block, bytes per block), llama.cpp's
    file type enum, the default alignment and the architecture names gguf knows."""

    quant_type: type[IntEnum]
    quant_sizes: dict[IntEnum, tuple[int, int]]
    file_type: type[IntEnum]
    default_alignment: int
    arch_names: frozenset[str]


@functools.cache
def tables() -> GGUFTables:
    """The tables, loaded on first use (a header answered from the facts cache needs none)."""
    c = _load_constants()
    return GGUFTables(quant_type=c.GGMLQuantizationType, quant_sizes=dict(c.GGML_QUANT_SIZES),
                      file_type=c.LlamaFileType, default_alignment=int(c.GGUF_DEFAULT_ALIGNMENT),
                      arch_names=frozenset(c.MODEL_ARCH_NAMES.values()))
