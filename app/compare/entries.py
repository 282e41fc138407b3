"""What is compared: entries (one model's rows of a run, or a model file), read from the store, and their names."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from app.results.fields import RowStatus
from app.results.row_types import ResultRow
from app.results.store import ResultStore


@dataclass
class CompareItem:
    """One compared entry: a model's rows of a past run (``kind`` "run", measured) or a model file ("model",
    predicted)."""

    kind: str  # "model" (predicted) | "run" (measured)
    label: str
    path: str = ""
    run_id: str = ""
    rows: list[ResultRow] = field(default_factory=list)
    sweep_name: str = ""

    def ok_rows(self) -> list[ResultRow]:
        return [r for r in self.rows if r.status == RowStatus.OK]


def model_item(path: str) -> CompareItem:
    """A model file as a compare entry (its figures are predictions)."""
    return CompareItem("model", f"model {os.path.basename(path)} (predicted)", path=path)


def run_item(run_id: str, rows: list[ResultRow], sweep_name: str = "") -> CompareItem:
    """One model's rows of a run as a compare entry (label: the run, the model and its fixed settings)."""
    models = sorted({"" if r.model_filename is None else r.model_filename for r in rows})
    settings = distinct_settings(rows)
    label = f"run {run_id[:15]}" + (f" {sweep_name}" if sweep_name else "") + f": {', '.join(models)}" + \
        (f" ({settings})" if settings else "")
    path = next((r.model_path for r in rows if r.model_path), "")
    return CompareItem("run", label, path=path, run_id=run_id, rows=rows, sweep_name=sweep_name)


def run_items(run_id: str, rows: list[ResultRow], sweep_name: str = "") -> list[CompareItem]:
    """A run as compare entries: one per model, never one average over several models."""
    by_model: dict[str, list[ResultRow]] = {}
    for r in rows:
        by_model.setdefault(r.model_path or r.model_filename or "", []).append(r)
    return [run_item(run_id, mine, sweep_name) for mine in by_model.values()]


def load_run(store: ResultStore, run_id: str) -> list[CompareItem]:
    """A stored run's entries (``run_id`` exactly as stored); empty when it has no results."""
    rows = store.rows(run_id)
    info = store.run_info(run_id)
    return run_items(run_id, rows, str(info.get("sweep_name") or "")) if rows else []


#: The settings a run's rows may share, each with how a row holds it and how it is said.
_SHARED_SETTINGS: tuple[tuple[Callable[[ResultRow], Any], Callable[[str], str]], ...] = (
    (lambda r: r.n_threads, lambda v: _threads_words(v)),
    (lambda r: r.type_k, lambda v: f"KV {v}"),
    (lambda r: r.n_gpu_layers, lambda v: f"{v} GPU layers"),
    (lambda r: r.flash_attn, lambda v: _flash_words(v)),
)


def distinct_settings(rows: list[ResultRow]) -> str:
    """The settings every row shares, in words: "all threads, KV f16, 99 GPU layers, flash attention off"."""
    parts = []
    for setting, say in _SHARED_SETTINGS:
        vals = sorted({str(setting(r)) for r in rows if setting(r) is not None})
        if len(vals) == 1:
            parts.append(say(vals[0]))
    return ", ".join(parts)


def _threads_words(v: str) -> str:
    return "all threads" if v in ("0", "-1") else f"{v} thread{'s' if v != '1' else ''}"


def _flash_words(v: str) -> str:
    return {"-1": "flash attention auto", "1": "flash attention on", "0": "flash attention off"}.get(v, f"FA {v}")


def colour_slots(items: list[CompareItem]) -> list[int]:
    """Each entry's colour, as an index into a palette: one per measured entry (its prediction is drawn in it too);
    a model file takes the colour of the first measured entry of the same file, else one of its own."""
    runs = [it for it in items if it.kind == "run"]
    first_run_of: dict[str, int] = {}
    for n, it in enumerate(runs):
        if it.path:
            first_run_of.setdefault(it.path, n)
    n_run, n_own = 0, len(runs)  # a run's slot; the next slot for a file with no run of its own
    out: list[int] = []
    for it in items:
        if it.kind == "run":
            out.append(n_run)
            n_run += 1
        elif it.path in first_run_of:
            out.append(first_run_of[it.path])
        else:
            out.append(n_own)
            n_own += 1
    return out


def short_model(path: str) -> str:
    """A model file's name without its directory and ``.gguf``."""
    name = os.path.basename(path)
    return name[:-5] if name.lower().endswith(".gguf") else name


def model_part(it: CompareItem) -> str:
    """The model an entry is of: its file's short name, or the models its rows name."""
    return short_model(it.path) if it.path else ", ".join(sorted({str(r.model_filename) for r in it.rows}))


def shared_prefix(names: list[str]) -> str:
    """The start every one of ``names`` shares, cut after its last separator (``SmolLM2-135M-Instruct.`` of
    ``…Q4_1`` and ``…Q8_0``), so that what is left still names each file; "" when fewer than two distinct names."""
    distinct = sorted(set(names))
    if len(distinct) < 2:
        return ""
    prefix = os.path.commonprefix(distinct)
    cut = max(prefix.rfind(ch) for ch in ".-_ ")
    return prefix[: cut + 1] if cut > 0 else ""


#: a legend entry's model part at most this long (the middle elided: two files differ at their ends)
LEGEND_MODEL_CHARS = 26


def legend_names(items: list[CompareItem], with_run: bool) -> list[str]:
    """Each entry's name in a legend: its model without the start all compared models share (the plot note names it
    once), the middle elided past LEGEND_MODEL_CHARS, and its run only where several runs are compared."""
    models = [model_part(it) for it in items]
    cut = len(shared_prefix(models))
    out = []
    for it, model in zip(items, models, strict=True):
        model = model[cut:]
        if len(model) > LEGEND_MODEL_CHARS:
            half = (LEGEND_MODEL_CHARS - 1) // 2
            model = f"{model[:half]}…{model[-half:]}"
        out.append(f"{it.sweep_name or it.run_id[:15]} · {model}" if it.kind == "run" and with_run else model)
    return out


def short_label(it: CompareItem) -> str:
    """An entry's name in the table: the model file, or the run, its model and what its tests shared."""
    if it.kind == "model":
        return short_model(it.path)
    shared = distinct_settings(it.rows)
    return (it.sweep_name or it.run_id[:15]) + f" · {model_part(it)}" + (f" ({shared})" if shared else "")
