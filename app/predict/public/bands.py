"""Bands of the public fit's expected figures, by the situation a figure is made in (issue #41 item 6).

A figure of the public fit (app/predict/public/fit.py) is made in one of three ways, its *basis*: the fit has rows of
the GPU itself; it has rows of the GPU's architecture only; or it is another architecture's fit, borrowed. Beside
the basis, the fit may lack what was asked (the backend, the build era or the weight family) and stand in another
for it: a *substitution*. How far a figure lands from what a user measures depends on that situation, so each
situation has its own band, made from the errors of figures made in that same situation when the fit was
cross-validated on its training rows (:meth:`PublicGpuModel.cross_validate`: each publication left out, and with it
the GPU or its whole architecture, so that every situation has errors of its own).

The band is the split-conformal interval of those errors (log of predicted ÷ measured): between the ⌊(n+1)·α/2⌋-th
and the ⌈(n+1)·(1−α/2)⌉-th smallest of n errors, α = 1 − COVERAGE. For a new figure exchangeable with them it
holds with probability at least COVERAGE, and it is the wider the fewer errors there are: a situation with fewer
than :func:`min_residuals` errors takes the band of a coarser one (any substitution, then any basis), and says so.
Pure functions.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from app.predict.public.data import SpreadFigure

#: Share of published figures a band is meant to hold (a 10–90 % interval).
COVERAGE = 0.80
#: A band is at least this wide on each side of its figure (a relative error), and always holds the figure; where
#: published repeats say how far machines spread (:func:`machine_spread`), at least that.
BAND_FLOOR = 0.05


class Basis(StrEnum):
    """What the fit that made a figure knows of the GPU, from most to least."""

    GPU = "GPU with training rows"
    ARCHITECTURE = "architecture with training rows"
    BORROWED = "borrowed fit"


class Memory(StrEnum):
    """What is uncertain about a GPU beyond the fit, which sets how far machines of one GPU name spread: a discrete GPU
    or Apple silicon has its own memory, fixed by its spec sheet; on the vendor's own backend (CUDA, Metal) one
    driver stack runs it, on Vulkan, ROCm or SYCL the driver and runtime each machine has installed (RADV or AMDVLK,
    the ROCm and hipBLASLt versions, oneAPI) move the figure too; an AMD or Intel iGPU shares system RAM whose speed
    (DDR5-5600 SO-DIMMs or LPDDR5X-8000) each machine decides."""

    FIXED = "memory fixed by the chip, the vendor's own backend"
    DRIVER = "memory fixed by the chip, a backend whose driver varies by machine"
    VARIES = "system RAM that varies by machine"


#: The backends whose driver is the vendor's one stack for that vendor's GPUs.
VENDOR_BACKENDS = {"nvidia": "CUDA", "apple": "Metal"}


def memory_of(kind: str, vendor: str, backend: str = "") -> Memory:
    """:class:`Memory` of a GPU profile's ``kind`` and ``vendor`` on ``backend`` (canonical name; "" the vendor's
    own): an AMD or Intel unified-memory part varies with the machine's RAM; another part is fixed, on the vendor's
    own backend or on one whose driver varies."""
    if kind == "unified" and vendor.lower() in ("amd", "intel"):
        return Memory.VARIES
    own = VENDOR_BACKENDS.get(vendor.lower())
    return Memory.FIXED if own is not None and backend in ("", own) else Memory.DRIVER


@dataclass(frozen=True)
class Situation:
    """How a figure was made: its basis, whether the fit stood in for a backend, era or weight family, and the GPU's
    :class:`Memory`; ``None`` in a field: any (a coarser situation, which pools the errors of the finer ones)."""

    basis: Basis | None
    substituted: bool | None
    memory: Memory | None = None

    def text(self) -> str:
        """"GPU with training rows, as asked", "borrowed fit, with a substitution", "any situation"."""
        parts = [str(self.basis) if self.basis else "any basis"]
        if self.substituted is not None:
            parts.append("with a substitution (backend, era or weight family)" if self.substituted
                         else "as asked (backend, era and weight family in the fit)")
        if self.memory is not None:
            parts.append(str(self.memory))
        return ", ".join(parts) if self.basis or self.substituted is not None or self.memory else "any situation"

    def coarser(self) -> Situation | None:
        """The situation that pools this one with its siblings: any substitution first, then any basis, then any
        memory (so a GPU on system RAM pools with its kind before it pools with the fixed-memory parts)."""
        if self.substituted is not None:
            return Situation(self.basis, None, self.memory)
        if self.basis is not None:
            return Situation(None, None, self.memory)
        if self.memory is not None:
            return Situation(None, None, None)
        return None

    def holds(self, exact: Situation) -> bool:
        """Whether a figure made in the ``exact`` situation counts in this (possibly coarser) one."""
        return (self.basis in (None, exact.basis) and self.substituted in (None, exact.substituted)
                and self.memory in (None, exact.memory))


@dataclass(frozen=True)
class MachineSpread:
    """How far one GPU's published figure of one question spreads between machines: the 10th and 90th percentile of
    each machine's figure ÷ the median of the other machines' (``low_ratio``, ``high_ratio``), from ``n_ratios``
    ratios of ``n_gpus`` GPUs; ``borrowed``: another phase's spread stands in (this phase has too few repeats)."""

    low_ratio: float
    high_ratio: float
    n_ratios: int
    n_gpus: int
    phase: str
    borrowed: str = ""

    def text(self) -> str:
        what = f"{self.borrowed}'s, " if self.borrowed else ""
        return (f"at least the spread between machines ({what}x{self.low_ratio:.2f} to x{self.high_ratio:.2f}: 80 % "
                f"of {self.n_ratios} published figures of {self.n_gpus} GPUs against the other machines')")


def machine_spread(figures: Iterable[SpreadFigure], phase: str, coverage: float = COVERAGE) -> MachineSpread | None:
    """The between-machine spread of ``phase`` from published figures (app/predict/public/data.py): per GPU that two
    or more publications gave, each publication's figure (the median of its own) ÷ the median of the others'; the
    ``coverage`` interval of those ratios (the 10th and 90th percentile at 80 %). None with fewer ratios than
    :func:`min_residuals`."""
    by_gpu: dict[str, dict[str, list[float]]] = {}
    for f in figures:
        if f.phase == phase:
            by_gpu.setdefault(f.gpu, {}).setdefault(f.publication, []).append(f.tps)
    ratios: list[float] = []
    gpus = 0
    for pubs in by_gpu.values():
        if len(pubs) < 2:
            continue
        gpus += 1
        medians = {p: statistics.median(v) for p, v in pubs.items()}
        for p, v in medians.items():
            ratios.append(v / statistics.median([m for o, m in medians.items() if o != p]))
    if len(ratios) < min_residuals(coverage):
        return None
    cuts = statistics.quantiles(ratios, n=round(2 / (1 - coverage)), method="inclusive")
    return MachineSpread(cuts[0], cuts[-1], len(ratios), gpus, phase)


@dataclass(frozen=True)
class Residual:
    """One cross-validated figure: the situation it was made in, its phase, the unit left out to make it (its
    publication), and log(predicted ÷ measured); and what made it: the row it predicts, the fold (its publication
    left out, with its GPU, or with its architecture), the figure and the row's spec-sheet ceiling."""

    situation: Situation
    phase: str
    source: str
    log_error: float
    row: int = -1
    fold: str = ""
    predicted_tps: float = 0.0
    ceiling_tps: float = 0.0


def _ranks(n: int, coverage: float) -> tuple[int, int]:
    """1-based ranks of the low and high edge among ``n`` sorted errors: ⌊(n+1)·α/2⌋ and ⌈(n+1)·(1−α/2)⌉. Rounded
    to 1e-9 first, since 1 − 0.8 is not 0.2 in binary (10 × 0.09999… would floor to 0 instead of 1)."""
    alpha = 1.0 - coverage
    return (math.floor(round((n + 1) * alpha / 2, 9)), math.ceil(round((n + 1) * (1 - alpha / 2), 9)))


def min_residuals(coverage: float = COVERAGE) -> int:
    """The fewest errors whose conformal interval at ``coverage`` is finite (9 at 80 %)."""
    n = 1
    while (ranks := _ranks(n, coverage))[1] > n or ranks[0] < 1:
        n += 1
    return n


def conformal_interval(log_errors: Sequence[float], coverage: float = COVERAGE) -> tuple[float, float] | None:
    """(low, high) of ``log_errors``: the ⌊(n+1)·α/2⌋-th and ⌈(n+1)·(1−α/2)⌉-th smallest (α = 1 − coverage); None
    with fewer than :func:`min_residuals`."""
    errs = sorted(e for e in log_errors if math.isfinite(e))
    if len(errs) < min_residuals(coverage):
        return None
    low, high = _ranks(len(errs), coverage)
    return errs[low - 1], errs[high - 1]


@dataclass(frozen=True)
class SituationBand:
    """The band of one figure: relative errors (predicted ÷ measured − 1) it spans, the situation it was asked
    for and the one whose errors made it, and how many errors of how many publications."""

    asked: Situation
    used: Situation
    phase: str
    low_error: float
    high_error: float
    n_residuals: int
    n_sources: int
    coverage: float = COVERAGE
    unit: str = "publication"  # what the cross-validation left out in turn
    floor: MachineSpread | None = None  # the spread between machines it was widened to, where it was

    @property
    def width(self) -> float:
        """High edge ÷ low edge of the band (the measured figure lies in value ÷ (1 + error))."""
        return (1.0 + self.high_error) / (1.0 + self.low_error)

    def edges(self, value: float) -> tuple[float, float]:
        """(low, high) tokens/s of a figure of ``value``."""
        return value / (1.0 + self.high_error), value / (1.0 + self.low_error)

    def text(self) -> str:
        below, above = 1.0 / (1.0 + self.high_error) - 1.0, 1.0 / (1.0 + self.low_error) - 1.0
        head = f"band {below:+.0%} to {above:+.0%} ({self.coverage:.0%})"
        if not self.n_residuals:
            return f"{head}: no cross-validated errors (one {self.unit} only), the floor alone, not a measured spread"
        if self.n_residuals < min_residuals(self.coverage):
            return (f"{head}: only {self.n_residuals} cross-validated errors in all, too few for a "
                    f"{self.coverage:.0%} band: their extremes")
        pooled = "" if self.used == self.asked else f" (too few of {self.asked.text()}: pooled)"
        floor = f"; widened to {self.floor.text()}" if self.floor is not None else ""
        return (f"{head} from {self.n_residuals} cross-validated errors of figures made the same way, "
                f"{self.used.text()}{pooled}, from {self.n_sources} {self.unit}s, each left out in turn{floor}")


def band_for(residuals: Iterable[Residual], situation: Situation, phase: str, coverage: float = COVERAGE,
             unit: str = "publication", floor: MachineSpread | None = None) -> SituationBand:
    """The band of a ``phase`` figure made in ``situation``: the conformal interval of the errors of that situation,
    else of the first coarser one with enough errors, else the extremes of all of the phase's (at least
    ±BAND_FLOOR, at least the spread between machines ``floor`` where given, and always holding the figure)."""
    own = [r for r in residuals if r.phase == phase]
    used: Situation | None = situation
    while used is not None:
        pool = [r for r in own if used.holds(r.situation)]
        interval = conformal_interval([r.log_error for r in pool], coverage)
        if interval is not None:
            break
        used = used.coarser()
    if used is None or interval is None:
        pool = own
        used = Situation(None, None)
        errs = [r.log_error for r in own] or [0.0]
        interval = (min(errs), max(errs))
    low, high = (math.expm1(v) for v in interval)
    low, high = min(low, -BAND_FLOOR), max(high, BAND_FLOOR)
    widened = None
    if floor is not None and (low > 1.0 / floor.high_ratio - 1.0 or high < 1.0 / floor.low_ratio - 1.0):
        # the measured figure lies in value ÷ (1 + error): a machine ratio r needs an error of 1/r − 1
        low, high, widened = min(low, 1.0 / floor.high_ratio - 1.0), max(high, 1.0 / floor.low_ratio - 1.0), floor
    return SituationBand(situation, used, phase, low, high, len(pool), len({r.source for r in pool}), coverage, unit,
                         widened)
