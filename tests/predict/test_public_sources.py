"""The training tables of the public fit and the held-out tables are held out BY SOURCE: no repository or thread gives
rows to both, and no published figure is in both. The training loader reads every training table (May 2024, later
builds, llama.cpp's pull requests by backend), one-line errors name the file, and the shipped fit learns from them."""

from __future__ import annotations

import dataclasses
import tomllib

import pytest

from app.paths import HARDWARE_PROFILES_DIR
from app.predict.profiles import load_profiles
from app.predict.public import fit as public_fit
from app.predict.public.arch_fit import PublicFitError, canonical_backend, row_era
from app.predict.public.data import (
    PUBLIC_2025_TABLE_PATH,
    PUBLIC_COMMUNITY_TABLE_PATH,
    PUBLIC_PR_TABLE_PATHS,
    PUBLIC_SCOREBOARD_TABLE_PATH,
    PUBLIC_TABLE_PATH,
    TRAINING_TABLE_PATHS,
    ReferenceTableError,
    load_reference,
    load_training,
    source_key,
)
from app.predict.public.held_out import HELD_OUT_TABLE_PATHS, load_held_out


@pytest.fixture(scope="module")
def training() -> list:
    return load_training()


@pytest.fixture(scope="module")
def held() -> list:
    return load_held_out()


def test_source_keys_name_the_thread_or_the_repository() -> None:
    assert source_key("https://github.com/ggml-org/llama.cpp/pull/13324") == "ggml-org/llama.cpp#13324"
    assert source_key("https://github.com/ggml-org/llama.cpp/issues/13324#issuecomment-1") == "ggml-org/llama.cpp#13324"
    assert source_key("https://github.com/Kyuz0/Amd-Strix-Halo-Toolboxes/blob/abc/benchmark/x.log") == (
        "kyuz0/amd-strix-halo-toolboxes")
    assert source_key("github:lhl/strix-halo-testing@5ee14b5:llm-bench/x.jsonl") == "lhl/strix-halo-testing"
    assert source_key("https://www.reddit.com/r/LocalLLaMA/comments/1ghvwsj/?x=1") == (
        "reddit.com/r/localllama/comments/1ghvwsj")


def test_the_training_loader_reads_every_training_table(training) -> None:
    assert TRAINING_TABLE_PATHS == (PUBLIC_TABLE_PATH, PUBLIC_2025_TABLE_PATH, *PUBLIC_PR_TABLE_PATHS,
                                    PUBLIC_COMMUNITY_TABLE_PATH, PUBLIC_SCOREBOARD_TABLE_PATH)
    new = load_reference(PUBLIC_2025_TABLE_PATH)
    assert len(training) == sum(len(load_reference(p)) for p in TRAINING_TABLE_PATHS) and len(new) >= 40
    assert not any(r.held_out for r in training)
    assert {canonical_backend(r.backend) for r in new} == {"CUDA", "Metal", "Vulkan", "ROCm", "SYCL"}
    assert len({r.weight_type for r in new}) >= 8 and len({r.gpu for r in new}) >= 10
    assert {row_era(r) for r in new} == {"b3000–b5999", "b6000–b7999", "≥b8000"}  # June 2024 on, none older
    assert any(r.n_depth > 0 for r in new) and {r.flash_attn for r in new} >= {0, 1}


def test_the_pull_request_tables_hold_pull_requests_and_the_held_out_ones_none(held) -> None:
    """Training takes llama.cpp's pull requests, held-out its issues and discussions: one repository, split by thread
    kind, so that no thread is on both sides by construction."""
    for path in PUBLIC_PR_TABLE_PATHS:
        for r in load_reference(path):
            assert "/pull/" in r.source_url, (path.name, r.source_url)
    assert not [r.source_url for r in held if r.source_url.startswith("https://github.com/ggml-org/") and
                "/pull/" in r.source_url and r not in load_reference(HELD_OUT_TABLE_PATHS[0], held_out=True)]


def test_no_source_gives_rows_to_both_sides(training, held) -> None:
    train_keys = {source_key(r.source_url) for r in training}
    held_keys = {source_key(r.source_url) for r in held}
    assert not train_keys & held_keys, sorted(train_keys & held_keys)
    # A repository whose files are held out gives no training row at all, not even from one of its threads.
    held_repos = {k for k in held_keys if "#" not in k}
    assert not {k.split("#")[0] for k in train_keys} & held_repos


def test_no_published_figure_is_in_both_tables(training, held) -> None:
    def figures(rows: list) -> set:
        return {(r.gpu, r.model.name, r.weight_type, round(r.pp_tps, 2), round(r.tg_tps, 2)) for r in rows}

    assert not figures(training) & figures(held)
    assert not {r.pp_tps for r in training} & {r.pp_tps for r in held}


def test_the_shipped_fit_learns_from_both_training_tables_and_never_the_held_out_one(training) -> None:
    shipped = public_fit.load_public_model()
    tables = {r.source_url for r in load_reference(PUBLIC_2025_TABLE_PATH)}
    assert any(r.source_url in tables for r in shipped.rows)
    assert len(shipped.rows) + len(shipped.unprofiled) == len(training)
    assert not any(r.held_out for r in shipped.rows)
    profiles = {p.name for p in load_profiles([HARDWARE_PROFILES_DIR])}
    assert all(r.gpu in profiles for r in shipped.rows) and all(r.gpu not in profiles for r in shipped.unprofiled)
    assert not set(HELD_OUT_TABLE_PATHS) & set(TRAINING_TABLE_PATHS)


def test_a_row_without_a_profile_is_refused_unless_set_aside(training) -> None:
    profiles = load_profiles([HARDWARE_PROFILES_DIR])
    ghost = dataclasses.replace(training[0], gpu="Voodoo 5")
    with pytest.raises(PublicFitError, match="no hardware profile: Voodoo 5"):
        public_fit.PublicGpuModel([*training[:5], ghost], profiles)
    model = public_fit.PublicGpuModel([*training[:5], ghost], profiles, skip_unprofiled=True)
    assert model.unprofiled == (ghost,) and ghost not in model.rows


def test_a_bad_training_table_gives_one_line_naming_it(tmp_path) -> None:
    with PUBLIC_2025_TABLE_PATH.open("rb") as f:
        doc = tomllib.load(f)
    bad = tmp_path / "llama_bench_public_2025.toml"
    text = PUBLIC_2025_TABLE_PATH.read_text(encoding="utf-8")
    bad.write_text(text.replace('flash_attn = 1\n', 'flash_attn = 2\n', 1), encoding="utf-8")
    assert doc["result"] and "flash_attn = 1\n" in text
    with pytest.raises(ReferenceTableError) as info:
        load_training([PUBLIC_TABLE_PATH, bad])
    msg = str(info.value)
    assert msg.startswith("llama_bench_public_2025.toml: result #") and "flash_attn must be 1, 0 or -1" in msg
    assert "\n" not in msg
