"""Open every top-level window of the workbench on an offscreen screen of a given size and print their geometry.

Run as ``python -m tests.gui.screen_probe W H`` (tests/gui/test_screen_fit.py does): Qt's offscreen platform takes
its screen's size from a config file, which must be given before the application exists, hence a process of its
own. Prints one JSON object: the screen's available geometry and each window's frame geometry, and for the main
window whether its plots are in the grid or in tabs and the chooser's answer/command positions.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

from app.gui.top_level import offscreen_screen


def _rect(widget) -> list[int]:  # noqa: ANN001
    g = widget.frameGeometry()
    return [g.x(), g.y(), g.width(), g.height()]


def main(argv: list[str]) -> int:
    width_px, height_px = int(argv[0]), int(argv[1])
    folder = Path(tempfile.mkdtemp(prefix="screen-probe-"))
    os.environ["QT_QPA_PLATFORM"] = offscreen_screen(width_px, height_px, folder)
    os.environ.setdefault("GGUF_WORKBENCH_DATA_DIR", str(folder / "data"))
    from PySide6.QtWidgets import QApplication

    from app.gui.calibration_view import CalibrationView
    from app.gui.history import HistoryDialog
    from app.gui.main_window import MainWindow

    app = QApplication([])
    win = MainWindow(restore=False)
    win.show()
    for _ in range(20):
        app.processEvents()
    out: dict[str, object] = {}
    avail = app.primaryScreen().availableGeometry()
    out["screen"] = [avail.x(), avail.y(), avail.width(), avail.height()]
    out["main"] = _rect(win)
    out["plots_mode"] = win.plots.mode
    chooser = win.show_chooser()
    cmp = win.show_compare()
    remote = win.show_remote()
    history = HistoryDialog(win)
    history.show()
    calibration = CalibrationView(win)
    calibration.show()
    win.help_dialog.show_page("Keyboard shortcuts", "shortcuts")
    for _ in range(20):
        app.processEvents()
    out.update(chooser=_rect(chooser), compare=_rect(cmp), remote=_rect(remote), history=_rect(history),
               calibration=_rect(calibration), help=_rect(win.help_dialog))
    bottom = max(chooser.recommendation.mapTo(chooser, chooser.recommendation.rect().bottomLeft()).y(),
                 chooser.command.mapTo(chooser, chooser.command.rect().bottomLeft()).y())
    out["chooser_answer_bottom"] = bottom
    out["chooser_height"] = chooser.height()
    print(json.dumps(out))
    for w in (win.help_dialog, calibration, history, remote, cmp, chooser):
        w.close()
    win.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
