"""Calibration: this machine's efficiency (achieved ÷ ceiling, by phase and backend) learned from stored runs.

Once one model has been measured here, other model files can be predicted on this machine: the ceiling
from their GGUF facts times the efficiency learned from the others.
"""

from __future__ import annotations

import statistics
from typing import Any

from app.core.ceilings import Efficiency
from app.core.store import ResultStore


def efficiency_from_rows(rows: list[dict[str, Any]]) -> Efficiency | None:
    """Median achieved fraction per phase over ok rows; None when a phase has no measurement."""
    ok = [r for r in rows if r.get("status") == "ok"]
    dec = [float(r["decode_achieved_frac"]) for r in ok if r.get("decode_achieved_frac")]
    pre = [float(r["prefill_achieved_frac"]) for r in ok if r.get("prefill_achieved_frac")]
    if not dec or not pre:
        return None
    return Efficiency(prefill=statistics.median(pre), decode=statistics.median(dec))


class StoreCalibration:
    """Looks efficiencies up in the results store for this machine (same CPU and GPU), excluding the model itself."""

    def __init__(self, store: ResultStore, cpu_info: str, gpu_info: str = "", limit: int = 500) -> None:
        self.rows = [r for r in store.recent_rows(limit)
                     if r.get("cpu_info") == cpu_info and (r.get("gpu_info") or "") == gpu_info]
        self._cache: dict[tuple[str, str], tuple[Efficiency | None, str]] = {}

    def __call__(self, backends: str, model_filename: str) -> tuple[Efficiency | None, str]:
        key = (backends, model_filename)
        if key not in self._cache:
            rows = [r for r in self.rows if (r.get("backends") or "CPU") == backends
                    and r.get("model_filename") != model_filename]
            eff = efficiency_from_rows(rows)
            models = sorted({str(r.get("model_filename")) for r in rows if r.get("status") == "ok"})
            self._cache[key] = (eff, f"{len(rows)} rows of {', '.join(models)}" if eff else "")
        return self._cache[key]
