"""Issue #28: every window opens to fit the screen it is on; a laptop's 1366×768 shows the chooser's answer.

The windows are opened in a process of their own on an offscreen screen of the asked size (tests/gui/screen_probe.py);
:func:`fitted_size` is checked in this process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtCore import QRect

from app.gui.top_level import fitted_size

ROOT = Path(__file__).resolve().parents[2]
WINDOWS = ("main", "chooser", "compare", "remote", "history", "calibration", "help")


def _probe(width_px: int, height_px: int) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "QT_QPA_PLATFORM"}
    out = subprocess.run([sys.executable, "-m", "tests.gui.screen_probe", str(width_px), str(height_px)],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_wanted_size_shrinks_to_the_screen_and_never_grows() -> None:
    laptop = QRect(0, 0, 1366, 728)  # 1366×768 less a 40 px task bar
    w, h = fitted_size(1600, 1000, laptop)
    assert w <= 1366 and h + 40 <= 728  # room for the title bar
    assert fitted_size(700, 400, laptop) == (700, 400)


@pytest.mark.heavy  # a process of its own
@pytest.mark.parametrize("size", [(1366, 768), (1920, 1080)])
def test_every_window_opens_inside_the_screen(size: tuple[int, int]) -> None:
    got = _probe(*size)
    sx, sy, sw, sh = got["screen"]
    assert (sw, sh) == size
    for name in WINDOWS:
        x, y, w, h = got[name]
        assert sx <= x and sy <= y and x + w <= sx + sw and y + h <= sy + sh, f"{name} {got[name]} is off {size}"
    # the chooser's recommendation and its command are inside its window, not under the screen's edge
    assert got["chooser_answer_bottom"] <= got["chooser_height"]
    if size == (1920, 1080):
        assert got["main"][2] >= 1600 and got["plots_mode"] == "grid"  # a large screen is used: no tabs
