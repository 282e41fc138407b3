"""The desktop window (PySide6 + pyqtgraph). The only package that imports Qt."""

from app.gui.qt_compat import guard_none_refcount

guard_none_refcount()
