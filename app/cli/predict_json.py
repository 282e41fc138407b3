"""``predict --json``'s version-1 keys, kept beside version 2's for one version (deprecated: they go in version 3).

Version 1 (unversioned, before 65b2b46) gave the expected figures as flat keys (``expected_decode_tps``,
``expected_decode_tps_low``...); version 2 gives each figure as ``{value, kind, low, high, source, source_detail,
depth}`` (``decode``, ``decode_empty``, ``prefill``, ``ttft_ms_figure``, and ``at_context.decode``). A script written
for version 1 reads the same answer from the keys below. Version 1 had no measured figures: its ``expected_*``
keys hold the figure shown wherever it is not a ceiling (expected or measured), null where it is one, as before.
``efficiency_note`` (given in version 1 only when stored runs were not used) is not given: ``no_expected_decode``
says why a figure is a ceiling.
"""

from __future__ import annotations

from typing import Any

from app.predict.answer import Answer, Figure, FigureKind

#: The version-1 keys given beside version 2's (docs/commands.md lists them as deprecated).
V1_KEYS: tuple[str, ...] = (
    "efficiency_prefill", "efficiency_decode", "expected_prefill_tps", "expected_decode_tps",
    "expected_decode_empty_tps", "expected_ttft_ms", "expected_total_s", "expected_scenario",
    "expected_decode_tps_low", "expected_decode_tps_high", "expected_prefill_tps_low", "expected_prefill_tps_high",
    "expected_source", "calibrated_from",
)
V1_AT_CONTEXT_KEYS: tuple[str, ...] = (
    "decode_tps", "decode_kind", "decode_tps_low", "decode_tps_high", "decode_source", "decode_ceiling_tps",
    "decode_empty_tps", "decode_empty_kind",
)


def _shown(fig: Figure | None) -> Figure | None:
    """The figure where version 1 had an expected one: anything but a ceiling."""
    return fig if fig is not None and fig.kind != FigureKind.CEILING else None


def _efficiency(fig: Figure | None, ceiling_tps: float | None) -> float | None:
    """Version 1's stored-run efficiency: achieved ÷ ceiling, where the figure is one."""
    if fig is None or fig.kind != FigureKind.EFFICIENCY or not ceiling_tps:
        return None
    return fig.value / ceiling_tps


def v1_keys(got: Answer) -> dict[str, Any]:
    """The version-1 flat keys of ``got`` (see the module docstring)."""
    pred = got.prediction
    decode, empty, prefill = _shown(got.decode), _shown(got.decode_empty), _shown(got.prefill)
    scenario = got.scenario() if decode is not None and prefill is not None else None
    source = next((f.source for f in (decode, prefill) if f is not None), None)
    return {
        "efficiency_prefill": _efficiency(got.prefill, pred.prefill_ceiling_tps),
        "efficiency_decode": _efficiency(got.decode, pred.decode_ceiling_tps),
        "expected_prefill_tps": prefill.value if prefill is not None else None,
        "expected_decode_tps": decode.value if decode is not None else None,
        "expected_decode_empty_tps": empty.value if empty is not None else None,
        "expected_ttft_ms": scenario.ttft_s * 1000.0 if scenario is not None else None,
        "expected_total_s": scenario.total_s if scenario is not None else None,
        "expected_scenario": scenario.to_json_dict() if scenario is not None else None,
        "expected_decode_tps_low": decode.low if decode is not None else None,
        "expected_decode_tps_high": decode.high if decode is not None else None,
        "expected_prefill_tps_low": prefill.low if prefill is not None else None,
        "expected_prefill_tps_high": prefill.high if prefill is not None else None,
        "expected_source": source.text() if source is not None else "",
        "calibrated_from": source.detail if source is not None and source.kind == FigureKind.EFFICIENCY else "",
    }


def v1_at_context_keys(full: Answer) -> dict[str, Any]:
    """The version-1 keys of the ``at_context`` block (the answer at the whole context)."""
    decode = _shown(full.decode)
    return {
        "decode_tps": full.decode.value, "decode_kind": "expected" if decode is not None else "ceiling",
        "decode_tps_low": full.decode.low, "decode_tps_high": full.decode.high,
        "decode_source": decode.source.text() if decode is not None else "ceiling",
        "decode_ceiling_tps": full.prediction.decode_ceiling_tps, "decode_empty_tps": full.decode_empty.value,
        "decode_empty_kind": "expected" if _shown(full.decode_empty) is not None else "ceiling",
    }
