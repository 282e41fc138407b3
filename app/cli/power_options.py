"""``--power-limit W`` and ``--on-battery``: the laptop GPU's power state a ``predict`` or ``choose`` answer is for."""

from __future__ import annotations

import argparse

from app.cli.arg_types import between
from app.cli.errors import UserError
from app.predict.answer import PowerError, with_power_state
from app.predict.profiles import HardwareProfile

#: --power-limit's range in watts: past any GPU's board power at both ends (a part's own range is checked after)
POWER_LIMIT_RANGE_W = (1.0, 2000.0)


def add_power_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--power-limit", dest="power_limit_w", type=between(*POWER_LIMIT_RANGE_W, unit="W"), metavar="W",
                   help="the GPU's power limit in watts, within the part's range (a laptop GPU ships at e.g. 35-115 "
                        "W; the figures otherwise assume the top; this machine's GPU: NVML's enforced limit)")
    p.add_argument("--on-battery", dest="on_battery", action="store_true",
                   help="a laptop running on battery: its GPU's limit taken at the bottom of its range unless "
                        "--power-limit gives it (this machine: what psutil reports)")


def power_state(args: argparse.Namespace, profile: HardwareProfile) -> HardwareProfile:
    """``profile`` at the power state the flags ask (as it is when they ask nothing); UserError, one line, for a
    state the part cannot be in."""
    watts, battery = getattr(args, "power_limit_w", None), bool(getattr(args, "on_battery", False))
    if watts is None and not battery:
        return profile  # as it is: a profile's top, or this machine's GPU as NVML and psutil read it
    try:
        return with_power_state(profile, watts, battery or profile.on_battery, "given")
    except PowerError as e:
        raise UserError(str(e)) from None
