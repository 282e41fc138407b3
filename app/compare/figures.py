"""What the compare table shows: each entry's figures (decode, TTFT at one prompt length, file size, KV per token),
their ratios to the first entry of the same kind with the noise of both means, and the table as text or JSON."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from app.compare.entries import CompareItem, short_label
from app.model.facts import ModelFacts
from app.model.format import short_bytes
from app.results.row_types import ResultRow

#: (path, prompt tokens) -> (decode tok/s from an empty cache, TTFT ms) predicted for a model file
PredictedFigures = Callable[[str, int], tuple[float | None, float | None]]
#: path -> the file's facts, None where they are not read (yet)
FactsOf = Callable[[str], ModelFacts | None]
#: path -> a model file's fit verdict in a few words (app.predict.placement.FitVerdict: its word and flags), the one
#: the inspector, ``predict`` and the chooser print for the same question; "" where there is none
VerdictOf = Callable[[str], str]

#: the figures, in the table's order: (Figures field, its noise's field, header, its ratio's header, the ratio's tip)
FIGURES: tuple[tuple[str, str, str, str, str], ...] = (
    ("decode_tps", "decode_noise_rel", "decode tok/s", "× decode",
     "decode ÷ the first entry of the same kind (measured or predicted)"),
    ("ttft_ms", "ttft_noise_rel", "TTFT ms @{prompt}", "× TTFT", "TTFT ÷ the first entry of the same kind"),
    ("size_bytes", "", "size", "× size", "file size ÷ the first of the same kind"),
    ("kv_bytes_per_token", "", "KV / token", "× KV", "KV per token ÷ the first of the same kind"),
)
#: fewer repetitions than this: a ratio is within the run-to-run noise, and marked ⚠
MIN_REPETITIONS = 3
DEFAULT_PROMPT = 512


@dataclass(frozen=True)
class Figures:
    """One entry's figures: measured (the means of its depth-0 tests) or predicted (a model file)."""

    decode_tps: float | None  # from an empty context
    ttft_ms: float | None  # at the table's prompt length
    size_bytes: float | None  # the file's
    kv_bytes_per_token: float | None
    decode_noise_rel: float | None  # relative standard error of the mean (0 for a prediction; None: not known)
    ttft_noise_rel: float | None
    repetitions: int | None  # the fewest repetitions of its tests (None: a prediction)

    def get(self, field: str) -> float | None:
        """A figure or its noise by field name; None for none (or an empty name)."""
        value = getattr(self, field, None) if field else None
        return None if value is None else float(value)


def reference_prompt(items: Iterable[CompareItem]) -> int:
    """The prompt length the TTFT column is read at: the one most measured entries' TTFT was measured at (the longest
    of a tie); 512 without measurements."""
    counts: Counter[int] = Counter()
    for it in items:
        if it.kind == "run":
            counts.update(it.summed().ttft_prompts)
    counts.pop(0, None)
    if not counts:
        return DEFAULT_PROMPT
    top = max(counts.values())
    return max(p for p, n in counts.items() if n == top)


def entry_figures(it: CompareItem, prompt: int, facts: ModelFacts | None,
                  predicted: PredictedFigures | None = None) -> Figures:
    """Decode tok/s (empty context), TTFT ms at ``prompt``, file size and KV bytes per token of one entry: a run's
    from its rows, a model file's from ``predicted``; size and KV per token from the file's ``facts`` where read."""
    if it.kind == "run":
        summed = it.summed()
        d0 = summed.figures_rows  # the ok rows from an empty context, else all of them
        decode = d0.decode_sum / d0.decode_n if d0.decode_n else None
        decode_noise = d0.decode_noise.value
        at = {p: total / n for p, (total, n) in sorted(d0.ttft_by_prompt.items())}  # mean TTFT at each prompt
        ttft_noise = d0.ttft_noise_by_prompt.get(prompt, d0.ttft_noise).value
        reps: int | None = d0.min_repetitions or 0
        ttft = at[prompt] if prompt in at else (float(np.interp(prompt, list(at), list(at.values()))) if at
                                                else None)
        size = summed.size_bytes
        type_k = summed.type_k or "f16"
    else:
        decode, ttft = predicted(it.path, prompt) if predicted is not None else (None, None)
        size, type_k = None, "f16"
        decode_noise = ttft_noise = 0.0  # a prediction has no repetitions
        reps = None
    if facts is not None:  # one definition of size for runs and files alike: the file on disk
        size = float(facts.file_bytes)
    kv = float(facts.kv_bytes_per_token(type_k)) if facts is not None else None
    return Figures(decode_tps=decode, ttft_ms=ttft, size_bytes=size, kv_bytes_per_token=kv,
                   decode_noise_rel=decode_noise, ttft_noise_rel=ttft_noise, repetitions=reps)


@dataclass(frozen=True)
class CompareRow:
    """One line of the table: the entry, its name and kind as shown, its figures, ratios and the cells' text."""

    item: CompareItem
    name: str
    kind: str  # "predicted", or "measured, 3 reps" (with ⚠ below MIN_REPETITIONS)
    thin: bool  # too few repetitions for its ratios to tell
    figures: Figures
    ratios: dict[str, float | None]  # by Figures field: this ÷ the first entry of the same kind
    cells: tuple[str, ...]  # figure, ratio, figure, ratio, ... (and the fit verdict) as the table prints them
    fit: str = ""  # a model file's fit verdict on the chosen hardware ("" for a run: it ran)


@dataclass(frozen=True)
class CompareTable:
    """The compare table: the prompt length TTFT is read at, and one row per entry."""

    prompt: int
    rows: tuple[CompareRow, ...]
    with_fit: bool = False  # a "fit" column: the model files' verdicts

    @property
    def headers(self) -> tuple[str, ...]:
        out = ["", "kind"]
        for _field, _noise, header, ratio_header, _tip in FIGURES:
            out += [header.format(prompt=self.prompt), ratio_header]
        return (*out, "fit") if self.with_fit else tuple(out)

    @property
    def n_thin(self) -> int:
        """Measured entries with fewer than MIN_REPETITIONS repetitions (marked ⚠)."""
        return sum(1 for r in self.rows if r.thin)

    def lines(self) -> list[tuple[str, ...]]:
        """Every row's cells as the window's table shows them (name, kind, then figure and ratio per figure)."""
        return [(r.name, r.kind, *r.cells) for r in self.rows]

    def text(self) -> str:
        """The table as aligned plain text (``gguf-bench compare``): names left, figures right."""
        head = ("entry",) + self.headers[1:]
        body = self.lines()
        widths = [max(len(line[c]) for line in [head, *body]) for c in range(len(head))]
        out = []
        for line in [head, *body]:
            out.append("  ".join(v.ljust(w) if c < 2 else v.rjust(w)
                                 for c, (v, w) in enumerate(zip(line, widths, strict=True))).rstrip())
        return "\n".join(out)

    def to_json(self) -> dict[str, Any]:
        """The table's numbers: per entry its figures (None where not known), ratios and the cells' text."""
        return {"reference_prompt": self.prompt, "entries": [{
            "name": r.name, "label": r.item.label, "kind": r.item.kind, "run_id": r.item.run_id,
            "model_path": r.item.path, "shown_kind": r.kind, "few_repetitions": r.thin,
            "figures": asdict(r.figures), "ratios": r.ratios, "cells": dict(zip(self.headers[2:], r.cells,
                                                                                strict=True)),
            "fit": r.fit or None,
        } for r in self.rows]}


def compare_table(items: Sequence[CompareItem], facts_of: FactsOf,
                  predicted: PredictedFigures | None = None, verdict_of: VerdictOf | None = None) -> CompareTable:
    """The table of ``items``: each entry's figures, and ratios to the first entry of its kind (measured with
    measured, predicted with predicted); with ``verdict_of``, each model file's fit verdict in a last column."""
    prompt = reference_prompt(items)
    figs = [entry_figures(it, prompt, facts_of(it.path) if it.path else None, predicted) for it in items]
    bases: dict[str, Figures] = {}
    for it, f in zip(items, figs, strict=True):
        bases.setdefault(it.kind, f)
    rows = []
    for it, f in zip(items, figs, strict=True):
        base = bases[it.kind]
        reps = f.repetitions
        thin = reps is not None and reps < MIN_REPETITIONS
        kind = "predicted" if it.kind != "run" else f"measured, {reps} rep{'s' if reps != 1 else ''}" + \
            (" ⚠" if thin else "")
        cells: list[str] = []
        ratios: dict[str, float | None] = {}
        for field, noise, _header, _ratio_header, _tip in FIGURES:
            v, b = f.get(field), base.get(field)
            cells.append(figure_text(field, v))
            ratios[field] = v / b if v is not None and b else None
            cells.append(ratio_text(v, b, f.get(noise), base.get(noise), thin))
        fit = verdict_of(it.path) if verdict_of is not None and it.kind != "run" and it.path else ""
        if verdict_of is not None:
            cells.append(fit or "—")
        rows.append(CompareRow(it, short_label(it), kind, thin, f, ratios, tuple(cells), fit))
    return CompareTable(prompt, tuple(rows), with_fit=verdict_of is not None)


def figure_text(field: str, v: float | None) -> str:
    """A figure as the table prints it: speeds and times with one decimal, sizes in B/KiB/MiB/GiB; "—" unknown."""
    if v is None:
        return "—"
    if field.endswith(("_bytes", "_bytes_per_token")):
        return f"{v:.0f} B" if v < 1024 else short_bytes(v)
    return f"{v:,.1f}"


def ratio_text(v: float | None, base: float | None, noise: float | None, base_noise: float | None,
               thin: bool) -> str:
    """"1.23× ±4%" (the noise of both means combined), "1.23× ⚠" with too few repetitions to tell."""
    if v is None or not base:
        return "—"
    text = f"{v / base:.2f}×"
    if thin:
        return text + " ⚠"
    if noise is not None and base_noise is not None and (noise or base_noise):
        text += f" ±{100 * (noise**2 + base_noise**2) ** 0.5:.0f}%"
    return text


#: The settings a prediction takes from a run's rows, by their keyword (KV types, layers, flash attention, batches).
_PREDICTION_SETTINGS: tuple[tuple[str, Callable[[ResultRow], Any]], ...] = (
    ("type_k", lambda r: r.type_k), ("type_v", lambda r: r.type_v), ("n_gpu_layers", lambda r: r.n_gpu_layers),
    ("flash_attn", lambda r: r.flash_attn), ("n_batch", lambda r: r.n_batch), ("n_ubatch", lambda r: r.n_ubatch),
)


def run_settings(rows: list[ResultRow]) -> dict[str, Any]:
    """The settings a run's rows share that a prediction takes (KV type, layers, flash attention, batches), as
    keywords of the prediction's settings."""
    out: dict[str, Any] = {}
    for keyword, setting in _PREDICTION_SETTINGS:
        vals = {setting(r) for r in rows if setting(r) is not None}
        if len(vals) == 1:
            out[keyword] = vals.pop()
    return out


def means_by_x(points: Iterable[tuple[float, float]]) -> tuple[list[float], list[float]]:
    """The mean y at each distinct x, sorted by x."""
    by_x: dict[float, list[float]] = {}
    for x, y in points:
        by_x.setdefault(x, []).append(y)
    xs = sorted(by_x)
    return xs, [statistics.fmean(by_x[x]) for x in xs]
