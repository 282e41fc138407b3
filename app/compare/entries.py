"""What is compared: entries (one model's rows of a run, or a model file), read from the store, and their names.

An entry's figures are sums over its rows (:class:`RunTally`), added a row at a time: the window keeps the rows
too (its plots draw them), ``gguf-bench compare`` streams them from the store (:func:`tally_run`) and keeps only
the sums, so a run of any length compares in bounded memory with the same figures.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from app.results.fields import RowStatus
from app.results.row_types import ResultRow
from app.results.store import ResultStore


class TalliedValues(NamedTuple):
    """The fields of one row an entry's figures and name are made of, typed as :class:`ResultRow` types them: a
    row's attributes (:meth:`of`, the window's rows) or what the store streams of a stored row (:func:`tally_run`,
    the values of :data:`TALLY_FIELDS` in their order, checked against the field table as they are read; an int
    field may come as a whole float from an older store, so :class:`RunTally` converts what it sums)."""

    status: str | None
    n_depth: int | None
    n_prompt: int | None
    decode_tps: float | None
    decode_tps_stddev: float | None
    ttft_ms: float | None
    ttft_ms_stddev: float | None
    n_repetitions: int | None
    model_size: int | None
    model_path: str | None
    model_filename: str | None
    n_threads: int | None
    type_k: str | None
    n_gpu_layers: int | None
    flash_attn: int | None

    @classmethod
    def of(cls, row: ResultRow) -> TalliedValues:
        return cls(status=row.status, n_depth=row.n_depth, n_prompt=row.n_prompt, decode_tps=row.decode_tps,
                   decode_tps_stddev=row.decode_tps_stddev, ttft_ms=row.ttft_ms, ttft_ms_stddev=row.ttft_ms_stddev,
                   n_repetitions=row.n_repetitions, model_size=row.model_size, model_path=row.model_path,
                   model_filename=row.model_filename, n_threads=row.n_threads, type_k=row.type_k,
                   n_gpu_layers=row.n_gpu_layers, flash_attn=row.flash_attn)

    @property
    def settings(self) -> tuple[object, ...]:
        """The values of :data:`SETTING_KEYS`, in their order."""
        return self.n_threads, self.type_k, self.n_gpu_layers, self.flash_attn


#: The settings an entry's name says when every row shares one value (:func:`distinct_settings`).
SETTING_KEYS = ("n_threads", "type_k", "n_gpu_layers", "flash_attn")
#: Every field an entry's figures and name are made of: what :func:`tally_run` reads of each stored row (the store
#: reads them by these names; the window's rows give them as attributes, :meth:`TalliedValues.of`).
TALLY_FIELDS: tuple[str, ...] = TalliedValues._fields


@dataclass
class NoiseSum:
    """The relative standard error of a mean over rows, summed a row at a time: each row a mean of its ``n``
    repetitions with its standard deviation; unknown (None) as soon as one row has no spread to tell."""

    sum_terms: float = 0.0
    n_rows: int = 0
    unknown: bool = False

    def add(self, mean: float | None, sd: float | None, n_repetitions: int) -> None:
        self.n_rows += 1
        if not mean or sd is None or n_repetitions < 2:
            self.unknown = True
        else:
            self.sum_terms += (float(sd) / float(mean)) ** 2 / n_repetitions

    @property
    def value(self) -> float | None:
        return None if self.unknown or not self.n_rows else math.sqrt(self.sum_terms) / self.n_rows


@dataclass
class DepthTally:
    """The sums over one set of an entry's ok rows (those from an empty context, or all of them)."""

    n_rows: int = 0
    decode_sum: float = 0.0
    decode_n: int = 0
    decode_noise: NoiseSum = field(default_factory=NoiseSum)
    ttft_by_prompt: dict[int, list[float]] = field(default_factory=dict)  # prompt -> [sum of TTFT ms, rows]
    ttft_noise_by_prompt: dict[int, NoiseSum] = field(default_factory=dict)  # over every row of that prompt
    ttft_noise: NoiseSum = field(default_factory=NoiseSum)
    min_repetitions: int | None = None

    def add(self, prompt: int, reps: int, decode: float | None, decode_sd: float | None, ttft: float | None,
            ttft_sd: float | None) -> None:
        """One ok row: its prompt length, repetitions, decode tok/s and TTFT ms (None: not measured) with their
        standard deviations."""
        self.n_rows += 1
        if self.min_repetitions is None or reps < self.min_repetitions:
            self.min_repetitions = reps
        if decode is not None:
            self.decode_sum += float(decode)
            self.decode_n += 1
        self.decode_noise.add(decode, decode_sd, reps)
        if ttft is not None:
            tally = self.ttft_by_prompt.get(prompt)
            if tally is None:
                tally = self.ttft_by_prompt[prompt] = [0.0, 0]
            tally[0] += float(ttft)
            tally[1] += 1
        noise = self.ttft_noise_by_prompt.get(prompt)
        if noise is None:
            noise = self.ttft_noise_by_prompt[prompt] = NoiseSum()
        noise.add(ttft, ttft_sd, reps)
        self.ttft_noise.add(ttft, ttft_sd, reps)


@dataclass
class RunTally:
    """What one run entry's figures and name are made of, summed row by row in memory that does not grow with
    the rows: its ok rows from an empty context and all its ok rows, the prompts its TTFT was measured at, the
    first size and KV type, its models and the values of :data:`SETTING_KEYS` (two at most: one means shared)."""

    depth0: DepthTally = field(default_factory=DepthTally)
    every: DepthTally = field(default_factory=DepthTally)
    ttft_prompts: Counter[int] = field(default_factory=Counter)
    size_bytes: float | None = None
    type_k: str | None = None
    path: str = ""
    models: set[str] = field(default_factory=set)
    settings: dict[str, set[str]] = field(default_factory=lambda: {k: set() for k in SETTING_KEYS})
    n_rows: int = 0

    def add(self, row: ResultRow) -> None:
        """One row (the window's rows, read by attribute)."""
        self.add_values(TalliedValues.of(row))

    def add_values(self, v: TalliedValues) -> None:
        """One row's :class:`TalliedValues` (what the store streams, or a row's attributes)."""
        self.n_rows += 1
        self.models.add(str(v.model_filename or ""))
        if not self.path:
            self.path = str(v.model_path or "")
        for seen, value in zip(self.settings.values(), v.settings, strict=True):
            if value is not None and len(seen) < 2:
                seen.add(str(value))
        if v.status != RowStatus.OK:
            return
        prompt, reps = int(v.n_prompt or 0), int(v.n_repetitions or 1)
        self.every.add(prompt, reps, v.decode_tps, v.decode_tps_stddev, v.ttft_ms, v.ttft_ms_stddev)
        if not v.n_depth:
            self.depth0.add(prompt, reps, v.decode_tps, v.decode_tps_stddev, v.ttft_ms, v.ttft_ms_stddev)
        if v.ttft_ms is not None:
            self.ttft_prompts[prompt] += 1
        if self.size_bytes is None and v.model_size:
            self.size_bytes = float(v.model_size)
        if self.type_k is None and v.type_k:
            self.type_k = str(v.type_k)

    @property
    def figures_rows(self) -> DepthTally:
        """The rows an entry's figures are read from: those from an empty context, else all its ok rows."""
        return self.depth0 if self.depth0.n_rows else self.every


def tally_rows(rows: Iterable[ResultRow]) -> RunTally:
    """The sums of ``rows`` (:class:`RunTally`), added in their order."""
    tally = RunTally()
    for row in rows:
        tally.add(row)
    return tally


@dataclass
class CompareItem:
    """One compared entry: a model's rows of a past run (``kind`` "run", measured) or a model file ("model",
    predicted). ``rows`` are kept where they are drawn (the window); ``tally`` is what its figures are read from
    (made from ``rows`` when not given)."""

    kind: str  # "model" (predicted) | "run" (measured)
    label: str
    path: str = ""
    run_id: str = ""
    rows: list[ResultRow] = field(default_factory=list)
    sweep_name: str = ""
    tally: RunTally | None = None

    def ok_rows(self) -> list[ResultRow]:
        return [r for r in self.rows if r.status == RowStatus.OK]

    def summed(self) -> RunTally:
        """The entry's sums (:class:`RunTally`), from its rows the first time they are asked for."""
        if self.tally is None:
            self.tally = tally_rows(self.rows)
        return self.tally


def model_item(path: str) -> CompareItem:
    """A model file as a compare entry (its figures are predictions)."""
    return CompareItem("model", f"model {os.path.basename(path)} (predicted)", path=path)


def run_item(run_id: str, rows: list[ResultRow], sweep_name: str = "", tally: RunTally | None = None) -> CompareItem:
    """One model's rows of a run as a compare entry (label: the run, the model and its fixed settings); ``rows``
    empty and ``tally`` given: an entry whose rows were summed as they were read, not kept."""
    item = CompareItem("run", "", run_id=run_id, rows=rows, sweep_name=sweep_name, tally=tally)
    summed = item.summed()
    settings = settings_words(summed.settings)
    item.label = f"run {run_id[:15]}" + (f" {sweep_name}" if sweep_name else "") + \
        f": {', '.join(sorted(summed.models))}" + (f" ({settings})" if settings else "")
    item.path = summed.path
    return item


def run_items(run_id: str, rows: list[ResultRow], sweep_name: str = "") -> list[CompareItem]:
    """A run as compare entries: one per model, never one average over several models."""
    by_model: dict[str, list[ResultRow]] = {}
    for r in rows:
        by_model.setdefault(r.model_path or r.model_filename or "", []).append(r)
    return [run_item(run_id, mine, sweep_name) for mine in by_model.values()]


def load_run(store: ResultStore, run_id: str) -> list[CompareItem]:
    """A stored run's entries (``run_id`` exactly as stored), with their rows (the window draws them); empty when it
    has no results."""
    rows = store.rows(run_id)
    info = store.run_info(run_id)
    return run_items(run_id, rows, str(info.get("sweep_name") or "")) if rows else []


def tally_run(store: ResultStore, run_id: str) -> list[CompareItem]:
    """A stored run's entries as :func:`load_run` gives them, their rows summed as they stream from the store and
    not kept: only :data:`TALLY_FIELDS` are read, so a run of any length takes memory per model, not per row."""
    tallies: dict[str, RunTally] = {}
    for values in store.row_values(run_id, TALLY_FIELDS):
        v = TalliedValues(*values)
        key = str(v.model_path or v.model_filename or "")
        tally = tallies.get(key)
        if tally is None:
            tally = tallies[key] = RunTally()
        tally.add_values(v)
    if not tallies:
        return []
    sweep_name = str(store.run_info(run_id).get("sweep_name") or "")
    return [run_item(run_id, [], sweep_name, tally) for tally in tallies.values()]


def settings_words(values: Mapping[str, set[str]]) -> str:
    """The settings every row shares (one value each in ``values``), in words: "all threads, KV f16, 99 GPU layers,
    flash attention off"."""
    parts = []
    for key, say in (("n_threads", _threads_words), ("type_k", lambda v: f"KV {v}"),
                     ("n_gpu_layers", lambda v: f"{v} GPU layers"), ("flash_attn", _flash_words)):
        vals = values.get(key, set())
        if len(vals) == 1:
            parts.append(say(next(iter(vals))))
    return ", ".join(parts)


def distinct_settings(rows: list[ResultRow]) -> str:
    """The settings every row shares, in words (:func:`settings_words`)."""
    return settings_words(tally_rows(rows).settings)


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
    return short_model(it.path) if it.path else ", ".join(sorted(it.summed().models))


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
    shared = settings_words(it.summed().settings)
    return (it.sweep_name or it.run_id[:15]) + f" · {model_part(it)}" + (f" ({shared})" if shared else "")
