"""Issue #28: dark mode follows the palette everywhere, plots included, with text and lines that can be read."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QApplication, QLabel

from app.gui import theme
from app.gui.plots.items import make_plot
from app.gui.plots.style import COLORS, color


@pytest.fixture
def app_theme(qapp) -> Iterator[QApplication]:  # noqa: ANN001
    yield qapp
    theme.apply_theme(qapp, "system")  # the rest of the suite runs on the platform's palette


@pytest.mark.parametrize("pal", [theme.light_palette(), theme.dark_palette()], ids=["light", "dark"])
def test_text_roles_and_series_have_contrast_on_their_page(pal: QPalette) -> None:
    base = pal.color(QPalette.ColorRole.Base)
    for role in theme.INK:
        assert theme.contrast(theme.ink(role, pal), base) >= theme.TEXT_CONTRAST, role
    assert theme.contrast(pal.color(QPalette.ColorRole.Text), base) >= 7
    for c in COLORS:
        assert theme.contrast(theme.series_colour(c, pal), theme.plot_background(pal)) >= theme.LINE_CONTRAST, c


def test_a_switch_to_dark_restyles_plots_and_labels(app_theme: QApplication, qtbot) -> None:  # noqa: ANN001
    plot = make_plot("t", "x", "y")
    qtbot.addWidget(plot)
    label = theme.set_role(QLabel("muted text"), "muted")
    qtbot.addWidget(label)
    assert not theme.is_dark()
    light_muted = label.palette().color(QPalette.ColorRole.WindowText).name()
    light_bg = plot.backgroundBrush().color().name()
    theme.apply_theme(app_theme, "dark")
    assert theme.is_dark() and theme.current_theme() == "dark"
    assert theme.restyle_plots([plot, label]) == 1
    assert plot.backgroundBrush().color().name() == theme.plot_background() != light_bg
    assert plot.getPlotItem().getAxis("left").textPen().color().name() == theme.plot_foreground()
    assert label.palette().color(QPalette.ColorRole.WindowText).name() == theme.ink("muted")  # on a dark page
    assert app_theme.styleSheet() == ""  # no application style sheet: every widget would paint slower
    assert color(0) == theme.series_colour(COLORS[0])
    theme.apply_theme(app_theme, "system")
    assert not theme.is_dark() and label.palette().color(QPalette.ColorRole.WindowText).name() == light_muted
