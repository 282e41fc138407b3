"""Issue #52 item 6: every ``--json`` document carries ``schema_version``, its keys are pinned here and listed in
docs/commands.md, and ``predict --json``'s version-1 keys (before the figures were nested, 65b2b46) still read the
same answer."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from app.choose.chooser import CHOOSE_SCHEMA_VERSION
from app.cli.json_docs import SCHEMA_VERSIONS, versioned
from app.cli.predict_cmd import PREDICT_SCHEMA_VERSION
from app.cli.predict_json import V1_AT_CONTEXT_KEYS, V1_KEYS
from app.results.store import ResultStore
from tests.cli_helpers import main_json

REPO = Path(__file__).resolve().parents[2]
COMMANDS_MD = REPO / "docs" / "commands.md"

#: ``predict --json``'s keys, version 2.
PREDICT_KEYS = (
    "schema_version", "profile", "model", "kind", "n_ctx", "n_gpu_layers", "type_k", "type_v", "n_prompt", "n_gen",
    "weight_bytes", "gpu_weight_bytes", "cpu_weight_bytes", "kv_bytes", "kv_bytes_per_token", "compute_buffer_bytes",
    "decode_ceiling_tps", "decode_ceiling_empty_tps", "decode_depth", "n_depth", "prefill_ceiling_tps",
    "gpu_bandwidth_gbps", "cpu_bandwidth_gbps", "tflops", "fits", "fit_status", "max_ngl", "max_ctx", "needed_bytes",
    "budget_bytes", "ttft_ms", "decode_s", "total_s", "ttft_share", "decode_share", "chars_per_s", "fit", "scenario",
    "notes", "n_cpu_moe", "no_kv_offload", "tensor_buft_overrides", "memory_per_device", "decode_gpu_read_bytes",
    "decode_host_read_bytes", "decode_extra_crossings", "repacked_weight_bytes", "repack", "split", "state_bytes",
    "this_machine", "decode", "decode_empty", "prefill", "ttft_ms_figure", "no_expected_decode", "measured",
    "prefill_ceiling_kind", "prefill_ceiling_source", "at_context", "verdict", "request", "n_threads",
    "threads_note", "ceiling_source", "no_op_offload", "prefill_offload_bytes", "inspector", *V1_KEYS,
)
INSPECTOR_KEYS = ("model", "profile", "n_ctx", "flags", "verdict", "decode_depth", "rows", "facts", "notes")
INSPECTOR_ROW_KEYS = ("label", "value", "band", "where", "source", "kind")
REQUEST_KEYS = ("prompt_tokens", "output_tokens", "ttft_s", "decode_s", "total_s", "ttft_share", "decode_share",
                "chars_per_s", "effective_chars_per_s", "ttft_kind", "decode_kind")
VERDICT_KEYS = ("status", "word", "reason", "text", "n_gpu_layers", "n_cpu_moe", "type_k", "placement", "ran_out",
                "margin_bytes", "device_bytes", "device_budget_bytes", "host_bytes", "host_budget_bytes",
                "beyond_trained_context", "user_placed", "best_flags")
PREDICT_AT_CONTEXT_KEYS = ("n_ctx", "depth", "type_k", "flash_attn", "n_gpu_layers", "decode", "decode_empty",
                           "needed_bytes", "fit_status", "no_expected_decode", *V1_AT_CONTEXT_KEYS)
FIGURE_KEYS = ("value", "kind", "low", "high", "source", "source_detail", "depth")
#: ``gguf-bench predict --json``'s keys at cc8251e (65b2b46^), the last version-1 output: a script written then reads
#: these (``efficiency_note`` was there only when stored runs were not used).
PREDICT_V1_KEYS = (
    "profile", "model", "kind", "n_ctx", "n_gpu_layers", "type_k", "type_v", "n_prompt", "n_gen", "weight_bytes",
    "gpu_weight_bytes", "cpu_weight_bytes", "kv_bytes", "kv_bytes_per_token", "compute_buffer_bytes",
    "decode_ceiling_tps", "decode_ceiling_empty_tps", "decode_depth", "n_depth", "prefill_ceiling_tps",
    "gpu_bandwidth_gbps", "cpu_bandwidth_gbps", "tflops", "fits", "fit_status", "max_ngl", "max_ctx", "needed_bytes",
    "budget_bytes", "ttft_ms", "decode_s", "total_s", "ttft_share", "decode_share", "chars_per_s",
    "efficiency_prefill", "efficiency_decode", "expected_prefill_tps", "expected_decode_tps",
    "expected_decode_empty_tps", "expected_ttft_ms", "expected_total_s", "fit", "scenario", "expected_scenario",
    "notes", "expected_decode_tps_low", "expected_decode_tps_high", "expected_prefill_tps_low",
    "expected_prefill_tps_high", "expected_source", "n_cpu_moe", "no_kv_offload", "tensor_buft_overrides",
    "memory_per_device", "decode_gpu_read_bytes", "decode_host_read_bytes", "decode_extra_crossings",
    "no_expected_decode", "repacked_weight_bytes", "repack", "at_context", "calibrated_from", "n_threads",
    "threads_note", "ceiling_source", "prefill_ceiling_kind", "prefill_ceiling_source",
)
PREDICT_V1_AT_CONTEXT_KEYS = ("n_ctx", "depth", "type_k", "n_gpu_layers", "decode_tps", "decode_kind",
                              "decode_tps_low", "decode_tps_high", "decode_source", "decode_ceiling_tps",
                              "decode_empty_tps", "decode_empty_kind", "needed_bytes", "fit_status")
CHOOSE_KEYS = ("schema_version", "profile", "this_machine", "n_ctx", "vram_bytes", "files", "errors",
               "recommendation", "notes")
CHOOSE_FILE_KEYS = (
    "source", "filename", "file_type", "size_bytes", "bits_per_weight", "n_layer", "status", "n_gpu_layers", "type_k",
    "kv_types_fitting", "memory_bytes", "budget_bytes", "weights_bytes", "kv_bytes", "compute_bytes",
    "overhead_bytes", "decode_tps", "ttft_ms", "measured", "quality", "notes", "n_cpu_moe", "decode_empty_tps",
    "decode_depth", "placement", "requantized_from", "placements", "model_key", "model_name", "ran_out", "repack",
    "capped_bits_per_weight", "expected_quality", "kv_cache", "host_bytes", "host_budget_bytes", "margin_bytes",
    "verdict", "content_key", "expected_kld", "expected_kld_low", "expected_kld_high", "expected_quality_kind",
    "expected_quality_source", "device_bytes", "ttft_kind",
)
CHOOSE_RECOMMENDATION_KEYS = ("filename", "source", "sentence", "command", "device_bytes", "device_budget_bytes",
                              "margin_bytes", "host_bytes", "host_budget_bytes", "per_model")
INSPECT_KEYS = (
    "schema_version", "path", "file_bytes", "architecture", "name", "file_type", "n_params", "weight_bytes",
    "tensor_types", "n_layer", "n_head", "n_head_kv", "head_dim_k", "head_dim_v", "n_embd", "n_ff", "n_vocab",
    "n_ctx_train", "swa_window", "swa_layers", "n_expert", "n_expert_used", "extra", "kv_k_per_layer",
    "kv_v_per_layer", "recurrent_layers", "state_r", "state_s", "state_bytes", "bits_per_weight", "gqa_ratio",
    "kv_bytes_per_token",
)
HISTORY_KEYS = ("schema_version", "run_id", "created_at", "finished_at", "status", "sweep_name", "n_tests", "n_ok",
                "n_failed", "models")
HW_KEYS = ("schema_version", "machine", "gpus", "gpu_note", "cpu_probe", "cpu_probe_error", "cpu_compute",
           "extra_buffers")


def _documented(heading: str) -> set[str]:
    """The keys docs/commands.md's section ``### `<heading>` (schema_version N)`` names (in backticks)."""
    text = COMMANDS_MD.read_text(encoding="utf-8")
    m = re.search(rf"^### `{re.escape(heading)}` \(schema_version (\d+)\)\n(.*?)(?=^##)", text + "\n##",
                  re.M | re.S)
    assert m is not None, f"docs/commands.md has no section for {heading}"
    return set(re.findall(r"`([a-z_0-9]+)`", m.group(2)))


def _version_in_docs(heading: str) -> int:
    m = re.search(rf"^### `{re.escape(heading)}` \(schema_version (\d+)\)", COMMANDS_MD.read_text("utf-8"), re.M)
    assert m is not None, heading
    return int(m.group(1))


def _same_keys(doc: dict[str, Any], pinned: tuple[str, ...]) -> None:
    """``doc`` has exactly the ``pinned`` keys (their order is not the schema's)."""
    assert set(doc) == set(pinned), f"new: {sorted(set(doc) - set(pinned))}, gone: {sorted(set(pinned) - set(doc))}"


def test_every_json_output_of_the_cli_goes_through_json_docs() -> None:
    """A ``json.dumps`` in app/cli outside json_docs.py would print a document without ``schema_version``."""
    found = []
    for path in sorted((REPO / "app" / "cli").glob("*.py")):
        if path.name == "json_docs.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr in ("dumps", "dump") and \
                    isinstance(node.value, ast.Name) and node.value.id == "json":
                found.append(f"{path.name}:{node.lineno}")
    assert found == [], f"print --json documents through app.cli.json_docs.json_text: {found}"


def test_each_documents_version_is_in_the_docs() -> None:
    versions = {**SCHEMA_VERSIONS, "choose": CHOOSE_SCHEMA_VERSION, "predict": PREDICT_SCHEMA_VERSION}
    assert set(versions) == {"inspect", "history", "hw", "doctor", "compare", "calibrate", "predict", "choose"}
    for command, version in versions.items():
        assert _version_in_docs(f"{command} --json") == version, command
    assert versioned({"a": 1, "schema_version": 9}, 3) == {"schema_version": 3, "a": 1}
    assert versioned([{"a": 1}, {"a": 2}], 1) == [{"schema_version": 1, "a": 1}, {"schema_version": 1, "a": 2}]


@pytest.fixture
def gpu_prediction(make_gguf: Callable[..., Path], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    """``predict --json`` for a GPU profile (nothing of this machine; expected figures from the public fit)."""
    model = make_gguf("m.gguf", n_layer=4)
    return main_json("predict", ["-m", str(model), "--hw", "RTX 4060 Laptop"], capsys)


def test_predict_json_keys_are_pinned_and_documented(gpu_prediction: dict[str, Any]) -> None:
    doc = gpu_prediction
    assert doc["schema_version"] == PREDICT_SCHEMA_VERSION == 2 and next(iter(doc)) == "schema_version"
    _same_keys(doc, PREDICT_KEYS)
    _same_keys(doc["at_context"], PREDICT_AT_CONTEXT_KEYS)
    for key in ("decode", "decode_empty", "prefill", "ttft_ms_figure"):
        _same_keys(doc[key], FIGURE_KEYS)
    _same_keys(doc["at_context"]["decode"], FIGURE_KEYS)
    _same_keys(doc["verdict"], VERDICT_KEYS)
    _same_keys(doc["request"], REQUEST_KEYS)
    _same_keys(doc["inspector"], INSPECTOR_KEYS)
    for row in doc["inspector"]["rows"]:
        _same_keys(row, INSPECTOR_ROW_KEYS)
    pinned = (set(PREDICT_KEYS) | set(PREDICT_AT_CONTEXT_KEYS) | set(FIGURE_KEYS) | set(VERDICT_KEYS)
              | set(REQUEST_KEYS) | set(INSPECTOR_KEYS) | set(INSPECTOR_ROW_KEYS))
    missing = pinned - _documented("predict --json")
    assert not missing, f"docs/commands.md does not list {sorted(missing)}"


def _v1_reader(doc: dict[str, Any]) -> dict[str, Any]:
    """What a script written for version 1 read: the figure to expect (else the ceiling), its band and source, the
    request's time, and the answer at the context."""
    a = doc["at_context"]
    return {"decode": doc["expected_decode_tps"] or doc["decode_ceiling_tps"],
            "band": (doc["expected_decode_tps_low"], doc["expected_decode_tps_high"]),
            "prefill": doc["expected_prefill_tps"] or doc["prefill_ceiling_tps"],
            "total_s": doc["expected_total_s"] or doc["total_s"], "source": doc["expected_source"],
            "at_context": (a["decode_tps"], a["decode_kind"], a["decode_tps_low"], a["decode_tps_high"],
                           a["decode_empty_tps"], a["needed_bytes"])}


def test_a_version_1_script_reads_the_same_answer(gpu_prediction: dict[str, Any]) -> None:
    """Every key version 1 gave is there, and a version-1 reader gets what version 2's nested figures say."""
    doc = gpu_prediction
    assert set(PREDICT_V1_KEYS) <= set(doc) and set(PREDICT_V1_AT_CONTEXT_KEYS) <= set(doc["at_context"])
    decode, prefill, a = doc["decode"], doc["prefill"], doc["at_context"]
    assert decode["kind"] == prefill["kind"] == a["decode"]["kind"] == "public"  # expected figures, with bands
    old = _v1_reader(doc)
    assert old["decode"] == decode["value"] and old["band"] == (decode["low"], decode["high"])
    assert old["prefill"] == prefill["value"] and old["source"] == decode["source"]
    assert old["total_s"] == pytest.approx(doc["n_prompt"] / prefill["value"] + doc["n_gen"] / decode["value"])
    assert old["at_context"] == (a["decode"]["value"], "expected", a["decode"]["low"], a["decode"]["high"],
                                 a["decode_empty"]["value"], a["needed_bytes"])
    assert doc["expected_decode_empty_tps"] == doc["decode_empty"]["value"]
    assert doc["expected_ttft_ms"] == pytest.approx(doc["ttft_ms_figure"]["value"])
    assert doc["efficiency_decode"] is None and doc["calibrated_from"] == ""  # no stored runs' efficiency here


def test_a_ceiling_is_no_expected_figure_in_version_1s_keys(make_gguf: Callable[..., Path],
                                                           monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """This CPU, not calibrated, no stored runs: the ceilings speak, and version 1's expected keys are null as they
    were. (A cached probe figure, and the scan taken in ProbeMode.CACHED: no probe, no repack check's child.)"""
    import app.cli.predict_cmd as predict_cmd
    from app.telemetry.cpu_probe import CpuProbe, save_probe
    from app.telemetry.machine import ProbeMode, scan_machine

    save_probe(CpuProbe(bandwidth_gbps=20.0, gflops_f32=200.0, n_threads=2, measured_at="test fixture"))
    monkeypatch.setattr(predict_cmd, "scan_machine", lambda probe=None: scan_machine(ProbeMode.CACHED))
    doc = main_json("predict", ["-m", str(make_gguf("m.gguf", n_layer=4)), "--hw", "cpu"], capsys)
    assert doc["decode"]["kind"] == doc["prefill"]["kind"] == doc["at_context"]["decode"]["kind"] == "ceiling"
    assert all(doc[k] is None for k in V1_KEYS if k not in ("expected_source", "calibrated_from")), doc
    assert doc["expected_source"] == doc["calibrated_from"] == ""
    a = doc["at_context"]
    assert (a["decode_kind"], a["decode_source"], a["decode_empty_kind"]) == ("ceiling", "ceiling", "ceiling")
    assert a["decode_tps"] == a["decode_ceiling_tps"] == a["decode"]["value"]
    assert _v1_reader(doc)["decode"] == doc["decode_ceiling_tps"]


def test_inspect_and_history_json_carry_the_version(make_gguf: Callable[..., Path], tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    doc = main_json("inspect", [str(make_gguf("m.gguf", n_layer=2))], capsys)
    _same_keys(doc, INSPECT_KEYS)
    assert doc["schema_version"] == 1
    assert set(INSPECT_KEYS) <= _documented("inspect --json")
    store = tmp_path / "r.sqlite3"
    with ResultStore(store) as s:
        s.begin_run("run-1")
    from app.cli.main import main

    assert main(["--store", str(store), "history", "--json"]) == 0
    import json

    runs = json.loads(capsys.readouterr().out)
    assert isinstance(runs, list) and len(runs) == 1  # a list stays a list
    _same_keys(runs[0], HISTORY_KEYS)
    assert runs[0]["schema_version"] == 1 and runs[0]["run_id"] == "run-1"
    assert set(HISTORY_KEYS) <= _documented("history --json")


def test_hw_json_carries_the_version(capsys: pytest.CaptureFixture[str]) -> None:
    doc = main_json("hw", ["--no-probe"], capsys)
    _same_keys(doc, HW_KEYS)
    assert doc["schema_version"] == 1
    assert set(HW_KEYS) <= _documented("hw --json")


def test_choose_json_keys_are_pinned_and_documented(make_gguf: Callable[..., Path],
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    model = str(make_gguf("m.gguf", n_layer=2))
    doc = main_json("choose", [model, "--hw", "RTX 4060 Laptop"], capsys)
    _same_keys(doc, CHOOSE_KEYS)
    _same_keys(doc["files"][0], CHOOSE_FILE_KEYS)
    _same_keys(doc["recommendation"], CHOOSE_RECOMMENDATION_KEYS)
    assert doc["schema_version"] == CHOOSE_SCHEMA_VERSION
    pinned = set(CHOOSE_KEYS) | set(CHOOSE_FILE_KEYS) | set(CHOOSE_RECOMMENDATION_KEYS)
    missing = pinned - _documented("choose --json")
    assert not missing, f"docs/commands.md does not list {sorted(missing)}"
    several = main_json("choose", [model, "--hw", "RTX 4060 Laptop", "--ctx", "4096,8192"], capsys)
    assert list(several) == ["schema_version", "contexts"] and len(several["contexts"]) == 2
    assert all(c["schema_version"] == CHOOSE_SCHEMA_VERSION for c in several["contexts"])
