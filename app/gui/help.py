"""Help → Keyboard shortcuts, Where your data lives, How speed works: prefill and decode, About.

Each is a short page in one dialog (a text browser; Esc or Ctrl+W closes it). The shortcuts page is made from the
window's own menus, so it lists what the keys do now; the data page names the folders this session uses (the
environment variables that move them included); the physics page says in a screen what the plots and the
inspector draw (the full account is the repository's docs/predictions.md).
"""

from __future__ import annotations

import importlib.metadata
import os
from html import escape
from pathlib import Path

import platformdirs
from PySide6.QtCore import QSettings
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QMenu, QMenuBar, QTextBrowser, QVBoxLayout, QWidget

from app.gui.top_level import add_close_keys, fit_to_screen
from app.paths import DataDirError, data_dir

#: Keys that no menu lists: in the plots, tables and windows.
OTHER_KEYS: tuple[tuple[str, str], ...] = (
    ("Esc, Ctrl+W", "close the chooser, compare, calibration and help windows"),
    ("Tab, then Space", "reach a plot's \"log\" button and switch its log scale"),
    ("Click / Ctrl+click a point", "select its test's row in the results (Ctrl: add or take away); every plot "
                                  "highlights it"),
    ("Hover a point or a line", "read its figures: a measured point's test and settings, a predicted line's value "
                                "where the mouse is"),
    ("Click a legend's sample", "hide or show that series; \"▸ legend\" opens a folded legend"),
    ("Arrow keys in a table", "move between rows (the chooser's command follows the selected file)"),
)

PHYSICS_HTML = """
<h3>How speed works: prefill and decode</h3>
<p>A request to a language model runs in two phases, and they are limited by different parts of the machine.</p>
<p><b>Prefill</b> reads the whole prompt at once: every weight is multiplied against every prompt token, about
2&nbsp;×&nbsp;parameters floating-point operations per token, in large batches. It is <b>compute-bound</b>: its
speed (tokens/s) is set by how many operations the CPU or GPU does per second. The time it takes is the
<b>time to first token (TTFT)</b> = prompt tokens ÷ prefill speed; it grows with the prompt.</p>
<p><b>Decode</b> makes the answer one token at a time, and every token reads <b>all the weights</b> (a
mixture-of-experts model: its active experts) and the <b>KV cache</b> of every token before it. It is
<b>memory-bandwidth-bound</b>: decode speed ≤ bandwidth ÷ (weight bytes + KV-cache bytes at that depth). That is
why a smaller quantization decodes faster, why decode slows as the context fills (the KV cache read per token
grows with it), and why a GPU with its fast memory decodes many times faster than a CPU.</p>
<p>A request's wall time ≈ prompt ÷ prefill speed + answer tokens ÷ decode speed (the scenario panel). A chat
(short prompt, long answer) is mostly decode; retrieval over long documents (long prompt) is mostly prefill.</p>
<p><b>Memory.</b> A model fits where weights + KV cache (grows with the context) + compute buffers fit the device;
otherwise layers stay in system RAM (a partial offload, <code>-ngl</code>), and every token then also crosses the
slower memory.</p>
<p><b>What the figures are.</b> A <i>ceiling</i> (dashed lines) is the most the hardware allows by the formulas
above. An <i>expected</i> figure (dash-dot, with a band) is what such hardware does in practice, learned from
measurements: this machine's calibration (Sweep → Calibrate this machine…), its stored runs, or public llama-bench
results for GPUs you do not have. <i>Measured</i> figures are points, from the runs on this machine. Each figure
says which it is and where it comes from (the inspector, a table cell's tooltip).</p>
<p>The whole account (formulas, the sources of every figure, their bands) is in the repository's
<code>docs/predictions.md</code>.</p>
"""


def _rows(rows: list[tuple[str, str]]) -> str:
    cells = "".join(f"<tr><td style='padding-right:14px'><b>{escape(k)}</b></td><td>{escape(v)}</td></tr>"
                    for k, v in rows)
    return f"<table cellspacing='0' cellpadding='2'>{cells}</table>"


def menu_shortcuts(menu_bar: QMenuBar) -> list[tuple[str, str]]:
    """(keys, "Menu → action") for every menu action that has a shortcut, in menu order."""
    out: list[tuple[str, str]] = []

    def walk(menu: QMenu, path: str) -> None:
        for a in menu.actions():
            title = a.text().replace("&", "")
            if a.menu() is not None:
                walk(a.menu(), f"{path} → {title}")
            elif not a.isSeparator() and not a.shortcut().isEmpty():
                out.append((a.shortcut().toString(), f"{path} → {title.rstrip('…')}"))

    for top in menu_bar.actions():
        if top.menu() is not None:
            walk(top.menu(), top.text().replace("&", ""))
    return out


def shortcuts_html(menu_bar: QMenuBar) -> str:
    return ("<h3>Keyboard shortcuts</h3>" + _rows(menu_shortcuts(menu_bar))
            + "<h4>In the plots, tables and windows</h4>" + _rows(list(OTHER_KEYS))
            + "<p>Alt and a menu's underlined letter opens that menu; the arrow keys move in it.</p>")


def data_locations(settings: QSettings | None = None) -> list[tuple[str, str]]:
    """(what, where) for everything the workbench keeps on this machine, in this session."""
    try:
        base = data_dir()
    except DataDirError as e:
        return [("Data folder", f"cannot be used: {e}")]
    out = [
        ("Data folder", str(base) + ("  (GGUF_WORKBENCH_DATA_DIR)" if os.environ.get("GGUF_WORKBENCH_DATA_DIR")
                                     else "")),
        ("Results store", str(base / "results.sqlite3") + "  (every run; gguf-bench history and export read it)"),
        ("Runs' event logs", str(base / "runs") + "  (per-token data, telemetry: re-opened with a past run)"),
        ("Worker logs", str(base / "logs")),
        ("This machine's calibration", str(base / "calibration")),
        ("CPU probe", str(base / "cpu_probe.json")),
        ("Your hardware profiles", str(base / "hardware") + "  (a .toml file there adds a GPU to every list)"),
    ]
    if settings is not None:
        out.append(("Window settings", settings.fileName()))
    cache = os.environ.get("GGUF_WORKBENCH_CACHE_DIR")
    out.append(("Cache (the public fit, made again when missing)",
                (cache + "  (GGUF_WORKBENCH_CACHE_DIR)") if cache else
                str(Path(platformdirs.user_cache_dir("gguf-workbench", appauthor=False)))))
    return out


def data_html(settings: QSettings | None = None) -> str:
    return ("<h3>Where your data lives</h3>" + _rows(data_locations(settings))
            + "<p>Model files stay where they are: the library only lists them. Set GGUF_WORKBENCH_DATA_DIR to keep "
              "everything in another folder (a portable install, a test).</p>")


def about_html() -> str:
    try:
        version = importlib.metadata.version("gguf-workbench")
    except importlib.metadata.PackageNotFoundError:
        version = "(not installed as a package)"
    return (f"<h3>GGUF Workbench {escape(version)}</h3><p>Benchmarks GGUF models through llama.cpp, beside what "
            "the hardware allows (ceilings) and what it is expected to do; helps choose a quantization for a GPU "
            "and a context.</p><p>The same runs from the command line: <code>gguf-bench --help</code>.</p>")


class HelpDialog(QDialog):
    """One help page at a time (:meth:`show_page`)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("GGUF Workbench — help")
        self.browser = QTextBrowser(self)
        self.browser.setOpenExternalLinks(False)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        buttons.rejected.connect(self.close)
        lay = QVBoxLayout(self)
        lay.addWidget(self.browser, 1)
        lay.addWidget(buttons)
        fit_to_screen(self, 760, 640)
        add_close_keys(self)

    def show_page(self, title: str, html: str) -> None:
        self.setWindowTitle(f"GGUF Workbench — {title}")
        self.browser.setHtml(html)
        self.show()
        self.raise_()
        self.activateWindow()


def help_actions(window: QWidget, menu_bar: QMenuBar, settings: QSettings | None,
                 dialog: HelpDialog) -> list[QAction]:
    """The Help menu's actions (F1: the shortcuts)."""
    pages = (
        ("Keyboard shortcuts", "F1", lambda: shortcuts_html(menu_bar)),
        ("Where your data lives", None, lambda: data_html(settings)),
        ("How speed works: prefill and decode", None, lambda: PHYSICS_HTML),
        ("About GGUF Workbench", None, about_html),
    )
    actions = []
    for title, keys, html in pages:
        a = QAction(f"{title}…", window)
        if keys:
            a.setShortcut(keys)
        a.triggered.connect(lambda _c=False, t=title, h=html: dialog.show_page(t, h()))
        window.addAction(a)
        actions.append(a)
    return actions

