"""The host side of a machine that is not this one: its system memory and what llama.cpp's CPU decode reaches of it.

A split placement on a GPU not owned (layers or experts left in system RAM, the common case on an 8 GB laptop GPU)
reads part of every token from system memory. Its expected decode needs the host's own figure: the memory's peak
bandwidth (``profiles/host/host_memory.toml``: a configuration assumed beside the GPU's architecture, stated)
times the share of peak that published CPU-backend llama-bench rows reach on machines of known memory (the band:
the least and the most of those rows), over the bytes a token reads on the host.
"""

from __future__ import annotations

import statistics
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from app.paths import PROFILES_DIR
from app.predict.profiles import HardwareProfile

HOST_MEMORY_PATH = PROFILES_DIR / "host" / "host_memory.toml"
#: the configuration assumed beside a GPU whose architecture no entry names
FALLBACK_MEMORY = "DDR5-5600 dual channel"


class HostMemoryError(ValueError):
    """The host memory table is malformed; the message is one line naming the file."""


@dataclass(frozen=True)
class HostMemory:
    """One system memory configuration: its peak bandwidth is the bus width times the data rate."""

    name: str
    memory_type: str
    data_rate_mtps: float
    bus_bits: int
    source: str
    assumed_with: tuple[str, ...] = ()

    @property
    def peak_bandwidth_gbps(self) -> float:
        return self.bus_bits / 8 * self.data_rate_mtps / 1000.0


@dataclass(frozen=True)
class CpuDecodeRow:
    """A published CPU-backend decode (tg128) on a machine of known memory, and the bytes its model reads a token."""

    machine: str
    cpu: str
    laptop: bool
    tg128_tps: float
    memory: HostMemory
    read_bytes_per_token: float
    source_url: str

    @property
    def efficiency(self) -> float:
        """Achieved bandwidth (tok/s × bytes a token reads) ÷ the memory's peak."""
        return self.tg128_tps * self.read_bytes_per_token / (self.memory.peak_bandwidth_gbps * 1e9)


@dataclass(frozen=True)
class HostEfficiency:
    """The share of peak memory bandwidth llama.cpp's CPU decode reaches: the rows' median, least and most."""

    median: float
    low: float
    high: float
    rows: tuple[CpuDecodeRow, ...]

    def describe(self) -> str:
        return (f"CPU decode at {self.median:.0%} of the memory's peak bandwidth ({self.low:.0%}-{self.high:.0%}: "
                f"{len(self.rows)} published CPU-backend llama-bench rows of known memory)")


@dataclass(frozen=True)
class HostMemoryTable:
    memories: tuple[HostMemory, ...]
    rows: tuple[CpuDecodeRow, ...]

    def named(self, name: str) -> HostMemory:
        for m in self.memories:
            if m.name.lower() == name.strip().lower():
                return m
        known = ", ".join(m.name for m in self.memories)
        raise HostMemoryError(f"{HOST_MEMORY_PATH.name}: no host memory named {name!r} (known: {known})")

    def assumed_for(self, profile: HardwareProfile) -> HostMemory:
        """The memory assumed beside ``profile``'s GPU: the configuration its architecture ships with."""
        for m in self.memories:
            if profile.architecture and profile.architecture in m.assumed_with:
                return m
        return self.named(FALLBACK_MEMORY)

    def efficiency(self) -> HostEfficiency:
        shares = [r.efficiency for r in self.rows]
        return HostEfficiency(statistics.median(shares), min(shares), max(shares), self.rows)


def _need(table: dict[str, object], key: str, kind: type | tuple[type, ...], where: str) -> object:
    value = table.get(key)
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise HostMemoryError(f"{where}: {key!r} is missing or not a {getattr(kind, '__name__', kind)}")
    return value


def parse_host_memory(doc: dict[str, object], where: str) -> HostMemoryTable:
    """Validate a parsed table: memories with positive rates, rows whose memory is named and whose achieved
    bandwidth stays under that memory's peak (a row above it has the wrong memory)."""
    memories: list[HostMemory] = []
    for i, m in enumerate(doc.get("memory") or []):  # type: ignore[union-attr]
        at = f"{where}: memory {i + 1}"
        if not isinstance(m, dict):
            raise HostMemoryError(f"{at}: not a table")
        rate, bits = _need(m, "data_rate_mtps", (int, float), at), _need(m, "bus_bits", int, at)
        if rate <= 0 or bits <= 0:  # type: ignore[operator]
            raise HostMemoryError(f"{at}: data_rate_mtps and bus_bits must be positive")
        memories.append(HostMemory(str(_need(m, "name", str, at)), str(_need(m, "memory_type", str, at)),
                                   float(rate), int(bits), str(_need(m, "source", str, at)),  # type: ignore[arg-type]
                                   tuple(str(a) for a in m.get("assumed_with", []))))
    models = doc.get("model") or {}
    if not isinstance(models, dict):
        raise HostMemoryError(f"{where}: [model] must be a table of models")
    table = HostMemoryTable(tuple(memories), ())
    rows: list[CpuDecodeRow] = []
    for i, r in enumerate(doc.get("row") or []):  # type: ignore[union-attr]
        at = f"{where}: row {i + 1}"
        if not isinstance(r, dict):
            raise HostMemoryError(f"{at}: not a table")
        model = models.get(str(_need(r, "model", str, at)))
        if not isinstance(model, dict):
            raise HostMemoryError(f"{at}: model {r['model']!r} has no [model] entry")
        embedding_bytes = (float(model["n_vocab"]) * float(model["n_embd"])
                           * float(model["embedding_bits_per_weight"]) / 8)
        read = float(model["file_gb"]) * 1e9 - embedding_bytes
        row = CpuDecodeRow(str(_need(r, "machine", str, at)), str(_need(r, "cpu", str, at)),
                           bool(_need(r, "laptop", bool, at)), float(_need(r, "tg128_tps", (int, float), at)),  # type: ignore[arg-type]
                           table.named(str(_need(r, "memory", str, at))), read, str(_need(r, "source_url", str, at)))
        if not 0 < row.efficiency < 1:
            raise HostMemoryError(f"{at}: {row.tg128_tps:g} tok/s reads {row.efficiency:.0%} of "
                                  f"{row.memory.name}'s peak: not that memory")
        rows.append(row)
    if not rows:
        raise HostMemoryError(f"{where}: no [[row]] of a CPU decode")
    if not any(m.name == FALLBACK_MEMORY for m in memories):
        raise HostMemoryError(f"{where}: no memory named {FALLBACK_MEMORY!r} (the fallback)")
    return HostMemoryTable(tuple(memories), tuple(rows))


def load_host_memory(path: Path = HOST_MEMORY_PATH) -> HostMemoryTable:
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise HostMemoryError(f"{path}: {exc}") from exc
    return parse_host_memory(doc, path.name)


@cache
def host_memory_table() -> HostMemoryTable:
    """The shipped table, read once."""
    return load_host_memory()
