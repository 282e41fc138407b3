"""Offload on a real second device: SmolLM2 on llama.cpp's Vulkan backend (lavapipe where there is no GPU).

Tiny settings throughout (-p 1 -n 1 -r 1 -t 1; the buffers do not depend on them): lavapipe is slow
(pp32 ≈ 10 tok/s, tg16 ≈ 2.7 tok/s at -ngl 99).
Run with -s to see the acceptance table (per-device buffers, predicted beside llama.cpp's own figures).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gguf
import pytest

from app.model.facts_cache import cached_facts
from app.predict.device_split import DeviceSplit, SplitSettings, device_split
from app.predict.settings import flash_attn_enabled
from app.results import export
from tests.cli_helpers import gguf_bench

pytestmark = pytest.mark.vulkan
NGLS = (0, 1, 16, 31)  # none, the output layer only, half, all (SmolLM2-135M: 30 layers + output)
TINY = ("-p", "1", "-n", "1", "-r", "1", "-t", "1", "--no-store", "-o", "json")
KINDS = ("weights", "kv", "compute")
TOLERANCE = 0.05


def _run(model: Path, *args: str) -> tuple[list[dict[str, Any]], str]:
    proc = gguf_bench("run", "-m", str(model), *TINY, *args)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), proc.stderr


@pytest.fixture(scope="module")
def ngl_sweep(smollm2_path: Path) -> tuple[list[dict[str, Any]], str]:
    """One sweep: -ngl 0,1,16,31 crossed with -nopo 0,1."""
    return _run(smollm2_path, "-ngl", ",".join(map(str, NGLS)), "-nopo", "0,1")


def _logged(row: dict[str, Any]) -> dict[str, dict[str, float]]:
    per_device = json.loads(row["device_buffers"])
    gpu = [name for name in per_device if name != "CPU"]
    assert len(gpu) <= 1, per_device
    names = {"CPU": "CPU", "GPU": gpu[0] if gpu else ""}
    return {side: {k: float(per_device.get(name, {}).get(f"{k}_bytes", 0)) for k in KINDS}
            for side, name in names.items()}


def _predicted(row: dict[str, Any], model: Path) -> DeviceSplit:
    facts = cached_facts(str(model))
    s = SplitSettings(n_ctx=int(row["n_ctx"]), n_gpu_layers=int(row["n_gpu_layers_effective"]),
                      type_k=row["type_k"], type_v=row["type_v"], n_ubatch=int(row["n_ubatch"]),
                      flash_attn=flash_attn_enabled(row["flash_attn_effective"]),
                      op_offload=not int(row["no_op_offload"]))
    return device_split(facts, s, facts.tensor_bytes)


def _mapped_span(model: Path, n_gpu_layers: int, n_layer: int = 30) -> float:
    """llama.cpp's CPU_Mapped figure with mmap: the file from the first to the last host tensor's byte (GPU tensors
    stored between them included: SmolLM2's tensors are in name order, so blk.9 comes after blk.29)."""
    first_gpu = n_layer + 1 - n_gpu_layers
    spans = []
    for t in gguf.GGUFReader(str(model)).tensors:
        block = t.name.split(".")[1] if t.name.startswith("blk.") else None
        on_gpu = int(block) >= first_gpu if block is not None else t.name.startswith("output") and n_gpu_layers >= 1
        if not on_gpu:
            spans.append((int(t.data_offset), int(t.data_offset) + int(t.n_bytes)))
    return float(max(e for _, e in spans) - min(b for b, _ in spans))


def _close(predicted: float, logged: float) -> bool:
    """Within 5 %; both under 0.01 MiB (llama.cpp's log rounds to 0.01 MiB) count as equal."""
    if max(predicted, logged) < 0.01 * 2**20:
        return True
    return abs(predicted - logged) <= TOLERANCE * max(logged, 1.0)


def test_backends_and_layers_per_device(ngl_sweep: tuple[list[dict[str, Any]], str]) -> None:
    rows, _ = ngl_sweep
    assert [(int(r["n_gpu_layers"]), int(r["no_op_offload"])) for r in rows] == [(n, o) for n in NGLS for o in (0, 1)]
    for r in rows:
        ngl = int(r["n_gpu_layers"])
        assert r["status"] == "ok", r["error"]
        assert int(r["n_gpu_layers_effective"]) == ngl
        assert r["backends"] == ("Vulkan,CPU" if ngl else "CPU")
        per_device = json.loads(r["device_buffers"])
        gpu_layers = sum(d["layers"] for name, d in per_device.items() if name != "CPU")
        assert (gpu_layers, per_device["CPU"]["layers"]) == (ngl, 31 - ngl)


def test_the_ngl_sweep_loads_each_setting_once(ngl_sweep: tuple[list[dict[str, Any]], str]) -> None:
    _, stderr = ngl_sweep
    loads = [line for line in stderr.splitlines() if line.startswith("loaded ")]
    assert len(loads) == len(NGLS), stderr


def test_op_offload_sends_the_prompt_to_the_gpu_at_ngl_0(ngl_sweep: tuple[list[dict[str, Any]], str]) -> None:
    rows, _ = ngl_sweep
    by = {(int(r["n_gpu_layers"]), int(r["no_op_offload"])): r for r in rows}
    assert int(by[0, 0]["gpu_compute_bytes"]) > 0  # op offload: the GPU gets a compute buffer with no layer on it
    assert int(by[0, 1]["gpu_compute_bytes"]) == 0  # -nopo 1: nothing on the GPU at all
    assert int(by[0, 1]["gpu_weights_bytes"]) == int(by[0, 1]["gpu_kv_bytes"]) == 0


def test_per_device_buffers_predicted_within_5_percent(ngl_sweep: tuple[list[dict[str, Any]], str],
                                                        smollm2_path: Path) -> None:
    rows, _ = ngl_sweep
    lines = [f"{'ngl':>4} {'nopo':>4} {'device':<7} " + " ".join(f"{k + ' pred/logged MiB':>26}" for k in KINDS),
             "(CPU weights: the mmapped span of the host tensors, as llama.cpp's CPU_Mapped buffer counts them)"]
    misses = []
    for r in rows:
        pred, logged = _predicted(r, smollm2_path), _logged(r)
        assert int(r["pred_gpu_weights_bytes"]) == round(pred.gpu_weights_bytes)  # the row's columns: same figures
        assert int(r["pred_gpu_kv_bytes"]) == round(pred.gpu_kv_bytes)
        assert int(r["pred_gpu_compute_bytes"]) == round(pred.gpu_compute_bytes)
        figures = {f"{side}.{k}": getattr(pred, f"{side.lower()}_{k}_bytes") for side in ("CPU", "GPU") for k in KINDS}
        # the host's weights as llama.cpp counts them with mmap: the mapped span, never less than the host tensors
        figures["CPU.weights"] = _mapped_span(smollm2_path, int(r["n_gpu_layers"]))
        assert figures["CPU.weights"] >= pred.cpu_weights_bytes
        for side in ("CPU", "GPU"):
            cells = []
            for k in KINDS:
                p, m = figures[f"{side}.{k}"], logged[side][k]
                cells.append(f"{p / 2**20:11.2f} / {m / 2**20:8.2f} {'ok' if _close(p, m) else 'MISS':>4}")
                if not _close(p, m):
                    misses.append((r["n_gpu_layers"], r["no_op_offload"], side, k, p, m))
            lines.append(f"{r['n_gpu_layers']:>4} {r['no_op_offload']:>4} {side:<7} " + " ".join(cells))
    print("\n" + "\n".join(lines))
    assert not misses, misses


def test_a_context_sweep_crosses_the_device_limit(smollm2_path: Path) -> None:
    facts = cached_facts(str(smollm2_path))
    limit_mib = int(device_split(facts, SplitSettings(n_ctx=1024, n_gpu_layers=31), facts.tensor_bytes)
                    .gpu_total_bytes / 2**20) + 1
    proc = gguf_bench("run", "-m", str(smollm2_path), "-p", "1,4000", "-n", "1", "-r", "1", "-t", "1", "-ngl", "31",
                      "--device-mem-limit", str(limit_mib), "--no-store", "-o", "csv")
    assert proc.returncode == 1 and "1 ok, 1 failed" in proc.stderr, proc.stderr  # a failed test: exit 1
    small, big = export.read_csv(proc.stdout)
    assert (int(small["n_ctx"]), int(big["n_ctx"])) == (256, 4096)
    assert small["status"] == "ok" and big["status"] == "failed"
    assert big["error_kind"] == "out_of_memory"
    assert f"more than the {limit_mib} MiB of --device-mem-limit" in big["error"]
    assert "on Vulkan0" in big["error"]
    boundary = int(big["pred_device_max_ctx"])
    assert boundary == int(small["pred_device_max_ctx"])
    assert 256 <= boundary < 4096  # the predicted boundary lies between the context that fit and the one that did not
    assert int(big["gpu_kv_bytes"]) > int(small["gpu_kv_bytes"])  # llama.cpp's figures for the context that failed
