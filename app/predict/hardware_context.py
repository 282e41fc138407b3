"""The hardware a run is predicted against: the measured CPU, and the detected NVIDIA GPU's profile."""

from __future__ import annotations

from dataclasses import dataclass, fields

from app.predict.profiles import (
    HardwareProfile,
    ProfileError,
    cpu_profile,
    find_profile,
    load_profiles,
    match_nvml_name,
)
from app.telemetry.cpu_peaks import ComputeFigure
from app.telemetry.machine import MachineScan, ProbeMode, scan_machine
from app.telemetry.repack_guard import remembered


@dataclass(frozen=True)
class CpuProfile(HardwareProfile):
    """This machine's CPU: the probed bandwidth, and a compute figure per kernel (``fp16_tensor_tflops`` is the
    float one). A prefill ceiling takes the figure for the model's weight type
    (:func:`app.predict.prefill.prefill_compute`)."""

    int8: ComputeFigure | None = None  # quantized weights: int8 dot products
    fma: ComputeFigure | None = None  # F32/F16/BF16 weights: float FMA
    #: AMX tiles, for weights of AMX types repacked into llama.cpp's AMX buffer: set only when this build has that
    #: buffer type and the repack guard found it safe here (app.telemetry.repack_guard); None otherwise
    amx: ComputeFigure | None = None


@dataclass(frozen=True)
class HardwareContext:
    cpu: HardwareProfile  # measured on this machine: probed bandwidth and matmul rate
    gpu: HardwareProfile | None = None  # the detected GPU's profile, or one the user picked
    note: str = ""

    def for_row(self, n_gpu_layers_effective: int) -> HardwareProfile:
        """The profile a test ran on: the GPU when layers were really offloaded, else the CPU."""
        return self.gpu if (self.gpu is not None and n_gpu_layers_effective > 0) else self.cpu


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
    verdict = remembered()
    amx = peaks.amx if peaks is not None and verdict is not None and verdict.safe and verdict.amx_in_use(1) else None
    return CpuProfile(**{f.name: getattr(base, f.name) for f in fields(base) if f.name != "source"}, source=source,
                      int8=peaks.int8 if peaks else None, fma=peaks.fma if peaks else None, amx=amx)


def hardware_context(scan: MachineScan, gpu_query: str | None = None,
                     profiles: list[HardwareProfile] | None = None) -> HardwareContext:
    """The hardware to predict against, from one look at the machine: its probed CPU and its first NVIDIA GPU's
    profile, or the profile ``gpu_query`` names. Raises ProfileError when there are no CPU figures at all."""
    if scan.probe is None:
        raise ProfileError(f"this CPU has no probed figures ({scan.probe_error or 'the CPU probe did not run'})")
    cpu = cpu_profile_of(scan)
    profiles = load_profiles() if profiles is None else profiles
    if gpu_query:
        return HardwareContext(cpu=cpu, gpu=find_profile(gpu_query, profiles), note=f"GPU profile chosen: {gpu_query}")
    if not scan.nvml_available:
        return HardwareContext(cpu=cpu, note=f"no NVIDIA GPU ({scan.nvml_reason})")
    if not scan.gpus or not scan.gpus[0].name:
        return HardwareContext(cpu=cpu, note="no NVIDIA GPU found")
    name = scan.gpus[0].name
    gpu = match_nvml_name(name, profiles)
    return HardwareContext(cpu=cpu, gpu=gpu,
                           note=f"GPU {name}" + ("" if gpu else ": no matching profile (add one to the user dir)"))


def detect_hardware_context(gpu_query: str | None = None) -> HardwareContext:
    """Look at this machine (probing the CPU once; cached per machine) and build its hardware context."""
    return hardware_context(scan_machine(ProbeMode.RUN), gpu_query)


def backend_name(profile: HardwareProfile) -> str:
    """The ``backends`` value rows measured on ``profile`` carry (see the engine): "CPU" for a CPU, else the GPU
    vendor's API first ("CUDA,CPU" on NVIDIA)."""
    if profile.kind == "cpu":
        return "CPU"
    return "CUDA,CPU" if profile.vendor.lower() == "nvidia" else "GPU,CPU"
