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


def counts(low: int, high: int, most: int = 16) -> Callable[[str], tuple[int, ...]]:
    """Comma-separated whole numbers from ``low`` to ``high`` (``--ctx 4096,8192``), at most ``most``, no repeats."""
    one = count(low, high)

    def parse(text: str) -> tuple[int, ...]:
        parts = [t for t in text.split(",") if t.strip()]
        if not parts:
            raise argparse.ArgumentTypeError("give at least one number")
        if len(parts) > most:
            raise argparse.ArgumentTypeError(f"at most {most} values (got {len(parts)})")
        return tuple(dict.fromkeys(one(t) for t in parts))

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


def between(low: float, high: float, unit: str = "") -> Callable[[str], float]:
    """A finite number above ``low`` and at most ``high`` (``inf``, ``nan``, ``1e-300`` where ``low`` is above it
    and ``1e400`` are refused with one line naming the range)."""
    shown = f" {unit}" if unit else ""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a number") from None
        if not (math.isfinite(value) and low < value <= high):
            raise argparse.ArgumentTypeError(f"{text[:40]} must be above {low:g} and at most {high:g}{shown}")
        return value

    return parse


def check_threads(n_threads: int) -> None:
    """``-t``: 0 (all) up to 4 × the CPU threads this process may use, as for sweeps; one line if not."""
    from app.cli.errors import UserError
    from app.run.params import THREADS_PER_CPU
    from app.telemetry.host import usable_cpu_threads

    limit = THREADS_PER_CPU * usable_cpu_threads()
    if not 0 <= n_threads <= limit:
        raise UserError(f"-t {n_threads}: must be between 0 (all) and {limit} (4 × the CPU threads this process "
                        "may use)")


#: --ram's range (GiB): from a small board to more than any workstation holds
RAM_GIB_RANGE = (0.5, 65536.0)
#: --margin's range (MiB): none, up to more than any GPU holds
MARGIN_MIB_RANGE = (0.0, 1_048_576.0)
#: GPU memory every placement leaves free by default: llama.cpp's --fit-target (common/common.h fit_params_target)
DEFAULT_MARGIN_MIB = 1024.0


def ram_gib_arg(text: str) -> float:
    value = finite(RAM_GIB_RANGE[0])(text)
    if value > RAM_GIB_RANGE[1]:
        raise argparse.ArgumentTypeError(f"{text[:40]} GiB is more RAM than any machine holds (at most "
                                         f"{RAM_GIB_RANGE[1]:g})")
    return value


def margin_mib(text: str) -> float:
    """``--margin``: MiB of GPU memory every placement leaves free."""
    value = finite(MARGIN_MIB_RANGE[0])(text)
    if value > MARGIN_MIB_RANGE[1]:
        raise argparse.ArgumentTypeError(f"{text[:40]} MiB is more than any GPU holds (at most "
                                         f"{MARGIN_MIB_RANGE[1]:g})")
    return value


def add_margin_option(p: argparse.ArgumentParser) -> None:
    """``--margin MiB``, as ``predict`` and ``choose`` take it."""
    p.add_argument("--margin", dest="margin_mib", type=margin_mib, default=DEFAULT_MARGIN_MIB, metavar="MiB",
                   help=f"GPU memory every placement leaves free (default {DEFAULT_MARGIN_MIB:g}, as llama.cpp's "
                        "--fit-target): a card filled to the last MiB fails to load or spills into shared memory")
