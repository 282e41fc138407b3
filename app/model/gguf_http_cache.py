"""Facts of remote GGUF files kept in the data dir, keyed by URL and the server's ETag (and size).

A changed file gets a new ETag, so a stale entry is never used; an unreadable entry is ignored.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

from app.atomic import write_text_atomic
from app.model.facts import ModelFacts, TensorTypeStat
from app.paths import DataDirError, data_dir

_DIR_NAME = "remote_headers"


def _entry_path(url: str) -> Path:
    return data_dir() / _DIR_NAME / (hashlib.sha256(url.encode()).hexdigest()[:32] + ".json")


def facts_to_dict(facts: ModelFacts) -> dict[str, object]:
    """Every field of ``facts`` as JSON values (tensor_bytes included)."""
    return dataclasses.asdict(facts)


def facts_from_dict(d: dict[str, object]) -> ModelFacts:
    """The inverse of :func:`facts_to_dict`."""
    values = dict(d)
    values["tensor_types"] = {k: TensorTypeStat(**v) for k, v in dict(values["tensor_types"]).items()}  # type: ignore
    for key in ("swa_layers", "kv_k_per_layer", "kv_v_per_layer", "recurrent_layers"):
        values[key] = tuple(values.get(key) or ())  # type: ignore[arg-type]
    values["tensor_shapes"] = {str(k): (str(v[0]), tuple(int(d) for d in v[1]))  # type: ignore[index]
                               for k, v in dict(values.get("tensor_shapes") or {}).items()}  # type: ignore[call-overload]
    return ModelFacts(**values)  # type: ignore[arg-type]


def load_cached_facts(url: str, etag: str, total_bytes: int) -> ModelFacts | None:
    """The cached facts of ``url`` when the entry's ETag and size match, else None."""
    try:
        entry = json.loads(_entry_path(url).read_text(encoding="utf-8"))
        if entry["url"] != url or entry["etag"] != etag or entry["total_bytes"] != total_bytes:
            return None
        if "kv_k_per_layer" not in entry["facts"]:  # read before per-layer memory (MLA, recurrent state): again
            return None
        return facts_from_dict(entry["facts"])
    except (OSError, ValueError, KeyError, TypeError, DataDirError):
        return None


def save_cached_facts(url: str, etag: str, total_bytes: int, facts: ModelFacts) -> None:
    """Remember ``facts`` for ``url`` at ``etag``; a data dir that cannot be written is not an error."""
    try:
        path = _entry_path(url)
        path.parent.mkdir(parents=True, exist_ok=True)
        entry = {"url": url, "etag": etag, "total_bytes": total_bytes, "facts": facts_to_dict(facts)}
        write_text_atomic(path, json.dumps(entry), own_file=True)
    except (OSError, DataDirError, TypeError, ValueError):
        pass


def save_header_copy(url: str, header: bytes, total_bytes: int) -> Path | None:
    """A sparse local copy of a remote GGUF: its ``header`` bytes (header and tensor table) then a hole up to
    ``total_bytes``, so llama.cpp's dry run (``no_alloc``, no weight read) can size the model without the weights;
    None where the data dir cannot be written."""
    try:
        path = data_dir() / _DIR_NAME / (hashlib.sha256(url.encode()).hexdigest()[:32] + ".gguf")
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".part")
        with tmp.open("wb") as f:
            f.write(header)
            f.truncate(max(total_bytes, len(header)))
        tmp.replace(path)
        return path
    except (OSError, DataDirError):
        return None
