"""How every top-level window opens and closes: a size that fits its screen, Esc and Ctrl+W to close.

A laptop at 1366×768 loses about 40 px to a task bar and 30 to the title bar; a window asked for 1600×1000 there
opens with its bottom under the screen's edge. Every top-level window of the workbench opens through
:func:`fit_to_screen`; a remembered geometry is clamped the same way (:func:`clamp_to_screen`), since the screen it
was saved on may be gone.
"""

from __future__ import annotations

import json
from pathlib import Path

from PySide6.QtCore import QRect
from PySide6.QtGui import QGuiApplication, QKeySequence, QShortcut
from PySide6.QtWidgets import QWidget

#: the share of the available height and width a window takes at most (room for its frame and title bar)
SCREEN_SHARE = 0.94
#: a window's frame and title bar, where the platform does not say (offscreen, before the first show)
FRAME_ALLOWANCE_PX = (16, 40)


def available_geometry(widget: QWidget) -> QRect:
    """The available geometry (less task bars) of the screen ``widget`` is on, else of the primary screen."""
    screen = widget.screen() if widget.screen() is not None else QGuiApplication.primaryScreen()
    return screen.availableGeometry() if screen is not None else QRect(0, 0, 1366, 728)


def fitted_size(wanted_w_px: int, wanted_h_px: int, available: QRect) -> tuple[int, int]:
    """``wanted`` shrunk to fit ``available`` with its frame (never grown)."""
    frame_w, frame_h = FRAME_ALLOWANCE_PX
    w = min(wanted_w_px, int(available.width() * SCREEN_SHARE) - frame_w)
    h = min(wanted_h_px, int(available.height() * SCREEN_SHARE) - frame_h)
    return max(w, 200), max(h, 150)


def fit_to_screen(window: QWidget, wanted_w_px: int, wanted_h_px: int) -> None:
    """Size ``window`` to ``wanted`` or to its screen, whichever is smaller, and centre it on that screen."""
    available = available_geometry(window)
    w, h = fitted_size(wanted_w_px, wanted_h_px, available)
    window.resize(w, h)
    window.move(available.x() + (available.width() - w) // 2,
                available.y() + max(0, (available.height() - h - FRAME_ALLOWANCE_PX[1]) // 2))


def clamp_to_screen(window: QWidget) -> None:
    """After a remembered geometry was restored: shrink and move the window back onto its screen if it is not."""
    available = available_geometry(window)
    geo = window.geometry()
    w, h = fitted_size(geo.width(), geo.height(), available)
    if (w, h) != (geo.width(), geo.height()) or not available.intersects(geo):
        fit_to_screen(window, w, h)


def add_close_keys(window: QWidget) -> None:
    """Esc and Ctrl+W (the platform's Close key) close ``window``, as they do a dialog."""
    wanted = {QKeySequence(QKeySequence.StandardKey.Close).toString(), "Esc", "Ctrl+W"} - {""}
    for keys in sorted(wanted):  # one shortcut per key: two on the same key are ambiguous and neither fires
        QShortcut(QKeySequence(keys), window, window.close)


def offscreen_screen(width_px: int, height_px: int, folder: Path) -> str:
    """A ``QT_QPA_PLATFORM`` value for Qt's offscreen platform with one screen of this size (its config file is
    written to ``folder``): scripted pictures and tests of a laptop's or a desktop's screen without a display.
    Set it before the QApplication exists."""
    config = {"screens": [{"name": f"screen-{width_px}x{height_px}", "x": 0, "y": 0, "width": width_px,
                           "height": height_px, "logicalDpi": 96, "logicalBaseDpi": 96, "dpr": 1}]}
    path = Path(folder) / f"screen_{width_px}x{height_px}.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return f"offscreen:configfile={path}"

