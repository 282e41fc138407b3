"""Scenario totals: the wall time of one request, split into time to first token and decode."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Scenario:
    """Wall time of one request: prefill of the prompt (time to first token), then decode of the output."""

    prompt_tokens: int
    output_tokens: int
    ttft_s: float
    decode_s: float
    total_s: float
    ttft_share: float  # of total_s
    decode_share: float
    chars_per_s: float  # output characters per second while streaming (decode_tps × chars_per_token)
    effective_chars_per_s: float  # output characters over the whole request, prompt time included

    def to_json_dict(self) -> dict[str, object]:
        return asdict(self)


def scenario_time(
    prompt_tokens: int, output_tokens: int, prefill_tps: float, decode_tps: float, chars_per_token: float = 4.0
) -> Scenario:
    """ttft = prompt / prefill_tps; decode = output / decode_tps; shares of the total; characters per second."""
    if prefill_tps <= 0 or decode_tps <= 0:
        raise ValueError("scenario_time: speeds must be positive")
    ttft = prompt_tokens / prefill_tps
    decode = output_tokens / decode_tps
    total = ttft + decode
    chars = output_tokens * chars_per_token
    return Scenario(
        prompt_tokens=prompt_tokens, output_tokens=output_tokens, ttft_s=ttft, decode_s=decode, total_s=total,
        ttft_share=ttft / total if total else 0.0, decode_share=decode / total if total else 0.0,
        chars_per_s=decode_tps * chars_per_token, effective_chars_per_s=chars / total if total else 0.0,
    )
