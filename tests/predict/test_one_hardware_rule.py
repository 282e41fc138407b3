"""Issue #52 item 2: one rule for which hardware a name or a detected GPU means (:meth:`Machine.profile_for`, and
:mod:`app.predict.detected_gpu` for the GPU NVML reports), the same for ``predict``, ``choose``, ``run`` and the
window.

The NVIDIA GPUs here are TEST DOUBLES: NVML's readings replayed from ``tests/telemetry/recorded`` through
``tests/telemetry/nvml_replay.py`` (this machine has no NVIDIA GPU); everything above NVML is the real code. The CPU
is this machine's, with a probe figure cached first, so no probe runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from app.choose.chooser import THIS_MACHINE
from app.predict.detected_gpu import FP16_FLOP_PER_CORE, detected_gpu_profile, profile_from_nvml
from app.predict.machine import CPU_NAMES, THIS_MACHINE_NAMES, Machine, names_this_machine
from app.predict.profiles import GIB, ProfileError, cpu_profile, find_profile, load_profiles, match_nvml_name
from app.telemetry import machine as telemetry_machine
from app.telemetry import nvml
from app.telemetry.cpu_probe import CpuProbe, save_probe
from app.telemetry.machine import ProbeMode, scan_machine
from app.telemetry.nvml import GpuInfo
from tests.cli_helpers import main_json
from tests.telemetry.nvml_replay import replay


@pytest.fixture
def replayed() -> Iterator[Any]:
    """``replayed(name)``: NVML answers from ``recorded/<name>.json`` (TEST DOUBLE) until the test ends."""
    yield lambda name: nvml.set_nvml_module(replay(name))
    nvml.set_nvml_module(None)


def _gpu(name: str, **kw: Any) -> GpuInfo:
    """A GPU as :func:`nvml.list_gpus` reports it, from the readings given (TEST DOUBLE: no NVML behind it)."""
    base: dict[str, Any] = dict(index=0, name=name, uuid=None, vram_total_bytes=8 * GIB, driver_version=None,
                                memory_bus_bits=128, max_memory_clock_mhz=7501, theoretical_bandwidth_gbps=None,
                                max_sm_clock_mhz=1777, cuda_cores=3584, compute_capability=(8, 6))
    return GpuInfo(**{**base, **kw})


def test_the_nvml_name_and_memory_pick_the_profile(replayed: Any) -> None:
    """An 8 GB "NVIDIA GeForce RTX 3060" (NVML names the 12 GB card alike) is the "RTX 3060 8GB" profile."""
    replayed("rtx3060_8gb_linux")
    (gpu,) = nvml.list_gpus()
    assert gpu.name == "NVIDIA GeForce RTX 3060" and gpu.vram_total_bytes == 8 * GIB
    assert (gpu.cuda_cores, gpu.compute_capability, gpu.max_sm_clock_mhz) == (3584, (8, 6), 2100)
    profile, why = detected_gpu_profile(gpu, load_profiles())
    assert profile is not None and profile.name == "RTX 3060 8GB" and why == ""
    twelve, _ = detected_gpu_profile(replace(gpu, vram_total_bytes=12288 * 2**20), load_profiles())
    assert twelve is not None and twelve.name == "RTX 3060 12GB"


def test_a_gpu_no_profile_names_gets_nvmls_figures_labelled(replayed: Any) -> None:
    """The L4's datasheet: 300 GB/s (192-bit × 12.5 Gbps) and 121 dense FP16 tensor TFLOPS (242 with sparsity):
    7424 cores ÷ 128 = 58 SMs × 1024 FLOP/clk × 2040 MHz = 121.2."""
    profiles = load_profiles()
    assert match_nvml_name("NVIDIA L4", profiles) is None, "a profile names the L4 now: replay another GPU here"
    replayed("nvidia_l4_linux")
    (gpu,) = nvml.list_gpus()
    profile, why = detected_gpu_profile(gpu, profiles)
    assert profile is not None and profile.name == "NVIDIA L4 (from NVML)" and profile.source.startswith("from NVML:")
    assert profile.peak_bandwidth_gbps == pytest.approx(192 / 8 * 6251 * 2 / 1000) == pytest.approx(300.0, abs=0.1)
    assert profile.fp16_tensor_tflops == pytest.approx(7424 * 8 * 2040 / 1e6) == pytest.approx(121.2, abs=0.05)
    assert profile.vram_bytes == pytest.approx(23034 * 2**20, abs=1) and profile.architecture == "Ada"
    assert profile.kind == "desktop" and profile.vendor == "NVIDIA"
    assert why == "GPU NVIDIA L4: no profile names it with 22.5 GiB; its figures are from NVML"


def test_a_neighbours_profile_is_never_taken() -> None:
    """A 6 GiB "RTX 3060" (no such profile): NVML's figures, not the 12 GB card's, and the note says whose not."""
    profile, why = detected_gpu_profile(_gpu("NVIDIA GeForce RTX 3060", vram_total_bytes=6 * GIB,
                                             memory_bus_bits=96), load_profiles())
    assert profile is not None and profile.name == "NVIDIA GeForce RTX 3060 (from NVML)"
    assert profile.peak_bandwidth_gbps == pytest.approx(96 / 8 * 15.002) and profile.vram_gib == 6.0
    assert "(RTX 3060 12GB is 12 GiB)" in why and why.endswith("its figures are from NVML")


@pytest.mark.parametrize(("name", "cores", "capability", "sm_mhz", "bus_bits", "mem_mhz"), [
    ("RTX 3060 12GB", 3584, (8, 6), 1777, 192, 7500),
    ("RTX 4090", 16384, (8, 9), 2520, 384, 10501),
    ("RTX 2080 Ti", 4352, (7, 5), 1545, 352, 7000),
    ("Tesla V100 PCIe", 5120, (7, 0), 1370, 4096, 877),
    ("H100 PCIe", 14592, (9, 0), 1620, None, None),
])
def test_nvmls_figures_are_the_profiles_own_where_a_profile_exists(
        name: str, cores: int, capability: tuple[int, int], sm_mhz: int, bus_bits: int | None,
        mem_mhz: int | None) -> None:
    """Built from a shipped profile's own unit counts and clocks, NVML's profile has that profile's figures: the
    per-core table is the rule each profile file's header states per SM."""
    shipped = find_profile(name, load_profiles())
    gpu = _gpu(name, cuda_cores=cores, compute_capability=capability, max_sm_clock_mhz=sm_mhz,
               memory_bus_bits=bus_bits or 5120, max_memory_clock_mhz=mem_mhz or 1000)
    built, _ = profile_from_nvml(gpu)
    assert built is not None and built.fp16_tensor_tflops == pytest.approx(shipped.fp16_tensor_tflops, rel=0.002)
    if bus_bits:
        assert built.peak_bandwidth_gbps == pytest.approx(shipped.peak_bandwidth_gbps, rel=0.005)
    assert capability in FP16_FLOP_PER_CORE and built.architecture == shipped.architecture


def test_what_nvml_does_not_give_is_said_and_no_profile_is_made() -> None:
    profile, why = detected_gpu_profile(_gpu("NVIDIA Some GPU", cuda_cores=None, max_sm_clock_mhz=None),
                                        load_profiles())
    assert profile is None and "NVML gives no CUDA core count, SM clock" in why and "this CPU's" in why
    floor, _ = profile_from_nvml(_gpu("NVIDIA Next GPU", compute_capability=(13, 0)))
    assert floor is not None and floor.fp16_tensor_tflops == pytest.approx(3584 * 2 * 1777 / 1e6)
    assert "compute capability 13.0" in floor.source and "the prefill ceiling is a floor" in floor.source
    gtx, _ = profile_from_nvml(_gpu("NVIDIA GeForce GTX 1660", compute_capability=(7, 5)))
    assert gtx is not None and gtx.fp16_tensor_tflops == pytest.approx(3584 * 4 * 1777 / 1e6)  # no tensor cores
    absurd, why = profile_from_nvml(_gpu("NVIDIA Broken", memory_bus_bits=10**6))  # checked as a profile file is
    assert absurd is None and "memory_bus_bits must be between" in why


def test_profile_for_reads_every_name_by_one_rule() -> None:
    cpu = cpu_profile("CPU: Test CPU", 20.0, 200.0, 32 * GIB)
    gpu = find_profile("RTX 4060 Laptop", load_profiles())
    here = Machine(cpu=cpu, gpu=gpu, cpu_model="Test CPU")
    for name in (None, "", "this", "THIS", " Local ", "local"):
        assert here.profile_for(name) is gpu, name
        assert replace(here, gpu=None).profile_for(name) is cpu, name
    for name in ("cpu", "CPU", " Cpu "):
        assert here.profile_for(name) is cpu, name
    assert here.profile_for("rtx 4060 laptop") is gpu and here.profile_for("NVIDIA GeForce RTX 4060 Laptop GPU") == gpu
    assert here.profile_for("rtx 4090").name == "RTX 4090"
    built = replace(gpu, name="NVIDIA L4 (from NVML)")
    assert replace(here, gpu=built).profile_for("nvidia l4 (FROM NVML)") is built  # this machine's GPU by its name
    with pytest.raises(ProfileError, match="did you mean") as refused:
        here.profile_for("RTX 40")
    assert "\n" not in str(refused.value)
    with pytest.raises(ProfileError, match=r"this CPU has no probed figures \(nothing of this machine was looked at"):
        Machine.elsewhere(public=False).profile_for("CPU")
    with pytest.raises(ProfileError, match=r"no probed figures \(the probe failed\)"):
        Machine(cpu=None, cpu_model="Test CPU", cpu_problem="the probe failed").profile_for("this")


def test_the_names_of_this_machine_are_one_set() -> None:
    assert set(THIS_MACHINE) == THIS_MACHINE_NAMES | CPU_NAMES  # the chooser's --measure check reads its own copy
    assert all(names_this_machine(n) for n in (None, "", "This", "LOCAL", "CPU", " cpu "))
    assert not any(names_this_machine(n) for n in ("RTX 4090", "cpus", "this machine"))


@pytest.fixture
def this_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """A cached CPU probe, and the surfaces' scans take it without probing or asking the repack guard (whose check is
    a child process): the scan is the real one in ProbeMode.CACHED."""
    save_probe(CpuProbe(bandwidth_gbps=20.0, gflops_f32=200.0, n_threads=2, measured_at="test fixture"))

    def cached(probe: object = None) -> telemetry_machine.MachineScan:
        return scan_machine(ProbeMode.CACHED)

    import app.choose.chooser as chooser
    import app.cli.predict_cmd as predict_cmd

    monkeypatch.setattr(predict_cmd, "scan_machine", cached)
    monkeypatch.setattr(chooser, "scan_machine", cached)


@pytest.mark.heavy  # the CLI's predict and choose for eight names on two machines: about 10 s
@pytest.mark.parametrize("recording", ["rtx3060_8gb_linux", "nvidia_l4_linux"])
def test_predict_and_choose_answer_every_name_for_the_same_hardware(
        recording: str, replayed: Any, this_machine: None, make_gguf: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """``--hw CPU``, ``cpu``, ``this``, none: one hardware in ``predict`` and ``choose``, this machine's GPU (as
    detected: NVML name and memory, else NVML's figures) or its CPU; before, ``predict --hw CPU`` answered for the
    GPU, and an 8 GB RTX 3060 was the CPU in the CLI and the 12 GB card in the window."""
    replayed(recording)
    model = str(make_gguf("m.gguf", n_layer=2))
    gpu = {"rtx3060_8gb_linux": "RTX 3060 8GB", "nvidia_l4_linux": "NVIDIA L4 (from NVML)"}[recording]
    cpu = f"CPU: {scan_machine(ProbeMode.CACHED).cpu_model}"
    for hw, expected in ((None, gpu), ("this", gpu), ("THIS", gpu), ("local", gpu), ("CPU", cpu), ("cpu", cpu),
                         (" Cpu ", cpu)):
        flag = ["--hw", hw] if hw is not None else []
        predicted = main_json("predict", ["-m", model, *flag], capsys)
        chosen = main_json("choose", [model, *flag], capsys)
        assert (predicted["profile"], chosen["profile"]) == (expected, expected), hw
        assert predicted["this_machine"] and chosen["this_machine"], hw
    if recording == "nvidia_l4_linux":  # the ceilings say where their figures came from
        said = main_json("predict", ["-m", model], capsys)["ceiling_source"]
        assert said.startswith("ceiling: NVIDIA L4 (from NVML) (from NVML: 22.5 GiB; 192-bit bus"), said


def test_run_hw_reads_names_by_the_same_rule(replayed: Any, this_machine: None, make_gguf: Any,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """``run --hw``'s rows are predicted on what the rule gives: "cpu" every row on this CPU, none this GPU."""
    import app.run.sweep_setup as sweep_setup
    from app.run.plan import TestSpec

    replayed("rtx3060_8gb_linux")
    monkeypatch.setattr(sweep_setup, "scan_machine", lambda probe=None: scan_machine(ProbeMode.CACHED))
    tests = [TestSpec(model_path=str(make_gguf("m.gguf", n_layer=2)))]

    def predicted_on(hw: str | None) -> tuple[str, str | None]:
        setup = sweep_setup.prepare_sweep(tests, None, gpu_query=hw)
        assert setup.hw is not None and setup.predictor is not None
        return setup.hw.cpu.name, setup.hw.gpu.name if setup.hw.gpu is not None else None

    cpu = f"CPU: {scan_machine(ProbeMode.CACHED).cpu_model}"
    assert predicted_on(None) == (cpu, "RTX 3060 8GB")
    assert predicted_on("CPU") == (cpu, None)  # every row on this CPU, as asked
    assert predicted_on("rtx 4090") == (cpu, "RTX 4090")
    with pytest.raises(ProfileError, match="did you mean"):
        predicted_on("RTX 40")
