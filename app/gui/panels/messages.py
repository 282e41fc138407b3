"""A dismissible message area: errors and notices in plain words, newest first."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QToolButton, QVBoxLayout, QWidget

_STYLE = {
    "error": ("#fdecea", "#b3261e", "Error"),
    "warning": ("#fff4e5", "#8a5300", "Note"),
    "info": ("#e8f1fb", "#1a4f8b", "Info"),
}
MAX_MESSAGES = 5


class MessageArea(QWidget):
    """Stacked one-line messages with a × each; hidden when empty. Repeats of a shown message are dropped."""

    changed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self._layout.setSpacing(2)
        self._rows: list[tuple[str, QFrame]] = []
        self.setVisible(False)

    def messages(self) -> list[str]:
        return [text for text, _ in self._rows]

    def add(self, text: str, level: str = "error") -> None:
        text = " ".join(text.split())
        if any(t == text for t, _ in self._rows):
            return
        bg, fg, tag = _STYLE.get(level, _STYLE["info"])
        frame = QFrame(self)
        frame.setObjectName("message")
        frame.setStyleSheet(f"QFrame#message {{ background: {bg}; border: 1px solid {fg}; border-radius: 3px; }}")
        row = QHBoxLayout(frame)
        row.setContentsMargins(6, 2, 2, 2)
        label = QLabel(f"<b style='color:{fg}'>{tag}:</b> {_escape(text)}", frame)
        label.setWordWrap(True)
        label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        close = QToolButton(frame)
        close.setText("×")
        close.setToolTip("Dismiss")
        close.setAutoRaise(True)
        close.clicked.connect(lambda: self._remove(frame))
        row.addWidget(label, 1)
        row.addWidget(close, 0, Qt.AlignmentFlag.AlignTop)
        self._layout.insertWidget(0, frame)
        self._rows.insert(0, (text, frame))
        while len(self._rows) > MAX_MESSAGES:
            self._remove(self._rows[-1][1])
        self.setVisible(True)
        self.changed.emit()

    def _remove(self, frame: QFrame) -> None:
        self._rows = [(t, f) for t, f in self._rows if f is not frame]
        frame.setParent(None)
        frame.deleteLater()
        self.setVisible(bool(self._rows))
        self.changed.emit()

    def clear(self) -> None:
        for _, f in list(self._rows):
            self._remove(f)


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
