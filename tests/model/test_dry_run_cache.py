"""llama.cpp's dry runs remembered in the cache folder (issue #54): a damaged entry once broke every later
``predict --dry-run`` of its file until the cache was deleted; now it is dropped, the run made again and written
over it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.model import dry_run as dr
from app.model.dry_run import ContextMemory, DryRunSettings, dry_run

SETTINGS = [DryRunSettings(n_ctx=4096)]
GOOD = {"contexts": [ContextMemory(DryRunSettings(512), kv_bytes=3.0, compute={"CPU": 7.0}).to_json()],
        "size_bytes": 100, "n_params": 10, "description": "x", "seconds": 1.5, "saved": 1.0}
DAMAGED = {
    "n_ctx not a number": {**GOOD, "contexts": [{**GOOD["contexts"][0], "n_ctx": "abc"}]},
    "a context not an object": {**GOOD, "contexts": ["abc"]},
    "contexts not a list": {**GOOD, "contexts": {"a": 1}},
    "compute not numbers": {**GOOD, "contexts": [{**GOOD["contexts"][0], "compute": {"CPU": "lots"}}]},
    "a cache without cells": {**GOOD, "contexts": [{**GOOD["contexts"][0], "kv_caches": [{"layers": 1}]}]},
    "an infinite n_ctx": {**GOOD, "contexts": [{**GOOD["contexts"][0], "n_ctx": float("inf")}]},
    "saved not a number": {**GOOD, "saved": "yesterday"},
    "not an object": "abc",
}


def test_reading_the_cache_keeps_the_good_entries_and_drops_the_damaged(tmp_path: Path) -> None:
    path = tmp_path / dr.CACHE_FILE
    path.write_text(json.dumps({"version": dr.FORMAT_VERSION, "entries": {"good": GOOD, **DAMAGED}}))
    entries = dr._read_cache(path)
    assert set(entries) == {"good", "saved not a number"}  # a 'saved' it cannot read only orders it first
    dr._write_cache(path, entries)  # and writing them back orders them without failing
    assert set(json.loads(path.read_text())["entries"]) == {"good", "saved not a number"}


@pytest.mark.parametrize("text", ["", "{", "[]", '{"version": 1, "entries": []}', "[" * 100_000])
def test_an_unreadable_cache_file_is_empty(tmp_path: Path, text: str) -> None:
    path = tmp_path / dr.CACHE_FILE
    path.write_text(text)
    assert dr._read_cache(path) == {}


def test_the_cache_lives_in_the_cache_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GGUF_WORKBENCH_CACHE_DIR", str(tmp_path / "cache"))
    assert dr._cache_path() == tmp_path / "cache" / dr.CACHE_FILE


@pytest.mark.heavy  # llama.cpp's dry run of the real model in a child process, three times
def test_a_damaged_entry_is_run_again_and_written_over(smollm2_path: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GGUF_WORKBENCH_CACHE_DIR", str(tmp_path / "cache"))
    first = dry_run(smollm2_path, SETTINGS)
    assert first.problem == "" and first.seconds > 0 and first.context(SETTINGS[0]) is not None
    cache_file = tmp_path / "cache" / dr.CACHE_FILE
    doc = json.loads(cache_file.read_text())
    (key,) = doc["entries"]
    doc["entries"][key]["contexts"][0]["n_ctx"] = "damaged"
    cache_file.write_text(json.dumps(doc))

    again = dry_run(smollm2_path, SETTINGS)  # a traceback here, and in every later run, before the fix
    assert again.problem == "" and again.seconds > 0  # the child ran again
    assert again.context(SETTINGS[0]) == first.context(SETTINGS[0])
    remembered = dry_run(smollm2_path, SETTINGS)
    assert remembered.seconds == 0.0 and remembered.context(SETTINGS[0]) == first.context(SETTINGS[0])  # cached
