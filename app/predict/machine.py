"""What "this machine" is, decided in one place: :meth:`Machine.load`.

A ``Machine`` holds everything an answer may draw on that belongs to where the workbench runs: this CPU's profile
(probed bandwidth, compute peaks, repack buffers), this machine's own GPU (the NVML-matched profile) if any, the
GPU backends this llama.cpp build has, the repack guard's default, this machine's calibration fit, the efficiencies
of its stored rows and its measured rows, and the public GPU fit (which belongs to no machine, but is loaded once
with the rest). :meth:`Machine.profile_for` is the one rule for which hardware a name (``--hw``, the window's list)
means, :meth:`Machine.is_this` the one rule for whether a hardware profile is this machine's. A GPU named that is
not here gets :meth:`Machine.elsewhere`: nothing of this machine, the public fit only.

Loading does I/O (a scan, files, a read-only look at the results store); everything after it is pure.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from app.model.dry_run import ContextMemory, DryRun, dry_run
from app.model.facts import ModelFacts
from app.predict.detected_gpu import detected_gpu_profile
from app.predict.hardware_context import HardwareContext, cpu_profile_of, hardware_context
from app.predict.machine_fit.calibration_fit import MachineFit
from app.predict.machine_fit.calibration_store import read_fit
from app.predict.machine_fit.store_efficiency import StoreCalibration, row_threads, threads_for, untrustworthy
from app.predict.memory_truth import dry_run_settings
from app.predict.profiles import HardwareProfile, ProfileError, find_profile, load_profiles
from app.predict.public.fit import PublicGpuModel, load_public_model
from app.predict.settings import PredictSettings
from app.results.fields import RowStatus
from app.results.row_types import ResultRow
from app.results.store import ResultStore, StoreError
from app.telemetry.llama_build import engine_version, installed_gpu_backends
from app.telemetry.machine import MachineScan, ProbeMode, scan_machine

__all__ = ["CPU_NAMES", "THIS_MACHINE_NAMES", "HardwareContext", "Machine", "cpu_profile_of", "detected_gpu_profile",
           "hardware_context", "names_this_machine", "same_hardware"]

#: Stored rows read for measured figures and efficiencies (newest first).
STORED_ROWS = 2000
#: What names this machine's own hardware (``--hw``; compared stripped, in any case): nothing, "this" or "local"
#: its GPU where it has one, else its CPU; "cpu" its CPU.
THIS_MACHINE_NAMES = frozenset({"", "this", "local"})
CPU_NAMES = frozenset({"cpu"})


def names_this_machine(hw: str | None) -> bool:
    """Whether ``hw`` names this machine's own hardware (:data:`THIS_MACHINE_NAMES`, :data:`CPU_NAMES`), so this
    machine must be looked at (:meth:`Machine.load`); any other name is a profile (:meth:`Machine.elsewhere`)."""
    return _asked(hw) in THIS_MACHINE_NAMES | CPU_NAMES


def names_cpu(hw: str | None) -> bool:
    """Whether ``hw`` asks for this machine's CPU even where it has a GPU (:data:`CPU_NAMES`, any case)."""
    return _asked(hw) in CPU_NAMES


def _asked(hw: str | None) -> str:
    return (hw or "").strip().casefold()


def same_hardware(a: HardwareProfile | None, b: HardwareProfile | None) -> bool:
    """Whether two profiles describe the same hardware (the window's "This CPU: X" and a row's "CPU: X" do: a CPU
    row records the compute figure its weight type used, so CPUs are matched by their probed bandwidth)."""
    if a is None or b is None:
        return a is b
    if a.name == b.name:
        return True
    if a.kind == b.kind == "cpu":
        return math.isclose(a.peak_bandwidth_gbps, b.peak_bandwidth_gbps, rel_tol=1e-6)
    return (a.kind == b.kind and a.peak_bandwidth_gbps == b.peak_bandwidth_gbps
            and a.fp16_tensor_tflops == b.fp16_tensor_tflops)


@dataclass(frozen=True)
class Machine:
    """This machine, as answers see it (see the module docstring); ``Machine()`` is none at all."""

    cpu: HardwareProfile | None = None  # this CPU (probed); None: nothing of this machine was looked at
    gpu: HardwareProfile | None = None  # this machine's own GPU (NVML name and memory matched to a profile)
    cpu_model: str = ""  # as rows record it (cpu_info)
    gpu_info: str = ""
    gpu_backends: tuple[str, ...] = ()  # the GPU backends this llama.cpp build has ("CUDA", "Vulkan")
    repack_default: int = 1  # --repack auto here: 0 where the repack guard found repacked weights crash
    ram_total_bytes: int | None = None  # this machine's system RAM
    fit: MachineFit | None = None  # `gguf-bench calibrate`'s fit of this machine
    efficiency: StoreCalibration | None = None  # achieved ÷ ceiling of other models' stored rows here
    rows: tuple[ResultRow, ...] = ()  # this CPU's stored rows (newest first), for measured figures
    public: PublicGpuModel | None = None  # published llama-bench results fitted per GPU architecture
    #: the public fit's setting: a backend and build asked for (``predict --backend/--build``); None: this
    #: machine's backend for the GPU's vendor, and the installed build
    public_backend: str | None = None
    public_build: int | None = None
    build_label: str = ""  # "installed llama-cpp-python 0.3.36"
    notes: tuple[str, ...] = field(default_factory=tuple)  # why a source is missing, for a status line
    fit_problem: str | None = None  # a saved fit that is there but not read (older form, damaged): one line
    store_problem: str | None = None  # a results store that is there but not read (damaged, newer): one line
    #: llama.cpp's dry runs of files here (:meth:`with_dry_run`): the memory truth of this machine's CPU answers
    dry_runs: tuple[DryRun, ...] = ()
    cpu_problem: str = ""  # why ``cpu`` is None on a machine that was looked at (the probe did not run, failed)

    def profile_for(self, hw: str | None) -> HardwareProfile:
        """The one rule for which hardware ``hw`` means; every surface asks it (``predict``, ``choose``, ``run``,
        the window's list). In order, each step the user's word before anything detected:

        1. "cpu" (any case): this machine's CPU, even where it has a GPU.
        2. nothing, "this" or "local" (any case): this machine's GPU where it has one (the profile its NVML name and
           memory name, else one built from NVML's figures: :mod:`app.predict.detected_gpu`), else its CPU.
        3. this machine's GPU by its profile's name (any case), also where that profile was built from NVML.
        4. any other name: the profile it names (:func:`app.predict.profiles.find_profile`: names and aliases, any
           case), whether or not it is this machine's.

        Raises ProfileError, one line: a name that names no profile (with the nearest), or this machine's hardware
        asked where nothing of it is known (no CPU figures)."""
        asked = _asked(hw)
        if asked in CPU_NAMES | THIS_MACHINE_NAMES:
            if asked in THIS_MACHINE_NAMES and self.gpu is not None:
                return self.gpu
            if self.cpu is None:
                why = self.cpu_problem or ("nothing of this machine was looked at" if not self.here
                                           else "the CPU probe did not run")
                raise ProfileError(f"this CPU has no probed figures ({why})")
            return self.cpu
        if self.gpu is not None and asked == self.gpu.name.casefold():
            return self.gpu
        return find_profile(str(hw), load_profiles())

    @property
    def here(self) -> bool:
        """Whether anything of this machine was looked at (False for :meth:`elsewhere` and ``Machine()``)."""
        return self.cpu is not None

    def is_this(self, profile: HardwareProfile | None) -> bool:
        """The one rule: ``profile`` is this machine's CPU (by name, or a CPU of the same probed bandwidth: the rows
        of this CPU name it "CPU: <model>"), or the GPU this machine has."""
        if profile is None or not self.here:
            return False
        if profile.kind == "cpu":
            return same_hardware(profile, self.cpu)
        return self.gpu is not None and profile.name == self.gpu.name

    def host_bandwidth_gbps(self, profile: HardwareProfile) -> float | None:
        """The host side's bandwidth for a prediction on ``profile``: this CPU's probed figure for this machine's
        hardware, None for a GPU that is not here (the prediction then assumes DEFAULT_CPU_BANDWIDTH_GBPS and says
        so)."""
        return self.cpu.peak_bandwidth_gbps if self.is_this(profile) and self.cpu is not None else None

    def fitted_backends(self) -> tuple[str, ...]:
        """The backends this machine's fit covers ("CPU", "Vulkan,CPU"…)."""
        return tuple(self.fit.fits) if self.fit is not None else ()

    def with_dry_run(self, facts: ModelFacts, settings: Sequence[PredictSettings]) -> Machine:
        """This machine with llama.cpp's dry run of ``facts``' file at each of ``settings`` (I/O: the cache, else a
        child process, app.model.dry_run): answers for this CPU at those settings take its memory figures. A file
        llama.cpp cannot load here, or a URL, adds nothing but the reason (:meth:`dry_run_of`)."""
        local = facts.extra.get("header_copy")  # a URL's header, written as a sparse local copy
        source = local if isinstance(local, str) and "://" in facts.path else facts.path
        run = replace(dry_run(source, [dry_run_settings(s) for s in settings]), path=facts.path)
        return replace(self, dry_runs=(*(r for r in self.dry_runs if r.path != run.path), run))

    def dry_run_of(self, facts: ModelFacts) -> DryRun | None:
        """The dry run of ``facts``' file this machine carries, if any."""
        return next((r for r in self.dry_runs if r.path == facts.path), None)

    def memory_truth(self, facts: ModelFacts, s: PredictSettings) -> tuple[ContextMemory, int | None] | None:
        """(llama.cpp's memory of the context ``s`` asks, the weights it loads) where this machine's dry run of the
        file sized it; None where it did not."""
        run = self.dry_run_of(facts)
        ctx = run.context(dry_run_settings(s)) if run is not None else None
        return (ctx, run.size_bytes) if ctx is not None and run is not None else None

    def with_public_setting(self, backend: str | None, build: int | None) -> Machine:
        """This machine with the public fit asked for ``backend`` and llama.cpp ``build`` (None: the defaults)."""
        return replace(self, public_backend=backend, public_build=build)

    def measured_rows(self, filename: str) -> list[ResultRow]:
        """This file's trustworthy rows measured here, newest first: ok, stable, not taken on a busy machine, at the
        thread count a default run uses (the one expected figures are for), with a decode figure."""
        return [r for r in self.rows if r.model_filename == filename and r.status == RowStatus.OK
                and r.decode_tps and not untrustworthy(r) and row_threads(r) == threads_for(None)]

    @classmethod
    def elsewhere(cls, *, public: bool = True) -> Machine:
        """Nothing of this machine (a GPU named that is not here): the public fit only, for the installed build."""
        notes: list[str] = []
        model = _public(notes) if public else None
        return cls(public=model, build_label=_build_label(), notes=tuple(notes))

    @classmethod
    def load(cls, scan: MachineScan | None = None, *, probe: ProbeMode = ProbeMode.RUN,
             store_path: str | Path | None = None, public: bool = True, read_store: bool = True) -> Machine:
        """Look at this machine once: the scan (``probe`` decides whether the CPU may be measured), its hardware
        profiles, its saved fit, its stored rows (the store opened read-only: nothing is written or recovered),
        the public fit. Never raises for a source that is missing: ``notes`` says why."""
        scan = scan if scan is not None else scan_machine(probe)
        hw, cpu_problem = _hardware(scan)
        facts = scan.run_facts()
        cpu_model, gpu_info = str(facts.get("cpu_model") or ""), str(facts.get("gpu_info") or "")
        notes: list[str] = [hw.note] if hw is not None and hw.note and (hw.gpu is None or hw.gpu_problem) else []
        fit, problem = read_fit(cpu_model, gpu_info) if cpu_model else (None, None)
        if problem is not None:
            notes.append(problem)
        elif fit is None:
            notes.append("this machine is not calibrated (Sweep → Calibrate this machine…, or gguf-bench calibrate)")
        rows: tuple[ResultRow, ...] = ()
        efficiency, store_problem = None, None
        if read_store and cpu_model:
            efficiency, rows, store_problem = _stored(store_path, cpu_model, gpu_info)
            notes += [store_problem] if store_problem else []
        return cls(cpu=hw.cpu if hw is not None else None, gpu=hw.gpu if hw is not None else None,
                   cpu_model=cpu_model, gpu_info=gpu_info, gpu_backends=tuple(installed_gpu_backends() or ()),
                   repack_default=scan.repack.default_repack if scan.repack is not None else 1, fit=fit,
                   ram_total_bytes=scan.ram_total_bytes,
                   efficiency=efficiency, rows=rows, public=_public(notes) if public else None,
                   build_label=_build_label(), notes=tuple(notes), fit_problem=problem, store_problem=store_problem,
                   cpu_problem=cpu_problem)


def _hardware(scan: MachineScan) -> tuple[HardwareContext | None, str]:
    """(this machine's hardware, "") or (None, why not: no CPU figures)."""
    try:
        return hardware_context(scan), ""
    except ProfileError as e:  # no CPU figures (the probe did not run, or failed)
        return None, str(e).removeprefix("this CPU has no probed figures (").removesuffix(")")


def _stored(store_path: str | Path | None, cpu_model: str, gpu_info: str
            ) -> tuple[StoreCalibration | None, tuple[ResultRow, ...], str | None]:
    """(this machine's stored-row efficiencies, its stored rows, why the store was not read), the store read only."""
    try:
        store = ResultStore.open_read_only(store_path)
    except (StoreError, OSError) as e:
        return None, (), f"results store not read: {e}"
    try:
        rows = tuple(r for r in store.recent_rows(STORED_ROWS) if r.cpu_info == cpu_model)
        return StoreCalibration(store, cpu_model, gpu_info), rows, None
    finally:
        store.close()


def _public(notes: list[str]) -> PublicGpuModel | None:
    try:
        return load_public_model()
    except (OSError, ValueError) as e:
        notes.append(f"no public GPU fit: {e}")
        return None


def _build_label() -> str:
    return f"installed llama-cpp-python {engine_version() or '?'}"
