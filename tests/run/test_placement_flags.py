"""llama-bench's placement flags (-ncmoe, -nkvo, -ot, -sm, -mg, -ts, -dev, --no-host): syntax, plan, a real run.

The fast tests read and plan the flags without a model; the engine's C arrays are built over the installed
libggml without loading one. The real run goes through the CLI on a synthetic mixture-of-experts model
(tests/gguf_synth.py write_synthetic_moe_gguf) and, where the reference llama-bench binary is present, compares
the placement columns' text with its CSV.
"""

from __future__ import annotations

import csv
import io
import os
import re
import subprocess
from pathlib import Path

import pytest

from app.cli.main import build_parser
from app.run.params import (
    LIST_PARAMS,
    NCMOE_ALL,
    NCMOE_HALF,
    PARAM,
    PlanError,
    device_names,
    override_pairs,
    tensor_split_values,
)
from app.run.plan import SweepSpec, TestSpec, check_placement_build, count_loads, load_sweep_preset
from app.telemetry.llama_build import installed_gpu_backends
from engines.base import LoadConfig, SettingsError
from engines.ggml_devices import find_lib_dir
from engines.llama_cpp_placement import TensorBuftOverride, build_placement, expert_block_pattern
from tests.cli_helpers import gguf_bench
from tests.gguf_synth import synthetic_tensor_shapes, write_synthetic_moe_gguf

PLACEMENT = ("n_cpu_moe", "split_mode", "main_gpu", "tensor_split", "devices", "tensor_buft_overrides", "no_host",
             "no_kv_offload")
REFERENCE_BENCH = Path("/tmp/lb/build/bin/llama-bench")


def parse(name: str, text: str) -> list[object]:
    return PARAM[name].parse_text(text)


# --- syntax ---------------------------------------------------------------------------------------------------------
def test_n_cpu_moe_takes_counts_ranges_all_and_half() -> None:
    assert parse("n_cpu_moe", "0,1,all") == [0, 1, NCMOE_ALL]
    assert parse("n_cpu_moe", "0-6+2,half") == [0, 2, 4, 6, NCMOE_HALF]
    assert PARAM["n_cpu_moe"].text([0, NCMOE_ALL, NCMOE_HALF]) == "0,all,half"
    with pytest.raises(PlanError, match=r"^-ncmoe: cannot read 'x' as a layer count, all or half$"):
        parse("n_cpu_moe", "x")
    with pytest.raises(PlanError, match=r"^-ncmoe: cannot read '-3' .*0 to 9999"):
        parse("n_cpu_moe", "-3")
    with pytest.raises(PlanError, match="n_cpu_moe value"):
        PARAM["n_cpu_moe"].check(True, "preset.toml")


def test_split_mode_main_gpu_and_the_01_flags() -> None:
    assert parse("split_mode", "none,layer,row,tensor") == ["none", "layer", "row", "tensor"]
    with pytest.raises(PlanError, match=r"unknown split mode 'rows' for split_mode \(valid: none, layer, row"):
        PARAM["split_mode"].check_list(parse("split_mode", "rows"), "command line")
    assert parse("main_gpu", "0-2") == [0, 1, 2]
    with pytest.raises(PlanError, match="main_gpu value 16 must be ≤ 15"):
        PARAM["main_gpu"].check(16, "command line")
    for name in ("no_kv_offload", "no_host"):
        assert parse(name, "0,1") == [0, 1]
        with pytest.raises(PlanError, match=f"{name} value 2 must be ≤ 1"):
            PARAM[name].check(2, "command line")


def test_devices_auto_none_and_names() -> None:
    assert parse("devices", "auto,none,Vulkan0/Vulkan1, CUDA0 / CUDA1") == [
        "auto", "none", "Vulkan0/Vulkan1", "CUDA0/CUDA1"]
    assert device_names("auto") is None and device_names("none") == () and device_names("A/B") == ("A", "B")
    for bad in ("Vulkan0//CUDA0", "auto/Vulkan0", "Vul kan0"):
        with pytest.raises(PlanError, match=r"^-dev: cannot read .* as auto\|none\|DEV0/DEV1"):
            parse("devices", bad)
    with pytest.raises(PlanError, match="17 devices, at most 16"):
        parse("devices", "/".join(f"D{i}" for i in range(17)))


def test_tensor_split_is_written_as_llama_bench_writes_it() -> None:
    """llama-bench splits a -ts value at ; or / and writes two decimals up to the last non-zero proportion."""
    assert parse("tensor_split", "3/1,1;1,0,0/1,1/0/0") == ["3.00/1.00", "1.00/1.00", "0.00", "0.00/1.00", "1.00"]
    assert tensor_split_values("0.00") == () and tensor_split_values("3.00/1.00") == (3.0, 1.0)
    for bad, why in (("a", "each proportion is a number"), ("-1/1", "not a proportion ≥ 0"),
                     ("0.001/1", "would be 0.00"), ("/".join(["1"] * 17), "at most 16")):
        with pytest.raises(PlanError, match=f"^-ts: cannot read .*{re.escape(why)}"):
            parse("tensor_split", bad)


def test_override_tensor_entries_joined_by_semicolons_values_by_commas() -> None:
    """llama-bench's -ot: ',' separates the values a sweep crosses, ';' the PATTERN=BUFT entries of one value."""
    assert parse("tensor_buft_overrides", r"blk\.0\.ffn_up_exps=CPU;exps=CPU,none") == [
        r"blk\.0\.ffn_up_exps=CPU;exps=CPU", "none"]
    assert override_pairs(r"blk\.0\.ffn_up_exps=CPU;exps=CPU") == ((r"blk\.0\.ffn_up_exps", "CPU"), ("exps", "CPU"))
    assert override_pairs("none") == ()
    for bad, why in (("exps", "needs PATTERN=BUFT"), ("(=CPU", "not a regular expression"),
                     ("exps=C P U", "not a buffer type name"), ("=CPU", "needs PATTERN=BUFT")):
        with pytest.raises(PlanError, match=f"^-ot: cannot read .*{re.escape(why)}"):
            parse("tensor_buft_overrides", bad)
    with pytest.raises(PlanError, match="65 overrides, at most 64"):
        parse("tensor_buft_overrides", ";".join(f"t{i}=CPU" for i in range(65)))


def test_cli_help_and_flags_come_from_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "--help"])
    text = capsys.readouterr().out
    for flag in ("-ncmoe", "--n-cpu-moe", "-nkvo", "--no-kv-offload", "-ot", "--override-tensor", "-sm",
                 "--split-mode", "-mg", "--main-gpu", "-ts", "--tensor-split", "-dev", "--device", "--no-host"):
        assert re.search(rf"(^|[\s,]){re.escape(flag)}[\s,]", text), flag
    args = build_parser().parse_args(["run", "-ncmoe", "0,all", "-ot", "exps=CPU", "-nkvo", "1"])
    assert (args.n_cpu_moe, args.tensor_buft_overrides, args.no_kv_offload) == ("0,all", "exps=CPU", "1")


# --- plan -----------------------------------------------------------------------------------------------------------
def test_load_flags_reload_the_model_and_nkvo_only_rebuilds_the_context() -> None:
    for name, values in (("n_cpu_moe", [0, 2]), ("split_mode", ["layer", "row"]), ("main_gpu", [0, 1]),
                         ("tensor_split", ["0.00", "3.00/1.00"]), ("devices", ["auto", "none"]),
                         ("tensor_buft_overrides", ["none", "exps=CPU"]), ("no_host", [0, 1])):
        assert PARAM[name].scope == "load", name
        tests = SweepSpec(models=["m.gguf"], **{name: values}, no_kv_offload=[0, 1]).tests()
        assert len(tests) == 4 and count_loads(tests) == 2, name  # each load value once, -nkvo inside it
        assert [getattr(t, name) for t in tests] == [values[0], values[0], values[1], values[1]]
    assert PARAM["no_kv_offload"].scope == "context"
    assert count_loads(SweepSpec(models=["m.gguf"], no_kv_offload=[0, 1]).tests()) == 1


def test_defaults_are_llama_benchs_and_test_names_show_what_differs() -> None:
    t = TestSpec(model_path="/m/moe.gguf")
    assert (t.n_cpu_moe, t.split_mode, t.main_gpu, t.tensor_split, t.devices, t.tensor_buft_overrides, t.no_host,
            t.no_kv_offload) == (0, "layer", 0, "0.00", "auto", "none", 0, 0)
    assert t.short_name() == "moe p512 n128 d0 ngl99 f16 fa auto"  # defaults are not shown
    named = TestSpec(model_path="/m/moe.gguf", n_cpu_moe="all", no_kv_offload=1, split_mode="row",  # type: ignore
                     tensor_buft_overrides=r"blk\.0\.ffn_(up|down)_exps=CPU", devices="Vulkan0", no_host=1)
    assert named.n_cpu_moe == NCMOE_ALL
    assert named.short_name() == (r"moe p512 n128 d0 ngl99 ncmoe all f16 fa auto sm row dev Vulkan0 "
                                           r"ot blk\.0\.ffn_(up|down)_e… nohost1 nkvo1")
    assert "ncmoe3" in TestSpec(model_path="m", n_cpu_moe=3).short_name()
    assert TestSpec.from_dict({"model_path": "m", "n_prompt": 8}).tensor_buft_overrides == "none"  # old dicts


def test_a_preset_takes_the_flags_and_names_a_bad_value(tmp_path: Path) -> None:
    good = tmp_path / "moe.toml"
    good.write_text('[sweep]\nn_cpu_moe = [0, "all"]\nno_kv_offload = [0, 1]\n'
                    'tensor_buft_overrides = ["ffn_.*_exps=CPU"]\ntensor_split = "3/1"\n', encoding="utf-8")
    spec = load_sweep_preset(good)
    assert spec.n_cpu_moe == [0, NCMOE_ALL] and spec.tensor_split == ["3.00/1.00"]
    assert spec.tensor_buft_overrides == ["ffn_.*_exps=CPU"]
    bad = tmp_path / "bad.toml"
    bad.write_text('[sweep]\nsplit_mode = "diagonal"\n', encoding="utf-8")
    with pytest.raises(PlanError, match=r"bad.toml: unknown split mode 'diagonal' for split_mode"):
        load_sweep_preset(bad)


def test_a_cpu_only_build_refuses_devices_and_buffer_types_it_cannot_have() -> None:
    with pytest.raises(PlanError, match=r"^command line: -dev Vulkan0: this llama.cpp build has no GPU backend"):
        check_placement_build(["auto", "Vulkan0"], [], "command line", gpu_backends=[])
    with pytest.raises(PlanError, match=r"-ot exps=CUDA0: no buffer type 'CUDA0' in this CPU-only .*\(valid: CPU\)"):
        check_placement_build(["none"], ["a=CPU;exps=CUDA0"], "command line", gpu_backends=[])
    check_placement_build(["auto", "none"], ["exps=CPU", "none"], "command line", gpu_backends=[])
    check_placement_build(["Vulkan0"], ["exps=Vulkan0"], "command line", gpu_backends=["Vulkan"])  # the engine checks
    if installed_gpu_backends() == []:  # this interpreter's own build, at plan time
        with pytest.raises(PlanError, match="-dev Vulkan0"):
            SweepSpec(models=["m.gguf"], devices=["Vulkan0"]).validate("command line")


def test_the_sweep_editor_shows_ncmoe_and_the_gpu_placement_flags_stay_on_the_command_line() -> None:
    """The form fits 1366x768 with one more field: -ncmoe has it; the GPU-only flags are CLI and TOML settings."""
    labelled = {p.name for p in LIST_PARAMS if p.label}
    assert "n_cpu_moe" in labelled
    assert not labelled & (set(PLACEMENT) - {"n_cpu_moe"})


# --- the engine's C arrays, over the installed libggml (no model) ---------------------------------------------------
def test_expert_pattern_is_llama_cpps_and_matches_one_layers_experts() -> None:
    names = list(synthetic_tensor_shapes(n_layer=12, n_expert=4))
    hits = [n for n in names if re.search(expert_block_pattern(1), n)]
    assert hits == ["blk.1.ffn_gate_exps.weight", "blk.1.ffn_up_exps.weight", "blk.1.ffn_down_exps.weight"]
    assert expert_block_pattern(3) == r"blk\.3\.ffn_(up|down|gate|gate_up)_(ch|)exps"  # common/common.h


def _lib_dir() -> Path:
    lib = find_lib_dir()
    if lib is None:
        pytest.fail("llama-cpp-python's libraries are not installed")
    return lib


def test_ncmoe_and_ot_become_one_null_terminated_override_array() -> None:
    cfg = LoadConfig(model_path="m.gguf", n_cpu_moe=2, tensor_buft_overrides=((r"output\.weight", "CPU"),))
    placement = build_placement(cfg, _lib_dir())
    arr = placement.overrides
    assert isinstance(arr[0], TensorBuftOverride) and len(arr) == 4
    assert [arr[i].pattern for i in range(3)] == [rb"output\.weight", *(expert_block_pattern(i).encode()
                                                                       for i in range(2))]
    assert all(arr[i].buft for i in range(3)) and arr[3].pattern is None and not arr[3].buft
    assert arr[0].buft == arr[1].buft  # -ot's "CPU" is the CPU device's buffer type, the one -ncmoe uses
    assert build_placement(LoadConfig(model_path="m.gguf"), _lib_dir()).overrides is None


def test_devices_none_is_a_lone_null_and_unknown_names_are_refused_with_the_ones_there() -> None:
    none = build_placement(LoadConfig(model_path="m.gguf", devices=()), _lib_dir()).devices
    assert len(none) == 1 and none[0] is None
    with pytest.raises(SettingsError, match=r"^-dev Nope0: no such GPU device in this llama.cpp build \(devices: "):
        build_placement(LoadConfig(model_path="m.gguf", devices=("Nope0",)), _lib_dir())
    with pytest.raises(SettingsError, match=r"^-dev CPU: no such GPU device"):  # llama-bench refuses CPU too
        build_placement(LoadConfig(model_path="m.gguf", devices=("CPU",)), _lib_dir())
    with pytest.raises(SettingsError, match=r"^-ot exps=Nope0: no buffer type 'Nope0' .*\(valid: .*CPU"):
        build_placement(LoadConfig(model_path="m.gguf", tensor_buft_overrides=(("exps", "Nope0"),)), _lib_dir())
    split = build_placement(LoadConfig(model_path="m.gguf", tensor_split=(3.0, 1.0)), _lib_dir()).tensor_split
    assert len(split) == 16 and list(split[:3]) == [3.0, 1.0, 0.0]


# --- real runs ------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def moe_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_synthetic_moe_gguf(tmp_path_factory.mktemp("moe") / "synth-moe.gguf", name="synthetic-moe")


def _csv_rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


@pytest.mark.heavy  # the CLI in a subprocess
def test_ncmoe_and_nkvo_run_for_real_one_ok_row_per_value(moe_model: Path) -> None:
    proc = gguf_bench("run", "-m", str(moe_model), "-p", "16", "-n", "4", "-r", "1", "-ncmoe", "0,1,all",
                      "-nkvo", "0,1", "-o", "csv", "--no-store")
    assert proc.returncode == 0, proc.stderr
    rows = _csv_rows(proc.stdout)
    assert [r["status"] for r in rows] == ["ok"] * 6
    assert [r["n_cpu_moe"] for r in rows] == ["0", "0", "1", "1", "4", "4"]  # all: the model's 4 layers
    assert [r["no_kv_offload"] for r in rows] == ["0", "1"] * 3
    assert [r["n_tensors_overridden"] for r in rows] == ["0", "0", "3", "3", "12", "12"]  # gate, up, down per layer
    assert proc.stderr.count("loaded synth-moe.gguf") == 3  # one load per -ncmoe value, -nkvo within it
    for r in rows:
        assert (r["split_mode"], r["main_gpu"], r["devices"], r["tensor_split"], r["tensor_buft_overrides"],
                r["no_host"]) == ("layer", "0", "auto", "0.00", "none", "0")
        assert float(r["decode_tps"]) > 0 and float(r["prefill_tps"]) > 0 and r["device_buffers"]
    assert "ncmoe all" in proc.stderr and "nkvo1" in proc.stderr  # the progress lines name the tests


@pytest.mark.heavy  # the CLI in a subprocess
def test_override_tensor_runs_and_counts_the_tensors_it_placed(moe_model: Path) -> None:
    proc = gguf_bench("run", "-m", str(moe_model), "-p", "8", "-n", "2", "-r", "1", "-ngl", "0",
                      "-ot", r"blk\.1\.ffn_up_exps=CPU;blk\.2\.ffn_.*_exps=CPU,none", "-ncmoe", "0,1",
                      "-o", "csv", "--no-store")
    assert proc.returncode == 0, proc.stderr
    got = [(r["tensor_buft_overrides"], r["n_cpu_moe"], r["n_tensors_overridden"], r["status"])
           for r in _csv_rows(proc.stdout)]
    ot = r"blk\.1\.ffn_up_exps=CPU;blk\.2\.ffn_.*_exps=CPU"  # blk.1's up and blk.2's three experts: 4 tensors
    assert got == [(ot, "0", "4", "ok"), ("none", "0", "0", "ok"),
                   (ot, "1", "7", "ok"), ("none", "1", "3", "ok")]  # -ot's entries first, then blk.0's three


@pytest.mark.heavy  # the CLI in a subprocess
def test_a_bad_flag_is_one_line_before_anything_runs(moe_model: Path) -> None:
    proc = gguf_bench("run", "-m", str(moe_model), "-ncmoe", "some")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == ["gguf-bench: error: -ncmoe: cannot read 'some' as a layer count, "
                                                "all or half"]


def _amx() -> bool:
    try:
        return " amx_int8" in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False


@pytest.mark.heavy  # the CLI in a subprocess
@pytest.mark.skipif(not REFERENCE_BENCH.is_file() or not os.access(REFERENCE_BENCH, os.X_OK),
                    reason=f"no reference llama-bench at {REFERENCE_BENCH}")
def test_placement_columns_read_as_the_reference_llama_benchs(moe_model: Path) -> None:
    """The same flags through llama-bench and gguf-bench: the placement columns hold the same text."""
    flags = ["-p", "8", "-n", "2", "-r", "1", "-ncmoe", "1", "-nkvo", "1", "-sm", "row", "-mg", "0", "-ts", "3;1",
             "-dev", "none", "--no-host", "1", "-ot", r"blk\.1\.ffn_up_exps=CPU;output\.weight=CPU"]
    flags += ["--repack", "0"] if _amx() else []  # llama.cpp's repacked weights crash on AMX CPUs (issue #24)
    ref = subprocess.run([str(REFERENCE_BENCH), "-m", str(moe_model), *flags, "-o", "csv"], capture_output=True,
                         text=True, timeout=300)
    assert ref.returncode == 0, ref.stderr[-2000:]
    ours = gguf_bench("run", "-m", str(moe_model), *flags, "-o", "csv", "--no-store")
    assert ours.returncode == 0, ours.stderr
    ref_rows, our_rows = _csv_rows(ref.stdout), _csv_rows(ours.stdout)
    assert (len(ref_rows), len(our_rows)) == (2, 1)  # llama-bench: pp8 and tg2 apart; ours: one test with both
    for column in (*PLACEMENT, "type_k", "type_v", "model_type", "model_size", "model_n_params", "n_batch",
                   "n_ubatch", "no_op_offload"):
        assert column in ref_rows[0], column
        assert our_rows[0][column] == ref_rows[0][column], (column, our_rows[0][column], ref_rows[0][column])
    assert our_rows[0]["tensor_split"] == "3.00/1.00" and our_rows[0]["devices"] == "none"


def test_a_cpu_only_build_names_the_gpu_flags_that_change_nothing() -> None:
    from app.worker.runner import _gpu_only_settings

    assert _gpu_only_settings(TestSpec(model_path="m")) == []
    flags = _gpu_only_settings(TestSpec(model_path="m", n_cpu_moe=2, split_mode="row", main_gpu=1,
                                        tensor_split="3.00/1.00", no_kv_offload=1, no_host=1))
    assert flags == ["-ncmoe", "-sm", "-mg", "-ts", "-nkvo", "--no-host"]


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads Linux's /proc/self/maps")
def test_ggml_calls_reach_the_copy_libllama_loaded() -> None:
    """A wheel holds libggml.so, .so.0 and .so.0.x.y as three copies: the registry must be opened by libllama's
    soname, or a second copy with its own devices is mapped (and -ot's "CPU" was another buffer type than -ncmoe's)."""
    import llama_cpp  # noqa: F401 - loads libllama and, by its soname, libggml

    from engines.ggml_devices import ggml_libraries

    ggml_path, base_path = ggml_libraries(_lib_dir())
    build_placement(LoadConfig(model_path="m.gguf", n_cpu_moe=1), _lib_dir())
    mapped = {line.split()[-1] for line in Path("/proc/self/maps").read_text().splitlines() if "libggml" in line}
    assert str(ggml_path) in mapped and str(base_path) in mapped
    for stem in ("libggml.so", "libggml-base.so"):  # one copy of each in the process
        assert len([m for m in mapped if Path(m).name.startswith(stem)]) == 1, sorted(mapped)
