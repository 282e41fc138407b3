"""``predict --hw <a GPU>`` is about a GPU that is not in this machine (issue #26, point 6): it probes nothing here,
writes no probe cache, and the host side of a partial offload is an assumed figure the output names."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.cli.main import main
from app.predict.hardware_context import ASSUMED_HOST, remote_hardware_context
from app.predict.memory.host import host_memory_table
from app.predict.profiles import ProfileError, find_profile, load_profiles
from app.telemetry import machine
from app.telemetry.cpu_probe_record import CACHE_FILE
from tests.cli_helpers import main_json
from tests.gguf_synth import write_synthetic_gguf


@pytest.fixture
def probe_calls(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """A tripwire (test double) in place of the CPU probe: records a call and fails it, so a regression fails fast
    here instead of loading the CPU for seconds."""
    calls: list[object] = []

    def tripped(**kwargs: object) -> None:
        calls.append(kwargs)
        raise RuntimeError("the CPU probe ran for a remote GPU")

    monkeypatch.setattr(machine, "probe_cpu", tripped)
    return calls


def _predict_json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    return main_json("predict", argv, capsys)


def test_predict_for_a_named_gpu_probes_nothing_and_writes_no_probe_cache(
        tmp_path: Path, isolated_data_dir: Path, probe_calls: list[object],
        capsys: pytest.CaptureFixture[str]) -> None:
    model = write_synthetic_gguf(tmp_path / "m.gguf", n_layer=4)
    doc = _predict_json(["-m", str(model), "--hw", "RTX 4060 Laptop", "-ngl", "2"], capsys)  # partial offload
    assert doc["profile"] == "RTX 4060 Laptop" and doc["fit_status"] == "partial"
    assert probe_calls == []
    assert not list(isolated_data_dir.rglob(CACHE_FILE))
    # the host side is the memory assumed beside that GPU, named as assumed, not this machine's probe
    memory = host_memory_table().assumed_for(find_profile("RTX 4060 Laptop", load_profiles()))
    assert doc["cpu_bandwidth_gbps"] == memory.peak_bandwidth_gbps
    said = f"host memory assumed: {memory.name}, {memory.peak_bandwidth_gbps:.1f} GB/s"
    assert any(n.startswith(said) for n in doc["notes"]), doc["notes"]

    rc = main(["predict", "-m", str(model), "--hw", "RTX 4060 Laptop", "-ngl", "2"])  # the text output says it too
    out = capsys.readouterr().out
    assert rc == 0 and said in out
    assert probe_calls == [] and not list(isolated_data_dir.rglob(CACHE_FILE))


def test_a_refused_gpu_name_is_one_line_and_probes_nothing(
        tmp_path: Path, probe_calls: list[object], capsys: pytest.CaptureFixture[str]) -> None:
    model = write_synthetic_gguf(tmp_path / "m.gguf")
    assert main(["predict", "-m", str(model), "--hw", "RTX 30"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and 'no hardware profile "RTX 30"' in err and "RTX 3070" in err
    assert probe_calls == []


def test_remote_context_has_the_assumed_host() -> None:
    hw = remote_hardware_context("RTX 4090")
    assert hw.gpu is not None and hw.gpu.name == "RTX 4090"
    memory = host_memory_table().assumed_for(hw.gpu)  # Ada, a desktop part: DDR5 beside it
    assert hw.cpu.kind == "cpu" and not hw.host_measured and hw.host_bandwidth_gbps is None
    assert hw.cpu.peak_bandwidth_gbps == memory.peak_bandwidth_gbps and hw.cpu.source.startswith("assumed: DDR5")
    assert hw.cpu.fp16_tensor_tflops == ASSUMED_HOST.fp16_tensor_tflops  # the compute side stays the stated one
    assert hw.for_row(0) is hw.cpu and hw.for_row(10) is hw.gpu
    with pytest.raises(ProfileError, match="did you mean"):
        remote_hardware_context("RTX 40")
