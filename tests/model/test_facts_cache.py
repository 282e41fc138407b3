"""The facts cache on disk (issue #54): one entry per file in the cache folder, read back by any process (a fresh
FactsCache stands for the next command or the window), a changed file read again, a damaged or foreign entry
ignored and written again, the folder bounded, concurrent writers leaving whole entries only."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from app.model import facts_cache
from app.model.facts_cache import FactsCache, facts_from_json, facts_to_json
from app.model.gguf_facts import GGUFFileError, read_model_facts
from tests.arch_ggufs import write_all
from tests.gguf_synth import write_synthetic_gguf


def _entry(cache: FactsCache, path: Path) -> dict:
    entry_path = cache.entry_path(str(path))
    assert entry_path is not None
    return json.loads(entry_path.read_text())


def test_a_fresh_process_reads_the_facts_from_the_entry_not_the_file(tmp_path: Path) -> None:
    model = write_synthetic_gguf(tmp_path / "m.gguf")
    first = FactsCache(tmp_path / "facts").get(model)
    assert first == read_model_facts(model)
    entry_path = FactsCache(tmp_path / "facts").entry_path(str(model))
    entry = json.loads(entry_path.read_text())
    entry["facts"]["name"] = "from the entry"  # what only the entry says: the file is not parsed again
    entry_path.write_text(json.dumps(entry))
    assert FactsCache(tmp_path / "facts").get(model).name == "from the entry"


def test_every_architectures_facts_round_trip_through_an_entry(tmp_path: Path) -> None:
    """Per-layer tuples, tensor shapes, the type histogram and ``extra`` come back equal to a fresh read."""
    (tmp_path / "models").mkdir()
    for label, path in write_all(tmp_path / "models").items():
        FactsCache(tmp_path / "facts").get(path)
        assert FactsCache(tmp_path / "facts").get(path) == read_model_facts(path), label


def test_a_rewritten_file_is_read_again(tmp_path: Path) -> None:
    model = write_synthetic_gguf(tmp_path / "m.gguf", n_layer=2)
    cache = FactsCache(tmp_path / "facts")
    assert cache.get(model).n_layer == 2
    write_synthetic_gguf(tmp_path / "new.gguf", n_layer=3)
    os.replace(tmp_path / "new.gguf", model)  # another file under the same name
    assert cache.get(model).n_layer == 3
    assert FactsCache(tmp_path / "facts").get(model).n_layer == 3
    assert _entry(cache, model)["facts"]["n_layer"] == 3


@pytest.mark.parametrize("damage", ["truncated", "not json", "a list", "wrong type", "missing field", "extra field",
                                    "other format", "other reader", "other file", "other stamp", "nested deep"])
def test_a_damaged_or_foreign_entry_is_ignored_and_written_again(tmp_path: Path, damage: str) -> None:
    model = write_synthetic_gguf(tmp_path / "m.gguf")
    truth = FactsCache(tmp_path / "facts").get(model)
    entry_path = FactsCache(tmp_path / "facts").entry_path(str(model))
    text = entry_path.read_text()
    entry = json.loads(text)
    if damage == "truncated":
        entry_path.write_text(text[: len(text) // 2])
    elif damage == "not json":
        entry_path.write_bytes(b"\xff\xfe garbage")
    elif damage == "a list":
        entry_path.write_text("[1, 2, 3]")
    elif damage == "nested deep":
        entry_path.write_text("[" * 100_000 + "]" * 100_000)
    else:
        if damage == "wrong type":
            entry["facts"]["n_layer"] = "two"
        elif damage == "missing field":
            del entry["facts"]["tensor_shapes"]
        elif damage == "extra field":
            entry["facts"]["surprise"] = 1
        elif damage == "other format":
            entry["format"] = facts_cache.FORMAT_VERSION + 1
        elif damage == "other reader":
            entry["reader"] = "made by other code"
        elif damage == "other file":
            entry["path"] = str(tmp_path / "elsewhere.gguf")
        elif damage == "other stamp":
            entry["stamp"][0] += 1
            entry["facts"]["name"] = "stale"
        entry_path.write_text(json.dumps(entry))
    again = FactsCache(tmp_path / "facts")
    assert again.get(model) == truth
    assert facts_from_json(_entry(again, model)["facts"]) == truth  # written again, whole


def test_the_folder_keeps_at_most_max_entries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(facts_cache, "MAX_ENTRIES", 4)
    models = [write_synthetic_gguf(tmp_path / f"m{i}.gguf") for i in range(7)]
    cache = FactsCache(tmp_path / "facts")
    for m in models:
        cache.get(m)
    kept = list((tmp_path / "facts").glob("*.json"))
    assert 1 <= len(kept) <= 4
    assert cache.entry_path(str(models[-1])) in kept  # the newest stays


def test_concurrent_writers_leave_whole_entries_only(tmp_path: Path) -> None:
    models = [write_synthetic_gguf(tmp_path / f"m{i}.gguf", n_layer=1 + i % 3) for i in range(4)]
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(3):
                for m in models:
                    cache = FactsCache(tmp_path / "facts")  # each a process of its own: nothing held in memory
                    assert cache.get(m).n_layer == read_model_facts(m).n_layer
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    entries = sorted((tmp_path / "facts").iterdir())
    assert [e.suffix for e in entries] == [".json"] * len(models)  # no temporary file left
    for m in models:
        assert facts_from_json(_entry(FactsCache(tmp_path / "facts"), m)["facts"]) == read_model_facts(m)


def test_a_cache_folder_that_cannot_be_written_is_no_error(tmp_path: Path) -> None:
    model = write_synthetic_gguf(tmp_path / "m.gguf")
    blocked = tmp_path / "a file"
    blocked.write_text("not a folder")
    assert FactsCache(blocked / "facts").get(model) == read_model_facts(model)


def test_a_bad_file_is_not_cached_and_raises_each_time(tmp_path: Path) -> None:
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 10)
    cache = FactsCache(tmp_path / "facts")
    for _ in range(2):
        with pytest.raises(GGUFFileError, match="truncated"):
            cache.get(bad)
    assert not (tmp_path / "facts").exists() or not list((tmp_path / "facts").iterdir())


def test_a_relative_path_gets_the_name_a_fresh_read_gives(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_synthetic_gguf(tmp_path / "m.gguf")
    monkeypatch.chdir(tmp_path)
    FactsCache(tmp_path / "facts").get(str(tmp_path / "m.gguf"))
    got = FactsCache(tmp_path / "facts").get("./m.gguf")
    assert got == read_model_facts("./m.gguf")


def test_the_process_wide_cache_writes_in_the_cache_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GGUF_WORKBENCH_CACHE_DIR", str(tmp_path / "cache"))
    model = write_synthetic_gguf(tmp_path / "m.gguf")
    facts_cache.cached_facts(model)
    assert list((tmp_path / "cache" / facts_cache.FOLDER_NAME).glob("*.json"))


def test_facts_to_json_is_plain_json(tmp_path: Path) -> None:
    facts = read_model_facts(write_synthetic_gguf(tmp_path / "m.gguf"))
    assert facts_from_json(json.loads(json.dumps(facts_to_json(facts)))) == facts
