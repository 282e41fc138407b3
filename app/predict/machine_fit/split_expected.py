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
"""

from __future__ import annotations

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
