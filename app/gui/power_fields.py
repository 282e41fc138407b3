"""A GPU's power state as two window fields, ``predict --power-limit W`` and ``--on-battery``: a limit in watts within
the part's range (its lowest value reads "top of range", or this machine's GPU "as read") and a battery box for a
laptop part. The inspector and the chooser window both take them, so a power state asked in either gives the figure
``predict`` and ``choose`` give for it (:func:`app.predict.answer.with_power_state`)."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import QCheckBox, QSpinBox, QWidget

from app.predict.answer import PowerError, lowest_power_w, top_power_w, with_power_state
from app.predict.profiles import HardwareProfile

#: Where a power state set in the window is said to come from (an answer's notes name it).
WINDOW_SOURCE = "the window's GPU power fields"


class PowerFields:
    """The two fields (``power``, ``battery``), made with ``parent``; ``changed`` is called when either changes."""

    def __init__(self, parent: QWidget, changed: Callable[[], None]) -> None:
        self.power = QSpinBox(parent)
        self.power.setSuffix(" W")
        self.power.setToolTip("The GPU's power limit (a laptop GPU ships across a range, e.g. 35-115 W; the figures "
                              "otherwise assume the top, or this machine's GPU as NVML reads it)")
        self.battery = QCheckBox("battery", parent)
        self.battery.setToolTip("A laptop on battery: its GPU's limit taken at the bottom of its range unless a "
                                "limit is set")
        self.power.valueChanged.connect(lambda _v: changed())
        self.battery.toggled.connect(lambda _b: changed())
        self.sync(None)

    def sync(self, profile: HardwareProfile | None) -> None:
        """The fields for ``profile``: its range, at "top of range" (or the limit read), the battery box for a
        laptop part as it was read; both off for no profile, a CPU or unified memory. Signals are held."""
        top = top_power_w(profile) if profile is not None and not profile.is_unified else None
        low = lowest_power_w(profile) if profile is not None and top is not None else None
        for w in (self.power, self.battery):
            w.blockSignals(True)
        self.power.setEnabled(top is not None and low is not None)
        self.battery.setEnabled(profile is not None and top is not None and profile.is_laptop_part)
        if top is not None and low is not None and profile is not None:
            self.power.setRange(max(int(low) - 1, 0), int(top))
            self.power.setSpecialValueText("top of range" if profile.power_limit_set_w is None else
                                           f"{profile.power_limit_set_w:g} W (as read)")
            self.power.setValue(self.power.minimum())
            self.battery.setChecked(profile.on_battery)
        else:
            self.power.setRange(0, 0)
            self.power.setSpecialValueText("—")
            self.battery.setChecked(False)
        for w in (self.power, self.battery):
            w.blockSignals(False)

    def watts(self) -> float | None:
        """The limit set (W); None: none set (the top, or the limit read), or the fields are off."""
        on = self.power.isEnabled() and self.power.value() > self.power.minimum()
        return float(self.power.value()) if on else None

    def on_battery(self) -> bool:
        return self.battery.isEnabled() and self.battery.isChecked()

    def applied(self, profile: HardwareProfile | None) -> HardwareProfile | None:
        """``profile`` at the state the fields ask (as it is where they ask nothing new, or are off)."""
        if profile is None or not self.power.isEnabled():
            return profile
        watts, battery = self.watts(), self.battery.isChecked()
        if watts is None and battery == profile.on_battery:
            return profile
        try:
            return with_power_state(profile, watts, battery, WINDOW_SOURCE)
        except PowerError:  # the range keeps to what the part runs at; a state it cannot be in is none asked
            return profile
