"""``gguf-workbench``: the desktop window. ``--demo-run --screenshot out.png`` runs the quick sweep and saves a picture.

Other flags: ``--compare-screenshot out.png`` (two short runs compared with the model's predicted curves),
``--replay events.jsonl`` (show a recorded event stream), ``--profile NAME`` (hardware for the predictions).
Without a display (no ``DISPLAY``/``WAYLAND_DISPLAY``) a screenshot run uses Qt's offscreen platform.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import replace
from pathlib import Path

EXIT_OK, EXIT_FAILED = 0, 1


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="gguf-workbench", description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", help="GGUF files to add to the library and select")
    ap.add_argument("--demo-run", action="store_true", help="run the selected preset at once (default: quick)")
    ap.add_argument("--sweep", help="preset to select (quick, standard, long-context, chat, rag)")
    ap.add_argument("--screenshot", help="with --demo-run or --replay: save the window as PNG when done, then exit")
    ap.add_argument("--compare-screenshot", help="run two short sweeps (1 and 2 threads), open the compare view "
                                                 "with them and the model's predicted curves, save it as PNG, exit")
    ap.add_argument("--replay", help="show a recorded event stream (JSONL) instead of running")
    ap.add_argument("--profile", help="hardware profile for the predictions, e.g. 'RTX 4060 Laptop'")
    ap.add_argument("--size", default="1600x1000", help="window size for screenshots, WxH")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    shot = args.screenshot or args.compare_screenshot
    headless = sys.platform.startswith("linux") and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
    if shot and headless:
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    elif headless and not os.environ.get("QT_QPA_PLATFORM"):
        print("gguf-workbench: no display found (neither DISPLAY nor WAYLAND_DISPLAY is set). Start it on a desktop, "
              "or run the same sweep with `gguf-bench run --sweep quick`, or save a picture with "
              "`gguf-workbench --demo-run --screenshot out.png`.", file=sys.stderr)
        return 2

    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from app.gui.main_window import MainWindow

    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("GGUF Workbench")
    app.setOrganizationName("gguf-workbench")
    _set_icon(app)
    win = MainWindow()
    if shot:
        w, _, h = args.size.partition("x")
        win.resize(int(w), int(h))
    if args.models:
        win.library.add_files([str(Path(m).expanduser().resolve()) for m in args.models])
    if args.sweep:
        win.editor.set_preset(args.sweep)
    if args.profile and not win.choose_profile(args.profile):
        print(f"gguf-workbench: no hardware profile matches {args.profile!r}", file=sys.stderr)
    win.show()
    status = {"rc": EXIT_OK}

    def finish(path: str | None, widget: object = None) -> None:
        if path:
            ok = win.save_screenshot(path, widget)
            print(f"gguf-workbench: {'saved' if ok else 'could not save'} {path}", file=sys.stderr)
            status["rc"] = EXIT_OK if ok else EXIT_FAILED
        app.quit()

    if args.replay:
        from app.gui.bridge import read_event_stream

        win.replay(read_event_stream(args.replay), os.path.basename(args.replay))
        if args.screenshot:
            _when_idle(win, lambda: finish(args.screenshot))
    elif args.compare_screenshot:
        _compare_demo(win, app, args.compare_screenshot, finish)
    elif args.demo_run:
        def done(outcome: object) -> None:
            if isinstance(outcome, str):
                status["rc"] = EXIT_FAILED
            if args.screenshot:
                _when_idle(win, lambda: finish(args.screenshot))

        win.sweepFinished.connect(done)
        QTimer.singleShot(300, win.run_sweep)
    rc = app.exec()
    if args.screenshot or args.compare_screenshot:
        return status["rc"]
    return rc


def _when_idle(win: object, then: object, timeout_s: float = 30.0) -> None:
    """Call ``then()`` once hardware detection and background predictions are done (pictures show them)."""
    import time

    from PySide6.QtCore import QTimer

    deadline = time.monotonic() + timeout_s

    def check() -> None:
        busy = win.tasks.pending or not win.hardware.ready  # type: ignore[attr-defined]
        if busy and time.monotonic() < deadline:
            QTimer.singleShot(100, check)
        else:
            QTimer.singleShot(300, then)  # type: ignore[arg-type]

    check()


def _compare_demo(win: object, app: object, path: str, finish: object) -> None:
    """Two quick sweeps that differ only in threads, then the compare view with both and the model file."""
    from PySide6.QtCore import QTimer

    from app.run.plan import SweepSpec

    runs: list[str] = []
    model = win.default_model  # type: ignore[attr-defined]
    base = SweepSpec(models=[model], n_prompt=[64, 128, 256], n_gen=[32], repetitions=2, name="compare-demo")

    def start(threads: int) -> None:
        win.start_tests(replace(base, n_threads=[threads]).tests(), f"threads-{threads}")  # type: ignore[attr-defined]

    def done(outcome: object) -> None:
        run_id = getattr(outcome, "run_id", None)
        if run_id:
            runs.append(run_id)
        if len(runs) == 1:
            QTimer.singleShot(200, lambda: start(2))
            return
        cmp = win.show_compare(runs=runs, models=[model])  # type: ignore[attr-defined]
        cmp.resize(1400, 820)
        _when_idle(win, lambda: (cmp.refresh(), QTimer.singleShot(300, lambda: finish(path, cmp))))

    win.sweepFinished.connect(done)  # type: ignore[attr-defined]
    QTimer.singleShot(300, lambda: start(1))


def _set_icon(app: object) -> None:
    from PySide6.QtGui import QIcon

    icon = Path(__file__).resolve().parents[2] / "packaging" / "gguf-workbench.svg"
    if icon.is_file():
        app.setWindowIcon(QIcon(str(icon)))  # type: ignore[attr-defined]


if __name__ == "__main__":
    sys.exit(main())
