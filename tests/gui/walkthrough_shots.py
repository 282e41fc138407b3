"""The new user's walkthrough as pictures (issue #44): the main window after a two-model run with a GPU what-if, the
same run re-opened from Past runs, the scenario panel, the chooser and the compare view, on the screen it runs on.

Run on a real X screen (Xvfb and a window manager give one), once per size and theme::

    Xvfb :99 -screen 0 1366x768x24 & DISPLAY=:99 openbox &
    DISPLAY=:99 python -m tests.gui.walkthrough_shots --theme dark --out /tmp/screens/1366-dark \\
        --run-log RUN.events.jsonl.gz MODEL_A.gguf MODEL_B.gguf

``--run-log`` is a kept event log of a sweep of the two models (a run's ``runs/<id>.events.jsonl.gz`` in the data
dir); it is fed to the window a batch per timer tick, as a live sweep's events are, then stored and re-opened.
Each picture is the whole screen (the window manager's frames included), named after what it shows. The data dir
is a fresh temporary one unless GGUF_WORKBENCH_DATA_DIR is set. Not a test: pytest does not collect it.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def _spin(app: Any, seconds: float, until: Any = None) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        app.processEvents()
        if until is not None and until():
            break
        time.sleep(0.02)


def _shot(app: Any, path: Path, widget: Any = None) -> None:
    """The whole screen (``widget``: only that widget) as PNG."""
    _spin(app, 0.8)
    pixmap = widget.grab() if widget is not None else app.primaryScreen().grabWindow(0)
    pixmap.save(str(path), "PNG")
    print(f"saved {path}", flush=True)


def _hover_decode(app: Any, win: Any, path: Path) -> None:
    """The real pointer (xdotool, where there is one) over the decode plot's first predicted line, 4,000 tokens in:
    the readout it shows, in the picture and on stdout."""
    import math
    import shutil
    import subprocess

    import numpy as np
    from PySide6.QtCore import QPointF

    dec = win.plots.decode
    if win.plots.mode == "tabs":
        win.plots.tabs.setCurrentIndex(0)
        _spin(app, 0.5)
    xs, ys = dec.data_of("pred", 0)
    if not len(xs) or shutil.which("xdotool") is None:
        return
    x = 4000.0
    y = float(np.interp(math.log10(x), np.log10(np.maximum(xs, 1e-9)), ys))
    scene = dec.plot.getViewBox().mapViewToScene(QPointF(math.log10(x) if dec.log_scale else x, y))
    at = dec.widget.viewport().mapToGlobal(dec.widget.mapFromScene(scene))
    for dx in (-3, 0):  # two moves: pyqtgraph passes on a move, not a position
        subprocess.run(["xdotool", "mousemove", str(at.x() + dx), str(at.y())], check=False)
        _spin(app, 0.4)
    print(f"hover readout: {dec.pointer.text!r}", flush=True)
    _shot(app, path)
    subprocess.run(["xdotool", "mousemove", "0", "0"], check=False)
    _spin(app, 0.3)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs=2)
    ap.add_argument("--run-log", required=True)
    ap.add_argument("--theme", default="light", choices=("light", "dark"))
    ap.add_argument("--out", required=True, help="folder for the pictures")
    ap.add_argument("--profile", default="RTX 4060 Laptop")
    ap.add_argument("--ctx", type=int, default=8192)
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("GGUF_WORKBENCH_DATA_DIR", tempfile.mkdtemp(prefix="walkthrough-"))

    from PySide6.QtWidgets import QApplication

    from app.gui import theme
    from app.gui.bridge import read_event_stream
    from app.gui.main_window import MainWindow
    from app.results.store import ResultStore
    from app.run.live import LiveRun

    app = QApplication(sys.argv[:1])
    theme.apply_theme(app, args.theme)
    models = [str(Path(m).resolve()) for m in args.models]
    events = read_event_stream(args.run_log)
    start = events[0]
    run_id = Path(args.run_log).name.split(".")[0]

    win = MainWindow(restore=False)
    win.show()
    _spin(app, 60, lambda: win.hardware.ready and not win.tasks.pending)
    win.library.add_files(models)
    win.choose_profile(args.profile)
    win.inspector.ctx.setValue(args.ctx)
    _spin(app, 30, lambda: all(m in win.predictor.facts for m in models) and not win.tasks.pending)

    # the sweep, live: its planned tests first, then its events a batch per timer tick, then its end
    queued = list(events[1:])
    win.bridge.drain = lambda: [queued.pop(0) for _ in range(min(len(queued), 40))]
    win.sweeps.session = LiveRun("walkthrough")
    win.sweeps.session.plan(list(start.tests))
    win.sweeps._reset_view()
    win.sweeps.tick(force=True)
    _spin(app, 120, lambda: not queued and not win.tasks.pending)
    win.sweeps.tick(force=True)
    win.sweeps.session.mark_finished()
    rows = win.sweeps.session.ordered_rows()
    with ResultStore.recover() as store:
        planned = [t.to_dict() if hasattr(t, "to_dict") else t for t in start.tests]  # typed specs, as a sweep's
        store.begin_run(run_id, sweep_name="walkthrough", tests=planned)
        for r in rows:  # typed rows (app.results.row_types)
            store.add_result(run_id, r.replace(run_id=run_id))
        store.finish_run(run_id, "finished")
        log = store.event_log_path(run_id)
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_bytes(Path(args.run_log).read_bytes())
    _spin(app, 30, lambda: not win.tasks.pending)
    win.sweeps.tick(force=True)
    _shot(app, out / "main-after-live-run.png")
    if getattr(win, "left_mode", "") == "tabs":  # a short screen: the scenario in its tab beside the inspector's
        win.left_tabs.setCurrentWidget(win.scenario_box)
        _shot(app, out / "main-scenario-tab.png")
    _shot(app, out / "scenario-panel.png", win.scenario.parentWidget())
    if getattr(win, "left_mode", "") == "tabs":
        win.left_tabs.setCurrentWidget(win.inspector_box)
    _hover_decode(app, win, out / "decode-hover-readout.png")
    folded = [p for p in win.plots.panels if p.legend.collapsed]
    for p in folded:  # every legend open, as a click on "▸ legend" opens it
        p.legend.toggle()
    _shot(app, out / "main-legends-open.png")
    for p in folded:
        p.legend.toggle()

    win.open_run(run_id)
    _spin(app, 30, lambda: not win.tasks.pending)
    win.sweeps.tick(force=True)
    _shot(app, out / "main-reopened-from-past-runs.png")

    chooser = win.show_chooser()
    chooser.set_sources(models)
    chooser.hw.setCurrentIndex(max(chooser.hw.findText(args.profile), 0))
    chooser.ctx.setValue(args.ctx)
    chooser.start()
    _spin(app, 120, lambda: chooser.report is not None and not chooser.evaluating)
    _shot(app, out / "chooser.png")
    chooser.close()

    cmp = win.show_compare(runs=[run_id], models=models[:1])
    _spin(app, 60, lambda: not win.tasks.pending)
    cmp.refresh()
    _shot(app, out / "compare.png")
    cmp.close()
    win.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
