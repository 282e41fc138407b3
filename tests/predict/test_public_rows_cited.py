"""Every published llama-bench row in the reference tables says where it was published (issue #26).

The tables are read with tomllib as they are on disk: every TOML file of profiles/reference, the ones the public
fit learns from and the held-out ones alike (a new table is checked without being named here).
A row without a source, a row whose model has no shape, or the same published figure copied twice fails here.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import gguf
import pytest

REFERENCE_DIR = Path(__file__).resolve().parents[2] / "profiles" / "reference"
TABLES = tuple(sorted(p.name for p in REFERENCE_DIR.glob("*.toml")))


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
    """One configuration of one published run is one row (fa, depth and batch sizes tell configurations apart; the
    section, runs of one table the columns do not: Windows and Linux, two drivers)."""
    seen: dict[tuple[Any, ...], int] = {}
    for i, row in enumerate(_load(name)["result"]):
        key = (row.get("gpu"), row.get("model"), row.get("weight_type"), row.get("backend"), row.get("n_prompt"),
               row.get("n_gen"), row.get("n_depth", 0), row.get("flash_attn", -1), row.get("n_ubatch"),
               row.get("n_batch"), row.get("build"), row.get("source_url"), row.get("source_section"))
        assert key not in seen, f"{_row_label(name, i, row)}: same row as result #{seen[key] + 1}"
        seen[key] = i


def _nominal_bits_per_weight(ggml_type: str) -> float | None:
    """Bits per weight of a ggml type from the gguf package's block sizes (Q4_K: 144 bytes per 256 = 4.5)."""
    qtype = getattr(gguf.GGMLQuantizationType, ggml_type.upper(), None)
    if qtype is None or qtype not in gguf.GGML_QUANT_SIZES:
        return None
    block, type_bytes = gguf.GGML_QUANT_SIZES[qtype]
    return type_bytes * 8 / block


@pytest.mark.parametrize("name", TABLES)
def test_file_size_agrees_with_the_main_weight_type(name: str) -> None:
    """A row's file size over its parameters is at least ~its main type's bits per weight, and not far above (mixes
    keep some tensors wider, small models have a large embedding): a row whose ggml_type or size was copied wrong
    (an "F16" gpt-oss file whose experts are MXFP4, a size in GB read as GiB twice) fails here."""
    for i, row in enumerate(_load(name)["result"]):
        nominal = _nominal_bits_per_weight(row["ggml_type"])
        assert nominal, f"{_row_label(name, i, row)}: unknown ggml_type {row['ggml_type']!r}"
        bpw = row["file_size_gib"] * 1024**3 * 8 / (row["n_params_b"] * 1e9)
        assert 0.9 * nominal <= bpw <= 1.6 * nominal + 0.5, (
            f"{_row_label(name, i, row)}: {bpw:.2f} bits per weight for a {row['ggml_type']} file "
            f"(nominal {nominal:.2f})")
