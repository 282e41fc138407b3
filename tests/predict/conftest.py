"""Fixtures for the prediction tests."""

from __future__ import annotations

import pytest

from app.paths import HARDWARE_PROFILES_DIR
from app.predict.profiles import HardwareProfile, load_profiles


@pytest.fixture(scope="module")
def profiles() -> list[HardwareProfile]:
    return load_profiles([HARDWARE_PROFILES_DIR])
