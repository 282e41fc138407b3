"""Human-readable sizes and the ``gguf-bench inspect`` text report of a model's facts."""

from __future__ import annotations

from collections.abc import Sequence

from app.model.facts import ModelFacts
from app.model.kv_cache import REPORTED_CACHE_TYPES

KIB = 1024
MIB = 1024**2
GIB = 1024**3


def format_bytes(n_bytes: float) -> str:
    """MiB below 1 GiB, else GiB, followed by the exact byte count."""
    size = f"{n_bytes / GIB:.2f} GiB" if n_bytes >= GIB else f"{n_bytes / MIB:.2f} MiB"
    return f"{size} ({int(round(n_bytes)):,} bytes)"


def short_bytes(n_bytes: float | None) -> str:
    """A size in a few characters: ``1.50 GiB``, ``92 MiB``, ``3 KiB``, ``512 B``; "" for none or zero."""
    if not n_bytes:
        return ""
    for unit, scale in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if n_bytes >= scale:
            return f"{n_bytes / scale:.2f} {unit}" if unit == "GiB" else f"{n_bytes / scale:.0f} {unit}"
    return f"{int(n_bytes)} B"


def format_params(n_params: int) -> str:
    """Parameters in millions below 1e9, else billions."""
    return f"{n_params / 1e9:.2f} B" if n_params >= 1e9 else f"{n_params / 1e6:.2f} M"


def _layer_ranges(layers: Sequence[int]) -> str:
    """"0-4, 6-10, 12" for a sorted list of layer indices."""
    parts: list[str] = []
    start: int | None = None
    prev = -1
    for i in layers:
        if start is None:
            start = prev = i
        elif i == prev + 1:
            prev = i
        else:
            parts.append(str(start) if start == prev else f"{start}-{prev}")
            start = prev = i
    if start is not None:
        parts.append(str(start) if start == prev else f"{start}-{prev}")
    return ", ".join(parts)


def format_facts_text(facts: ModelFacts) -> str:
    """Aligned multi-line report of a model's facts, for ``gguf-bench inspect``."""
    label_width = 18
    lines: list[str] = []

    def row(label: str, value: object) -> None:
        lines.append(f"{label:<{label_width}}{value}")

    row("File", facts.path)
    row("File size", format_bytes(facts.file_bytes))
    row("Name", facts.name)
    row("Architecture", facts.architecture)
    row("File type", facts.file_type)
    row("Parameters", f"{format_params(facts.n_params)} ({facts.n_params:,})")
    row("Weights", f"{format_bytes(facts.weight_bytes)}, {facts.bits_per_weight:.3f} bits/weight")
    row("Layers", facts.n_layer)
    row("Embedding", facts.n_embd)
    row("Feed-forward", facts.n_ff)
    gqa = f"GQA ratio {facts.gqa_ratio:.2f}" if facts.n_head_kv else "no KV heads"
    row("Attention heads", f"{facts.n_head} query, {facts.n_head_kv} KV ({gqa})")
    row("Head dims", f"K {facts.head_dim_k}, V {facts.head_dim_v}")
    row("Vocabulary", facts.n_vocab)
    row("Train context", f"{facts.n_ctx_train} tokens")
    if facts.n_expert:
        row("Experts", f"{facts.n_expert} ({facts.n_expert_used} used per token)")
    if facts.swa_layers:
        row(
            "Sliding window",
            f"{facts.swa_window} tokens on {len(facts.swa_layers)} of {facts.n_layer} layers: "
            f"{_layer_ranges(facts.swa_layers)}",
        )
    else:
        row("Sliding window", "none")
    rule = facts.extra.get("memory_rule")
    if rule:
        known = "" if facts.extra.get("memory_rule_known", True) else " (not an architecture this workbench knows)"
        row("Memory rule", f"{rule}{known}")
    if facts.recurrent_layers:
        row("Recurrent state", f"{format_bytes(facts.state_bytes)} on {len(facts.recurrent_layers)} of "
                               f"{facts.n_layer} layers ({facts.state_r} + {facts.state_s} f32 values each), at any "
                               "context; read and written by every token")

    lines.append("")
    lines.append("Tensor types")
    header = f"  {'type':<8}{'tensors':>8}{'elements':>16}{'bytes':>16}"
    lines.append(header)
    for name, stat in facts.tensor_types.items():
        lines.append(f"  {name:<8}{stat.n_tensors:>8}{stat.n_elements:>16,}{stat.n_bytes:>16,}")

    lines.append("")
    ctx = facts.n_ctx_train
    swa_note = ", sliding-window layers capped" if facts.swa_layers else ""
    v_note = "; no V cache (MLA)" if facts.kv_layers and not any(v for _, v in facts.kv_widths()) else ""
    lines.append(f"KV cache (K and V of the same type, {facts.kv_layers} of {facts.n_layer} layers{swa_note}{v_note})")
    lines.append(f"  {'type':<8}{'KiB/token':>12}  at {ctx} tokens (train context)")
    for cache in REPORTED_CACHE_TYPES:
        per_token = facts.kv_bytes_per_token(cache)
        at_ctx = format_bytes(facts.kv_bytes(ctx, cache)) if ctx else "n/a"
        lines.append(f"  {cache:<8}{per_token / KIB:>12.2f}  {at_ctx}")
    return "\n".join(lines)
