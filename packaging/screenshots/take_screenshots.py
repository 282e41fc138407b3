"""The README's screenshots: the main window after a stored two-model run, the compare view and the chooser, on a
laptop's 1366×768 screen and a desktop's 1920×1080, light and dark, with the inspector on a laptop GPU (so the
what-if lines show beside the CPU's predictions).

Each screen size runs in a process of its own on Qt's offscreen platform with a screen of that size, so every
window opens as it would there (fitted to the screen's available geometry), not at a size the script forces.

Usage (a results store holding a two-model run, e.g. ``gguf-bench run -m A.gguf -m B.gguf --sweep quick``)::

    GGUF_WORKBENCH_DATA_DIR=DIR .venv/bin/python packaging/screenshots/take_screenshots.py RUN_ID OUT_DIR \\
        [--profile "RTX 4060 Laptop"] [--sizes 1366x768,1920x1080] [--themes light,dark]

Writes ``main-window-WxH-THEME.png``, ``compare-WxH-THEME.png`` and ``chooser-WxH-THEME.png``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SIZES = "1366x768,1920x1080"
THEMES = "light,dark"


def _spin(app: object, seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        app.processEvents()  # type: ignore[attr-defined]
        time.sleep(0.01)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_id")
    ap.add_argument("out_dir")
    ap.add_argument("--profile", default="RTX 4060 Laptop")
    ap.add_argument("--ctx", type=int, default=8192, help="the chooser's context (default 8192)")
    ap.add_argument("--sizes", default=SIZES, help=f"screens, WxH,... (default {SIZES})")
    ap.add_argument("--themes", default=THEMES, help=f"themes (default {THEMES})")
    ap.add_argument("--one-size", help=argparse.SUPPRESS)  # the per-screen child process
    return ap.parse_args(argv)


def shoot_one_screen(args: argparse.Namespace, width_px: int, height_px: int) -> int:
    """In this process: every picture for one screen size, each theme in turn."""
    from app.gui.top_level import offscreen_screen

    os.environ["QT_QPA_PLATFORM"] = offscreen_screen(width_px, height_px, Path(tempfile.mkdtemp()))
    from PySide6.QtWidgets import QApplication

    import app.gui  # noqa: F401 - the PySide6 guard first
    from app.gui.main_window import MainWindow
    from app.model import library as ml
    from app.results.store import ResultStore

    qapp = QApplication.instance() or QApplication(sys.argv[:1])
    win = MainWindow(restore=False, probe=False)
    win.show()
    while not (win.hardware.ready and not win.tasks.pending):
        _spin(qapp, 0.1)
    with ResultStore() as store:
        models = list(dict.fromkeys(str(r.model_path) for r in store.rows(args.run_id)))
    win.library.add_entries([ml.entry_for_file(m, "recent") for m in models if m not in win.library.paths()])
    win.library.select_paths(models)
    win.choose_profile(args.profile)
    if not win.open_run(args.run_id):
        print(f"no run {args.run_id} in {os.environ.get('GGUF_WORKBENCH_DATA_DIR', 'the data dir')}",
              file=sys.stderr)
        return 1
    out = Path(args.out_dir)
    size = f"{width_px}x{height_px}"
    cmp = win.show_compare(runs=[args.run_id])
    chooser = win.show_chooser()
    chooser.hw.setCurrentText(args.profile)
    chooser.ctx.setValue(args.ctx)
    chooser.start()
    deadline = time.monotonic() + 180
    while chooser.report is None and time.monotonic() < deadline:
        _spin(qapp, 0.1)
    for theme_name in args.themes.split(","):
        win.set_theme(theme_name)
        if chooser.report is not None:
            chooser.show_report(chooser.report)  # its plots again in this theme's colours
        for _ in range(30):
            win.sweeps.tick(force=True)
            _spin(qapp, 0.05)
        cmp.refresh()
        _spin(qapp, 0.5)
        for name, widget in (("main-window", None), ("compare", cmp), ("chooser", chooser)):
            path = out / f"{name}-{size}-{theme_name}.png"
            ok = win.save_screenshot(str(path), widget)
            print(f"{'saved' if ok else 'could not save'} {path}")
    for w in (chooser, cmp, win):
        w.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.one_size:
        w, _, h = args.one_size.partition("x")
        return shoot_one_screen(args, int(w), int(h))
    Path(args.out_dir).mkdir(parents=True, exist_ok=True)
    rc = 0
    for size in args.sizes.split(","):
        cmd = [sys.executable, __file__, args.run_id, args.out_dir, "--profile", args.profile, "--ctx",
               str(args.ctx), "--themes", args.themes, "--one-size", size]
        env = {k: v for k, v in os.environ.items() if k != "QT_QPA_PLATFORM"}
        rc = subprocess.run(cmd, cwd=ROOT, env=env, check=False).returncode or rc
    return rc


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
