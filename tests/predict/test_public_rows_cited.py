"""Every published llama-bench row in the reference tables says where it was published (issue #26).

The tables are read with tomllib as they are on disk: the two the public fit learns from
(llama_bench_public.toml, llama_bench_public_2025.toml) and the held-out one (llama_bench_public_more.toml).
A row without a source, a row whose model has no shape, or the same published figure copied twice fails here.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest

REFERENCE_DIR = Path(__file__).resolve().parents[2] / "profiles" / "reference"
TABLES = ("llama_bench_public.toml", "llama_bench_public_2025.toml", "llama_bench_public_more.toml")


def _load(name: str) -> dict[str, Any]:
    with (REFERENCE_DIR / name).open("rb") as fh:
        return tomllib.load(fh)


def _row_label(name: str, i: int, row: dict[str, Any]) -> str:
    return f"{name} result #{i + 1} ({row.get('gpu')!r}, {row.get('model')!r}, {row.get('weight_type')!r})"


@pytest.mark.parametrize("name", TABLES)
def test_table_has_models_and_results(name: str) -> None:
    doc = _load(name)
    assert doc.get("model"), f"{name}: no [[model]] tables"
    assert doc.get("result"), f"{name}: no [[result]] tables"


@pytest.mark.parametrize("name", TABLES)
def test_every_result_cites_its_source(name: str) -> None:
    for i, row in enumerate(_load(name)["result"]):
        label = _row_label(name, i, row)
        url = row.get("source_url")
        assert isinstance(url, str) and url.strip(), f"{label}: no source_url"
        assert url.startswith("https://"), f"{label}: source_url {url!r} is not an https:// address"
        section = row.get("source_section")
        assert isinstance(section, str) and section.strip(), f"{label}: no source_section"


@pytest.mark.parametrize("name", TABLES)
def test_every_model_cites_its_source(name: str) -> None:
    for i, model in enumerate(_load(name)["model"]):
        source = model.get("source")
        assert isinstance(source, str) and source.strip(), f"{name} model #{i + 1} ({model.get('name')!r}): no source"


@pytest.mark.parametrize("name", TABLES)
def test_every_result_names_a_model_of_its_table(name: str) -> None:
    doc = _load(name)
    names = [m["name"] for m in doc["model"]]
    assert len(names) == len(set(names)), f"{name}: a [[model]] name appears twice"
    for i, row in enumerate(doc["result"]):
        assert row.get("model") in names, f"{_row_label(name, i, row)}: no [[model]] named {row.get('model')!r}"


@pytest.mark.parametrize("name", TABLES)
def test_no_result_is_copied_twice(name: str) -> None:
    """One configuration of one published run is one row (fa, depth and batch sizes tell configurations apart)."""
    seen: dict[tuple[Any, ...], int] = {}
    for i, row in enumerate(_load(name)["result"]):
        key = (row.get("gpu"), row.get("model"), row.get("weight_type"), row.get("backend"), row.get("n_prompt"),
               row.get("n_gen"), row.get("n_depth", 0), row.get("flash_attn", -1), row.get("n_ubatch"),
               row.get("n_batch"), row.get("build"), row.get("source_url"))
        assert key not in seen, f"{_row_label(name, i, row)}: same row as result #{seen[key] + 1}"
        seen[key] = i
