"""The public fit kept on disk (app/predict/public/fit_cache.py): a second call reads what the first made, a
changed input makes it anew, and a damaged or unwritable cache is passed over, never an error."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.predict.public.fit_cache import cache_dir, cached, fit_key


@pytest.fixture
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("GGUF_WORKBENCH_CACHE_DIR", str(folder))
    return folder


def _table(tmp_path: Path, text: str = "rows = 1\n") -> Path:
    path = tmp_path / "table.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_second_call_reads_the_saved_object(own_cache: Path, tmp_path: Path) -> None:
    table = _table(tmp_path)
    made: list[int] = []

    def make() -> dict:
        made.append(1)
        return {"fit": [1.5, 2.5]}

    first = cached("fit", [table], make, dict)
    second = cached("fit", [table], make, dict)
    assert first == second == {"fit": [1.5, 2.5]} and len(made) == 1
    assert cache_dir() == own_cache and len(list(own_cache.glob("fit-*.pickle"))) == 1


def test_a_changed_input_makes_a_new_key_and_a_new_object(own_cache: Path, tmp_path: Path) -> None:
    table = _table(tmp_path)
    key = fit_key([table])
    assert cached("fit", [table], lambda: {"n": 1}, dict) == {"n": 1}
    table.write_text("rows = 2\n", encoding="utf-8")
    assert fit_key([table]) != key
    assert cached("fit", [table], lambda: {"n": 2}, dict) == {"n": 2}


def test_a_damaged_or_foreign_file_is_passed_over(own_cache: Path, tmp_path: Path) -> None:
    table = _table(tmp_path)
    cached("fit", [table], lambda: {"n": 1}, dict)
    saved = next(own_cache.glob("fit-*.pickle"))
    saved.write_bytes(b"not a pickle")
    assert cached("fit", [table], lambda: {"n": 3}, dict) == {"n": 3}  # damaged: made again (and saved)
    assert cached("fit", [table], lambda: [4], list) == [4]  # a saved dict is not the list asked for: made again


def test_an_unwritable_cache_folder_still_gives_the_object(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x", encoding="utf-8")
    monkeypatch.setenv("GGUF_WORKBENCH_CACHE_DIR", str(blocker / "cache"))
    table = _table(tmp_path)
    assert cached("fit", [table], lambda: {"n": 5}, dict) == {"n": 5}
