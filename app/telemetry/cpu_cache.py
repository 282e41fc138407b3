"""The sizes of this CPU's per-core L2 cache and of its last-level cache, read from the OS (Linux sysfs); 0 when
the OS does not say.

The fitted model uses the L2 to tell attention whose keys and values stay in a core's cache from attention that
streams them from further out, and the last level to tell weights that stay in the cache between decoded tokens from
weights streamed from memory (see :mod:`app.predict.machine_fit.fitted_model`). Nothing here raises.
"""

from __future__ import annotations

from pathlib import Path

CACHE_DIR = Path("/sys/devices/system/cpu/cpu0/cache")
_UNITS = {"K": 1024, "M": 1024**2, "G": 1024**3}


def parse_size(text: str) -> int:
    """Bytes from sysfs's ``512K`` / ``32768K`` / ``1M`` form; 0 when it cannot be read."""
    text = text.strip().upper()
    if not text:
        return 0
    unit = _UNITS.get(text[-1], 1)
    digits = text[:-1] if text[-1] in _UNITS else text
    return int(digits) * unit if digits.isdigit() else 0


def _data_caches(cache_dir: Path) -> dict[int, int]:
    """Level -> bytes of CPU 0's data (or unified) caches that sysfs lists."""
    out: dict[int, int] = {}
    for index in sorted(cache_dir.glob("index[0-9]*")):
        try:
            level = (index / "level").read_text(encoding="utf-8").strip()
            kind = (index / "type").read_text(encoding="utf-8").strip()
            size = (index / "size").read_text(encoding="utf-8")
        except OSError:
            continue
        if level.isdigit() and kind in ("Unified", "Data"):
            out[int(level)] = parse_size(size)
    return out


def l2_cache_bytes(cache_dir: Path = CACHE_DIR) -> int:
    """Bytes of the level-2 data (or unified) cache of CPU 0; 0 when sysfs does not give it."""
    return _data_caches(cache_dir).get(2, 0)


def llc_bytes(cache_dir: Path = CACHE_DIR) -> int:
    """Bytes of CPU 0's last-level data (or unified) cache beyond L2 (an L3 or L4 it shares with other cores); 0
    when sysfs gives none."""
    levels = {k: v for k, v in _data_caches(cache_dir).items() if k > 2 and v > 0}
    return levels[max(levels)] if levels else 0
