"""Issue #41 point 8: the laptop under a test in every row: its power source, the GPU's enforced power limit and its
range, and whether the GPU's clocks were held back by power or temperature during the timed part; a row with those
flags is marked in the window's table as an unstable one is.

This VM has no battery and no NVIDIA GPU: the battery is a TEST DOUBLE of psutil's sensors_battery, the GPU one of
pynvml replaying a recording (tests/telemetry/nvml_replay.py)."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from app.telemetry import host, nvml
from app.telemetry.sampler import Reading
from app.worker.telemetry import TestTelemetry
from tests.telemetry.nvml_replay import replay


@pytest.fixture
def laptop_gpu() -> Iterator[None]:
    nvml.set_nvml_module(replay("rtx4060_laptop_linux"))
    yield
    nvml.set_nvml_module(None)


@pytest.mark.parametrize(("plugged", "source"), [(True, "ac"), (False, "battery"), (None, None)])
def test_the_power_source_is_what_the_os_says(monkeypatch: pytest.MonkeyPatch, plugged: bool | None,
                                               source: str | None) -> None:
    battery = SimpleNamespace(percent=71.0, secsleft=3600, power_plugged=plugged)  # TEST DOUBLE of psutil's
    monkeypatch.setattr(host.psutil, "sensors_battery", lambda: battery)
    assert host.power_source() == source
    monkeypatch.setattr(host.psutil, "sensors_battery", lambda: None)  # a desktop, a VM: no battery
    assert host.power_source() is None


def test_the_gpu_power_limit_and_its_range_in_watts(laptop_gpu: None) -> None:
    assert nvml.power_limits_w(0) == (80.0, 35.0, 115.0)
    assert nvml.power_limits_w(3) == (None, None, None)  # no such device: not available, no exception


def test_clock_event_words() -> None:
    assert nvml.clock_event_words(0x4 | 0x40) == "software power cap, hardware thermal slowdown"
    assert nvml.clock_event_words(0) == "" and nvml.clock_event_words(None) == ""
    assert not 0x1 & nvml.HELD_BACK_REASONS  # idle is not held back


def _reading(t_ns: int, mask: int | None) -> Reading:
    return Reading(t_ns=t_ns, throttle_reasons=mask)


def test_a_test_is_throttled_only_by_power_or_heat_inside_its_timed_part(laptop_gpu: None,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(host.psutil, "sensors_battery", lambda: SimpleNamespace(power_plugged=False))  # TEST DOUBLE
    t = TestTelemetry(lambda _e: None, interval_s=None)
    t.gpu = True
    t._windows = {"prefill": [(100, 200)], "decode": [(200, 400)]}
    idle_then_capped = [_reading(50, 0x4), _reading(150, 0x1), _reading(300, 0x4 | 0x20), _reading(500, 0x40)]
    got = t._laptop(idle_then_capped)
    assert got["throttled"] == 1 and got["throttle_reasons"] == "software power cap, software thermal slowdown"
    assert got["power_source"] == "battery"
    assert (got["gpu_power_limit_w"], got["gpu_power_limit_min_w"], got["gpu_power_limit_max_w"]) == (80.0, 35.0,
                                                                                                       115.0)
    clean = t._laptop([_reading(50, 0x4), _reading(150, 0x1), _reading(300, 0), _reading(500, 0x40)])
    assert clean["throttled"] == 0 and clean["throttle_reasons"] == ""  # caps outside the timed part do not count
    assert t._laptop([_reading(150, None)])["throttled"] is None  # no reading: not known, not "not throttled"
    t.gpu = False
    assert t._laptop(idle_then_capped)["throttled"] is None and t._laptop([])["gpu_power_limit_w"] is None


def test_the_window_marks_a_throttled_row_and_a_row_on_battery(qtbot) -> None:  # noqa: ANN001 - pytest-qt
    from PySide6.QtCore import Qt

    from app.gui.predictions import PredictionService
    from app.gui.results_model import ResultsModel
    from app.results.fields import WINDOW_FIELDS
    from app.results.row_types import ResultRow

    model = ResultsModel(PredictionService())
    rows = [ResultRow(test_index=0, status="ok", throttled=1, throttle_reasons="software power cap",
                      power_source="battery"),
            ResultRow(test_index=1, status="ok", throttled=0, power_source="ac")]
    model.update_rows(rows)
    col = next(i for i, f in enumerate(WINDOW_FIELDS) if f.header == "status")
    flagged, clean = (model.index(i, col) for i in (0, 1))
    assert flagged.data(Qt.ItemDataRole.DisplayRole) == "ok ⚠ throttled ⚠ on battery"
    assert "software power cap" in flagged.data(Qt.ItemDataRole.ToolTipRole)
    assert flagged.data(Qt.ItemDataRole.BackgroundRole) is not None
    assert clean.data(Qt.ItemDataRole.DisplayRole) == "ok"


def test_a_laptop_gpus_prediction_says_which_power_limit_it_assumes() -> None:
    from app.predict.answer import answer
    from app.predict.profiles import find_profile, load_profiles
    from app.predict.settings import PredictSettings
    from tests.predict.samples import make_facts

    laptop = find_profile("RTX 4060 Laptop", load_profiles())
    got = answer(make_facts(), laptop, PredictSettings(4096))
    assert any("ships at 35-115 W: these figures assume 115 W" in n for n in got.notes), got.notes
    desktop = answer(make_facts(), find_profile("RTX 4090", load_profiles()), PredictSettings(4096))
    assert not any("ships at" in n for n in desktop.notes)
