"""The per-core L2 size from sysfs: parsed, found among the cache levels, 0 when absent."""

from __future__ import annotations

from pathlib import Path

from app.telemetry.cpu_cache import l2_cache_bytes, parse_size


def _index(root: Path, i: int, level: str, kind: str, size: str) -> None:
    d = root / f"index{i}"
    d.mkdir(parents=True)
    (d / "level").write_text(level + "\n")
    (d / "type").write_text(kind + "\n")
    (d / "size").write_text(size + "\n")


def test_parse_size() -> None:
    assert parse_size("512K\n") == 512 * 1024 and parse_size("1M") == 2**20 and parse_size("4096") == 4096
    assert parse_size("") == 0 and parse_size("lots") == 0


def test_the_level_2_data_or_unified_cache_is_found(tmp_path: Path) -> None:
    _index(tmp_path, 0, "1", "Data", "32K")
    _index(tmp_path, 1, "1", "Instruction", "32K")
    _index(tmp_path, 2, "2", "Unified", "1024K")
    _index(tmp_path, 3, "3", "Unified", "32768K")
    assert l2_cache_bytes(tmp_path) == 2**20
    assert l2_cache_bytes(tmp_path / "missing") == 0
