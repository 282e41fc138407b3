"""Calibrate: measure this machine on a ladder of small synthetic models and fit it (``gguf-bench calibrate``,
the window's Sweep → Calibrate this machine…).

``ladder`` writes the ladder, runs it through sweep sessions and fits the rows; ``synth_models`` writes runnable
GGUF models of any shape and weight type. The fitted model itself (what a fit predicts, how it is saved) lives in
app.predict (``calibration_fit``, ``fitted_model``, ``workload``, ``calibration_store``), because every
prediction reads it; the types its views show are named here.
"""

from app.predict.machine_fit.calibration_fit import MachineFit
from app.predict.machine_fit.fitted_model import FitError, FitPoint, PhaseFit

__all__ = ["FitError", "FitPoint", "MachineFit", "PhaseFit"]
