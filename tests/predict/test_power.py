"""A laptop GPU's power limit and power source as inputs (issue #53 item 5): app/predict/power.py scales prefill by
the cited sweeps and the part's boost-clock range, keeps decode with its band reaching down to the sweeps' decode, and
every figure says which state it assumes."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest

from app.calibrate.synth_models import SynthShape, write_synth_model
from app.model.facts import ModelFacts
from app.model.gguf_facts import read_model_facts
from app.predict.answer import answer
from app.predict.power import (
    PowerError,
    as_read,
    check_power_state,
    load_power_sweeps,
    parse_power_sweeps,
    power_scale,
    power_sweeps,
    with_power_state,
)
from app.predict.profiles import find_profile, load_profiles
from app.predict.settings import PredictSettings
from tests.predict.answer_helpers import StandInFit, fixed, machine_of


@pytest.fixture(scope="module")
def dense(tmp_path_factory: pytest.TempPathFactory) -> ModelFacts:
    path = tmp_path_factory.mktemp("dense") / "dense.gguf"
    return read_model_facts(write_synth_model(path, SynthShape(384, 6, "Q8_0", gqa=2)))


@pytest.fixture(scope="module")
def laptop():  # noqa: ANN201
    return find_profile("RTX 4060 Laptop", load_profiles())


def _sweep_at(phase: str, share: float) -> list[float]:
    return [s.at(share) for s in power_sweeps() if s.phase == phase]


def test_the_shipped_sweeps_read_as_shares_of_board_power() -> None:
    sweeps = load_power_sweeps()
    prefill = [s for s in sweeps if s.phase == "prefill"]
    # LLM Garage's RTX 3090: 5941 tok/s at 200 W of 9893 at 350 W; its TTFT column is a time: 1178 / 1725 ms
    assert prefill[0].at(200 / 350) == pytest.approx(5941 / 9893)
    assert prefill[1].at(200 / 350) == pytest.approx(1178 / 1725)
    assert prefill[0].at(1.0) == 1.0 and prefill[0].at(0.1) == pytest.approx(1390 / 9893)  # held at the ends
    assert all(s.url.startswith("https://") and s.source for s in sweeps)


@pytest.mark.parametrize(("doc", "says"), [
    ({}, "no prefill sweep"),
    ({"sweep": [{"gpu": "X", "board_power_w": 100, "phase": "idle", "points": [[100, 1], [50, 1]],
                 "source": "s", "url": "u"}]}, "phase must be prefill or decode"),
    ({"sweep": [{"gpu": "X", "board_power_w": 100, "phase": "prefill", "points": [[100, 1]], "source": "s",
                 "url": "u"}]}, "at least two points"),
    ({"sweep": [{"gpu": "X", "board_power_w": 90, "phase": "prefill", "points": [[100, 1], [50, 1]],
                 "source": "s", "url": "u"}]}, "must be the board power"),
    ({"sweep": [{"gpu": "X", "board_power_w": 100, "phase": "prefill", "points": [[100, 1], [50, 2]],
                 "source": "s", "url": "u"}]}, "not a power sweep"),
    ({"sweep": [{"gpu": "X", "board_power_w": 100, "phase": "prefill", "points": [[100, 1], [50, "x"]],
                 "source": "s", "url": "u"}]}, "each point must be"),
])
def test_a_bad_sweep_table_is_refused_in_one_line(doc: dict[str, object], says: str) -> None:
    with pytest.raises(PowerError, match=says) as err:
        parse_power_sweeps(doc, "power_sweeps.toml")
    assert "\n" not in str(err.value) and str(err.value).startswith("power_sweeps.toml")


def test_an_unreadable_table_names_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "power_sweeps.toml"
    bad.write_text("[[sweep]\n", encoding="utf-8")
    with pytest.raises(PowerError, match="power_sweeps.toml: cannot be read"):
        load_power_sweeps(bad)


def test_60_w_on_an_rtx_4060_laptop_is_the_clock_line_and_the_sweeps_their_geometric_mean(laptop) -> None:
    scale = power_scale(replace(laptop, power_limit_set_w=60.0))
    assert scale is not None and scale.watts == 60.0 and scale.top_w == 115.0
    clock = (1470 + (60 - 35) / (115 - 35) * (2370 - 1470)) / 2370  # the profile's boost clocks at 35 and 115 W
    swept = _sweep_at("prefill", 60 / 115)
    assert scale.prefill == pytest.approx(math.sqrt(clock * sum(swept) / len(swept)))
    assert scale.prefill_low == pytest.approx(min(clock, *swept))
    assert scale.prefill_high == pytest.approx(max(clock, *swept))
    held = min(s.at(60 / 115) for s in power_sweeps() if s.phase == "decode" and s.lowest_share <= 60 / 115)
    assert (scale.decode, scale.decode_high) == (1.0, 1.0) and scale.decode_low == pytest.approx(held) and held < 1.0
    assert "60 W of RTX 4060 Laptop's 35-115 W" in scale.words and "llmgarage.ai" in scale.words
    assert power_scale(laptop) is None  # nothing asked: the top


def test_on_battery_takes_the_bottom_of_the_range_unless_a_limit_is_given_and_says_so(laptop) -> None:
    battery = power_scale(replace(laptop, on_battery=True))
    assert battery is not None and battery.watts == 35.0
    assert "on battery" in battery.words and "bottom of the part's range" in battery.words
    assert "held-out" in battery.words  # decode on battery: no sweep outside the check
    given = power_scale(replace(laptop, on_battery=True, power_limit_set_w=80.0))
    assert given is not None and given.watts == 80.0 and "bottom of the part's range" not in given.words


def test_a_state_the_part_cannot_be_in_is_refused_in_one_line(laptop) -> None:
    says = "--power-limit 20 W is outside what RTX 4060 Laptop runs at: 33-115 W .NVIDIA lists 35-115 W"
    with pytest.raises(PowerError, match=says):
        check_power_state(laptop, 20.0, False)
    with pytest.raises(PowerError, match="outside"):
        check_power_state(laptop, 140.0, False)
    desktop = find_profile("RTX 4090", load_profiles())
    with pytest.raises(PowerError, match="RTX 4090 is a desktop part"):
        check_power_state(desktop, None, True)
    check_power_state(desktop, 300.0, False)  # a desktop card's limit within the sweeps' reach
    with pytest.raises(PowerError, match="the published power sweeps reach down to 29% of 450 W"):
        check_power_state(desktop, 50.0, False)
    mac = find_profile("M2 Max", load_profiles())
    with pytest.raises(PowerError, match="not a discrete GPU"):
        with_power_state(mac, 30.0, False)
    assert with_power_state(laptop, None, False) is laptop
    check_power_state(laptop, 33.0, False)  # below NVIDIA's list, within the sweeps: a firmware's cap on battery


def test_this_machines_gpu_is_at_the_state_nvml_and_psutil_read(laptop) -> None:
    read = as_read(laptop, 140.0, "battery")  # a Dynamic Boost limit above the listed top is held at the top
    assert read.power_read_w == read.power_limit_set_w == 115.0 and read.on_battery and read.battery_read
    assert "NVML" in read.power_state_source
    assert as_read(laptop, None, None) is laptop
    desktop = as_read(find_profile("RTX 4090", load_profiles()), 400.0, "battery")  # a UPS, not a laptop battery
    assert not desktop.on_battery and desktop.power_limit_set_w == 400.0


def test_the_answer_at_60_w_and_on_battery_differs_in_prefill_and_decode_band_each_saying_why(dense: ModelFacts,
                                                                                              laptop) -> None:
    """TEST DOUBLE of a saved fit (answer_helpers), measured at an unknown limit (taken as the top): the answer's
    prefill follows the power state; decode keeps its value, its band reaching down where the sweeps do."""
    fit = StandInFit({"CUDA,CPU": fixed(60.0, prefill=3000.0)})
    s = PredictSettings(n_ctx=2048, n_prompt=512, n_gen=64)
    top = answer(dense, laptop, s, machine_of(laptop, fit=fit))
    assert any("ships at 35-115 W: these figures assume 115 W" in n for n in top.notes)
    for state in (replace(laptop, power_limit_set_w=60.0, power_state_source="given"),
                  replace(laptop, on_battery=True, power_state_source="given")):
        got = answer(dense, state, s, machine_of(state, fit=fit))
        scale = power_scale(state)
        assert scale is not None and got.prefill is not None and top.prefill is not None
        assert got.prefill.value == pytest.approx(top.prefill.value * scale.prefill)
        assert got.prefill.value < top.prefill.value
        assert got.prefill.low == pytest.approx(top.prefill.low * scale.prefill_low)  # type: ignore[operator]
        assert "power:" in got.prefill.source.detail
        assert got.decode.value == pytest.approx(top.decode.value)
        assert got.decode.low < top.decode.low  # type: ignore[operator]
        assert any(n.startswith("power (given): at ") for n in got.notes)
    measured_at_80 = replace(laptop, power_read_w=80.0, power_limit_set_w=80.0, battery_read=False)
    same = answer(dense, measured_at_80, s, machine_of(measured_at_80, fit=fit))
    assert same.prefill is not None and same.prefill.value == pytest.approx(top.prefill.value)  # measured so
    at_60 = replace(measured_at_80, power_limit_set_w=60.0)  # asked below what the fit was measured at: the ratio
    lower = answer(dense, at_60, s, machine_of(at_60, fit=fit))
    ratio = power_scale(at_60).prefill / power_scale(measured_at_80).prefill  # type: ignore[union-attr]
    assert lower.prefill is not None and lower.prefill.value == pytest.approx(top.prefill.value * ratio)
