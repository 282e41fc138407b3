"""A laptop GPU's power limit and power source as inputs: how prefill and decode scale below the part's top power.

A laptop GPU is sold across a power range (an RTX 4060 Laptop at 35-115 W) and its profile's figures, like the
published llama-bench rows behind the public fit, assume the top. A question may ask for another point
(``--power-limit W``, ``--on-battery``, the window's fields; on this machine NVML's enforced limit and psutil's
power source). Two kinds of cited data say what that point does, and neither is fitted to a held-out check:

* **Sweeps of one GPU at several limits** (``profiles/power/power_sweeps.toml``): a phase's rate at each limit as a
  share of its rate at the card's board power, read at the same share of board power on the part asked. Prefill
  (tensor-core GEMMs) falls with the limit; decode (memory-bound) holds until the board can no longer feed its
  memory.
* **The part's boost clock at both ends of its range** (``boost_clock_mhz`` in its profile, the maker's table):
  compute-bound prefill scales with the clock; the clock at the limit asked is read off the line between the two.

Prefill's factor on a part with both is their geometric mean, the band spanning both (they disagree: a desktop
board spends more of its power outside the GPU than a laptop part does); without the clock range, the sweeps'
mean, the band their spread. Decode keeps its value (the sweeps hold it within a few per cent over most of a board's
range) and its band reaches down to the sweeps' decode at that share, read no lower than the lowest share at which a
decode sweep kept at least half its rate (below it a desktop board stops feeding its memory, which says nothing of a
laptop part rated for its whole range).

On battery a laptop's firmware caps the GPU; the cap is the maker's and no cited sweep gives it, so the limit on
battery is taken at the bottom of the part's range unless a limit is given (a firmware may cap it lower still:
limits down to the sweeps' lowest share of board power are accepted), and said so. The one published reading
of a laptop GPU's decode on battery (its memory clock lowered) is held out as a check (benchmarks/split_prefill.py):
decode on battery is taken as on AC. Pure functions over the table, read once.
"""

from __future__ import annotations

import math
import statistics
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

from app.paths import PROFILES_DIR
from app.predict.profiles import HardwareProfile

POWER_SWEEPS_PATH = PROFILES_DIR / "power" / "power_sweeps.toml"
PHASES = ("prefill", "decode")
#: A decode sweep "holds" at a share of board power while it keeps at least this share of its rate; the lowest
#: share at which a decode sweep held is where the decode band stops (a board below it starves its memory).
DECODE_HOLDS_SHARE = 0.5


class PowerError(ValueError):
    """A power limit a part cannot run at, or a malformed sweep table; the message is one line."""


@dataclass(frozen=True)
class PowerSweep:
    """One GPU, one phase, at several power limits: (share of board power, share of the rate at board power)."""

    gpu: str
    phase: str
    board_power_w: float
    shares: tuple[tuple[float, float], ...]  # ascending by share of board power
    source: str
    url: str

    def at(self, share: float) -> float:
        """The rate's share at ``share`` of board power, linear between points, held at the ends."""
        xs = self.shares
        if share <= xs[0][0]:
            return xs[0][1]
        for (x0, y0), (x1, y1) in zip(xs, xs[1:], strict=False):
            if share <= x1:
                return y0 + (share - x0) / (x1 - x0) * (y1 - y0)
        return xs[-1][1]

    @property
    def lowest_share(self) -> float:
        return self.shares[0][0]


@dataclass(frozen=True)
class PowerScale:
    """What a power state does to a part's figures: each phase's factor and its band, and the words that say why."""

    watts: float  # the limit the figures are for
    top_w: float  # the part's top (what unscaled figures assume)
    prefill: float
    prefill_low: float
    prefill_high: float
    decode: float
    decode_low: float
    decode_high: float
    words: str

    def factor(self, phase: str) -> tuple[float, float, float]:
        """(value, low, high) factors of ``phase``."""
        if phase == "prefill":
            return self.prefill, self.prefill_low, self.prefill_high
        return self.decode, self.decode_low, self.decode_high

    def relative_to(self, reference: PowerScale | None) -> PowerScale:
        """These factors over ``reference``'s (the state a figure was measured at), each edge over its own."""
        if reference is None:
            return self
        return PowerScale(
            self.watts, reference.watts, self.prefill / reference.prefill, self.prefill_low / reference.prefill_low,
            self.prefill_high / reference.prefill_high, self.decode / reference.decode,
            self.decode_low / reference.decode_low, self.decode_high / reference.decode_high,
            f"{self.words}; relative to {reference.watts:g} W, the limit this machine's figures were measured at")


def _share_points(points: Sequence[object], measure: str, where: str) -> tuple[float, tuple[tuple[float, float], ...]]:
    """(the top point's watts, (watts, rate share) ascending) of a sweep's points; ``ms`` points are times."""
    pairs: list[tuple[float, float]] = []
    for p in points:
        if not (isinstance(p, list) and len(p) == 2 and all(isinstance(v, int | float) and not isinstance(v, bool)
                                                            and math.isfinite(v) and v > 0 for v in p)):
            raise PowerError(f"{where}: each point must be [watts, value], both positive, got {p!r}")
        pairs.append((float(p[0]), float(p[1])))
    if len(pairs) < 2 or len({w for w, _ in pairs}) != len(pairs):
        raise PowerError(f"{where}: needs at least two points at different limits")
    top_w, top_value = max(pairs)
    rates = [(w, (top_value / v) if measure == "ms" else (v / top_value)) for w, v in pairs]
    return top_w, tuple(sorted(rates))


def parse_power_sweeps(doc: dict[str, object], where: str) -> tuple[PowerSweep, ...]:
    """The sweeps of a parsed table, each checked: a known phase and measure, its points at and below its board
    power, its rate share at most a little above 1 (a limit below board power is never faster)."""
    sweeps: list[PowerSweep] = []
    listed = doc.get("sweep") or []
    if not isinstance(listed, list):
        raise PowerError(f"{where}: sweep must be an array of tables ([[sweep]])")
    for i, s in enumerate(listed):
        at = f"{where}: sweep {i + 1}"
        if not isinstance(s, dict):
            raise PowerError(f"{at}: not a table")
        phase, measure = s.get("phase"), s.get("measure", "tps")
        if phase not in PHASES or measure not in ("tps", "ms"):
            raise PowerError(f"{at}: phase must be prefill or decode and measure tps or ms")
        board = s.get("board_power_w")
        if not isinstance(board, int | float) or isinstance(board, bool) or board <= 0:
            raise PowerError(f"{at}: board_power_w must be positive watts")
        top_w, rates = _share_points(s.get("points") or [], str(measure), at)
        if top_w != board:
            raise PowerError(f"{at}: the top point ({top_w:g} W) must be the board power ({board:g} W)")
        if any(share > 1.05 for _, share in rates):
            raise PowerError(f"{at}: a point runs more than 5 % faster than at board power: not a power sweep")
        text = {k: s.get(k) for k in ("gpu", "source", "url")}
        if not all(isinstance(v, str) and v.strip() for v in text.values()):
            raise PowerError(f"{at}: gpu, source and url are required")
        sweeps.append(PowerSweep(str(text["gpu"]), str(phase), float(board),
                                 tuple((w / float(board), min(r, 1.0)) for w, r in rates),
                                 str(text["source"]), str(text["url"])))
    for phase in PHASES:
        if not any(s.phase == phase for s in sweeps):
            raise PowerError(f"{where}: no {phase} sweep")
    return tuple(sweeps)


def load_power_sweeps(path: Path = POWER_SWEEPS_PATH) -> tuple[PowerSweep, ...]:
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise PowerError(f"{path.name}: cannot be read ({exc})") from exc
    return parse_power_sweeps(doc, path.name)


@cache
def power_sweeps() -> tuple[PowerSweep, ...]:
    """The shipped sweeps, read once."""
    return load_power_sweeps()


def top_power_w(profile: HardwareProfile) -> float | None:
    """The power a part's unscaled figures assume: its board power, else the top of its range; None for a CPU."""
    if profile.kind == "cpu":
        return None
    return profile.tdp_w or (profile.power_limit_w[1] if profile.power_limit_w else None)


def asked_power_w(profile: HardwareProfile) -> float | None:
    """The limit ``profile``'s power state asks for: the one set, else on battery the bottom of its range; None:
    the top (nothing asked)."""
    if profile.power_limit_set_w is not None:
        return profile.power_limit_set_w
    if profile.on_battery and profile.power_limit_w:
        return profile.power_limit_w[0]
    return None


def lowest_power_w(profile: HardwareProfile, sweeps: Sequence[PowerSweep] | None = None) -> float | None:
    """The lowest limit this module speaks for on ``profile``: the lowest share of board power every prefill sweep
    measured, or the bottom of a laptop part's range where that is lower (a laptop's firmware may cap its GPU below
    the maker's range, on battery)."""
    top = top_power_w(profile)
    if top is None:
        return None
    sweeps = power_sweeps() if sweeps is None else sweeps
    swept = top * max(s.lowest_share for s in sweeps if s.phase == "prefill")
    return min(swept, profile.power_limit_w[0]) if profile.power_limit_w and not profile.tdp_w else swept


def check_power_state(profile: HardwareProfile, watts: float | None, on_battery: bool) -> None:
    """PowerError (one line naming the part and its range) for a state ``profile`` cannot be in: battery on a part
    that is not a laptop's, a limit outside the range this module speaks for."""
    if profile.kind == "cpu" or profile.is_unified:
        if watts is not None or on_battery:
            raise PowerError(f"{profile.name} is not a discrete GPU: --power-limit and --on-battery set a laptop GPU's "
                             "power")
        return
    if on_battery and not profile.is_laptop_part:
        raise PowerError(f"--on-battery: {profile.name} is a desktop part (it has no battery)")
    if watts is None:
        return
    top, low = top_power_w(profile), lowest_power_w(profile)
    if top is None or low is None:
        raise PowerError(f"--power-limit: {profile.name}'s profile gives no board power or power range")
    if not low - 1e-9 <= watts <= top + 1e-9:
        listed = profile.power_limit_w if profile.power_limit_w and not profile.tdp_w else None
        laptop = f"NVIDIA lists {listed[0]:g}-{top:g} W; " if listed else ""
        what = f"{low:.0f}-{top:g} W ({laptop}the published power sweeps reach down to {low / top:.0%} of {top:g} W)"
        raise PowerError(f"--power-limit {watts:g} W is outside what {profile.name} runs at: {what}")


def _clock_share(profile: HardwareProfile, watts: float) -> float | None:
    """The boost clock at ``watts`` over the clock at the top, on the line between the range's two ends."""
    if profile.boost_clock_mhz is None or profile.power_limit_w is None:
        return None
    (lo_w, hi_w), (lo_mhz, hi_mhz) = profile.power_limit_w, profile.boost_clock_mhz
    if hi_w <= lo_w:
        return 1.0
    t = min(max((watts - lo_w) / (hi_w - lo_w), 0.0), 1.0)
    return (lo_mhz + t * (hi_mhz - lo_mhz)) / hi_mhz


def _decode_floor_share(decode: Sequence[PowerSweep]) -> float:
    """The lowest share of board power at which a decode sweep was measured keeping DECODE_HOLDS_SHARE of its
    rate: below it the sweeps say a board starves its memory."""
    return min(min(x for x, y in s.shares if y >= DECODE_HOLDS_SHARE) for s in decode)


def power_scale(profile: HardwareProfile, sweeps: Sequence[PowerSweep] | None = None) -> PowerScale | None:
    """What ``profile``'s power state does to its figures (None: it asks for the top, or it is no discrete GPU).
    Raises PowerError for a limit it cannot run at."""
    watts = asked_power_w(profile)
    top = top_power_w(profile)
    if watts is None or top is None or profile.is_unified:
        return None
    check_power_state(profile, watts, profile.on_battery)
    return scale_at(profile, watts, top, power_sweeps() if sweeps is None else sweeps)


def scale_at(profile: HardwareProfile, watts: float, top: float, sweeps: Sequence[PowerSweep]) -> PowerScale:
    """The factors at ``watts`` of a part whose figures assume ``top`` (see the module docstring)."""
    share = watts / top
    prefill = [s for s in sweeps if s.phase == "prefill"]
    decode = [s for s in sweeps if s.phase == "decode"]
    swept = [s.at(share) for s in prefill]
    mean, low, high = statistics.fmean(swept), min(swept), max(swept)
    clock = _clock_share(profile, watts)
    where = f"{watts:g} W of {profile.name}'s " + (
        f"{profile.power_limit_w[0]:g}-{profile.power_limit_w[1]:g} W" if profile.power_limit_w and not profile.tdp_w
        else f"{top:g} W")
    cited = "; ".join(dict.fromkeys(f"{s.gpu} ({s.url})" for s in prefill))
    if clock is not None and profile.boost_clock_mhz is not None:
        value = math.sqrt(clock * mean)
        low, high = min(clock, low), max(clock, high)
        mhz = profile.boost_clock_mhz[0] + (profile.boost_clock_mhz[1] - profile.boost_clock_mhz[0]) * (
            (watts - profile.power_limit_w[0]) / (profile.power_limit_w[1] - profile.power_limit_w[0])
            if profile.power_limit_w and profile.power_limit_w[1] > profile.power_limit_w[0] else 1.0)
        why = (f"its boost clock at {watts:g} W, {mhz:,.0f} of {profile.boost_clock_mhz[1]:,.0f} MHz ({clock:.2f}, the "
               f"maker's range), and published power sweeps at {share:.0%} of board power ({mean:.2f}: {cited}); "
               f"the figure their geometric mean, the band both")
    else:
        value = mean
        why = f"published power sweeps at {share:.0%} of board power ({cited}); the band their spread"
    floor = _decode_floor_share(decode)
    held = [s.at(max(share, floor)) for s in decode if s.lowest_share <= max(share, floor)]
    decode_low = min([1.0, *held])
    decode_words = (f"decode as at the top: published sweeps hold it within {1 - decode_low:.0%} at "
                    f"{max(share, floor):.0%} of board power, the band's low edge")
    if share < floor:
        decode_words += f" (below {floor:.0%} a desktop board starves its memory; not carried to a laptop part)"
    battery = ""
    if profile.on_battery:
        battery = (" on battery" + ("" if profile.power_limit_set_w is not None else
                                    f" (the limit on battery is the maker's; taken at the bottom of the part's range, "
                                    f"{watts:g} W)")
                   + "; memory clocks on battery: no published sweep outside the held-out check, decode as on AC")
    return PowerScale(watts, top, value, low, high, 1.0, decode_low, 1.0,
                      f"at {where}{battery}: prefill ×{value:.2f} ({low:.2f}-{high:.2f}) from {why}; {decode_words}")


def with_power_state(profile: HardwareProfile, watts: float | None, on_battery: bool, source: str = "given"
                     ) -> HardwareProfile:
    """``profile`` asked at ``watts`` (None: the top, or on battery the bottom of its range) and ``on_battery``;
    PowerError (one line) for a state it cannot be in. Nothing asked: ``profile`` as it is."""
    if watts is None and not on_battery:
        return profile
    check_power_state(profile, watts, on_battery)
    return replace(profile, power_limit_set_w=watts, on_battery=on_battery, power_state_source=source)


def as_read(profile: HardwareProfile, limit_w: float | None, source: str | None) -> HardwareProfile:
    """This machine's own GPU at the state it was read in: NVML's enforced limit (held within the range this module
    speaks for: a laptop's Dynamic Boost may enforce more than its listed top) and psutil's power source. Its fit
    and stored rows were measured so; answers for it are at that state unless another is asked."""
    battery = source == "battery"
    top, low = top_power_w(profile), lowest_power_w(profile)
    if top is None or low is None or profile.is_unified or (limit_w is None and not battery):
        return profile
    watts = min(max(limit_w, low), top) if limit_w is not None else None
    if battery and not profile.is_laptop_part:
        battery = False
    return replace(profile, power_limit_set_w=watts, on_battery=battery, power_read_w=watts, battery_read=battery,
                   power_state_source="this machine: NVML's enforced limit, psutil's power source")


def power_state_words(profile: HardwareProfile) -> str:
    """One line naming the power state unscaled figures for ``profile`` assume ("" where there is none to name): a
    laptop part's figures assume the top of its range, on AC."""
    top = top_power_w(profile)
    if top is None or profile.is_unified or asked_power_w(profile) is not None:
        return ""
    if profile.power_limit_w and not profile.tdp_w:
        low, high = profile.power_limit_w
        return (f"{profile.name} ships at {low:g}-{high:g} W: these figures assume {top:g} W, the top of its range, on "
                "AC (--power-limit W and --on-battery ask for another point; a row records the limit it ran at)")
    return ""
