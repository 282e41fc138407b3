"""Run one of the workbench's entry points with the CPU probe taken as stored, even when it is stale.

``python benchmarks/stored_probe.py MODULE ARGS...`` runs ``python -m MODULE ARGS...`` in the current folder's
checkout, except that the machine scan reads the stored CPU probe instead of measuring again. A probe taken while
the machine was busy is measured again by every ``predict``, ``choose`` and window start (app/telemetry/
cpu_probe_record.py ``stale_reason``), seconds each: benchmarks/header_speed.py times what the command itself
costs, the probe aside, and says so. Not for anything but timing.
"""

from __future__ import annotations

import os
import runpy
import sys

sys.path.insert(0, os.getcwd())  # the checkout being timed (a baseline's, or this one)

import app.telemetry.machine as machine  # noqa: E402

_measure_or_read = machine._probe
machine._probe = lambda mode: _measure_or_read(machine.ProbeMode.CACHED)  # type: ignore[assignment]
module = sys.argv[1]
sys.argv = [module, *sys.argv[2:]]
runpy.run_module(module, run_name="__main__", alter_sys=True)
