"""A dismissible message area: errors and notes in plain words, newest first, updated in place, notes expiring.

A message has a key (its text unless given): a message with a key already shown replaces that one's text where it
stands instead of piling up (a test that fails again for the same reason, a contention warning that changes).
Notes and information expire after :data:`NOTE_EXPIRE_S`; errors stay until dismissed. A message about a run has a
key beginning with :data:`RUN_KEY` and goes when another run starts (:meth:`MessageArea.remove_prefix`). Each
message shows at most :data:`MAX_LINES` lines, the rest behind a "more" link (and in its tooltip); the area is as
tall as its messages, never clipping them. Colours come from the window's palette, so they read in light and dark
mode.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QSizePolicy, QToolButton, QVBoxLayout, QWidget

from app.gui import theme
from app.shown_text import escape_controls

#: (accent colour, tag) per level; the background is the accent mixed into the window's own base colour
_INFO = ("#3b7dd8", "Info")  # also what a level this does not know is shown as
_LEVELS = {
    "error": ("#d93025", "Error"),
    "warning": ("#c77700", "Note"),
    "info": _INFO,
}
MAX_MESSAGES = 3  # more push the library below its three rows on a 768 px screen
MAX_LINES = 3  # a message's lines shown before its "more" link
NOTE_EXPIRE_S = 90.0
#: the beginning of the key of a message about a run (its failures, its notices): gone when another run starts
RUN_KEY = "run:"
MORE, LESS = "more", "less"


def level_colours(palette: QPalette, level: str) -> tuple[str, str]:
    """(background, text) for a message of ``level`` on ``palette``: a light tint on light windows, a dark one on
    dark windows, with the palette's own text colour (contrast as the palette has it)."""
    accent = _LEVELS.get(level, _INFO)[0]
    return theme.tint(accent, 0.18, palette).name(), palette.color(QPalette.ColorRole.Text).name()


class _Message(QFrame):
    def __init__(self, key: str, parent: QWidget) -> None:
        super().__init__(parent)
        self.key = key
        self.text = ""
        self.level = "info"
        self.expanded = False
        self.setObjectName("message")
        row = QHBoxLayout(self)
        row.setContentsMargins(6, 2, 2, 2)
        self.label = QLabel(self)
        self.label.setWordWrap(True)
        self.label.setTextFormat(Qt.TextFormat.RichText)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse
                                           | Qt.TextInteractionFlag.LinksAccessibleByMouse)
        self.label.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Minimum)
        self.label.linkActivated.connect(self._link)
        self.close_button = QToolButton(self)
        self.close_button.setText("×")
        self.close_button.setToolTip("Dismiss")
        self.close_button.setAutoRaise(True)
        row.addWidget(self.label, 1)
        row.addWidget(self.close_button, 0, Qt.AlignmentFlag.AlignTop)
        self.expiry = QTimer(self)
        self.expiry.setSingleShot(True)
        self._laid_out_for = -1

    def show_text(self, text: str, level: str) -> None:
        self.text, self.level = text, level
        accent, _tag = _LEVELS.get(level, _INFO)
        bg, fg = level_colours(self.palette(), level)
        self.setStyleSheet(f"QFrame#message {{ background: {bg}; border: 1px solid {accent}; border-radius: 3px; }}"
                           f" QLabel {{ color: {fg}; }}")
        self.label.setToolTip(text)
        self._laid_out_for = -1
        self.fit_text()
        if level == "error":
            self.expiry.stop()
        else:
            self.expiry.start(int(NOTE_EXPIRE_S * 1000))

    def _html(self, text: str, link: str = "") -> str:
        tag = _LEVELS.get(self.level, _INFO)[1]
        more = f" <a href='{link}' style='color:{theme.ink('link')}'>{link}</a>" if link else ""
        return f"<b>{tag}:</b> {_escape(text)}{more}"

    def shown_lines(self) -> int:
        """How many lines the label's text takes at its width now."""
        line_h = max(self.label.fontMetrics().lineSpacing(), 1)
        return round(self.label.heightForWidth(self.label.width()) / line_h)

    def fit_text(self) -> None:
        """The whole text where it takes at most MAX_LINES lines at the label's width (or the user asked for it);
        else as much of it as fits, cut at a word, with a "more" link."""
        width = self.label.width()
        if width == self._laid_out_for:
            return
        self._laid_out_for = width
        self.label.setText(self._html(self.text, LESS if self.expanded else ""))
        if self.expanded or self.shown_lines() <= MAX_LINES:
            if not self.expanded:
                self.label.setText(self._html(self.text))
            return
        words = self.text.split(" ")
        lo, hi = 1, len(words)  # the most words that fit with the link
        while lo < hi:
            mid = (lo + hi + 1) // 2
            self.label.setText(self._html(" ".join(words[:mid]) + " …", MORE))
            if self.shown_lines() <= MAX_LINES:
                lo = mid
            else:
                hi = mid - 1
        self.label.setText(self._html(" ".join(words[:lo]) + " …", MORE))

    def _link(self, which: str) -> None:
        self.expanded = which == MORE
        self._laid_out_for = -1
        self.fit_text()
        self._fit_area()
        QTimer.singleShot(0, self, self._fit_area)  # and once the label has taken its new text in

    def _fit_area(self) -> None:
        area = self.parentWidget()
        if isinstance(area, MessageArea):
            area.fit_height()

    def resizeEvent(self, event: Any) -> None:  # noqa: N802 - Qt's name
        super().resizeEvent(event)
        self.fit_text()
        self._fit_area()  # the label's width is known only now: the area's height follows its lines


class MessageArea(QWidget):
    """Stacked messages with a × each; hidden when empty. A repeated key updates its message in place."""

    changed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self._layout.setSpacing(2)
        self._rows: list[_Message] = []
        self.setVisible(False)

    def fit_height(self) -> None:
        """As tall as the messages at this width (a splitter never hands a wrapped label less than its text)."""
        for m in self._rows:
            m.layout().invalidate()
        self._layout.invalidate()
        h = self._layout.heightForWidth(self.width()) if self._rows else 0
        if h > 0 and h != self.minimumHeight():
            self.setMinimumHeight(h)

    def resizeEvent(self, event: Any) -> None:  # noqa: N802 - Qt's name
        super().resizeEvent(event)
        for m in self._rows:
            m.fit_text()
        self.fit_height()

    def messages(self) -> list[str]:
        return [m.text for m in self._rows]

    def add(self, text: str, level: str = "error", key: str | None = None) -> None:
        """Show ``text`` (its control characters escaped: it may quote a file name or a server's reply); if a
        message with ``key`` (default: the text) is shown, it is updated where it is."""
        text = " ".join(escape_controls(text).split())
        key = key or text
        msg = next((m for m in self._rows if m.key == key), None)
        if msg is None:
            msg = _Message(key, self)
            msg.close_button.clicked.connect(lambda: self._remove(msg))
            msg.expiry.timeout.connect(lambda: self._remove(msg))
            self._layout.insertWidget(0, msg)
            self._rows.insert(0, msg)
        msg.show_text(text, level)
        while len(self._rows) > MAX_MESSAGES:
            self._remove(self._oldest_to_drop())
        self.setVisible(True)
        self.fit_height()
        self.changed.emit()

    def _oldest_to_drop(self) -> _Message:
        """The oldest note, else the oldest message: an error outlives the notes that came after it."""
        notes = [m for m in self._rows if m.level != "error"]
        return (notes or self._rows)[-1]

    def _remove(self, msg: _Message) -> None:
        if msg not in self._rows:
            return
        self._rows.remove(msg)
        msg.expiry.stop()
        msg.setParent(None)
        msg.deleteLater()
        self.setVisible(bool(self._rows))
        self.setMinimumHeight(0)
        self.fit_height()
        self.changed.emit()

    def remove_key(self, key: str) -> None:
        """Take a message away once what it says no longer holds."""
        for m in [m for m in self._rows if m.key == key]:
            self._remove(m)

    def remove_prefix(self, prefix: str) -> None:
        """Take away every message whose key begins with ``prefix`` (a run's, when another run starts)."""
        for m in [m for m in self._rows if m.key.startswith(prefix)]:
            self._remove(m)

    def restyle(self) -> None:
        """The page's colours again (after a theme switch)."""
        for m in self._rows:
            m.show_text(m.text, m.level)

    def clear(self) -> None:
        for m in list(self._rows):
            self._remove(m)


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
