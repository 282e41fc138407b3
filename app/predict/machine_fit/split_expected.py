"""Expected decode for a placement split between a device and the host, composed from the two sides' own figures.

Decode is bandwidth-bound on each side and the layers run one after the other, so a token's time is the sum of
each side's share of the bytes it reads, taken at the rate that side reaches on its own:

    t = f_device / decode_full_offload + (1 - f_device) / decode_host_only + transfers

where ``f_device`` is the fraction of the token's bytes (weights and KV cache) read on the device,
``decode_full_offload`` the expected decode with every layer on the device (a fit of that backend, or the public
fit), ``decode_host_only`` the expected decode with nothing offloaded (this machine's CPU fit), both at the same
depth, and ``transfers`` the crossings' time (as this machine's split tests measured it, else as the ceiling
counts it). The band is the same sum at the two sides' band edges, the crossings at the most and the least their
tests gave. Without an expected figure for either side there is none for the split: its ceiling speaks instead.

Prefill is composed the same way over the prompt's work (:func:`split_prefill_expected`): the device's share at
its full-offload expected prefill, the CPU's share at its host-only one, plus the seconds spent moving host-held
weights to the device (llama.cpp's op offload moves them once per micro-batch; app/predict/ceilings/op_offload.py
says which bytes and over which link). With op offload the device does all the matmul work of a big enough
micro-batch; without it (-nopo 1, or a micro-batch under llama.cpp's minimum) the CPU does its layers' share, and
with -nkvo the CPU always does the attention.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.predict.machine_fit.fitted_model import Expected


def device_fraction(device_read_bytes: float, host_read_bytes: float) -> float:
    """The fraction of a token's bytes read on the device (0 when nothing is read)."""
    total = device_read_bytes + host_read_bytes
    return device_read_bytes / total if total > 0 else 0.0


def split_decode_expected(device: Expected | None, host: Expected | None, device_frac: float,
                          transfer_s: float = 0.0, transfer_range_s: tuple[float, float] | None = None
                          ) -> Expected | None:
    """The expected decode (tok/s) of a split that reads ``device_frac`` of its bytes on the device, from the
    full-offload figure ``device`` and the host-only figure ``host``, its crossings taking ``transfer_s`` a token
    (``transfer_range_s``: the least and most they may take, for the band; default ``transfer_s`` both); None when
    a side that reads bytes has none."""
    if not 0.0 <= device_frac <= 1.0:
        raise ValueError(f"device fraction {device_frac} is not between 0 and 1")
    sides = [(device_frac, device, "device"), (1.0 - device_frac, host, "host")]
    if any(frac > 0 and (fig is None or fig.value <= 0 or fig.low <= 0) for frac, fig, _ in sides):
        return None

    least, most = transfer_range_s if transfer_range_s is not None else (transfer_s, transfer_s)
    transfer = {"value": transfer_s, "low": most, "high": least}  # the slow edge of the band takes the most

    def rate(pick: str) -> float:
        seconds: float = transfer[pick] + sum(frac / getattr(fig, pick) for frac, fig, _ in sides if frac > 0 and fig)
        return 1.0 / seconds

    parts = "; ".join(f"{name} part ({frac:.0%} of the bytes read): {fig.source}"
                      for frac, fig, name in sides if frac > 0 and fig)
    return Expected(rate("value"), rate("low"), rate("high"),
                    f"split by the bytes each side reads per token — {parts}")


@dataclass(frozen=True)
class PrefillSplit:
    """How a split placement's prompt divides between the two sides (app/predict/ceilings/op_offload.py): the
    prompt's tokens, their work done on the device and on the CPU (in tokens' worth of the whole model's work), and
    the seconds spent moving host-held weights to the device (the figure's, the least and the most)."""

    n_prompt: int
    device_tokens: float
    host_tokens: float
    transfer_s: tuple[float, float, float] = (0.0, 0.0, 0.0)
    words: str = ""  # what the division assumed

    def __post_init__(self) -> None:
        if self.n_prompt <= 0 or self.device_tokens < 0 or self.host_tokens < 0 or min(self.transfer_s) < 0:
            raise ValueError("PrefillSplit: a prompt of tokens, non-negative work and transfers")


def split_prefill_expected(device: Expected | None, host: Expected | None, parts: PrefillSplit) -> Expected | None:
    """The expected prefill (tok/s) of a split: the device's work at its full-offload figure, the CPU's at its
    host-only figure, plus the transfers, ``parts.n_prompt`` tokens over the sum; the band is the same sum at each
    side's band edge and the transfers' least and most. None when a side that works has no figure."""
    sides = [(parts.device_tokens, device, "device"), (parts.host_tokens, host, "host")]
    if any(work > 0 and (fig is None or fig.value <= 0 or fig.low <= 0) for work, fig, _ in sides):
        return None
    value_s, least_s, most_s = parts.transfer_s

    def rate(pick: str, transfer: float) -> float:
        seconds = transfer + sum(work / getattr(fig, pick) for work, fig, _ in sides if work > 0 and fig)
        return parts.n_prompt / seconds if seconds > 0 else float("inf")

    shares = "; ".join(f"{name} part ({work / parts.n_prompt:.0%} of the prompt's work): {fig.source}"
                       for work, fig, name in sides if work > 0 and fig)
    return Expected(rate("value", value_s), rate("low", most_s), rate("high", least_s),
                    f"{parts.words}{' — ' if parts.words else ''}{shares}")
