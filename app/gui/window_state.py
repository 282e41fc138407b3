"""The window's remembered state: geometry, splitter positions, the inspector's context, the library and the sweep."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QByteArray
from PySide6.QtWidgets import QSplitter

from app.gui.top_level import clamp_to_screen


def _splits(win: Any) -> tuple[tuple[str, QSplitter], ...]:
    return (("window/main_split", win.main_split), ("window/left_split", win.left_split),
            ("window/right_split", win.right_split))


def restore_window_state(win: Any) -> None:
    """Put the window back as it was left (a missing or unreadable value keeps the default)."""
    geo = win.settings.value("window/geometry")
    if isinstance(geo, QByteArray) and not geo.isEmpty():
        win.restoreGeometry(geo)
        clamp_to_screen(win)  # saved on a larger screen, or one that is gone
    for key, split in _splits(win):
        state = win.settings.value(key)
        if isinstance(state, QByteArray) and not state.isEmpty():
            split.restoreState(state)
    last = win.settings.last_sweep()
    if last:
        win.editor.restore(last)
    try:
        win.inspector.ctx.setValue(int(win.settings.value("inspector/ctx", 4096)))
    except (TypeError, ValueError):
        pass


def save_window_state(win: Any) -> None:
    """Remember the window's geometry, splitters, inspector context, library folders, selection and sweep."""
    s = win.settings
    s.set_value("window/geometry", win.saveGeometry())
    for key, split in _splits(win):
        s.set_value(key, split.saveState())
    s.set_value("inspector/ctx", win.inspector.ctx.value())
    s.set_library_folders(win.library.folders)
    s.set_selected_models(win.library.selected_paths())
    s.set_last_sweep(win.editor.state())
    s.sync()
