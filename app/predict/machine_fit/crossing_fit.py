"""What one device crossing costs on this machine, learned from its own split runs.

A decoded token of a split placement changes device where consecutive ops sit apart (``app/predict/ceilings/decode.py``:
into and out of each host-held layer's experts with ``-ncmoe``, of a feed-forward kept on the host by ``-ot``, of
each layer's attention with ``-nkvo``). Without a measurement each crossing is taken to cost its bytes over PCIe
plus a copy's latency (:data:`app.predict.ceilings.decode.PCIE_COPY_LATENCY_S`, 10 µs: a discrete GPU's launch and
wait). What it really costs is the driver's: a submit and a fence wait, milliseconds on Mesa's software device
(``benchmarks/split_decode_floor.py``). A split test measured here, with ``k`` extra crossings and both of its sides
predicted by this machine's fit, says what one cost:

    c = (1 / measured decode − (f / decode_device_alone + (1 − f) / decode_host_alone)) / k

(``f`` the share of the token's bytes read on the device, :mod:`app.predict.machine_fit.split_expected`). The cost of a
GPU backend is the median over its split tests, at least 0, and its band runs from the least to the most the tests give
with their sides and their own measurement at the edges of the fit's bands (a split test is as noisy as any test
of that backend here); calibration measures such tests on a GPU build.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from app.model.facts import ModelFacts
from app.predict.ceilings.decode import DecodeBytes, decode_bytes
from app.predict.machine_fit.fitted_model import Expected
from app.predict.settings import PredictSettings, placed_weights
from app.results.fields import RowStatus
from app.results.phases import row_rate
from app.results.row_types import ResultRow

#: ``MachineFit.expected``'s shape: (facts, settings, backend) -> phase -> figure.
ExpectedOf = Callable[[ModelFacts, PredictSettings, str], Mapping[str, Expected | None]]


@dataclass(frozen=True)
class CrossingCost:
    """Seconds one extra device crossing costs a decoded token on one GPU backend of this machine, and the split
    tests it was learned from (label, the seconds each gave)."""

    seconds: float
    points: tuple[tuple[str, float], ...]
    #: the least and the most a crossing may cost (at least 0): over the tests, each taken with its sides at the
    #: edges of their bands (a side's error lands in what the test says a crossing costs); None: the points' range
    low_s: float | None = None
    high_s: float | None = None

    @property
    def range_s(self) -> tuple[float, float]:
        """The least and the most one crossing costs (at least 0): the band of what the crossings add."""
        costs = [max(c, 0.0) for _, c in self.points] or [self.seconds]
        low = min(costs) if self.low_s is None else self.low_s
        high = max(costs) if self.high_s is None else self.high_s
        return max(min(low, self.seconds), 0.0), max(high, self.seconds)

    def describe(self) -> str:
        return (f"{self.seconds * 1e3:.2f} ms each, as this machine's calibration measured "
                f"({len(self.points)} split test{'s' if len(self.points) != 1 else ''})")

    def to_json_dict(self) -> dict[str, Any]:
        return {"seconds": self.seconds, "points": [list(p) for p in self.points], "low_s": self.low_s,
                "high_s": self.high_s}

    @classmethod
    def from_json_dict(cls, d: Mapping[str, Any]) -> CrossingCost:
        """Raises ValueError (or KeyError/TypeError) on another shape or a negative or non-finite cost."""
        seconds = float(d["seconds"])
        if not 0.0 <= seconds < float("inf"):
            raise ValueError(f"a crossing cost of {seconds} s is not a non-negative finite number")
        low, high = (None if d.get(k) is None else float(d[k]) for k in ("low_s", "high_s"))
        return cls(seconds, tuple((str(label), float(c)) for label, c in d["points"]), low, high)


def split_decode_bytes(facts: ModelFacts, s: PredictSettings) -> DecodeBytes:
    """A decoded token's bytes on each side and its extra crossings with ``s``'s placement, at the depth a
    prediction takes decode at (the prompt and half the generated tokens past ``s.depth``)."""
    split, _, offload_kqv = placed_weights(facts, s, facts.tensor_bytes or None)
    return decode_bytes(facts, split, s.decode_depth, s.type_k, s.type_v or s.type_k, offload_kqv)


def crossing_seconds(row: ResultRow, facts: ModelFacts, expected: ExpectedOf
                     ) -> tuple[str, float, float, float] | None:
    """(the row's GPU backend, seconds per extra crossing it gives, the least and the most with the sides at their
    band edges), or None when it is no split with extra crossings, measured no decode, or a side has no expected
    figure."""
    backend = row.backends or ""
    rate = row_rate(row, "decode_tps")
    if (row.status != RowStatus.OK or (row.n_parallel or 1) != 1 or not backend
            or backend == "CPU" or rate is None):
        return None
    s = PredictSettings.from_row(row)
    read = split_decode_bytes(facts, s)
    total = read.gpu_bytes + read.host_bytes
    if read.extra_crossings <= 0 or total <= 0:
        return None
    full = replace(s, n_gpu_layers=999, n_cpu_moe=0, no_kv_offload=False, tensor_buft_overrides="none")
    device = expected(facts, full, backend).get("decode")
    host = expected(facts, replace(full, n_gpu_layers=0), "CPU").get("decode")
    if device is None or host is None or device.value <= 0 or host.value <= 0:
        return None
    frac = read.gpu_bytes / total

    # the measurement is as uncertain as any of this backend here: the device fit's band (calibration widens it
    # to the spread between its passes), and so are the sides: at their slow edge, and the test at its fast one,
    # they leave the least for the crossings; the other way round the most
    noise = max(device.high / device.value - 1.0, 0.0)

    def per_crossing(pick: str, measured_s: float) -> float:
        sides_s: float = frac / getattr(device, pick) + (1.0 - frac) / getattr(host, pick)
        return (measured_s - sides_s) / read.extra_crossings

    return (backend, per_crossing("value", 1.0 / rate), per_crossing("low", 1.0 / (rate * (1.0 + noise))),
            per_crossing("high", (1.0 + noise) / rate))


def learn_crossing_costs(rows: Sequence[ResultRow], facts_of: Callable[[str], ModelFacts | None],
                         expected: ExpectedOf, label_of: Callable[[ResultRow], str]
                         ) -> dict[str, CrossingCost]:
    """Each GPU backend's crossing cost from the split rows among ``rows`` (the caller's trusted ones)."""
    found: dict[str, list[tuple[str, float, float, float]]] = {}
    for row in rows:
        facts = facts_of(row.model_path or "")
        got = crossing_seconds(row, facts, expected) if facts is not None else None
        if got is not None:
            found.setdefault(got[0], []).append((label_of(row), *got[1:]))
    return {backend: CrossingCost(max(statistics.median(c for _, c, _, _ in pts), 0.0),
                                  tuple((label, c) for label, c, _, _ in pts),
                                  max(min(lo for _, _, lo, _ in pts), 0.0), max(max(hi for _, _, _, hi in pts), 0.0))
            for backend, pts in found.items()}
