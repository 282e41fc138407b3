"""The hardware the window predicts for: this CPU (probed), the detected NVIDIA GPUs, and profiles/hardware.

Detection (:func:`app.telemetry.machine.scan_machine`: NVML, host facts and the CPU probe, then
:func:`app.doctor.report.run_doctor`: llama.cpp's backends and devices and the machine's GPUs) runs on its own task
thread; the list in the inspector shows "Detecting hardware…" until it answers, and the GPU line under it
(:class:`GpuFacts`) says what llama.cpp can offload to and the command that fixes a mismatch, which also goes to
the message area. The choice is remembered.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal

from app.doctor.report import DoctorReport, Level, run_doctor
from app.gui.panels.gpu_facts import GpuFacts
from app.gui.panels.inspector import InspectorPanel
from app.gui.profile_order import sorted_by_name
from app.gui.settings import Settings
from app.gui.tasks import Tasks
from app.predict.machine import cpu_profile_of, detected_gpu_profile
from app.predict.profiles import HardwareProfile, ProfileError, load_profiles
from app.telemetry.cpu_probe import load_cached_probe
from app.telemetry.machine import MachineScan, ProbeMode, scan_machine

CPU_LABEL = "This CPU (measured)"
DETECTING_LABEL = "Detecting hardware…"
SETTING_KEY = "hardware/profile"


def look_at_machine(probe: ProbeMode) -> tuple[MachineScan, DoctorReport]:
    """The task: the machine scan, then the doctor's two looks (a second or two: vulkaninfo, a child process)."""
    return scan_machine(probe), run_doctor()


class HardwareProfiles(QObject):
    """Fills the inspector's hardware list and says which profile is chosen."""

    message = Signal(str, str)  # (text, level)
    machineChanged = Signal()  # this CPU's profile or the list of known profiles changed (before the list is set)

    def __init__(self, inspector: InspectorPanel, settings: Settings, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.inspector = inspector
        self.settings = settings
        self.tasks = Tasks(self, max_workers=1)
        self.profiles: list[HardwareProfile] = []  # from profiles/hardware and the user's folder
        self.detected: list[tuple[str, HardwareProfile]] = []  # (label, profile) per recognised GPU
        self.cpu: HardwareProfile | None = None  # this CPU, from the probe
        self.probe_done = False  # no CPU probe is running or about to run
        self.ready = False  # detection has answered
        self.doctor: DoctorReport | None = None  # what llama.cpp can use and what the machine has
        self.scan: MachineScan | None = None  # the last machine scan (the expected figures' fits are keyed by it)
        self.gpu_facts = GpuFacts(inspector)
        inspector.layout().insertWidget(1, self.gpu_facts)  # under the hardware list and its settings
        self._wanted = ""
        self.inspector.profile_combo.activated.connect(self._chosen)

    @property
    def cpu_bandwidth_gbps(self) -> float | None:
        return self.cpu.peak_bandwidth_gbps if self.cpu is not None else None

    def load(self) -> None:
        """Read the hardware profiles (a bad file is a warning, not a failure)."""
        try:
            self.profiles = load_profiles()
        except ProfileError as e:
            self.profiles = []
            self.message.emit(f"Hardware profiles could not be read: {e}", "warning")
        self._refresh()

    def start_detection(self, probe: bool) -> None:
        """Look at the machine in the background; ``probe``: measure this CPU if it has no cached figures."""
        try:
            cached = load_cached_probe()
        except Exception:  # noqa: BLE001 - an unreadable cache is measured again
            cached = None
        if cached is not None or not probe:
            self.probe_done = True
        self.tasks.submit(look_at_machine, self._detected, ProbeMode.RUN if probe else ProbeMode.CACHED)

    def reprobe(self) -> None:
        """Measure this CPU again (Tools → Measure this CPU again): the new figures replace its one profile, and
        every row measured here is predicted with them (:meth:`PredictionService.hardware_of`)."""
        self.probe_done = False
        self.message.emit("Measuring this CPU's bandwidth and compute again (a few seconds)…", "info")
        self.tasks.submit(look_at_machine, self._reprobed, ProbeMode.REFRESH)

    def _reprobed(self, found: tuple[MachineScan, DoctorReport] | None, err: BaseException | None) -> None:
        self.detected.clear()  # _detected adds the GPUs again
        before = self.cpu_bandwidth_gbps
        self._detected(found, err)
        after = self.cpu_bandwidth_gbps
        if err is None and after is not None:
            was = f" (was {before:.1f})" if before is not None else ""
            self.message.emit(f"This CPU measured again: {after:.1f} GB/s{was}; its one profile now uses it.", "info")

    def _detected(self, found: tuple[MachineScan, DoctorReport] | None, err: BaseException | None) -> None:
        self.probe_done = True
        self.ready = True
        if err is not None or found is None:
            self.message.emit(f"Hardware detection failed: {err}", "warning")
            self.gpu_facts.show_error(str(err))
            return
        scan, self.doctor = found
        self.scan = scan
        self._show_doctor(self.doctor)
        for gpu in scan.gpus:  # the rule predict and choose take: NVML name and memory, else NVML's figures
            prof, why = detected_gpu_profile(gpu, self.profiles)
            if prof is not None:
                self.detected.append((f"Detected GPU: {prof.name}", prof))
            if why:  # figures from NVML rather than a profile's, or none: worth a profile in the user dir
                self.message.emit(why, "warning")
        if scan.probe is not None:
            try:
                self.cpu = cpu_profile_of(scan, "This CPU")
            except ValueError:
                self.cpu = None
        elif scan.probe_error:
            self.message.emit(f"The CPU probe failed: {scan.probe_error}", "warning")
        self._refresh()

    def _show_doctor(self, report: DoctorReport) -> None:
        """The GPU line, and each fix (a GPU this llama.cpp cannot use) as a warning with its command."""
        self.gpu_facts.show_report(report)
        for a in report.advice:
            if a.level is Level.FIX:
                self.message.emit(f"{a.text}. Run `{a.command}`, then restart.", "warning")
            elif a.level is Level.ERROR:
                self.message.emit(a.text, "warning")

    def known(self) -> list[HardwareProfile]:
        """Every profile a measured row may name: the detected GPUs, this CPU and the profile files."""
        return [p for _label, p in self.detected] + ([self.cpu] if self.cpu is not None else []) + self.profiles

    def _refresh(self) -> None:
        self.machineChanged.emit()
        items: list[tuple[str, HardwareProfile | None]] = list(self.detected)
        if self.cpu is not None:
            items.append((CPU_LABEL, self.cpu))
        if not self.ready:
            items.insert(0, (DETECTING_LABEL, None))
        items += [(p.name, p) for p in sorted_by_name(self.profiles)]  # by name, numbers by value
        labels = [label for label, _ in items]
        wanted = self._wanted or str(self.settings.value(SETTING_KEY, "") or "")
        if wanted not in labels:
            wanted = labels[0] if labels else ""
        self.inspector.set_profiles(items, wanted or None)

    def choose(self, query: str) -> bool:
        """Select (and remember) the first profile whose name contains ``query``."""
        if self.inspector.select_profile(query):
            self._wanted = self.inspector.profile_combo.currentText()
            return True
        return False

    def _chosen(self, _index: int) -> None:
        """The user picked a profile: remember it."""
        self._wanted = self.inspector.profile_combo.currentText()
        self.settings.set_value(SETTING_KEY, self._wanted)

    def shutdown(self) -> None:
        self.tasks.shutdown()
