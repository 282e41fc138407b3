"""``gguf-bench import``: real llama-bench outputs (tests/results/data/llama_bench/) read into rows, stored, exported
and written as public reference results.

The smollm2_* files are one llama-bench (CPU build) run per pair of formats: ``-o json -oe md`` (smollm2_cpu.json,
.md), ``-o csv -oe jsonl`` (smollm2_cpu.csv, .jsonl), ``-o md -oe json`` with non-default settings
(smollm2_settings.md, .json). The public_* files are GPU tables copied from public threads (URL in each).
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.bench_import.formats import FORMATS, BenchFormatError, detect_format, parse_text
from app.bench_import.load import BenchImportError, read_bench_file, read_bench_files, store_import
from app.bench_import.public_toml import backend_word, parse_model_type, public_results, to_toml
from app.bench_import.rows import rows_from_records
from app.predict.public.data import parse_reference
from app.results import export
from app.results.fields import check_row
from app.results.row_types import ResultRow
from app.results.store import ResultStore
from tests.cli_helpers import gguf_bench

DATA = Path(__file__).parent / "data" / "llama_bench"
TESTS = ("n_prompt", "n_gen", "n_depth")


def _tests(rows: list[dict]) -> list[tuple[int, int, int]]:
    return [tuple(r[k] for k in TESTS) for r in rows]


def _rows(name: str) -> list[ResultRow]:
    return read_bench_file(DATA / name).rows


def _tables(name: str) -> list[dict[str, Any]]:
    """The rows of a file as tables of their columns (as the store keeps them), to check column by column."""
    return [r.to_mapping() for r in _rows(name)]


# --- the formats ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("exact", "printed"), [("smollm2_cpu.json", "smollm2_cpu.md"),
                                               ("smollm2_settings.json", "smollm2_settings.md")])
def test_json_and_markdown_of_one_run_give_the_same_rows(exact: str, printed: str) -> None:
    full, table = _tables(exact), _tables(printed)
    assert len(full) == len(table) == 8
    assert _tests(full) == _tests(table)
    for a, b in zip(full, table, strict=True):
        assert b["avg_ts"] == pytest.approx(a["avg_ts"], abs=0.005)  # md prints two decimals
        assert b["stddev_ts"] == pytest.approx(a["stddev_ts"], abs=0.005)
        assert b["model_type"] == a["model_type"] == "llama 256M Q4_1"
        assert b["backends"] == a["backends"] == "CPU"
        assert b["n_threads"] == a["n_threads"] == 1
        assert b["build_commit"] == a["build_commit"] and b["build_number"] == a["build_number"]
        assert abs(b["model_size"] - a["model_size"]) <= 0.005 * 1024**2  # "92.10 MiB"
        assert abs(b["model_n_params"] - a["model_n_params"]) <= 0.005e6  # "134.52 M"
        for phase in ("prefill_tps", "decode_tps", "ttft_ms"):
            assert (phase in a) == (phase in b)
        if "ttft_ms" in a:  # json: the mean time; md: n_prompt ÷ the mean rate (lower by about the spread²)
            assert b["ttft_ms"] == pytest.approx(1000 * b["n_prompt"] / b["avg_ts"])
            assert b["ttft_ms"] == pytest.approx(a["ttft_ms"], rel=0.05)
        assert "samples_ns" in a and "samples_ns" not in b and "test_time" not in b  # md shows none: left empty


def test_csv_and_jsonl_of_one_run_give_identical_rows() -> None:
    csv_rows, jsonl_rows = _tables("smollm2_cpu.csv"), _tables("smollm2_cpu.jsonl")
    assert _tests(csv_rows) == _tests(jsonl_rows) == [(16, 0, 0), (32, 0, 0), (0, 8, 0)]
    for a, b in zip(csv_rows, jsonl_rows, strict=True):
        shared = set(a) & set(b)
        assert {k: a[k] for k in shared} == {k: b[k] for k in shared}
        assert set(b) - set(a) == {"samples_ns", "samples_ts", "n_repetitions", "ttft_samples_ms",
                                   "prefill_samples_tps", "decode_samples_tps"} & set(b)  # only JSON has samples
    assert csv_rows[0]["avg_ts"] == 118.102812 and csv_rows[0]["avg_ns"] == 135509303


def test_every_real_format_parses_into_the_same_tests() -> None:
    depth_run = _tests(_tables("smollm2_cpu.json"))
    assert depth_run == [(16, 0, 0), (32, 0, 0), (0, 8, 0), (16, 8, 0), (16, 0, 16), (32, 0, 16), (0, 8, 16),
                         (16, 8, 16)]
    assert _tests(_tables("smollm2_cpu.md")) == depth_run
    assert _tests(_tables("smollm2_cpu.csv")) == _tests(_tables("smollm2_cpu.jsonl"))
    for name in ("smollm2_cpu.csv", "smollm2_cpu.json", "smollm2_cpu.jsonl", "smollm2_cpu.md"):
        for row in _tables(name):
            assert check_row(row) == []


def test_phases_are_derived_from_the_test_kind() -> None:
    rows = _tables("smollm2_cpu.json")
    pp, tg, pg = rows[0], rows[2], rows[3]
    assert pp["prefill_tps"] == pp["avg_ts"] and pp["ttft_ms"] == pytest.approx(pp["avg_ns"] / 1e6)
    assert pp["ttft_samples_ms"] == pytest.approx([t / 1e6 for t in pp["samples_ns"]])
    assert pp["n_repetitions"] == 2 and "decode_tps" not in pp
    assert tg["decode_tps"] == tg["avg_ts"] and tg["tpot_ms"] == pytest.approx(1000 / tg["avg_ts"])
    assert tg["decode_samples_tps"] == tg["samples_ts"] and "prefill_tps" not in tg
    assert "prefill_tps" not in pg and "decode_tps" not in pg and pg["avg_ts"] > 0  # pp+tg blends both
    assert pp["model_filename"] == "SmolLM2-135M-Instruct.Q4_1.gguf" and pp["repack"] == 1  # JSON true → 1


def test_markdown_columns_shown_only_when_not_default() -> None:
    rows = _tables("smollm2_settings.md")
    assert {(r["flash_attn"], r["type_k"]) for r in rows} == {(0, "f16"), (1, "f16"), (0, "q8_0"), (1, "q8_0")}
    assert {r["n_ubatch"] for r in rows} == {256}
    assert all("n_gpu_layers" not in r and "type_v" not in r for r in rows)  # not shown: left empty
    assert rows[0]["model_filename"] == "llama 256M Q4_1"  # a table names no file: its model column


def test_markdown_gpu_tables_from_public_threads() -> None:
    rocm_vulkan = _tables("public_8060s_rocm_vulkan.md")
    assert [r["backends"] for r in rocm_vulkan] == ["ROCm,RPC"] * 3 + ["Vulkan,RPC"] * 3
    assert [r["model_type"] for r in rocm_vulkan] == ["llama 3B Q4_K - Medium"] * 3 + ["gpt-oss ?B F16"] * 3
    assert [(r["build_commit"], r["build_number"]) for r in rocm_vulkan] == \
        [("c81de6e1", 6092)] * 3 + [("fd1234cb", 6096)] * 3  # each table's build line below it
    assert rocm_vulkan[0]["gpu_info"] == "Radeon 8060S Graphics"
    assert rocm_vulkan[3]["gpu_info"] == "Radeon 8060S Graphics (RADV GFX1151) (radv)"
    assert [r.get("flash_attn") for r in rocm_vulkan] == [1, 1, 1, None, None, None]
    assert rocm_vulkan[3]["n_gpu_layers"] == 125 and rocm_vulkan[3]["n_threads"] == 32
    assert _tests(rocm_vulkan)[:3] == [(512, 0, 0), (0, 128, 0), (512, 128, 0)]
    assert rocm_vulkan[0]["model_size"] == round(1.87 * 1024**3) and rocm_vulkan[0]["model_n_params"] == 3_210_000_000
    assert rocm_vulkan[0]["prefill_tps"] == 573.52 and rocm_vulkan[0]["ttft_ms"] == pytest.approx(512e3 / 573.52)
    assert rocm_vulkan[1]["decode_tps"] == 74.98 and rocm_vulkan[1]["stddev_ts"] == 0.0

    old = _tables("public_3090ti_cuda_old.md")  # "pp 512", "tg 128" and an nkvo column (January 2024)
    assert _tests(old) == [(512, 0, 0), (0, 128, 0)] * 2
    assert [r["no_kv_offload"] for r in old] == [0, 0, 1, 1]
    assert {r["gpu_info"] for r in old} == {"NVIDIA GeForce RTX 3090 Ti"}
    assert old[3]["avg_ts"] == 59.99 and old[3]["stddev_ts"] == 2.35

    depths = _tables("public_8060s_depths.md")
    assert [r["n_depth"] for r in depths] == [0, 0, 4096, 4096, 8192, 8192, 16384]
    assert [r["n_prompt"] for r in depths[::2]] == [2048] * 4 and [r["n_gen"] for r in depths[1::2]] == [32] * 3
    assert "backends" not in depths[0] and "build_commit" not in depths[0]  # the poster cut them: left empty
    assert depths[3]["decode_tps"] == 44.14


def test_format_is_told_by_suffix_or_by_content() -> None:
    for name, fmt in (("smollm2_cpu.csv", "csv"), ("smollm2_cpu.json", "json"), ("smollm2_cpu.jsonl", "jsonl"),
                      ("smollm2_cpu.md", "md")):
        text = (DATA / name).read_text()
        assert detect_format(text, Path(name).suffix) == fmt
        assert detect_format(text, ".txt") == fmt
        assert len(parse_text(text, fmt)[0]) > 0


# --- bad files ------------------------------------------------------------------------------------------------
def _bad_files(tmp_path: Path) -> dict[str, Path]:
    full = (DATA / "smollm2_cpu.json").read_text()
    files = {"truncated.json": full[: len(full) // 2], "unknown.csv": "a,b,c\n1,2,3\n", "empty.md": "",
             "binary.json": None}
    out = {}
    for name, text in files.items():
        p = tmp_path / name
        if text is None:
            p.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
        else:
            p.write_text(text)
        out[name] = p
    return out


@pytest.mark.parametrize(("name", "cause"), [("truncated.json", "not valid JSON"), ("unknown.csv", "not llama-bench"),
                                             ("empty.md", "empty file"), ("binary.json", "binary file")])
def test_a_bad_file_fails_with_one_line_naming_it(tmp_path: Path, name: str, cause: str) -> None:
    path = _bad_files(tmp_path)[name]
    with pytest.raises(BenchImportError) as e:
        read_bench_files([DATA / "smollm2_cpu.csv", path])
    message = str(e.value)
    assert message.startswith(f"{path}") and cause in message and "\n" not in message


@pytest.mark.parametrize(("fmt", "text", "cause"), [
    ("json", '[{"n_prompt": 1, "n_gen": 0, "avg_ts": ' + "9" * 400 + "}]", "avg_ts"),
    ("json", '[{"n_prompt": 1, "n_gen": 0, "avg_ts": 5, "samples_ns": [' + "9" * 400 + "]}]", "samples_ns"),
    ("csv", "n_prompt,n_gen,avg_ts,model_type\n" + "9" * 40 + ",0,1,x\n", "n_prompt"),
    ("csv", "n_prompt,n_gen,avg_ts,model_type\n0,0,1,x\n", "name no test"),
    ("md", "| model | size | test | t/s |\n|-|-|-|-|\n| x | " + "9" * 300 + " GiB | pp5 | 1 ± 1 |\n", "size"),
    ("md", "| model | test | t/s |\n|-|-|-|\n| x | pp5 | 1 ± 1 | 2 |\n", "cells"),
    ("md", "| model | test | t/s |\n|-|-|-|\n| x | qq5 | 1 ± 1 |\n", "test 'qq5'"),
])
def test_values_out_of_range_fail_with_one_line(fmt: str, text: str, cause: str) -> None:
    with pytest.raises(BenchFormatError) as e:
        parse_text(text, fmt)
    assert cause in str(e.value) and "\n" not in str(e.value)


@pytest.mark.heavy  # the CLI in a subprocess
def test_cli_refuses_a_bad_file_and_stores_nothing(tmp_path: Path) -> None:
    store = tmp_path / "results.sqlite3"
    bad = _bad_files(tmp_path)["truncated.json"]
    done = gguf_bench("--store", str(store), "import", str(DATA / "smollm2_cpu.csv"), str(bad))
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and str(bad) in done.stderr and "not valid JSON" in done.stderr
    with ResultStore(store) as s:
        assert s.runs() == []


# --- the store ------------------------------------------------------------------------------------------------
def test_stored_import_is_one_run_marked_as_imported(tmp_path: Path) -> None:
    files = read_bench_files([DATA / "smollm2_cpu.csv", DATA / "public_8060s_rocm_vulkan.md"])
    with ResultStore(tmp_path / "r.sqlite3") as store:
        run_id, rows = store_import(store, files, "mixed", "https://example.org/thread#c1", "gguf-bench import …")
        (summary,) = store.runs()
        stored = store.rows(run_id)
        info = store.run_info(run_id)
    assert summary.sweep_name == "import: mixed (https://example.org/thread#c1)"
    assert summary.status == "finished" and summary.n_ok == 9 and summary.n_tests == 9
    assert [r.test_index for r in stored] == list(range(9)) and all(r.run_id == run_id for r in stored)
    assert info["machine"]["source_url"] == "https://example.org/thread#c1"
    assert info["command"] == "gguf-bench import …"
    assert "SmolLM2-135M-Instruct.Q4_1.gguf" in summary.models and "llama 3B Q4_K - Medium" in summary.models


@pytest.mark.heavy  # the CLI in a subprocess
def test_cli_import_then_history_and_export_csv(tmp_path: Path) -> None:
    store = str(tmp_path / "results.sqlite3")
    done = gguf_bench("--store", store, "import", str(DATA / "smollm2_cpu.csv"), "--name", "smollm2 cpu",
                      "--source", "https://example.org/run", "-o", "json")
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    assert [r["avg_ts"] for r in printed] == [118.102812, 89.328279, 51.229328]
    history = gguf_bench("--store", store, "history")
    assert "import: smollm2 cpu (https://example.org/run)" in history.stdout
    exported = gguf_bench("--store", store, "export", "last", "-o", "csv")
    assert exported.returncode == 0, exported.stderr
    rows = export.read_csv(exported.stdout)
    source = export.read_csv((DATA / "smollm2_cpu.csv").read_text())
    assert len(rows) == len(source) == 3
    for mine, theirs in zip(rows, source, strict=True):  # llama-bench's own column values come back
        for col in ("build_commit", "build_number", "cpu_info", "backends", "model_filename", "model_type",
                    "model_size", "model_n_params", "n_batch", "n_ubatch", "n_threads", "type_k", "n_gpu_layers",
                    "flash_attn", "n_prompt", "n_gen", "n_depth", "test_time", "avg_ns", "stddev_ns"):
            assert mine[col] == theirs[col], col
        assert float(mine["avg_ts"]) == pytest.approx(float(theirs["avg_ts"]), abs=1e-4)
    assert float(rows[0]["prefill_tps"]) == pytest.approx(118.1028) and rows[2]["decode_tps"] == "51.2293"


@pytest.mark.heavy  # the CLI in a subprocess
def test_cli_dry_run_stores_nothing(tmp_path: Path) -> None:
    store = tmp_path / "results.sqlite3"
    done = gguf_bench("--store", str(store), "import", "--dry-run", "-o", "csv", str(DATA / "smollm2_cpu.md"))
    assert done.returncode == 0, done.stderr
    assert len(export.read_csv(done.stdout)) == 8 and "nothing stored" in done.stderr
    with ResultStore(store) as s:
        assert s.runs() == []


# --- the public table ------------------------------------------------------------------------------------------
def test_model_type_gives_weight_and_ggml_types() -> None:
    for text, name, weight, ggml in (("llama 8B Q4_K - Medium", "llama 8B", "Q4_K_M", "Q4_K"),
                                     ("llama 8B IQ4_XS - 4.25 bpw", "llama 8B", "IQ4_XS", "IQ4_XS"),
                                     ("llama 7B F16", "llama 7B", "F16", "F16"),
                                     ("llama 7B mostly Q4_0", "llama 7B", "Q4_0", "Q4_0"),
                                     ("qwen3 14B Q3_K - Small", "qwen3 14B", "Q3_K_S", "Q3_K"),
                                     ("llama 8B IQ3_S mix - 3.66 bpw", "llama 8B", "IQ3_M", "IQ3_S"),
                                     ("gpt-oss 120B MXFP4 MoE", "gpt-oss 120B", "MXFP4_MOE", "MXFP4"),
                                     ("llama 8B Q2_K - Medium", "llama 8B", "Q2_K", "Q2_K")):
        got = parse_model_type(text)
        assert (got.name, got.weight_type, got.ggml_type) == (name, weight, ggml), text
    assert [backend_word(b) for b in ("Metal,BLAS", "ROCm,RPC", "MTL,BLAS", "CUDA", "CPU")] == \
        ["Metal", "ROCm", "Metal", "CUDA", "CPU"]


def test_public_results_pair_pp_and_tg_per_configuration() -> None:
    files = [(name, _rows(name)) for name in ("public_8060s_rocm_vulkan.md", "public_3090ti_cuda_old.md",
                                              "public_8060s_depths.md", "smollm2_cpu.json")]
    results, notes = public_results(files, "Radeon 8060S", "https://example.org/t")
    assert [(r["backend"], r["weight_type"], r["pp_tps"], r["tg_tps"]) for r in results] == [
        ("ROCm", "Q4_K_M", 573.52, 74.98), ("Vulkan", "F16", 564.23, 45.01), ("CUDA", "Q4_0", 4035.47, 127.43),
        ("CUDA", "Q4_0", 237.84, 59.99)]
    assert results[0]["build"] == "c81de6e1 (6092)" and results[0]["file_size_gib"] == 1.87
    assert results[1]["n_gpu_layers"] == 125 and "left out pp512+tg128" in notes[0]
    assert any("public_8060s_depths.md" in n and "backends" in n for n in notes)  # no backend: not guessed
    assert any("smollm2_cpu.json" in n and "CPU backend" in n for n in notes)


@pytest.mark.heavy  # the CLI in a subprocess
def test_cli_public_toml_passes_the_reference_validation(tmp_path: Path) -> None:
    url = "https://github.com/geerlingguy/ai-benchmarks/issues/21"
    done = gguf_bench("import", "--public-toml", "--gpu", "Radeon 8060S", "--source", url,
                      str(DATA / "public_8060s_rocm_vulkan.md"))
    assert done.returncode == 0, done.stderr
    doc = tomllib.loads(done.stdout)
    assert [r["model"] for r in doc["result"]] == ["llama 3B", "gpt-oss ?B"]
    models = [{"name": r["model"], "n_layer": 1, "n_embd": 1, "n_vocab": 1, "n_head": 1, "n_head_kv": 1,
               "head_dim": 1, "tied_embeddings": False, "source": "test"} for r in doc["result"]]
    parsed = parse_reference({"model": models, "result": doc["result"]}, "imported")
    assert [(p.gpu, p.backend, p.n_prompt, p.n_gen, p.source_url) for p in parsed] == \
        [("Radeon 8060S", "ROCm", 512, 128, url), ("Radeon 8060S", "Vulkan", 512, 128, url)]
    missing = gguf_bench("import", "--public-toml", str(DATA / "public_8060s_rocm_vulkan.md"))
    assert missing.returncode == 2 and "--gpu" in missing.stderr and "--source" in missing.stderr


def test_a_table_of_one_test_gives_a_row_of_that_test_alone(tmp_path: Path) -> None:
    """PR threads often publish a tg-only (-p 0) or pp-only (-n 0) table: the row keeps the test it has, with the
    other's count 0 and no figure, and the reference loader takes it as such."""
    table = ("| model | size | params | backend | ngl | fa | test | t/s |\n|---|--:|--:|---|--:|--:|--:|--:|\n"
             "| llama 7B Q4_0 | 3.56 GiB | 6.74 B | Vulkan | 99 | 1 | tg128 | 221.08 ± 1.41 |\n"
             "| llama 8B Q4_0 | 4.33 GiB | 8.03 B | Vulkan | 99 | 1 | pp512 | 9000.50 ± 20.00 |\n")
    (tmp_path / "t.md").write_text(table, encoding="utf-8")
    results, _ = public_results([("t.md", read_bench_file(tmp_path / "t.md").rows)], "RTX 5090", "https://e.org/t")
    tg_only, pp_only = results
    assert (tg_only["n_prompt"], tg_only["n_gen"], tg_only["tg_tps"], "pp_tps" in tg_only) == (0, 128, 221.08, False)
    assert (pp_only["n_prompt"], pp_only["n_gen"], pp_only["pp_tps"], "tg_tps" in pp_only) == (512, 0, 9000.5, False)
    assert "tg128 (the source has no pp test of it)" in tg_only["source_section"]
    models = [{"name": r["model"], "n_layer": 1, "n_embd": 1, "n_vocab": 1, "n_head": 1, "n_head_kv": 1,
               "head_dim": 1, "tied_embeddings": False, "source": "test"} for r in results]
    parsed = parse_reference({"model": models, "result": tomllib.loads(to_toml(results))["result"]}, "imported")
    assert [(p.pp_tps, p.tg_tps) for p in parsed] == [(0.0, 221.08), (9000.5, 0.0)]


def test_toml_text_round_trips_awkward_strings() -> None:
    results, _ = public_results([('we"ird\\name.md', _rows("public_3090ti_cuda_old.md"))], "RTX 3090 Ti", "u")
    back = tomllib.loads(to_toml(results))["result"]
    assert back[0]["source_section"].startswith('we"ird\\name.md: ') and back == results


# --- any text -------------------------------------------------------------------------------------------------
_PIECES = st.sampled_from(["|", " model ", " test ", " t/s ", "---", ":", "pp512", "tg128", " @ d", "±", "1.5",
                           "-3", "1e400", "9" * 400, "\n", ",", '"', "[", "]", "{", "}", '"avg_ts": ', '"n_prompt": ',
                           '"n_gen": ', "true", "null", "build: abc (12)", "Device 0: X,", "GiB", " B", "n_prompt",
                           "avg_ts", "n_gen", "model_type"])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_PIECES, max_size=40).map("".join), st.sampled_from(FORMATS))
def test_any_text_parses_or_fails_with_one_line(text: str, fmt: str) -> None:
    try:
        records, _notes = parse_text(text, fmt)
    except BenchFormatError as e:
        assert "\n" not in str(e)
        return
    for i, row in enumerate(rows_from_records(records)):
        assert check_row(row.to_mapping()) == [] and row.test_index == i
