"""Which hardware profile a detected NVIDIA GPU gets: one rule, in numbered steps, each with its reason.

1. The profile NVML's device name *and* memory size name (:func:`app.predict.profiles.match_nvml_name`): the name
   as a profile's name or alias, else a profile's name with a memory size added ("NVIDIA GeForce RTX 3060" with
   8 GiB is "RTX 3060 8GB"); a profile of another memory size is not this GPU, whatever its name.
2. Else a profile built from what NVML reports, named and sourced "from NVML": the memory, the bandwidth from the
   bus width and the memory clock, the FP16 tensor rate from the CUDA cores, the compute capability and the
   highest SM clock (:func:`profile_from_nvml`). Never a neighbour's profile: a 12 GB card's figures are not an
   8 GB card's.
3. Else none (NVML did not give enough to build one): the predictions are this CPU's, and the note says why.

Step 1 takes a profile's cited figures over NVML's (the profiles hold the clock a part is sold at, NVML the
highest its V/F curve allows). :meth:`app.predict.machine.Machine.profile_for` decides which hardware a name means
(``--hw``); nothing here overrides a profile the user named.
"""

from __future__ import annotations

from collections.abc import Sequence

from app.predict.profiles import GIB, HardwareProfile, ProfileError, match_nvml_name, profile_from_entry
from app.telemetry.nvml import NVML_MEM_CLOCK_DATA_RATE_MULTIPLIER, GpuInfo

#: Dense FP16 tensor FLOP per clock per CUDA core, by CUDA compute capability, with FP16 accumulate: the rate every
#: NVIDIA profile in profiles/hardware carries, per core rather than per SM (each file's header states it per SM).
#: (figure, what it is, the file whose header states the rule)
FP16_FLOP_PER_CORE: dict[tuple[int, int], tuple[float, str]] = {
    (6, 0): (4.0, "GP100: FP16 at twice the FP32 rate, cores × 4 (nvidia-pascal-volta.toml)"),
    (6, 1): (2.0, "GP10x: no tensor cores and FP16 at 1/64 rate, so llama.cpp runs FP32: cores × 2 "
                  "(nvidia-pascal-volta.toml)"),
    (7, 0): (16.0, "Volta: SMs (cores ÷ 64) × 1024 (nvidia-pascal-volta.toml)"),
    (7, 5): (16.0, "Turing: SMs (cores ÷ 64) × 1024 (nvidia-turing.toml)"),
    (8, 0): (32.0, "GA100: SMs (cores ÷ 64) × 2048 (nvidia-desktop-more.toml)"),
    (8, 6): (8.0, "Ampere GA10x: SMs (cores ÷ 128) × 1024 (nvidia-desktop-more.toml)"),
    (8, 9): (8.0, "Ada: SMs (cores ÷ 128) × 1024 (nvidia-desktop-more.toml)"),
    (9, 0): (32.0, "Hopper: SMs (cores ÷ 128) × 4096 (datacenter.toml's H100 PCIe: 114 SMs × 4096 × 1620 MHz "
                   "= 756.5)"),
    (12, 0): (8.0, "Blackwell GeForce: SMs (cores ÷ 128) × 1024 (nvidia-desktop-more.toml)"),
}
#: Turing's GTX 16 parts have compute capability 7.5 but no tensor cores: FP16 on the ALUs at twice FP32.
GTX16_FP16_FLOP_PER_CORE = (4.0, "Turing GTX 16 (no tensor cores): cores × 4 (nvidia-turing.toml)")
#: A compute capability not in the table: the FP32 FMA rate, a floor under any tensor rate (said so).
FP32_FLOP_PER_CORE = 2.0
#: The architecture names profiles/hardware uses (the public fit pools GPUs by them), by compute capability major.
ARCHITECTURES: dict[tuple[int, int] | int, str] = {
    6: "Pascal", 7: "Volta", (7, 5): "Turing", (8, 0): "Ampere GA100", 8: "Ampere", (8, 9): "Ada", 9: "Hopper",
    10: "Blackwell", 12: "Blackwell",
}


def _fp16_rate(gpu: GpuInfo) -> tuple[float, str]:
    """(FP16 FLOP per clock per CUDA core, what that is) for ``gpu``'s compute capability."""
    cc = gpu.compute_capability
    if cc == (7, 5) and "gtx" in (gpu.name or "").casefold().split():
        return GTX16_FP16_FLOP_PER_CORE
    if cc in FP16_FLOP_PER_CORE:
        return FP16_FLOP_PER_CORE[cc]
    said = f"compute capability {cc[0]}.{cc[1]}" if cc else "no compute capability from NVML"
    return FP32_FLOP_PER_CORE, f"the FP32 rate, cores × 2: {said}, whose tensor rate is not known here, so the " \
                               "prefill ceiling is a floor"


def profile_from_nvml(gpu: GpuInfo) -> tuple[HardwareProfile | None, str]:
    """(a profile of ``gpu`` from what NVML reports, "") or (None, what NVML did not give). Checked as a profile
    file's entries are (:func:`profile_from_entry`)."""
    needs = {"memory size": gpu.vram_total_bytes, "memory bus width": gpu.memory_bus_bits,
             "memory clock": gpu.max_memory_clock_mhz, "CUDA core count": gpu.cuda_cores,
             "SM clock": gpu.max_sm_clock_mhz}
    missing = [what for what, value in needs.items() if not value]
    if missing:
        return None, f"NVML gives no {', '.join(missing)} to build one from"
    assert gpu.vram_total_bytes and gpu.memory_bus_bits and gpu.max_memory_clock_mhz and gpu.cuda_cores \
        and gpu.max_sm_clock_mhz
    name = gpu.name or f"NVIDIA GPU {gpu.index}"
    data_rate_gbps = gpu.max_memory_clock_mhz * NVML_MEM_CLOCK_DATA_RATE_MULTIPLIER / 1000.0
    bandwidth_gbps = gpu.memory_bus_bits / 8 * data_rate_gbps
    per_core, rule = _fp16_rate(gpu)
    tflops = gpu.cuda_cores * per_core * gpu.max_sm_clock_mhz / 1e6
    cc = gpu.compute_capability
    architecture = (ARCHITECTURES.get(cc, ARCHITECTURES.get(cc[0], "")) if cc else "")
    source = (f"from NVML: {gpu.vram_total_bytes / GIB:.1f} GiB; {gpu.memory_bus_bits}-bit bus × {data_rate_gbps:g} "
              f"Gbps (memory clock {gpu.max_memory_clock_mhz} MHz × {NVML_MEM_CLOCK_DATA_RATE_MULTIPLIER}) = "
              f"{bandwidth_gbps:.1f} GB/s; {gpu.cuda_cores} CUDA cores × {per_core:g} FLOP/clk ({rule}) × "
              f"{gpu.max_sm_clock_mhz} MHz (the highest SM clock) = {tflops:.1f} TFLOPS")
    entry: dict[str, object] = {
        "name": f"{name} (from NVML)", "vendor": "NVIDIA",
        "kind": "laptop" if "laptop" in name.casefold() else "desktop", "vram_gib": gpu.vram_total_bytes / GIB,
        "memory_bus_bits": gpu.memory_bus_bits, "memory_data_rate_gbps": data_rate_gbps,
        "peak_bandwidth_gbps": bandwidth_gbps, "fp16_tensor_tflops": tflops, "source": source,
        "architecture": architecture,
        "notes": "no hardware profile names this GPU with its memory: its figures are what NVML reports",
    }
    try:
        return profile_from_entry(entry, f"NVML's figures of {name}"), ""
    except ProfileError as e:  # a reading out of any real part's range
        return None, str(e)


def detected_gpu_profile(gpu: GpuInfo, profiles: Sequence[HardwareProfile]) -> tuple[HardwareProfile | None, str]:
    """(the profile ``gpu`` gets by the module's rule, why, in one line: "" where a profile names it plainly)."""
    name = gpu.name or ""
    memory = f"{gpu.vram_total_bytes / GIB:.1f} GiB" if gpu.vram_total_bytes else "its memory unknown"
    if name:  # 1. the profile its name and memory name
        found = match_nvml_name(name, profiles, gpu.vram_total_bytes)
        if found is not None:
            return found, ""
    named = match_nvml_name(name, profiles) if name else None
    other = (f" ({named.name} is {named.vram_gib:g} GiB)" if named is not None else "")
    built, missing = profile_from_nvml(gpu)  # 2. built from what NVML reports
    label = name or f"NVIDIA GPU {gpu.index}"
    if built is not None:
        return built, f"GPU {label}: no profile names it with {memory}{other}; its figures are from NVML"
    return None, (f"GPU {label}: no profile names it with {memory}{other}, and {missing}: predictions are this "
                  "CPU's (add a profile to <data dir>/hardware)")  # 3. none
