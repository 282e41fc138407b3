"""The hardware a run is predicted against: the measured CPU, and the detected NVIDIA GPU's profile; or, for a GPU
the user names that is not in this machine, that GPU's profile and an assumed host (nothing of this machine)."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from app.predict.ceilings.decode import DEFAULT_CPU_BANDWIDTH_GBPS
from app.predict.detected_gpu import detected_gpu_profile
from app.predict.memory.host import host_memory_table
from app.predict.power import as_read
from app.predict.profiles import GIB, HardwareProfile, ProfileError, cpu_profile, find_profile, load_profiles
from app.telemetry.cpu_peaks import ComputeFigure
from app.telemetry.machine import MachineScan, ProbeMode, scan_machine


@dataclass(frozen=True)
class CpuProfile(HardwareProfile):
    """This machine's CPU: the probed bandwidth, and a compute figure per kernel (``fp16_tensor_tflops`` is the
    float one). A prefill ceiling takes the figure for the model's weight type
    (:func:`app.predict.ceilings.prefill.prefill_compute`)."""

    int8: ComputeFigure | None = None  # quantized weights: int8 dot products
    fma: ComputeFigure | None = None  # F32/F16/BF16 weights: float FMA
    #: AMX tiles, for weights of AMX types repacked into llama.cpp's AMX buffer: set only when this build has that
    #: buffer type and the repack guard found it safe here (app.telemetry.repack_guard); None otherwise
    amx: ComputeFigure | None = None


@dataclass(frozen=True)
class HardwareContext:
    cpu: HardwareProfile  # measured on this machine (probed bandwidth and matmul rate), or ASSUMED_HOST
    gpu: HardwareProfile | None = None  # the detected GPU's profile, or one the user picked
    note: str = ""
    host_measured: bool = True  # False: ``cpu`` is ASSUMED_HOST, the host of a GPU that is not this machine's
    gpu_problem: bool = False  # no profile names the detected GPU: ``gpu`` is built from NVML, or None (``note``)

    @property
    def host_bandwidth_gbps(self) -> float | None:
        """The host side's bandwidth for a GPU prediction: this CPU's probed figure, None for a remote GPU's host
        (the prediction then takes its stated default, DEFAULT_CPU_BANDWIDTH_GBPS, and names it as assumed)."""
        return self.cpu.peak_bandwidth_gbps if self.host_measured else None

    def for_row(self, n_gpu_layers_effective: int) -> HardwareProfile:
        """The profile a test ran on: the GPU when layers were really offloaded, else the CPU."""
        return self.gpu if (self.gpu is not None and n_gpu_layers_effective > 0) else self.cpu


#: The host of a GPU named with ``--hw`` that is not in this machine: nothing of it is known, so nothing is measured
#: here. Bandwidth: DEFAULT_CPU_BANDWIDTH_GBPS (dual-channel DDR5-4000 peak); compute: 8 cores × 32 FP32 FLOP per
#: cycle (AVX2, two FMA units) × 3 GHz = 768 GFLOPS; 32 GiB of RAM. Assumed figures of a typical laptop, not measured.
ASSUMED_HOST = replace(
    cpu_profile("assumed host CPU (not this machine)", DEFAULT_CPU_BANDWIDTH_GBPS, 768.0, 32 * GIB),
    source=f"assumed: a typical laptop host ({DEFAULT_CPU_BANDWIDTH_GBPS:g} GB/s, dual-channel DDR5-4000), "
           "not measured",
    notes="assumed figures for the host of a GPU that is not this machine's",
)


def cpu_profile_of(scan: MachineScan, label: str = "CPU") -> CpuProfile:
    """This machine's CPU as a profile (``label: model``): the probed bandwidth and the compute peaks derived from
    the CPU's features (:meth:`MachineScan.cpu_peaks`; the probed matmul, a measured roofline, without them)."""
    assert scan.probe is not None
    peaks = scan.cpu_peaks()
    gflops = peaks.fma.tflops * 1e3 if peaks is not None else scan.probe.gflops_f32
    base = cpu_profile(f"{label}: {scan.cpu_model}", scan.probe.bandwidth_gbps, gflops, scan.ram_total_bytes or 1)
    state = {True: ", taken while busy", None: ", not load-checked"}.get(scan.probe.busy, "")
    compute = f"{peaks.int8.kind} (quantized weights), {peaks.fma.kind} (float)" if peaks else "f32 matmul probe"
    source = f"bandwidth probed {scan.probe.measured_at}{state}; compute: {compute}"
    verdict = scan.repack
    amx = peaks.amx if peaks is not None and verdict is not None and verdict.safe and verdict.amx_in_use(1) else None
    profile = CpuProfile(**{f.name: getattr(base, f.name) for f in fields(base) if f.name != "source"},
                         source=source, int8=peaks.int8 if peaks else None, fma=peaks.fma if peaks else None, amx=amx)
    return replace(profile, repack_buffers=verdict.extra_buffers if verdict is not None else (),
                   cpu_flags=scan.cpu_features.flags if scan.cpu_features is not None else ())


def hardware_context(scan: MachineScan, profiles: list[HardwareProfile] | None = None) -> HardwareContext:
    """This machine's hardware, from one look at it: its probed CPU and its first NVIDIA GPU's profile by the one
    rule of :mod:`app.predict.detected_gpu` (NVML name and memory, else built from NVML's figures). Which hardware a
    name means (``--hw``) is :meth:`app.predict.machine.Machine.profile_for`. Raises ProfileError when there are no
    CPU figures at all."""
    if scan.probe is None:
        raise ProfileError(f"this CPU has no probed figures ({scan.probe_error or 'the CPU probe did not run'})")
    cpu = cpu_profile_of(scan)
    if not scan.nvml_available:
        return HardwareContext(cpu=cpu, note=f"no NVIDIA GPU ({scan.nvml_reason})")
    if not scan.gpus:
        return HardwareContext(cpu=cpu, note="no NVIDIA GPU found")
    gpu, why = detected_gpu_profile(scan.gpus[0], load_profiles() if profiles is None else profiles)
    if gpu is not None:  # at the power state it runs in now (app.predict.power.as_read)
        gpu = as_read(gpu, scan.gpu_power_limit_w, scan.power_source)
    return HardwareContext(cpu=cpu, gpu=gpu, note=why or f"GPU {scan.gpus[0].name}", gpu_problem=bool(why))


def remote_hardware_context(gpu_query: str, profiles: list[HardwareProfile] | None = None) -> HardwareContext:
    """The hardware of a GPU the user names that is not in this machine (``predict --hw GPU``): its profile and
    ASSUMED_HOST. Touches nothing of this machine: no scan, no CPU probe, no probe cache. Raises ProfileError when
    ``gpu_query`` names no profile."""
    gpu = find_profile(gpu_query, load_profiles() if profiles is None else profiles)
    memory = host_memory_table().assumed_for(gpu)  # the one the answers assume (app.predict.answer)
    cpu = replace(ASSUMED_HOST, peak_bandwidth_gbps=memory.peak_bandwidth_gbps,
                  source=f"assumed: {memory.name} beside {gpu.name} ({memory.source})")
    note = (f"GPU profile chosen: {gpu.name}; host side assumed ({memory.name}, {memory.peak_bandwidth_gbps:.1f} "
            f"GB/s), not this machine's")
    return HardwareContext(cpu=cpu, gpu=gpu, note=note, host_measured=False)


def detect_hardware_context() -> HardwareContext:
    """Look at this machine (probing the CPU once; cached per machine) and build its hardware context."""
    return hardware_context(scan_machine(ProbeMode.RUN))


def backend_name(profile: HardwareProfile) -> str:
    """The ``backends`` value rows measured on ``profile`` carry (see the engine): "CPU" for a CPU, else the GPU
    vendor's API first ("CUDA,CPU" on NVIDIA)."""
    if profile.kind == "cpu":
        return "CPU"
    return "CUDA,CPU" if profile.vendor.lower() == "nvidia" else "GPU,CPU"
