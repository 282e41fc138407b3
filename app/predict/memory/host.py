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
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TypeVar

from app.paths import PROFILES_DIR
from app.predict.profiles import HardwareProfile

HOST_MEMORY_PATH = PROFILES_DIR / "host" / "host_memory.toml"
#: the configuration assumed beside a GPU whose architecture no entry names
FALLBACK_MEMORY = "DDR5-5600 dual channel"
T = TypeVar("T")


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


def _need(table: Mapping[str, object], key: str, kind: type[T], where: str) -> T:
    value = table.get(key)
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise HostMemoryError(f"{where}: {key!r} is missing or not a {kind.__name__}")
    return value


def _number(table: Mapping[str, object], key: str, where: str) -> float:
    value = table.get(key)
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise HostMemoryError(f"{where}: {key!r} is missing or not a number")
    return float(value)


def _tables(doc: Mapping[str, object], key: str, where: str) -> list[dict[str, object]]:
    """The array of tables ``[[key]]``, each checked to be a table."""
    items = doc.get(key) or []
    if not isinstance(items, list):
        raise HostMemoryError(f"{where}: {key!r} must be an array of tables")
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise HostMemoryError(f"{where}: {key} {i + 1}: not a table")
    return items


def parse_host_memory(doc: dict[str, object], where: str) -> HostMemoryTable:
    """Validate a parsed table: memories with positive rates, rows whose memory is named and whose achieved
    bandwidth stays under that memory's peak (a row above it has the wrong memory)."""
    memories: list[HostMemory] = []
    for i, m in enumerate(_tables(doc, "memory", where)):
        at = f"{where}: memory {i + 1}"
        rate, bits = _number(m, "data_rate_mtps", at), _need(m, "bus_bits", int, at)
        if rate <= 0 or bits <= 0:
            raise HostMemoryError(f"{at}: data_rate_mtps and bus_bits must be positive")
        assumed_with = m.get("assumed_with", [])
        memories.append(HostMemory(_need(m, "name", str, at), _need(m, "memory_type", str, at), rate, bits,
                                   _need(m, "source", str, at),
                                   tuple(str(a) for a in assumed_with) if isinstance(assumed_with, list) else ()))
    models = doc.get("model") or {}
    if not isinstance(models, dict):
        raise HostMemoryError(f"{where}: [model] must be a table of models")
    table = HostMemoryTable(tuple(memories), ())
    rows: list[CpuDecodeRow] = []
    for i, r in enumerate(_tables(doc, "row", where)):
        at = f"{where}: row {i + 1}"
        name = _need(r, "model", str, at)
        model = models.get(name)
        if not isinstance(model, dict):
            raise HostMemoryError(f"{at}: model {name!r} has no [model] entry")
        of_model = f"{where}: model {name!r}"
        embedding_bytes = (_number(model, "n_vocab", of_model) * _number(model, "n_embd", of_model)
                           * _number(model, "embedding_bits_per_weight", of_model) / 8)
        read = _number(model, "file_gb", of_model) * 1e9 - embedding_bytes
        row = CpuDecodeRow(_need(r, "machine", str, at), _need(r, "cpu", str, at), _need(r, "laptop", bool, at),
                           _number(r, "tg128_tps", at), table.named(_need(r, "memory", str, at)), read,
                           _need(r, "source_url", str, at))
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
