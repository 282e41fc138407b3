"""The inspector's figures for one file on one hardware profile at one question: the verdict, the memory behind it,
the largest context, and each phase's ceiling and expected (or measured) figure, decided once.

``gguf-bench predict`` prints :meth:`InspectorView.text` and puts :meth:`InspectorView.to_json_dict` in its JSON; the
window's inspector renders :meth:`InspectorView.rows` (the same words, with emphasis). Which settings each figure is
for is the question's (``app.predict.questions``): the verdict's placement at the context, decode at the context
full and from an empty cache, prefill for llama-bench's 512-token prompt."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.model.facts import ModelFacts
from app.model.format import short_bytes
from app.predict.answer import Answer, Figure
from app.predict.placement import FitVerdict
from app.predict.profiles import HardwareProfile
from app.predict.questions import DEFAULT_N_PROMPT, Question
from app.predict.settings import PredictSettings, at_context_depth

#: what a view asks for one figure: the answer for these settings (None where there is none: facts or a fit missing)
Ask = Callable[[PredictSettings], Answer | None]


@dataclass(frozen=True)
class FigureRow:
    """One row of the inspector: its label, the figure in words (``value``: the part a surface may emphasise),
    what it is for (``where``) and where it comes from (``source``, short; the whole source is in
    :meth:`InspectorView.sources_text`). ``kind``: "fact", "ceiling", "expected", "measured" or "none" (a phase
    with no expected figure: ``value`` says why)."""

    label: str
    value: str
    where: str = ""
    source: str = ""
    kind: str = "fact"
    band: str = ""  # "264.9–391.4": an expected figure's band, where its source gives one

    def text(self) -> str:
        band = f" ({self.band})" if self.band else ""
        where = f" {self.where}" if self.where else ""
        source = f" ({self.source})" if self.source else ""
        return f"{self.label}: {self.value}{band}{where}{source}"

    def to_json_dict(self) -> dict[str, str]:
        return {"label": self.label, "value": self.value, "band": self.band, "where": self.where,
                "source": self.source, "kind": self.kind}


def _bytes(n: float) -> str:
    return short_bytes(n) or f"{n:.0f} B"


def largest_context(max_ctx: int, n_ctx_train: int) -> str:
    """The largest context that both fits and stays within the trained context (what the verdict accepts)."""
    if n_ctx_train and max_ctx > n_ctx_train:
        return f"{n_ctx_train:,} tokens (the trained context; memory allows {max_ctx:,})"
    return f"{max_ctx:,} tokens"


def facts_line(f: ModelFacts, type_k: str) -> str:
    """A file's facts in one line: architecture, layers, bits per weight, attention shape, KV cache per token at
    ``type_k`` and the trained context."""
    return (f"{f.architecture}, {f.n_layer} layers, {f.bits_per_weight:.2f} bits/weight; {f.n_head} heads, "
            f"{f.n_head_kv} KV heads × {f.head_dim_k}, {_bytes(f.kv_bytes_per_token(type_k))} of KV cache per token "
            f"({type_k}); trained context {f.n_ctx_train:,} tokens")


def figure_row(phase: str, fig: Figure, where: str, why: str = "") -> FigureRow:
    """A phase's figure as the answer gives it: expected (with its band) or measured, what it is for and its
    source's name; or, for a ceiling, why there is no expected figure."""
    if fig.kind == "ceiling":
        hint = " (Sweep → Calibrate this machine…)" if phase == "Decode" else ""
        return FigureRow(f"{phase} expected", f"no fit for this hardware: ceilings only{hint}"
                                              + (f": {why}" if why else ""), kind="none")
    kind = "measured" if fig.kind == "measured" else "expected"
    band = f"{fig.low:,.1f}–{fig.high:,.1f}" if fig.low is not None and fig.high and fig.high > fig.low else ""
    return FigureRow(f"{phase} {kind}", f"{fig.value:,.1f} tok/s", where, fig.source.name or fig.source.text(), kind,
                     band)


@dataclass(frozen=True)
class InspectorView:
    """The inspector's answer: ``verdict`` for the question, ``got`` the answer at the verdict's placement and the
    question's context (decode at the context full), ``short`` the same placement for a 512-token prompt (prefill and
    TTFT)."""

    model_name: str
    profile_name: str
    question: Question
    placed: Question  # the question at the verdict's placement (its -ngl, -ncmoe and KV type)
    verdict: FitVerdict
    got: Answer
    short: Answer
    facts: ModelFacts

    @property
    def decode_depth(self) -> int:
        return int(at_context_depth(self.placed.at_context()))

    @property
    def flags(self) -> str:
        placed = self.verdict.asked if self.verdict.user_placed else self.verdict.best
        return placed.flags(self.verdict.kv_cache) if placed is not None else ""

    def verdict_line(self) -> str:
        """The verdict as every surface prints it: its word, flags, context and reason."""
        flags = f" ({self.flags})" if self.flags else ""
        return f"{self.verdict.word}{flags} at {self.question.n_ctx:,} tokens — {self.verdict.reason()}"

    def rows(self) -> tuple[FigureRow, ...]:
        """The figures under the verdict, in the order the inspector shows them."""
        pred, fit, short = self.got.prediction, self.got.prediction.fit, self.short.prediction
        depth = self.decode_depth
        kept = f"; {_bytes(fit.margin_bytes)} kept free" if fit.margin_bytes else ""
        rows = [
            FigureRow("Memory needed", f"{_bytes(fit.needed_bytes)} of {_bytes(fit.budget_bytes)} = weights "
                                       f"{_bytes(fit.weight_bytes)} + KV cache {_bytes(fit.kv_bytes)} + compute "
                                       f"buffers {_bytes(fit.compute_buffer_bytes)} + runtime overhead "
                                       f"{_bytes(fit.overhead_bytes)}{kept}"),
            FigureRow("Largest context", largest_context(fit.max_ctx, self.facts.n_ctx_train)),
            FigureRow("Decode ceiling", f"{pred.decode_ceiling_empty_tps:,.1f} tok/s empty, "
                                        f"{pred.decode_ceiling_tps:,.1f} at depth {depth:,} (the context full)",
                      kind="ceiling"),
            figure_row("Decode", self.got.decode, f"at depth {depth:,}", self.got.no_expected_decode),
            figure_row("Decode, empty cache", self.got.decode_empty, "llama-bench's tg128"),
            FigureRow("Prefill ceiling", f"{short.prefill_ceiling_tps:,.0f} tok/s, TTFT {short.ttft_ms:,.1f} ms "
                                         f"({DEFAULT_N_PROMPT}-token prompt)", kind="ceiling"),
        ]
        if self.short.prefill is not None:
            rows.append(figure_row("Prefill", self.short.prefill, f"{DEFAULT_N_PROMPT}-token prompt"))
        return tuple(rows)

    def facts_line(self) -> str:
        """The file's facts in one line (its KV cache per token at the cache type asked)."""
        return facts_line(self.facts, self.question.type_k)

    @property
    def notes(self) -> tuple[str, ...]:
        return tuple(self.got.notes)

    def sources_text(self) -> str:
        """Each expected figure's whole source once, with the phases it is for."""
        parts = [(phase, fig) for phase, fig in (("Decode", self.got.decode), ("Decode, empty cache",
                                                                                self.got.decode_empty),
                                                 ("Prefill", self.short.prefill)) if fig is not None]
        seen: dict[str, list[str]] = {}
        for phase, fig in parts:
            seen.setdefault(fig.source.text(), []).append(phase)
        return "\n\n".join(f"{', '.join(phases)}: {text}" for text, phases in seen.items())

    def text(self) -> str:
        """The view in plain lines, as ``gguf-bench predict`` prints it."""
        lines = [f"On {self.profile_name}: {self.verdict_line()}", *(f"  {r.text()}" for r in self.rows()),
                 f"  {self.facts_line()}"]
        return "\n".join(lines)

    def to_json_dict(self) -> dict[str, Any]:
        return {"model": self.model_name, "profile": self.profile_name,
                "n_ctx": self.question.n_ctx, "flags": self.flags, "verdict": self.verdict_line(),
                "decode_depth": self.decode_depth, "rows": [r.to_json_dict() for r in self.rows()],
                "facts": self.facts_line(), "notes": list(self.notes)}


def inspector_view(facts: ModelFacts, profile: HardwareProfile, question: Question, verdict: FitVerdict | str | None,
                   ask: Ask, model_name: str = "") -> InspectorView | str | None:
    """The inspector's view of ``facts`` on ``profile`` for ``question``, its figures asked through ``ask`` (the
    CLI's :func:`app.predict.answer.answer`, the window's cache in front of it). A string: why there is no view
    (the verdict's or the answer's failure, in words); None while the verdict is not ready."""
    if verdict is None or isinstance(verdict, str):
        return verdict
    placed_at = verdict.asked if verdict.user_placed else verdict.best
    placed = (question.with_placement(placed_at.n_gpu_layers, placed_at.n_cpu_moe, placed_at.type_k)
              if placed_at is not None else question)
    got = ask(placed.at_context())
    if got is None:
        return "no prediction for this model and profile"
    short = ask(placed.short_prompt()) or got
    return InspectorView(model_name or facts.name, profile.name, question, placed, verdict, got, short, facts)


__all__ = ["Ask", "FigureRow", "InspectorView", "facts_line", "figure_row",
           "inspector_view", "largest_context"]
