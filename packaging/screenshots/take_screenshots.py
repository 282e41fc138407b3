"""The README's screenshots: the main window after a stored two-model run, and the compare view, at 1600×1000 and
1366×768, with the inspector on a laptop GPU (so the what-if lines show beside the CPU's predictions).

Usage (a results store holding the run; xvfb-run for real X11 rendering, else offscreen)::

    GGUF_WORKBENCH_DATA_DIR=DIR xvfb-run -s "-screen 0 1920x1080x24" \\
        .venv/bin/python packaging/screenshots/take_screenshots.py RUN_ID OUT_DIR [--profile "RTX 4060 Laptop"]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

SIZES = ((1600, 1000, ""), (1366, 768, "-1366x768"))


def _spin(app: object, seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        app.processEvents()  # type: ignore[attr-defined]
        time.sleep(0.01)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("run_id")
    ap.add_argument("out_dir")
    ap.add_argument("--profile", default="RTX 4060 Laptop")
    args = ap.parse_args(argv)

    from PySide6.QtWidgets import QApplication

    import app.gui  # noqa: F401 - the PySide6 guard first
    from app.gui.main_window import MainWindow
    from app.model import library as ml
    from app.results.store import ResultStore

    qapp = QApplication.instance() or QApplication(sys.argv)
    win = MainWindow(restore=False, probe=False)
    win.show()
    while not (win.hardware.ready and not win.tasks.pending):
        _spin(qapp, 0.1)
    with ResultStore() as store:
        models = list(dict.fromkeys(str(r["model_path"]) for r in store.rows(args.run_id)))
    win.library.add_entries([ml.entry_for_file(m, "recent") for m in models if m not in win.library.paths()])
    win.library.select_paths(models)
    win.choose_profile(args.profile)
    if not win.open_run(args.run_id):
        print(f"no run {args.run_id}", file=sys.stderr)
        return 1
    out = Path(args.out_dir)
    cmp = win.show_compare(runs=[args.run_id])
    for w, h, suffix in SIZES:
        win.resize(w, h)
        for _ in range(30):
            win.sweeps.tick(force=True)
            _spin(qapp, 0.05)
        win.save_screenshot(str(out / f"main-window{suffix}.png"))
        cmp.resize(w, h)
        cmp.refresh()
        _spin(qapp, 0.5)
        win.save_screenshot(str(out / f"compare{suffix}.png"), cmp)
    win.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
