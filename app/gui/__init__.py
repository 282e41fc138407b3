"""The desktop window (PySide6 + pyqtgraph). The only package that imports Qt."""
