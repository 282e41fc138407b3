"""Issue #44 point 5: two ``choose --measure`` at once measured one file at 10.0 and 567.0 tok/s, and the cache kept
the slow figure and served it without its "unstable" mark. The measurement cache takes a lock per key (the second
search waits for the first one's figure instead of measuring the same file at the same time) and never keeps a
figure without its stability (two figures of one key that disagree keep the faster, marked unstable)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from app.choose import measure_cache
from app.choose.measure_cache import CachedMeasurement, MeasureCache, key_digest

KEY = {"file": {"path": "/m.gguf", "size_bytes": 1, "mtime_ns": 1}, "settings": {"n_depth": 0}}


def test_a_second_search_waits_for_the_first_ones_figure(tmp_path: Path) -> None:
    import fcntl
    import os

    path = tmp_path / "measure-cache.json"
    lock = path.parent / "locks" / f"{key_digest(KEY)}.lock"
    lock.parent.mkdir(parents=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)  # another process's search claimed the key and is measuring it
    second = MeasureCache(path)
    got: list[CachedMeasurement | None] = []
    waiter = threading.Thread(target=lambda: got.append(second.get(KEY)))
    waiter.start()
    time.sleep(0.5)
    assert waiter.is_alive() and not got  # waiting for the figure, not measuring it at the same time
    theirs = MeasureCache(path)
    theirs._entries = {}
    theirs.put(KEY, CachedMeasurement(decode_tps=567.0, n_depth=0))  # what the other search keeps...
    os.close(fd)  # ...before its claim ends
    waiter.join(5)
    assert got and got[0] is not None and got[0].decode_tps == 567.0


def test_two_figures_that_disagree_keep_the_faster_marked_unstable(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(measure_cache, "CLAIM_WAIT_S", 0.2)  # two searches measured it (a wait that ran out, or two
    path = tmp_path / "measure-cache.json"
    fast, slow = MeasureCache(path), MeasureCache(path)  # searches of one process): both figures reach put()
    assert fast.get(KEY) is None and slow.get(KEY) is None
    fast.put(KEY, CachedMeasurement(decode_tps=567.0, n_depth=0))
    slow.put(KEY, CachedMeasurement(decode_tps=10.0, n_depth=0))
    kept = MeasureCache(path).get(KEY)
    assert kept is not None and kept.decode_tps == 567.0 and kept.unstable


def test_two_figures_that_agree_stay_stable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(measure_cache, "CLAIM_WAIT_S", 0.2)
    path = tmp_path / "measure-cache.json"
    a, b = MeasureCache(path), MeasureCache(path)
    assert a.get(KEY) is None and b.get(KEY) is None
    a.put(KEY, CachedMeasurement(decode_tps=500.0, n_depth=0))
    b.put(KEY, CachedMeasurement(decode_tps=480.0, n_depth=0))
    kept = MeasureCache(path).get(KEY)
    assert kept is not None and kept.decode_tps == 500.0 and not kept.unstable


def test_entries_written_at_once_are_all_kept(tmp_path: Path) -> None:
    path = tmp_path / "measure-cache.json"
    caches = [MeasureCache(path) for _ in range(8)]
    keys = [{**KEY, "settings": {"n_depth": i}} for i in range(8)]
    threads = [threading.Thread(target=c.put, args=(k, CachedMeasurement(decode_tps=100.0 + i, n_depth=i)))
               for i, (c, k) in enumerate(zip(caches, keys, strict=True))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    fresh = MeasureCache(path)
    assert [fresh.get(k) is not None for k in keys] == [True] * 8


def test_a_claim_is_released_when_the_measurement_fails(tmp_path: Path) -> None:
    path = tmp_path / "measure-cache.json"
    first, second = MeasureCache(path), MeasureCache(path)
    assert first.get(KEY) is None
    first.release()  # its test failed: nothing to wait for
    t0 = time.monotonic()
    assert second.get(KEY) is None and time.monotonic() - t0 < 1
