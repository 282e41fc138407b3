"""Where a GGUF file came from, as its own header says: the ``workbench.*`` lineage keys ``quantize`` writes.

``workbench.quantized_from`` is the source's file type, ``workbench.requantized_from`` the quantized type at the
start of its lineage (set when the source was quantized, or was itself made from a quantized file). The quantizer
writes them (app.quantize), quality and the chooser read them (app.quality, app.choose).
"""

from __future__ import annotations

from pathlib import Path

from app.model.facts import ModelFacts
from app.model.gguf_scan import CorruptHeader, ShortRead, scan_gguf

#: File types that hold unquantized weights (llama.cpp names, as ModelFacts.file_type gives them).
UNQUANTIZED = frozenset({"F32", "F16", "BF16"})
KEY_QUANTIZED_FROM = "workbench.quantized_from"
KEY_REQUANTIZED_FROM = "workbench.requantized_from"
LINEAGE_KEYS = (KEY_QUANTIZED_FROM, KEY_REQUANTIZED_FROM)


def header_strings(path: str | Path, keys: tuple[str, ...] = LINEAGE_KEYS) -> dict[str, str]:
    """The string values of ``keys`` in a GGUF header (absent keys left out); {} when the header cannot be read."""
    p = Path(path)
    try:
        scan = scan_gguf(p, p.stat().st_size)
    except (OSError, ShortRead, CorruptHeader, ValueError):
        return {}
    out = {}
    for key in keys:
        f = scan.fields.get(key)
        if f is not None and isinstance(f.value, str) and f.value:
            out[key] = f.value
    return out


def requantized_from(facts: ModelFacts) -> str:
    """The quantized type at the start of the file's lineage (read with its facts), "" for none."""
    value = facts.extra.get(KEY_REQUANTIZED_FROM)
    return value if isinstance(value, str) else ""
