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
source                    str       where the figures come from
memory_type               str       optional ("GDDR6", "HBM3", ...)
tdp_w                     number    optional fixed board power
power_limit_w             [lo, hi]  optional power range for parts that vary (laptops)
aliases                   [str]     optional other names, including the NVML device name
notes                     str       optional
architecture              str       optional GPU architecture ("Ada", "Ampere", "Apple silicon"...; default ""):
                                    the public-measurement fit (app/predict/public_fit.py) pools GPUs by it
========================  ========  ==========================================================

A user profile with the same name as a built-in one replaces it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
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
}
_POSITIVE = (
    "vram_gib", "memory_bus_bits", "memory_data_rate_gbps", "peak_bandwidth_gbps", "fp16_tensor_tflops", "tdp_w"
)
_NOISE_WORDS = frozenset({"nvidia", "geforce", "amd", "radeon", "apple", "gpu"})


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
    architecture: str = ""  # pools GPUs for the public-measurement fit; "" unknown

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
            "architecture": self.architecture,
        }


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
        if key in ("name", "vendor", "source") and not value.strip():
            raise ProfileError(f"{label}: {key} must not be empty")
    if entry["kind"] not in FILE_KINDS:
        raise ProfileError(f"{label}: kind {entry['kind']!r} is not one of {', '.join(FILE_KINDS)}")
    aliases = entry.get("aliases", [])
    if not all(isinstance(a, str) and a.strip() for a in aliases):
        raise ProfileError(f"{label}: aliases must be non-empty strings")
    power = entry.get("power_limit_w")
    if power is not None:
        ok = len(power) == 2 and all(isinstance(p, int | float) and not isinstance(p, bool) and 0 < p < math.inf
                                     for p in power)
        if not ok or power[0] > power[1]:
            raise ProfileError(f"{label}: power_limit_w must be [low, high] positive watts, got {power!r}")
    profile = HardwareProfile(
        name=entry["name"].strip(), vendor=entry["vendor"], kind=entry["kind"], vram_gib=float(entry["vram_gib"]),
        memory_bus_bits=entry["memory_bus_bits"], memory_data_rate_gbps=float(entry["memory_data_rate_gbps"]),
        peak_bandwidth_gbps=float(entry["peak_bandwidth_gbps"]), fp16_tensor_tflops=float(entry["fp16_tensor_tflops"]),
        source=entry["source"], memory_type=entry.get("memory_type", ""),
        tdp_w=float(entry["tdp_w"]) if "tdp_w" in entry else None,
        power_limit_w=(float(power[0]), float(power[1])) if power else None,
        aliases=tuple(a.strip() for a in aliases), notes=entry.get("notes", ""), path=where,
        architecture=entry.get("architecture", "").strip(),
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


def _normalize(text: str) -> str:
    """Lower case, punctuation to spaces, vendor/brand words dropped: "NVIDIA GeForce RTX 4060" → "rtx 4060"."""
    words = re.sub(r"[^0-9a-z]+", " ", text.casefold()).split()
    return " ".join(w for w in words if w not in _NOISE_WORDS)


def _unique(matches: Iterable[HardwareProfile]) -> list[HardwareProfile]:
    seen: dict[int, HardwareProfile] = {}
    for p in matches:
        seen.setdefault(id(p), p)
    return list(seen.values())


def find_profile(query: str, profiles: Sequence[HardwareProfile]) -> HardwareProfile:
    """Look a profile up by name or alias: exact (case-insensitive), then normalized, then unique words or substring.

    "RTX 4060 Laptop", "rtx 4060 laptop gpu", "4060 laptop" and "laptop 4060" all find the same profile;
    "4060" is ambiguous and raises ProfileError listing the candidates.
    """
    q = query.strip()
    if not q:
        raise ProfileError("empty hardware profile name")
    stages = (
        lambda p: any(n.casefold() == q.casefold() for n in p.names()),
        lambda p: any(_normalize(n) == _normalize(q) for n in p.names()),
        lambda p: any(set(_normalize(q).split()) <= set(_normalize(n).split()) for n in p.names()),
        lambda p: any(_normalize(q) in _normalize(n) for n in p.names()),
    )
    for matches_stage in stages:
        found = _unique(p for p in profiles if matches_stage(p))
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            names = ", ".join(p.name for p in found)
            raise ProfileError(f"hardware profile {query!r} is ambiguous: {names}")
    raise ProfileError(f"no hardware profile matches {query!r} (add a [[gpu]] table to <data dir>/hardware/*.toml)")


def match_nvml_name(nvml_name: str, profiles: Sequence[HardwareProfile]) -> HardwareProfile | None:
    """The profile whose name or alias is the NVML device name (exact, then normalized); None if none or several."""
    for same in (lambda a, b: a.casefold() == b.casefold(), lambda a, b: _normalize(a) == _normalize(b)):
        found = _unique(p for p in profiles if any(same(n, nvml_name) for n in p.names()))
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            return None
    return None
