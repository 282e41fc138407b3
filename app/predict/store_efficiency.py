"""Calibration: this machine's efficiency (achieved ÷ ceiling, by phase and backend) learned from stored runs.

Once one model has been measured here, other model files can be predicted on this machine: the ceiling
from their GGUF facts times the efficiency learned from the others.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from app.predict.calibration_fit import MachineFit
from app.predict.calibration_store import load_fit
from app.predict.prediction import Efficiency, FittedExpectation
from app.results.fields import RowStatus
from app.results.store import ResultStore


def efficiency_from_rows(rows: list[dict[str, Any]]) -> Efficiency | None:
    """Median achieved fraction per phase over ok rows; None when a phase has no measurement."""
    ok = [r for r in rows if r.get("status") == RowStatus.OK]
    dec = _fractions(ok, "decode_achieved_frac")
    pre = _fractions(ok, "prefill_achieved_frac")
    if not dec or not pre:
        return None
    return Efficiency(prefill=statistics.median(pre), decode=statistics.median(dec))


def _fractions(rows: list[dict[str, Any]], key: str) -> list[float]:
    """The positive finite numbers under ``key``; a stored row with anything else there is skipped."""
    out = []
    for r in rows:
        value = r.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < math.inf:
            out.append(float(value))
    return out


def fitted_expectation(fit: MachineFit | None, backend: str = "CPU") -> FittedExpectation | None:
    """``predict()``'s ``fitted`` hook from a saved fit of this machine; None when it has no fit on ``backend``."""
    if fit is None or backend not in fit.fits:
        return None
    return lambda facts, settings: fit.expected(facts, settings, backend)


class StoreCalibration:
    """Looks efficiencies up in the results store for this machine (same CPU and GPU), excluding the model itself."""

    def __init__(self, store: ResultStore, cpu_info: str, gpu_info: str = "", limit: int = 500) -> None:
        self.rows = [r for r in store.recent_rows(limit)
                     if r.get("cpu_info") == cpu_info and (r.get("gpu_info") or "") == gpu_info]
        self._cache: dict[tuple[str, str], tuple[Efficiency | None, str]] = {}
        self.machine_fit: MachineFit | None = load_fit(cpu_info, gpu_info)  # `gguf-bench calibrate`'s, if any

    def fitted(self, backend: str = "CPU") -> FittedExpectation | None:
        """Expected figures from this machine's saved fit on ``backend`` (None: not calibrated there); they take
        the place of the stored efficiencies in ``predict``."""
        return fitted_expectation(self.machine_fit, backend)

    def __call__(self, backends: str, model_filename: str, file_type: str = "") -> tuple[Efficiency | None, str]:
        """Efficiency from other models on this backend, preferring the same quantization type.

        The efficiency of a kernel depends on the weight type (on a CPU, Q8_0 dot products run far faster than
        Q4_1's), so rows of the same ``file_type`` are used when there are any.
        """
        key = (backends, model_filename, file_type)
        if key not in self._cache:
            others = [r for r in self.rows if (r.get("backends") or "CPU") == backends
                      and r.get("model_filename") != model_filename and r.get("status") == RowStatus.OK]
            same = [r for r in others if file_type and r.get("model_ftype") == file_type]
            rows = same or others
            eff = efficiency_from_rows(rows)
            models = sorted({str(r.get("model_filename")) for r in rows})
            kind = f"same type {file_type}" if same else "other types"
            self._cache[key] = (eff, f"{len(rows)} rows ({kind}) of {', '.join(models)}" if eff else "")
        return self._cache[key]
