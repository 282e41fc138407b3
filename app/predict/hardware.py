"""The hardware a run is predicted against: the measured CPU, and the detected NVIDIA GPU's profile."""

from __future__ import annotations

from dataclasses import dataclass

from app.predict.profiles import HardwareProfile, ProfileError, cpu_profile, find_profile, load_profiles


@dataclass(frozen=True)
class HardwareContext:
    cpu: HardwareProfile  # measured on this machine: probed bandwidth and matmul rate
    gpu: HardwareProfile | None = None  # the detected GPU's profile, or one the user picked
    note: str = ""

    def for_row(self, n_gpu_layers_effective: int) -> HardwareProfile:
        """The profile a test ran on: the GPU when layers were really offloaded, else the CPU."""
        return self.gpu if (self.gpu is not None and n_gpu_layers_effective > 0) else self.cpu


def detect_hardware_context(gpu_query: str | None = None) -> HardwareContext:
    """Probe the CPU (cached per machine) and match the first NVIDIA GPU to a profile; never raises for telemetry."""
    from app.telemetry.cpu_probe import probe_cpu
    from app.telemetry.host import cpu_model, system_ram

    probe = probe_cpu(cache=True)
    ram_total = system_ram()[1] or 1
    cpu = cpu_profile(f"CPU: {cpu_model()}", probe.bandwidth_gbps, probe.gflops_f32, ram_total)
    profiles = load_profiles()
    if gpu_query:
        return HardwareContext(cpu=cpu, gpu=find_profile(gpu_query, profiles), note=f"GPU profile chosen: {gpu_query}")
    gpu, note = None, "no NVIDIA GPU found"
    try:
        from app.predict.profiles import match_nvml_name
        from app.telemetry import nvml

        if nvml.nvml_available():
            gpus = nvml.list_gpus()
            if gpus and gpus[0].name:
                gpu = match_nvml_name(gpus[0].name, profiles)
                note = f"GPU {gpus[0].name}" + ("" if gpu else ": no matching profile (add one to the user dir)")
        else:
            note = f"no NVIDIA GPU ({nvml.nvml_unavailable_reason()})"
    except (ProfileError, OSError) as e:
        note = f"GPU detection failed: {e}"
    return HardwareContext(cpu=cpu, gpu=gpu, note=note)
