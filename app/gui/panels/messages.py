"""A dismissible message area: errors and notes in plain words, newest first, updated in place, notes expiring.

A message has a key (its text unless given): a message with a key already shown replaces that one's text where it
stands instead of piling up (a test that fails again for the same reason, a contention warning that changes).
Notes and information expire after :data:`NOTE_EXPIRE_S`; errors stay until dismissed. Colours come from the
window's palette, so they read in light and dark mode.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QToolButton, QVBoxLayout, QWidget

from app.gui import theme

#: (accent colour, tag) per level; the background is the accent mixed into the window's own base colour
_LEVELS = {
    "error": ("#d93025", "Error"),
    "warning": ("#c77700", "Note"),
    "info": ("#3b7dd8", "Info"),
}
MAX_MESSAGES = 3  # more push the library below its three rows on a 768 px screen
NOTE_EXPIRE_S = 90.0


def level_colours(palette: QPalette, level: str) -> tuple[str, str]:
    """(background, text) for a message of ``level`` on ``palette``: a light tint on light windows, a dark one on
    dark windows, with the palette's own text colour (contrast as the palette has it)."""
    accent = _LEVELS.get(level, _LEVELS["info"])[0]
    return theme.tint(accent, 0.18, palette).name(), palette.color(QPalette.ColorRole.Text).name()


class _Message(QFrame):
    def __init__(self, key: str, parent: QWidget) -> None:
        super().__init__(parent)
        self.key = key
        self.text = ""
        self.level = "info"
        self.setObjectName("message")
        row = QHBoxLayout(self)
        row.setContentsMargins(6, 2, 2, 2)
        self.label = QLabel(self)
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.close_button = QToolButton(self)
        self.close_button.setText("×")
        self.close_button.setToolTip("Dismiss")
        self.close_button.setAutoRaise(True)
        row.addWidget(self.label, 1)
        row.addWidget(self.close_button, 0, Qt.AlignmentFlag.AlignTop)
        self.expiry = QTimer(self)
        self.expiry.setSingleShot(True)

    def show_text(self, text: str, level: str) -> None:
        self.text, self.level = text, level
        accent, tag = _LEVELS.get(level, _LEVELS["info"])
        bg, fg = level_colours(self.palette(), level)
        self.setStyleSheet(f"QFrame#message {{ background: {bg}; border: 1px solid {accent}; border-radius: 3px; }}"
                           f" QLabel {{ color: {fg}; }}")
        self.label.setText(f"<b>{tag}:</b> {_escape(text)}")
        self.label.setToolTip(text)
        if level == "error":
            self.expiry.stop()
        else:
            self.expiry.start(int(NOTE_EXPIRE_S * 1000))


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

    def messages(self) -> list[str]:
        return [m.text for m in self._rows]

    def add(self, text: str, level: str = "error", key: str | None = None) -> None:
        """Show ``text``; if a message with ``key`` (default: the text) is shown, it is updated where it is."""
        text = " ".join(text.split())
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
        self.changed.emit()

    def remove_key(self, key: str) -> None:
        """Take a message away once what it says no longer holds."""
        for m in [m for m in self._rows if m.key == key]:
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
