"""Small statistics on raw samples: mean, median, stddev, percentiles, coefficient of variation."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

#: pyperf's rule: a result whose stdev is 10% of its mean or more may be unstable.
UNSTABLE_CV = 0.10


def mean(xs: Sequence[float]) -> float | None:
    return statistics.fmean(xs) if xs else None


def median(xs: Sequence[float]) -> float | None:
    return statistics.median(xs) if xs else None


def stddev(xs: Sequence[float]) -> float | None:
    """Sample standard deviation (n − 1); 0 for a single sample, None for none."""
    if not xs:
        return None
    return statistics.stdev(xs) if len(xs) > 1 else 0.0


def cv(xs: Sequence[float]) -> float | None:
    m, s = mean(xs), stddev(xs)
    if m is None or s is None or m == 0:
        return None
    return s / abs(m)


def percentile(xs: Sequence[float], q: float) -> float | None:
    """Linear-interpolated percentile, q in [0, 100]."""
    if not xs:
        return None
    s = sorted(xs)
    pos = (len(s) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)
