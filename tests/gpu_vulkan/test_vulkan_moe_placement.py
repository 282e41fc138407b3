"""MoE experts and the KV cache kept in host memory on a real second device (lavapipe where there is no GPU).

A synthetic llama-family mixture of experts (tests/gguf_synth.py write_synthetic_moe_gguf: 4 layers of 8 experts),
fully offloaded, with -ncmoe 0,2,all and -nkvo 0,1: llama.cpp's own per-device figures (the row's device_buffers)
must show the first N layers' expert bytes leave the device, and the KV cache leave it with -nkvo 1; the predicted
per-device bytes (app/predict/device_split.py) must be within 5 % of them.
Tiny settings (-p 1 -n 1 -r 1 -t 1): the buffers do not depend on them. Run with -s to see the table.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import gguf
import pytest

from app.model.gguf_facts import read_model_facts
from app.predict.device_split import SplitSettings, device_split
from app.predict.settings import PredictSettings
from app.results.row_types import ResultRow
from engines.llama_cpp_placement import expert_block_pattern
from tests.cli_helpers import gguf_bench
from tests.gguf_synth import write_synthetic_moe_gguf

pytestmark = pytest.mark.vulkan
N_LAYER = 4
TINY = ("-p", "1", "-n", "1", "-r", "1", "-t", "1", "-ngl", "99", "--no-store", "-o", "json")
#: llama.cpp logs buffers in MiB with two decimals: a difference of two figures is good to about 0.01 MiB.
ROUNDING_BYTES = 0.011 * 2**20


@pytest.fixture(scope="module")
def moe_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_synthetic_moe_gguf(tmp_path_factory.mktemp("moe") / "synth-moe.gguf", n_layer=N_LAYER)


def _run(model: Path, *args: str, n_failed: int = 0) -> list[dict[str, Any]]:
    proc = gguf_bench("run", "-m", str(model), *TINY, *args)
    assert proc.returncode == (1 if n_failed else 0) and f" {n_failed} failed" in proc.stderr, proc.stderr
    return json.loads(proc.stdout)


def _per_device(row: dict[str, Any]) -> tuple[dict[str, float], dict[str, float]]:
    """(host, the one GPU device) bytes by kind, from the row's device_buffers."""
    per_device = json.loads(row["device_buffers"])
    gpus = [name for name in per_device if name != "CPU"]
    assert len(gpus) == 1, per_device
    kinds = ("weights", "kv", "compute")
    return tuple({k: float(per_device[name].get(f"{k}_bytes", 0)) for k in kinds}  # type: ignore[return-value]
                 for name in ("CPU", gpus[0]))


def _expert_bytes(model: Path, n_layers: int) -> float:
    """Bytes of the first ``n_layers`` layers' expert tensors, read from the file."""
    patterns = [re.compile(expert_block_pattern(i)) for i in range(n_layers)]
    return float(sum(int(t.n_bytes) for t in gguf.GGUFReader(str(model)).tensors
                     if any(p.search(t.name) for p in patterns)))


@pytest.fixture(scope="module")
def moe_sweep(moe_model: Path) -> list[dict[str, Any]]:
    return _run(moe_model, "-ncmoe", "0,2,all", "-nkvo", "0,1")


def test_ncmoe_moves_the_expert_bytes_from_the_device_to_host(moe_model: Path,
                                                              moe_sweep: list[dict[str, Any]]) -> None:
    assert [r["status"] for r in moe_sweep] == ["ok"] * 6, [r.get("error") for r in moe_sweep]
    assert all("Vulkan" in r["backends"] for r in moe_sweep)
    by_ncmoe = {int(r["n_cpu_moe"]): r for r in moe_sweep if not int(r["no_kv_offload"])}
    assert sorted(by_ncmoe) == [0, 2, N_LAYER]  # "all" recorded as the model's layer count
    host0, gpu0 = _per_device(by_ncmoe[0])
    print(f"\n{'ncmoe':>5} {'host weights':>13} {'device weights':>15} {'moved':>10} {'expert bytes':>13}")
    for n, row in sorted(by_ncmoe.items()):
        host, gpu = _per_device(row)
        moved, experts = gpu0["weights"] - gpu["weights"], _expert_bytes(moe_model, n)
        print(f"{n:>5} {host['weights']:>13,.0f} {gpu['weights']:>15,.0f} {moved:>10,.0f} {experts:>13,.0f}")
        assert abs(moved - experts) <= max(0.05 * experts, ROUNDING_BYTES), (n, moved, experts)
        assert int(row["n_tensors_overridden"]) == 3 * n  # gate, up and down of each layer
        if n:
            assert host["weights"] > host0["weights"]
    assert _per_device(by_ncmoe[N_LAYER])[1]["weights"] < 0.2 * gpu0["weights"]  # the experts were most of it


def test_nkvo_keeps_the_kv_cache_in_host_memory(moe_sweep: list[dict[str, Any]]) -> None:
    for row in moe_sweep:
        host, gpu = _per_device(row)
        if int(row["no_kv_offload"]):
            assert gpu["kv"] == 0 and host["kv"] > 0 and int(row["gpu_kv_bytes"]) == 0
        else:
            assert gpu["kv"] > 0 and host["kv"] == 0


def test_devices_none_keeps_everything_on_the_host_and_an_unknown_device_is_a_failed_row(moe_model: Path) -> None:
    rows = _run(moe_model, "-dev", "none,Nope0", n_failed=1)
    none, nope = rows
    assert none["status"] == "ok" and none["devices"] == "none"
    assert int(none["gpu_weights_bytes"]) == 0 and int(none["n_gpu_layers_effective"]) == 0
    assert nope["status"] == "failed" and nope["error_kind"] == "unsupported_settings"
    assert nope["error"].startswith("-dev Nope0: no such GPU device in this llama.cpp build (devices: Vulkan0")


def test_predicted_bytes_per_device_match_llama_cpps(moe_model: Path, moe_sweep: list[dict[str, Any]]) -> None:
    facts = read_model_facts(moe_model)
    print(f"\n{'ncmoe':>5} {'nkvo':>4} {'buffer':<14} {'measured':>10} {'predicted':>10} {'diff':>7}")
    for row in moe_sweep:
        settings = PredictSettings.from_row(ResultRow.from_mapping(row))
        s = SplitSettings(settings.n_ctx, int(row["n_gpu_layers_effective"]), settings.type_k, settings.type_v,
                          settings.n_ubatch, settings.flash_attn, n_cpu_moe=settings.n_cpu_moe,
                          no_kv_offload=settings.no_kv_offload)
        p = device_split(facts, s, facts.tensor_bytes)
        host, gpu = _per_device(row)
        predicted = {("host", "weights"): p.cpu_mapped_weights_bytes, ("host", "kv"): p.cpu_kv_bytes,
                     ("host", "compute"): p.cpu_compute_bytes, ("gpu", "weights"): p.gpu_weights_bytes,
                     ("gpu", "kv"): p.gpu_kv_bytes, ("gpu", "compute"): p.gpu_compute_bytes}
        for (device, kind), value in predicted.items():
            got = (host if device == "host" else gpu)[kind]
            diff = (value - got) / got if got else 0.0
            print(f"{row['n_cpu_moe']:>5} {row['no_kv_offload']:>4} {device + ' ' + kind:<14} {got:>10,.0f} "
                  f"{value:>10,.0f} {diff:>+7.1%}")
            assert abs(value - got) <= max(0.05 * got, ROUNDING_BYTES), (row["n_cpu_moe"], device, kind, value, got)
