"""The size of this CPU's per-core L2 cache, read from the OS (Linux sysfs); 0 when the OS does not say.

The fitted model uses it to tell attention whose keys and values stay in a core's cache from attention that
streams them from further out (see :mod:`app.predict.fitted_model`). Nothing here raises.
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


def l2_cache_bytes(cache_dir: Path = CACHE_DIR) -> int:
    """Bytes of the level-2 data (or unified) cache of CPU 0; 0 when sysfs does not give it."""
    for index in sorted(cache_dir.glob("index[0-9]*")):
        try:
            level = (index / "level").read_text(encoding="utf-8").strip()
            kind = (index / "type").read_text(encoding="utf-8").strip()
            size = (index / "size").read_text(encoding="utf-8")
        except OSError:
            continue
        if level == "2" and kind in ("Unified", "Data"):
            return parse_size(size)
    return 0
