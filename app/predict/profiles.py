"""Hardware profiles: the GPU spec table in ``profiles/hardware/*.toml`` plus the user's own TOML files.

Each file holds an array of ``[[gpu]]`` tables. Keys (units in the names):

========================  ========  ==========================================================
key                       type      meaning
========================  ========  ==========================================================
name                      str       display name, unique across all files ("RTX 4060 Laptop")
vendor                    str       "NVIDIA", "AMD", "Apple", ...
kind                      str       "laptop" | "desktop" | "unified" | "server"
vram_gib                  number    memory in GiB (unified: the largest configuration)
memory_bus_bits           int       memory interface width
memory_data_rate_gbps     number    effective per-pin data rate (16.0 for 16 Gbps GDDR6)
peak_bandwidth_gbps       number    GB/s; must equal bus / 8 × data rate within 2 % (not checked for unified)
fp16_tensor_tflops        number    dense FP16 tensor TFLOPS (which flavour: see the file's header)
source                    str       where the figures come from (which page, which entry, which figures are computed)
source_url                str       optional page the figures were read from: an https:// URL, or a repository file
                                    as "github:owner/repo@<40-hex commit>:path"
memory_type               str       optional ("GDDR6", "HBM3", ...)
tdp_w                     number    optional fixed board power
power_limit_w             [lo, hi]  optional power range for parts that vary (laptops)
aliases                   [str]     optional other names, including the NVML device name
notes                     str       optional
architecture              str       optional GPU architecture ("Ada", "Ampere", "Apple silicon"...; default ""):
                                    the public-measurement fit (app/predict/public/fit.py) pools GPUs by it
pcie_gen                  int       optional PCIe generation of the GPU's link (1-6): with pcie_lanes it bounds
                                    prefill whenever weights live in system RAM (app/predict/ceilings/op_offload.py)
pcie_lanes                int       optional lanes of that link (1, 2, 4, 8 or 16)
pcie_source               str       where the link comes from (required with pcie_gen)
boost_clock_mhz           [lo, hi]  optional boost clock at the bottom and the top of power_limit_w (a laptop
                                    part's range as its maker lists it): how compute scales with the power limit
                                    (app/predict/power.py); its source is said in ``source``
========================  ========  ==========================================================

A user profile with the same name as a built-in one replaces it.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from app.bounded_read import TomlFileError, read_toml
from app.paths import HARDWARE_PROFILES_DIR, REPO_ROOT, data_dir
from app.toml_tables import check_table

GIB = 1024**3
KINDS: tuple[str, ...] = ("laptop", "desktop", "unified", "server", "cpu")
FILE_KINDS: tuple[str, ...] = ("laptop", "desktop", "unified", "server")  # kinds a TOML file may use
BANDWIDTH_TOLERANCE = 0.02

_REQUIRED: dict[str, tuple[type, ...]] = {
    "name": (str,),
    "vendor": (str,),
    "kind": (str,),
    "vram_gib": (int, float),
    "memory_bus_bits": (int,),
    "memory_data_rate_gbps": (int, float),
    "peak_bandwidth_gbps": (int, float),
    "fp16_tensor_tflops": (int, float),
    "source": (str,),
}
_OPTIONAL: dict[str, tuple[type, ...]] = {
    "memory_type": (str,),
    "tdp_w": (int, float),
    "power_limit_w": (list,),
    "aliases": (list,),
    "notes": (str,),
    "architecture": (str,),
    "source_url": (str,),
    "pcie_gen": (int,),
    "pcie_lanes": (int,),
    "pcie_source": (str,),
    "boost_clock_mhz": (list,),
}
#: PCIe generations and lane counts a profile may give (PCI-SIG's generations 1-6; a GPU's link is x1 to x16).
PCIE_GENERATIONS = (1, 2, 3, 4, 5, 6)
PCIE_LANE_COUNTS = (1, 2, 4, 8, 16)
#: A source_url: a web page, or one file of a public repository at one commit ("github:owner/repo@commit:path").
SOURCE_URL_PATTERN = re.compile(r"https://[^\s/]+\.[^\s/]+(/\S*)?|github:[\w.-]+/[\w.-]+@[0-9a-f]{40}:\S+")
MAX_SOURCE_URL_CHARS = 500
_POSITIVE = (
    "vram_gib", "memory_bus_bits", "memory_data_rate_gbps", "peak_bandwidth_gbps", "fp16_tensor_tflops", "tdp_w"
)
#: The range of each number a profile may give: far past any real part at both ends (a GPU of 16 TiB, a bus of 64k
#: bits, 1 PB/s), so a value outside is a typo or an attack, never hardware.
_BOUNDS: dict[str, tuple[float, float]] = {
    "vram_gib": (0.01, 16384.0), "memory_bus_bits": (1, 65536), "memory_data_rate_gbps": (0.01, 1000.0),
    "peak_bandwidth_gbps": (0.1, 1e6), "fp16_tensor_tflops": (1e-3, 1e6), "tdp_w": (0.1, 1e5),
}
#: The longest name, vendor or kind a profile may give (a lookup takes no longer name either).
MAX_NAME_CHARS = 200
_NOISE_WORDS = frozenset({"nvidia", "geforce", "amd", "radeon", "intel", "apple", "gpu", "graphics"})


class ProfileError(ValueError):
    """A hardware profile file is malformed, or a lookup failed; the message is one line."""


@dataclass(frozen=True)
class HardwareProfile:
    """One accelerator (or the measured CPU side, kind "cpu"). For "cpu", fp16_tensor_tflops is the measured rate."""

    name: str
    vendor: str
    kind: str
    vram_gib: float
    memory_bus_bits: int
    memory_data_rate_gbps: float
    peak_bandwidth_gbps: float
    fp16_tensor_tflops: float
    source: str
    memory_type: str = ""
    tdp_w: float | None = None
    power_limit_w: tuple[float, float] | None = None
    aliases: tuple[str, ...] = ()
    notes: str = ""
    path: str = ""  # file the profile came from; "" for constructed profiles
    #: this machine's CPU only: the extra buffer types its llama.cpp repacks weights into (registry order, from the
    #: repack guard's probe) and the CPU's feature flags, which decide the weights each takes (predict.memory.repack)
    repack_buffers: tuple[str, ...] = ()
    cpu_flags: tuple[str, ...] = ()
    #: the system RAM of the machine around a GPU (GiB) and where that figure comes from ("given"); None: this
    #: machine's own, or an assumption by the kind of part (app.predict.answer.host_ram)
    host_ram_gib: float | None = None
    host_ram_source: str = ""
    architecture: str = ""  # pools GPUs for the public-measurement fit; "" unknown
    source_url: str = ""  # the page (or repository file at a commit) the figures were read from; "" none
    #: the GPU's PCIe link (generation, lanes) and where it comes from; None: not known
    pcie_gen: int | None = None
    pcie_lanes: int | None = None
    pcie_source: str = ""
    #: the boost clock (MHz) at the bottom and the top of ``power_limit_w`` (a laptop part's range)
    boost_clock_mhz: tuple[float, float] | None = None
    #: the power state a question asks for (``--power-limit W``, ``--on-battery``, the window's fields, or this
    #: machine's NVML limit and psutil power source) and where it comes from; None/False: the part at the top of
    #: its range (its board power), on AC (app/predict/power.py)
    power_limit_set_w: float | None = None
    on_battery: bool = False
    power_state_source: str = ""
    #: this machine's own GPU: the power limit NVML enforced and whether it ran on battery when it was looked at (its
    #: fit and stored rows were measured so); None: not this machine's, or not read
    power_read_w: float | None = None
    battery_read: bool | None = None

    @property
    def is_laptop_part(self) -> bool:
        """A laptop GPU: sold across a power range rather than at one board power (or named so)."""
        return bool(self.power_limit_w and not self.tdp_w) or "laptop" in self.name.lower()

    @property
    def vram_bytes(self) -> int:
        return int(self.vram_gib * GIB)

    @property
    def bus_bandwidth_gbps(self) -> float:
        """bus / 8 × per-pin data rate, in GB/s."""
        return self.memory_bus_bits / 8 * self.memory_data_rate_gbps

    @property
    def is_unified(self) -> bool:
        """True when the GPU shares the host's memory pool (Apple silicon) or there is no GPU at all."""
        return self.kind in ("unified", "cpu")

    def names(self) -> tuple[str, ...]:
        return (self.name, *self.aliases)

    def to_json_dict(self) -> dict[str, object]:
        return {
            "name": self.name, "vendor": self.vendor, "kind": self.kind, "vram_gib": self.vram_gib,
            "memory_type": self.memory_type, "memory_bus_bits": self.memory_bus_bits,
            "memory_data_rate_gbps": self.memory_data_rate_gbps, "peak_bandwidth_gbps": self.peak_bandwidth_gbps,
            "fp16_tensor_tflops": self.fp16_tensor_tflops, "tdp_w": self.tdp_w,
            "power_limit_w": list(self.power_limit_w) if self.power_limit_w else None,
            "aliases": list(self.aliases), "source": self.source, "notes": self.notes, "path": self.path,
            "architecture": self.architecture, "source_url": self.source_url,
            "pcie_gen": self.pcie_gen, "pcie_lanes": self.pcie_lanes, "pcie_source": self.pcie_source,
            "boost_clock_mhz": list(self.boost_clock_mhz) if self.boost_clock_mhz else None,
            "power_limit_set_w": self.power_limit_set_w, "on_battery": self.on_battery,
            "power_state_source": self.power_state_source,
        }


def with_given_ram(profile: HardwareProfile, ram_gib: float | None) -> HardwareProfile:
    """``profile`` with the system RAM a user gave (``--ram``) beside its GPU; ValueError (one line) where there is
    no such RAM to give: a CPU or unified memory holds the model in the profile's own pool."""
    if ram_gib is None:
        return profile
    if profile.is_unified:
        pool = "this machine's system RAM" if profile.kind == "cpu" else "its unified memory"
        raise ValueError(f"--ram is the system RAM beside a discrete GPU; {profile.name} holds the model in {pool} "
                         f"({profile.vram_gib:.1f} GiB): drop --ram, or name a discrete GPU with --hw")
    return replace(profile, host_ram_gib=ram_gib, host_ram_source="given")


def cpu_profile(name: str, bandwidth_gbps: float, gflops: float, ram_bytes: int) -> HardwareProfile:
    """A profile for the host CPU from measured memory bandwidth (GB/s) and matmul rate (GFLOPS)."""
    if bandwidth_gbps <= 0 or gflops <= 0 or ram_bytes <= 0:
        raise ValueError("cpu_profile: bandwidth_gbps, gflops and ram_bytes must be positive")
    return HardwareProfile(
        name=name, vendor="CPU", kind="cpu", vram_gib=ram_bytes / GIB, memory_bus_bits=0,
        memory_data_rate_gbps=0.0, peak_bandwidth_gbps=float(bandwidth_gbps),
        fp16_tensor_tflops=gflops / 1000.0, source="measured", notes="host RAM; figures measured on this machine",
    )


def _check_entry(entry: object, where: str) -> HardwareProfile:
    """Validate one ``[[gpu]]`` table; ``where`` is the file path used in messages."""
    if not isinstance(entry, dict):
        raise ProfileError(f"{where}: each [[gpu]] entry must be a table")
    label = f"{where}: gpu {entry['name']!r}" if isinstance(entry.get("name"), str) else f"{where}: gpu entry"
    check_table(entry, _REQUIRED, _OPTIONAL, label, ProfileError)
    for key, value in entry.items():
        if key in _POSITIVE and value <= 0:
            raise ProfileError(f"{label}: {key} must be positive, got {value!r}")
        if key in _BOUNDS and not _BOUNDS[key][0] <= value <= _BOUNDS[key][1]:  # 1e308 GiB overflowed a byte
            low, high = _BOUNDS[key]  # count, 1e-301 GB/s a time
            raise ProfileError(f"{label}: {key} must be between {low:g} and {high:g}, got {value!r}")
        if key in ("name", "vendor", "kind") and len(value) > MAX_NAME_CHARS:
            raise ProfileError(f"{label}: {key} is {len(value):,} characters long (at most {MAX_NAME_CHARS})")
        if key in ("name", "vendor", "source") and not value.strip():
            raise ProfileError(f"{label}: {key} must not be empty")
    url = entry.get("source_url")
    if url is not None and (len(url) > MAX_SOURCE_URL_CHARS or not SOURCE_URL_PATTERN.fullmatch(url)):
        raise ProfileError(f"{label}: source_url must be an https:// URL or \"github:owner/repo@<40-hex commit>:path\" "
                           f"(at most {MAX_SOURCE_URL_CHARS} characters), got {url[:80]!r}")
    if entry["kind"] not in FILE_KINDS:
        raise ProfileError(f"{label}: kind {entry['kind']!r} is not one of {', '.join(FILE_KINDS)}")
    aliases = entry.get("aliases", [])
    if not all(isinstance(a, str) and a.strip() for a in aliases):
        raise ProfileError(f"{label}: aliases must be non-empty strings")
    power = entry.get("power_limit_w")
    if power is not None:
        ok = len(power) == 2 and all(isinstance(p, int | float) and not isinstance(p, bool) and 0.1 <= p <= 1e5
                                     for p in power)
        if not ok or power[0] > power[1]:
            raise ProfileError(f"{label}: power_limit_w must be [low, high] positive watts, got {power!r}")
    pcie_gen, pcie_lanes = entry.get("pcie_gen"), entry.get("pcie_lanes")
    if pcie_gen is not None and pcie_gen not in PCIE_GENERATIONS:
        raise ProfileError(f"{label}: pcie_gen must be one of {', '.join(map(str, PCIE_GENERATIONS))}, "
                           f"got {pcie_gen!r}")
    if pcie_lanes is not None and pcie_lanes not in PCIE_LANE_COUNTS:
        raise ProfileError(f"{label}: pcie_lanes must be one of {', '.join(map(str, PCIE_LANE_COUNTS))}, "
                           f"got {pcie_lanes!r}")
    pcie_source = entry.get("pcie_source", "").strip()
    if (pcie_gen is None) != (pcie_lanes is None) or (pcie_gen is not None and not pcie_source):
        raise ProfileError(f"{label}: pcie_gen, pcie_lanes and pcie_source go together (the link, where it is read)")
    clock = entry.get("boost_clock_mhz")
    if clock is not None:
        ok = len(clock) == 2 and all(isinstance(c, int | float) and not isinstance(c, bool) and 1 <= c <= 1e5
                                     for c in clock)
        if not ok or clock[0] > clock[1] or power is None:
            raise ProfileError(f"{label}: boost_clock_mhz must be [at the bottom, at the top] of power_limit_w in MHz, "
                               f"got {clock!r}" + ("" if power is not None else " (no power_limit_w)"))
    profile = HardwareProfile(
        name=entry["name"].strip(), vendor=entry["vendor"], kind=entry["kind"], vram_gib=float(entry["vram_gib"]),
        memory_bus_bits=entry["memory_bus_bits"], memory_data_rate_gbps=float(entry["memory_data_rate_gbps"]),
        peak_bandwidth_gbps=float(entry["peak_bandwidth_gbps"]), fp16_tensor_tflops=float(entry["fp16_tensor_tflops"]),
        source=entry["source"], memory_type=entry.get("memory_type", ""),
        tdp_w=float(entry["tdp_w"]) if "tdp_w" in entry else None,
        power_limit_w=(float(power[0]), float(power[1])) if power else None,
        aliases=tuple(a.strip() for a in aliases), notes=entry.get("notes", ""), path=where,
        architecture=entry.get("architecture", "").strip(), source_url=entry.get("source_url", ""),
        pcie_gen=pcie_gen, pcie_lanes=pcie_lanes, pcie_source=entry.get("pcie_source", ""),
        boost_clock_mhz=(float(clock[0]), float(clock[1])) if clock else None,
    )
    if profile.kind != "unified":
        expected = profile.bus_bandwidth_gbps
        if abs(profile.peak_bandwidth_gbps - expected) > BANDWIDTH_TOLERANCE * expected:
            raise ProfileError(
                f"{label}: peak_bandwidth_gbps {entry['peak_bandwidth_gbps']:g} disagrees with bus "
                f"{profile.memory_bus_bits} bit × {profile.memory_data_rate_gbps:g} Gbps = {expected:.1f}"
            )
    return profile


def _display_path(path: Path) -> str:
    """``profiles/hardware/x.toml`` for built-in files, the full path otherwise."""
    try:
        return str(path.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


def load_profile_file(path: Path) -> list[HardwareProfile]:
    """Read and validate one TOML file of ``[[gpu]]`` tables."""
    where = _display_path(path)
    try:
        doc = read_toml(path)
    except TomlFileError as e:
        says = {"invalid": f"not valid TOML: {e.cause}", "nested": f"not a hardware profile ({e.cause})",
                "not_regular": e.cause}.get(e.kind, f"cannot read: {e.cause}")
        raise ProfileError(f"{where}: {says}") from None
    extra = sorted(set(doc) - {"gpu"})
    if extra:
        raise ProfileError(f"{where}: unknown top-level key {extra[0]!r} (only [[gpu]] tables are allowed)")
    entries = doc.get("gpu", [])
    if not isinstance(entries, list):
        raise ProfileError(f"{where}: 'gpu' must be an array of tables ([[gpu]])")
    profiles = [_check_entry(e, where) for e in entries]
    seen: dict[str, str] = {}
    for p in profiles:
        for n in dict.fromkeys(n.casefold() for n in p.names()):  # a profile may repeat its own name
            key = n
            if key in seen:
                raise ProfileError(f"{where}: gpu {p.name!r}: name or alias {n!r} already used by {seen[key]!r}")
            seen[key] = p.name
    return profiles


def user_profiles_dir() -> Path:
    """Where users put their own hardware TOML files (``<data dir>/hardware``)."""
    return data_dir() / "hardware"


def load_profiles(dirs: list[Path] | None = None) -> list[HardwareProfile]:
    """All profiles from ``dirs`` in order (default: built-in dir, then the user dir); later names replace earlier."""
    if dirs is None:
        dirs = [HARDWARE_PROFILES_DIR, user_profiles_dir()]
    by_name: dict[str, HardwareProfile] = {}
    for d in dirs:
        if not d.is_dir():
            continue
        in_dir: dict[str, HardwareProfile] = {}  # every name and alias seen in this directory
        for path in sorted(d.glob("*.toml")):
            for p in load_profile_file(path):
                for n in p.names():
                    other = in_dir.get(n.casefold())
                    if other is not None and other is not p:
                        msg = f"{p.path}: gpu {p.name!r}: name or alias {n!r} already used in {other.path}"
                        raise ProfileError(msg)
                    in_dir[n.casefold()] = p
                by_name.pop(p.name.casefold(), None)  # a later directory replaces a same-named profile
                by_name[p.name.casefold()] = p
    return list(by_name.values())


#: Longest name a lookup takes (a flag or a TOML value): longer is refused before any matching.
MAX_QUERY_CHARS = 200
#: How many profiles a refused lookup offers ("did you mean"), and the difflib ratio one must reach when it has
#: under half of the query's words (nearest_profiles).
NEAREST_LIMIT = 6
NEAREST_MIN_RATIO = 0.6
#: Words that say a laptop part: "RTX 4060 Mobile", "RTX 3080 Max-Q" are laptop names ("laptop" once normalized).
_LAPTOP_WORDS = frozenset({"laptop", "mobile", "notebook"})
#: Series words a laptop query may leave out ("4060 laptop" for "RTX 4060 Laptop"), never the model number.
_SERIES_WORDS = frozenset({"rtx", "gtx", "rx", "arc", "quadro"})


def _normalize(text: str) -> str:
    """The form names are compared in: lower case; trademark marks and a Vulkan driver tag ("(RADV NAVI31)")
    dropped; a digit run split from the letters after it ("4060Ti", "12GB" → "4060 ti", "12 gb"); punctuation to
    spaces; vendor and brand words (NVIDIA, GeForce, AMD, Radeon, Intel, Apple, GPU, Graphics) dropped; "Max-Q",
    "mobile" and "notebook" read as "laptop". "NVIDIA GeForce RTX 4060 Laptop GPU" → "rtx 4060 laptop",
    "AMD Radeon(TM) 8060S Graphics" → "8060 s" (as "Radeon 8060S" is)."""
    t = text.casefold()
    t = re.sub(r"\((?:tm|r|c)\)|[\u2122\u00ae\u00a9]", " ", t)
    t = re.sub(r"\((?:radv|amdvlk|llvmpipe)\b[^)]*\)", " ", t)
    t = re.sub(r"\bwith max-?q design\b|\bmax[- ]?q\b", " laptop ", t)
    t = re.sub(r"(\d)([a-z])", r"\1 \2", t)
    out: list[str] = []
    for w in re.sub(r"[^0-9a-z]+", " ", t).split():
        w = "laptop" if w in _LAPTOP_WORDS else w
        if w not in _NOISE_WORDS and not (w == "laptop" and w in out):
            out.append(w)
    return " ".join(out)


def _unique(matches: Iterable[HardwareProfile]) -> list[HardwareProfile]:
    seen: dict[int, HardwareProfile] = {}
    for p in matches:
        seen.setdefault(id(p), p)
    return list(seen.values())


def _laptop_words(normalized: str) -> frozenset[str]:
    """A laptop name's words without its series word: the set a laptop query must equal."""
    return frozenset(normalized.split()) - _SERIES_WORDS


def _exact_matches(query: str, profiles: Sequence[HardwareProfile]) -> list[HardwareProfile]:
    """Profiles one of whose names is ``query``: as written (case aside), else once both are normalized."""
    q, qn = query.casefold(), _normalize(query)
    found = _unique(p for p in profiles if any(n.casefold() == q for n in p.names()))
    if found or not qn:
        return found
    return _unique(p for p in profiles if any(_normalize(n) == qn for n in p.names()))


def _matches(query: str, profiles: Sequence[HardwareProfile]) -> list[HardwareProfile]:
    """What ``query`` names (see :func:`find_profile`): the exact matches, else, for a laptop query only, the
    laptop profiles whose names have the same words in any order, the series word optional."""
    found = _exact_matches(query, profiles)
    words = _laptop_words(_normalize(query))
    if found or "laptop" not in words or len(words) < 2:
        return found
    return _unique(p for p in profiles if p.kind == "laptop"
                   and any(_laptop_words(_normalize(n)) == words for n in p.names()))


def _likeness(query_normalized: str, name: str) -> tuple[float, float]:
    """(share of the query's words in ``name``, difflib ratio), both normalized: the order candidates are offered in."""
    n = _normalize(name)
    q_words = query_normalized.split()
    share = sum(w in n.split() for w in q_words) / len(q_words) if q_words else 0.0
    return share, difflib.SequenceMatcher(None, query_normalized, n).ratio()


def nearest_profiles(query: str, profiles: Sequence[HardwareProfile], limit: int = NEAREST_LIMIT) -> list[str]:
    """The names of the profiles most like ``query``, best first, at most ``limit``: first by the share of the
    query's words a name has, then by difflib's ratio; none with under half the words and a ratio under
    NEAREST_MIN_RATIO. "RTX 3070 Ti" offers the RTX 3070 Ti Laptop first, then the RTX 3060 Ti, 3080 Ti, ..."""
    qn = _normalize(query[:MAX_QUERY_CHARS])
    scored = [(max(_likeness(qn, n) for n in p.names()), p.name) for p in profiles]
    scored.sort(key=lambda s: (-s[0][0], -s[0][1], s[1]))
    return [name for (share, ratio), name in scored if share >= 0.5 or ratio >= NEAREST_MIN_RATIO][:limit]


def _shown(query: str) -> str:
    """``query`` for a one-line message: whitespace folded, cut at 60 characters."""
    q = " ".join(query.split())
    return f'"{q[:60]}…"' if len(q) > 60 else f'"{q}"'


def find_profile(query: str, profiles: Sequence[HardwareProfile]) -> HardwareProfile:
    """The profile ``query`` names exactly; anything else raises ProfileError, one line listing the nearest.

    A query names a profile when it is the profile's name or one of its aliases (which hold the NVML and Vulkan
    device names), compared as written (case aside), else normalized (:func:`_normalize`): "RTX 4060 Laptop",
    "NVIDIA GeForce RTX 4060 Laptop GPU", "rtx 4060 mobile" and "AMD Radeon RX 7900 XTX (RADV NAVI31)" resolve;
    "RTX 30", "4060", "7900" and "RX 7900 XT" (there is no XT profile) do not. One looser rule, for laptop parts
    only: a query with the word laptop (or mobile, notebook, Max-Q) also names the laptop profile whose name has the
    same words in any order, the series word (RTX, GTX, RX, Arc, Quadro) optional: "4060 laptop" and "laptop 4060"
    are the RTX 4060 Laptop, "3070 laptop" the RTX 3070 Laptop (not the 3070 Ti Laptop).

    A name without a laptop word never resolves to a laptop part: "RTX 3070 Ti" and "NVIDIA GeForce RTX 3070 Ti" are
    the desktop card, refused with "did you mean" while there is no desktop profile. A name that several profiles
    claim (a user's profile with a built-in alias) is refused with them as candidates. Where one product name covers
    two memory sizes, the bare name is an explicit alias of one of them in the TOML ("RTX 3060" and the NVML name
    are the 12 GB card, the common one; "RTX 4060 Ti" the 16 GB one): the profile's name in every output says which.
    """
    q = query.strip()
    if not q:
        raise ProfileError("empty hardware profile name")
    if len(q) > MAX_QUERY_CHARS:
        raise ProfileError(f"hardware profile name is {len(q)} characters long (at most {MAX_QUERY_CHARS})")
    found = _matches(q, profiles)
    if len(found) == 1:
        return found[0]
    if found:
        names = ", ".join(sorted(p.name for p in found))
        raise ProfileError(f"hardware profile {_shown(q)} is ambiguous — did you mean: {names}")
    near = nearest_profiles(q, profiles)
    hint = (f"did you mean: {', '.join(near)}" if near
            else "none is close (add a [[gpu]] table to <data dir>/hardware/*.toml)")
    raise ProfileError(f"no hardware profile {_shown(q)} — {hint}")


#: How far a detected GPU's memory may be from its profile's (NVML reports a little less than the nominal size).
VRAM_MATCH_TOLERANCE = 0.1


#: A memory size in a normalized name ("rtx 3060 8 gb"): the words a device name may lack where the profile's name
#: says which of two memory sizes it is.
_MEMORY_WORDS = re.compile(r"(?:^| )\d+ gb(?= |$)")


def _without_memory(normalized: str) -> str:
    return " ".join(_MEMORY_WORDS.sub(" ", normalized).split())


def match_nvml_name(nvml_name: str, profiles: Sequence[HardwareProfile],
                    vram_total_bytes: int | None = None) -> HardwareProfile | None:
    """The profile whose name or alias is the NVML (or Vulkan) device name, as written or normalized; None if none
    or several. With ``vram_total_bytes`` (the device's memory) the memory decides too: a profile whose memory differs
    by more than VRAM_MATCH_TOLERANCE is not it, and where the name alone names none of that memory, a profile whose
    name is the device's with a memory size added is ("NVIDIA GeForce RTX 3060" with 8 GiB is "RTX 3060 8GB", not
    the 12 GB card whose alias that name is)."""
    if not nvml_name.strip() or len(nvml_name) > MAX_QUERY_CHARS:
        return None
    if not vram_total_bytes:
        found = _exact_matches(nvml_name.strip(), profiles)
        return found[0] if len(found) == 1 else None

    def same_memory(p: HardwareProfile) -> bool:
        return abs(vram_total_bytes - p.vram_bytes) <= VRAM_MATCH_TOLERANCE * p.vram_bytes

    found = [p for p in _exact_matches(nvml_name.strip(), profiles) if same_memory(p)]
    if not found:
        bare = _without_memory(_normalize(nvml_name))
        found = _unique(p for p in profiles if same_memory(p) and bare
                        and any(_without_memory(_normalize(n)) == bare for n in p.names()))
    return found[0] if len(found) == 1 else None


def profile_from_entry(entry: dict[str, object], where: str) -> HardwareProfile:
    """A profile from one table of the keys a ``[[gpu]]`` table holds, checked as a profile file's are (bounds, kind,
    bandwidth against bus × data rate); ``where`` names its origin in a refusal. Raises ProfileError."""
    return _check_entry(entry, where)
