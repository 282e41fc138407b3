"""Light and dark: the window follows the system's palette (or the View menu's choice), plots and text included.

Nothing in the window hard-codes a colour that assumes a white page. Text colours with a meaning (muted, good,
warning, bad, the TTFT and decode hues) are :func:`ink` roles with a light and a dark value, each at least
:data:`TEXT_CONTRAST` against its page (WCAG AA for text); plot series are lightened on a dark page until they
have :data:`LINE_CONTRAST` (WCAG's figure for graphics). Static labels carry a ``role`` (:func:`set_role`) that
a switch colours again; rendered text (inspector, scenario) is rendered again by its panel.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

import shiboken6
from PySide6.QtGui import QColor, QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication, QWidget

THEMES = ("system", "light", "dark")
TEXT_CONTRAST = 4.5
LINE_CONTRAST = 3.0

#: role → (on a light page, on a dark page)
INK: dict[str, tuple[str, str]] = {
    "muted": ("#5f5f5f", "#a8a8a8"),
    "good": ("#1b7a2e", "#6fcf7f"),
    "warn": ("#9a5800", "#f0b050"),
    "bad": ("#b3261e", "#ff8a80"),
    "ttft": ("#9a5a00", "#f5b041"),
    "decode": ("#2a62b0", "#7fb2ff"),
    "link": ("#1a4f8b", "#8ab4f8"),
}

_DARK = {
    QPalette.ColorRole.Window: "#2b2b2b", QPalette.ColorRole.WindowText: "#e6e6e6",
    QPalette.ColorRole.Base: "#1e1e1e", QPalette.ColorRole.AlternateBase: "#262626",
    QPalette.ColorRole.Text: "#e6e6e6", QPalette.ColorRole.Button: "#353535",
    QPalette.ColorRole.ButtonText: "#e6e6e6", QPalette.ColorRole.BrightText: "#ff6b6b",
    QPalette.ColorRole.Highlight: "#3d6fb6", QPalette.ColorRole.HighlightedText: "#ffffff",
    QPalette.ColorRole.ToolTipBase: "#2b2b2b", QPalette.ColorRole.ToolTipText: "#e6e6e6",
    QPalette.ColorRole.PlaceholderText: "#9a9a9a", QPalette.ColorRole.Link: "#8ab4f8",
    QPalette.ColorRole.Light: "#4a4a4a", QPalette.ColorRole.Midlight: "#3c3c3c",
    QPalette.ColorRole.Mid: "#303030", QPalette.ColorRole.Dark: "#1a1a1a", QPalette.ColorRole.Shadow: "#000000",
}
_DISABLED_DARK = {QPalette.ColorRole.WindowText: "#7a7a7a", QPalette.ColorRole.Text: "#7a7a7a",
                  QPalette.ColorRole.ButtonText: "#7a7a7a"}

_system_palette: QPalette | None = None
_system_style: str | None = None
_current = "system"


def dark_palette() -> QPalette:
    pal = QPalette()
    for role, colour in _DARK.items():
        pal.setColor(role, QColor(colour))
    for role, colour in _DISABLED_DARK.items():
        pal.setColor(QPalette.ColorGroup.Disabled, role, QColor(colour))
    return pal


def light_palette() -> QPalette:
    from PySide6.QtWidgets import QStyleFactory

    style = QStyleFactory.create("Fusion")
    return style.standardPalette() if style is not None else QPalette()


def palette() -> QPalette:
    app = QGuiApplication.instance()
    return QGuiApplication.palette() if app is not None else QPalette()


def is_dark(pal: QPalette | None = None) -> bool:
    """A dark page: the palette's base colour is darker than middle grey."""
    return (pal or palette()).color(QPalette.ColorRole.Base).lightness() < 128


def ink(role: str, pal: QPalette | None = None) -> str:
    """The colour of text with this meaning on the current page (see :data:`INK`)."""
    light, dark = INK[role]
    return dark if is_dark(pal) else light


def mix(a: QColor | str, b: QColor | str, share_b: float) -> QColor:
    ca, cb = QColor(a), QColor(b)
    return QColor(*(round(x * (1 - share_b) + y * share_b) for x, y in
                    zip(ca.getRgb()[:3], cb.getRgb()[:3], strict=True)))


def tint(accent: str, share: float = 0.16, pal: QPalette | None = None) -> QColor:
    """A background that means ``accent`` on the current page: the page's base colour with some of it (cached:
    a table asks for it per cell and paint)."""
    return QColor(_tint((pal or palette()).color(QPalette.ColorRole.Base).rgb(), accent, share))


@lru_cache(maxsize=256)
def _tint(base_rgb: int, accent: str, share: float) -> int:
    return mix(QColor.fromRgb(base_rgb), accent, share).rgb()


def relative_luminance(c: QColor | str) -> float:
    def channel(v: int) -> float:
        s = v / 255
        return s / 12.92 if s <= 0.03928 else ((s + 0.055) / 1.055) ** 2.4

    q = QColor(c)
    return 0.2126 * channel(q.red()) + 0.7152 * channel(q.green()) + 0.0722 * channel(q.blue())


def contrast(a: QColor | str, b: QColor | str) -> float:
    """WCAG contrast ratio of two colours (1 to 21)."""
    la, lb = sorted((relative_luminance(a), relative_luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def series_colour(c: str, pal: QPalette | None = None) -> str:
    """A plot series colour, lightened on a dark page until it stands out from the plot's background."""
    return _series_colour(c, plot_background(pal), is_dark(pal))


@lru_cache(maxsize=512)
def _series_colour(c: str, page: str, dark: bool) -> str:
    out = QColor(c)
    share = 0.0
    while contrast(out, page) < LINE_CONTRAST and share < 0.9:
        share += 0.1
        out = mix(c, "#ffffff" if dark else "#000000", share)
    return out.name()


def plot_background(pal: QPalette | None = None) -> str:
    return (pal or palette()).color(QPalette.ColorRole.Base).name()


def plot_foreground(pal: QPalette | None = None) -> str:
    return (pal or palette()).color(QPalette.ColorRole.Text).name()


def set_role(widget: QWidget, role: str) -> QWidget:
    """Colour ``widget``'s text by ``role`` (see :data:`INK`), now and after a theme switch (through its own
    palette: an application style sheet would put every widget's painting through Qt's slower style-sheet
    style, CPU taken from a measurement)."""
    widget.setProperty("role", role)
    _keep_themed(widget)
    _apply_role(widget, role)
    return widget


#: The widgets :func:`set_role` or :func:`set_bar_role` coloured, by id: a theme switch recolours these (a walk of
#: QApplication.allWidgets() also met widgets other code was tearing down, and crashed in them).
_themed: dict[int, QWidget] = {}


def _keep_themed(widget: QWidget) -> None:
    key = id(widget)
    if key not in _themed:
        _themed[key] = widget
        widget.destroyed.connect(lambda *_: _themed.pop(key, None))


def _apply_role(widget: QWidget, role: str) -> None:
    pal = widget.palette()
    pal.setColor(QPalette.ColorRole.WindowText, QColor(ink(role)))
    widget.setPalette(pal)


def set_bar_role(bar: QWidget, role: str | None) -> None:
    """A progress bar's fill in the colour of ``role`` (a cancelled sweep's "warn", a failed one's "bad"), or the
    page's own highlight again (None); kept through a theme switch."""
    bar.setProperty("bar_role", role or "")
    _keep_themed(bar)
    _apply_bar_role(bar, role)


def _apply_bar_role(bar: QWidget, role: str | None) -> None:
    pal = bar.palette()
    app_pal = palette()
    for group in (QPalette.ColorGroup.Active, QPalette.ColorGroup.Inactive):
        pal.setColor(group, QPalette.ColorRole.Highlight,
                     QColor(ink(role)) if role in INK else app_pal.color(group, QPalette.ColorRole.Highlight))
    bar.setPalette(pal)


def apply_theme(app: QApplication, choice: str) -> None:
    """``system`` (the platform's palette and style), ``light`` or ``dark`` (Fusion with that palette)."""
    global _system_palette, _system_style, _current
    _current = choice if choice in THEMES else "system"
    if _system_palette is None:
        _system_palette = QPalette(app.palette())
        _system_style = app.style().name()
    if choice == "dark":
        app.setStyle("Fusion")
        app.setPalette(dark_palette())
    elif choice == "light":
        app.setStyle("Fusion")
        app.setPalette(light_palette())
    else:
        if _system_style:
            app.setStyle(_system_style)
        app.setPalette(_system_palette)
    for w in list(_themed.values()):
        if not shiboken6.isValid(w):
            continue
        role = w.property("role")
        if isinstance(role, str) and role in INK:
            _apply_role(w, role)
        bar_role = w.property("bar_role")
        if isinstance(bar_role, str):
            _apply_bar_role(w, bar_role or None)


def current_theme() -> str:
    """The choice last applied (``system`` before any)."""
    return _current


def restyle_plots(widgets: Iterable[QWidget]) -> int:
    """Give every pyqtgraph plot among ``widgets`` the current page's colours; how many were restyled."""
    import pyqtgraph as pg

    from app.gui.plots.items import style_plot

    n = 0
    for w in widgets:
        if isinstance(w, pg.PlotWidget):
            style_plot(w)
            n += 1
    return n
