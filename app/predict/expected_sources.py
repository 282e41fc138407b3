"""The one policy for where an expected figure comes from; rows, the window, ``predict`` and the chooser ask it.

For the hardware a prediction is for, in this order per phase (``predict`` applies the order):

1. **this machine's calibration fit** (``gguf-bench calibrate``) for the backend the test runs on: ``CPU`` with
   no layer offloaded, the GPU backend (``Vulkan,CPU``, ``CUDA,CPU``…) with every layer offloaded; for a
   placement split between the device and the host (partial ``-ngl``, ``-ncmoe``, ``-nkvo``), the device's
   full-offload figure and the CPU's own, composed by the bytes each reads (:mod:`app.predict.split_expected`),
   each device crossing at the cost this machine's split tests measured (:mod:`app.predict.crossing_fit`);
   never for hardware that is not this machine's, and for the CPU only at the thread count a default run uses
   (the fit does not record its threads; ``calibrate`` runs at the default count; a full offload's figures do not
   depend on the CPU threads);
2. **stored-row efficiency**: achieved ÷ ceiling of other models measured here on that backend, times the
   ceilings (this machine only), from stable rows not taken on a busy machine, at the thread count asked
   (:mod:`app.predict.store_efficiency`);
3. **the public llama-bench fit**, for a GPU profile, where neither of the above gives a figure.

Without any of them a prediction has ceilings only. Each source is loaded once per :class:`ExpectedSources`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from app.predict.calibration_fit import MachineFit
from app.predict.calibration_store import read_fit
from app.predict.crossing_fit import CrossingCost
from app.predict.hardware_context import backend_name
from app.predict.prediction import Efficiency, FittedExpectation
from app.predict.profiles import HardwareProfile
from app.predict.public_fit import PublicGpuModel, load_public_model
from app.predict.store_efficiency import StoreCalibration, fitted_expectation, threads_for
from app.results.store import ResultStore
from app.telemetry.llama_build import installed_gpu_backends


@dataclass(frozen=True)
class ExpectedInputs:
    """What ``predict`` takes to turn ceilings into expected figures, for one (hardware, model, backend)."""

    fitted: FittedExpectation | None = None
    efficiency: Efficiency | None = None
    efficiency_source: str = ""
    public: PublicGpuModel | None = None
    n_threads: int | None = None  # the CPU threads the expected figures are for (None: not this machine's)
    efficiency_note: str = ""  # why the stored rows gave no efficiency ("" when they did, or were not asked)
    host_fitted: FittedExpectation | None = None  # this machine's CPU fit: the host side of a split placement
    crossing: CrossingCost | None = None  # what a device crossing of a split costs here (None: assumed)

    def as_kwargs(self) -> dict[str, object]:
        """``predict()``'s keyword arguments."""
        return {"fitted": self.fitted, "efficiency": self.efficiency, "public": self.public,
                "host_fitted": self.host_fitted, "crossing": self.crossing}


def machine_backend(profile: HardwareProfile, row_backends: str | None = None) -> str:
    """The backend a test on ``profile`` runs (and a fit of it is keyed) on: ``CPU`` for a CPU profile; for a GPU,
    the row's own ``backends`` when known, else this build's GPU backend (``Vulkan,CPU``), else the vendor's."""
    if profile.kind == "cpu":
        return "CPU"
    if row_backends and row_backends != "CPU":
        return row_backends
    built = installed_gpu_backends() or []
    return f"{built[0]},CPU" if built else backend_name(profile)


@dataclass
class ExpectedSources:
    """This machine's fit, its stored-row efficiencies and the public GPU fit, each loaded once."""

    machine_fit: MachineFit | None = None
    store_efficiency: StoreCalibration | None = None
    public: PublicGpuModel | None = None
    notes: list[str] = field(default_factory=list)  # why a source is missing, for a status line
    fit_problem: str | None = None  # a saved fit that is there but not read (older form, damaged): one line

    @classmethod
    def load(cls, cpu_model: str, gpu_info: str = "", store: ResultStore | None = None, *,
             public: bool = True) -> ExpectedSources:
        """Load what exists for this machine (``cpu_model``, ``gpu_info`` as rows record them); never raises."""
        notes: list[str] = []
        fit, problem = read_fit(cpu_model, gpu_info) if cpu_model else (None, None)
        if problem is not None:
            notes.append(problem)
        elif fit is None:
            notes.append("this machine is not calibrated (Sweep → Calibrate this machine…, or gguf-bench calibrate)")
        eff = StoreCalibration(store, cpu_model, gpu_info) if store is not None and cpu_model else None
        model = None
        if public:
            try:
                model = load_public_model()
            except (OSError, ValueError) as e:
                notes.append(f"no public GPU fit: {e}")
        return cls(machine_fit=fit, store_efficiency=eff, public=model, notes=notes, fit_problem=problem)

    def fitted_backends(self) -> tuple[str, ...]:
        """The backends this machine's fit covers ("CPU", "Vulkan,CPU"…)."""
        return tuple(self.machine_fit.fits) if self.machine_fit is not None else ()

    def inputs(self, profile: HardwareProfile, *, this_machine: bool, model_filename: str = "", file_type: str = "",
               row_backends: str | None = None, n_threads: int | None = None) -> ExpectedInputs:
        """The sources a prediction on ``profile`` takes, by the policy in the module docstring.

        ``this_machine``: ``profile`` is this machine's CPU or GPU (rows measured here, the window's "This CPU").
        ``n_threads``: the CPU threads the prediction is for (None or 0: the count a default run uses here).
        """
        public = self.public if profile.kind != "cpu" else None
        if not this_machine:
            return ExpectedInputs(public=public)
        threads = threads_for(n_threads)
        backend = machine_backend(profile, row_backends)
        # The fit is taken at the default thread count; the threads matter only where the CPU runs the layers (a
        # full offload's CPU threads only schedule the device's work: lavapipe, too, runs on its own threads). A
        # split placement takes no fit whole: predict() composes the device's full-offload fit with the CPU's.
        at_default = threads == threads_for(None)
        fitted = (fitted_expectation(self.machine_fit, backend)
                  if at_default or profile.kind != "cpu" else None)
        host_fitted = (fitted_expectation(self.machine_fit, "CPU")
                       if profile.kind != "cpu" and at_default else None)
        eff, eff_source, note = (None, "", "")
        if self.store_efficiency is not None:
            eff, eff_source = self.store_efficiency(backend, model_filename, file_type, threads)
            if eff is None:
                note = self.store_efficiency.why_none(backend, model_filename, file_type, threads)
        crossing = (self.machine_fit.crossings.get(backend)
                    if self.machine_fit is not None and profile.kind != "cpu" else None)
        return ExpectedInputs(fitted=fitted, efficiency=eff, efficiency_source=eff_source, public=public,
                              n_threads=threads, efficiency_note=note, host_fitted=host_fitted, crossing=crossing)
