"""Predicted columns for a measured row: ceilings, achieved fractions, effective bandwidth, memory.

Every measured number stands beside what physics allows on the hardware it ran on; with a calibration
(this machine's achieved ÷ ceiling, learned from other models) an "expected" figure stands beside it too.
"""

from __future__ import annotations

from typing import Any

from app.model.facts import ModelFacts
from app.model.facts_cache import FACTS, cached_facts
from app.model.gguf_facts import GGUFFileError
from app.predict.answer import Machine, answer
from app.predict.ceilings.offload import active_weight_bytes
from app.predict.device_split import device_split_columns
from app.predict.hardware_context import HardwareContext
from app.predict.settings import PredictSettings
from app.results.row_types import ResultRow


def _ratio(measured: Any, ceiling: float | None) -> float | None:
    if measured is None or not ceiling:
        return None
    return float(measured) / ceiling


def predicted_columns(row: ResultRow, facts: ModelFacts, hw: HardwareContext,
                      machine: Machine | None = None) -> dict[str, Any]:
    """The pred_* / *_achieved_frac / effective_bandwidth_gbps / expected_* columns for one row: the answer for the
    hardware it ran on (``hw``: its GPU when layers were offloaded, else its CPU) at its settings, on ``machine``
    (None: ceilings only). A row's expected figure is never its own measurement."""
    ngl_eff = row.n_gpu_layers_effective or 0
    profile = hw.for_row(ngl_eff)
    if row.n_prompt is None or row.n_gen is None:
        raise ValueError("the row holds no prompt or generated-token count")
    n_prompt, n_gen, depth = row.n_prompt, row.n_gen, row.n_depth or 0
    settings = PredictSettings.from_row(row, n_gpu_layers=ngl_eff)
    got = answer(facts, profile, settings, machine, measured=False)
    pred = got.prediction
    decode_tps = row.decode_tps
    kv_read = facts.kv_bytes_per_token(settings.type_k, settings.type_v) * (depth + n_prompt + n_gen / 2.0)
    decode, prefill = got.expected_decode, got.expected_prefill
    out: dict[str, Any] = {
        "model_ftype": facts.file_type,
        "hw_profile": profile.name,
        "pred_bandwidth_gbps": profile.peak_bandwidth_gbps,
        "pred_tflops": pred.tflops,  # the compute the prefill ceiling divided by (by weight type on a CPU)
        "pred_decode_ceiling_tps": pred.decode_ceiling_tps,
        "pred_prefill_ceiling_tps": pred.prefill_ceiling_tps if n_prompt else None,
        "pred_ttft_ms": pred.ttft_ms if n_prompt else None,
        "decode_achieved_frac": _ratio(decode_tps, pred.decode_ceiling_tps),
        "prefill_achieved_frac": _ratio(row.prefill_tps, pred.prefill_ceiling_tps) if n_prompt else None,
        "effective_bandwidth_gbps": (float(decode_tps) * (active_weight_bytes(facts, facts.tensor_bytes or None)
                                                           + kv_read) / 1e9
                                     if decode_tps is not None else None),
        "pred_weight_bytes": facts.weight_bytes,
        "pred_kv_bytes": pred.kv_bytes,
        "pred_compute_buffer_bytes": pred.compute_buffer_bytes,
        "pred_mem_bytes": facts.weight_bytes + pred.kv_bytes + pred.compute_buffer_bytes,
        "pred_needed_bytes": got.needed_bytes,
        "expected_decode_tps": decode.value if decode is not None else None,
        "expected_prefill_tps": prefill.value if prefill is not None and n_prompt else None,
        "calibrated_from": (decode.source.detail or decode.source.name) if decode is not None else "",
    }
    out.update(device_split_columns(row, facts, settings))
    return out


class RowPredictor:
    """Callable for SweepSession(extra_row=...): reads each model's facts once, never raises."""

    def __init__(self, hw: HardwareContext, machine: Machine | None = None) -> None:
        self.hw = hw
        self.machine = machine  # where expected figures come from (app.predict.answer)
        self._unreadable: set[str] = set()

    def prime(self, path: str, facts: ModelFacts) -> None:
        """Hand over facts already read, so nothing is parsed while a worker is measuring."""
        FACTS.put(path, facts)

    def facts(self, path: str) -> ModelFacts | None:
        """The model's facts from the shared cache; None (remembered) when the file cannot be read."""
        if path in self._unreadable:
            return None
        try:
            return cached_facts(path)
        except GGUFFileError:
            self._unreadable.add(path)
            return None

    def __call__(self, row: ResultRow) -> dict[str, Any]:
        facts = self.facts(row.model_path or "")
        if facts is None or row.n_prompt is None:
            return {}
        try:
            return predicted_columns(row, facts, self.hw, self.machine)
        except (ValueError, ZeroDivisionError) as e:
            return {"prediction_error": str(e)}
