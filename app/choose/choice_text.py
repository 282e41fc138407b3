"""A verdict's short texts, the same in ``gguf-bench choose``'s table and the window's chooser table: the placement
as llama.cpp's flags, the measured quality, the measurement here. (The whole run command of the pick is
:func:`app.choose.verdicts.llama_server_command`.)"""

from __future__ import annotations

from app.choose.verdicts import NOT_MEASURED, FileChoice


def placement_flags(c: FileChoice) -> str:
    """Where the chosen configuration puts the model, as the flags that set it and the KV-cache type: "-ngl 49
    -ncmoe 30 f16" (every layer offloaded, the experts of the first 30 in system RAM), "-ngl 44 q8_0" (44 layers
    offloaded, the rest on the CPU), "-ngl 0 f16" on a CPU."""
    return f"-ngl {c.n_gpu_layers}" + (f" -ncmoe {c.n_cpu_moe}" if c.n_cpu_moe else "") + f" {c.type_k}"


def quality_text(c: FileChoice) -> str:
    """"KLD 0.0300, PPL 18.50, same-top 92.0%", or :data:`NOT_MEASURED`."""
    q = c.quality
    if q is None or q.mean_kld is None:
        return NOT_MEASURED
    parts = [f"KLD {q.mean_kld:.4f}"]
    if q.ppl is not None:
        parts.append(f"PPL {q.ppl:.2f}")
    if q.same_top_rate is not None:
        parts.append(f"same-top {q.same_top_rate * 100:.1f}%")
    return ", ".join(parts)


def measured_text(c: FileChoice) -> str:
    """"measured here: 5.5 tok/s, TTFT 840 ms (p512 n128 d0 ngl0 t2)", or "" when the file was not measured here at
    the chosen placement."""
    m = c.measured
    if m is None or m.decode_tps is None:
        return ""
    ttft = f", TTFT {m.ttft_ms:.0f} ms" if m.ttft_ms is not None else ""
    return f"measured here: {m.decode_tps:.1f} tok/s{ttft} ({m.settings})"
