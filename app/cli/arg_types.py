"""Argparse types that check a flag's value where it enters: a whole number in a range, a finite number."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def count(low: int, high: int) -> Callable[[str], int]:
    """A whole number from ``low`` to ``high`` (``-p -5``, ``--ctx 1e400`` or ``--ctx 10**400`` are refused)."""

    def parse(text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a whole number") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text[:40]} must be between {low:,} and {high:,}")
        return value

    return parse


def finite(low: float = 0.0) -> Callable[[str], float]:
    """A finite number of at least ``low`` (``nan`` and ``inf`` are refused)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a number") from None
        if not math.isfinite(value) or value < low:
            raise argparse.ArgumentTypeError(f"{text[:40]} must be a finite number of at least {low:g}")
        return value

    return parse
