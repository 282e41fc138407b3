"""The order the window lists hardware profiles in: by name as a person sorts them, numbers by value.

``profiles/hardware`` keeps its files by vendor and generation and the loader keeps their order (AMD, Apple, the
data-centre cards, Intel, then NVIDIA's in five files): a list of 160 names in that order has no order a user can
see. Sorted by :func:`natural_key`, "RTX 4060" comes before "RTX 4060 Laptop", "RTX 4060 Ti 8GB" and "RTX 4070",
and "RTX 2060" before "RTX 3050".
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

_PARTS = re.compile(r"(\d+)")


def natural_key(name: str) -> tuple[tuple[int, int | str], ...]:
    """``name`` as a sort key: case-folded text, and every run of digits as its number."""
    return tuple((1, int(part)) if part.isdigit() else (0, part.casefold().strip())
                 for part in _PARTS.split(name) if part)


def sorted_names(names: Iterable[str]) -> list[str]:
    """``names`` in :func:`natural_key` order."""
    return sorted(names, key=natural_key)


def sorted_by_name(items: Sequence[object]) -> list[object]:
    """Objects with a ``name`` (hardware profiles) in :func:`natural_key` order of their names."""
    return sorted(items, key=lambda p: natural_key(str(getattr(p, "name", ""))))
