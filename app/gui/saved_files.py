"""Files the window writes for the user (pictures, tables): the same guard and atomic write as ``gguf-bench``'s
outputs (:mod:`app.output_guard`, :mod:`app.atomic`): never over a model or a link to one, never into a FIFO or
device, whole or not at all."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtGui import QImage

from app.atomic import replace_atomically, write_text_atomic


def save_png(img: QImage, path: str | Path) -> Path:
    """``img`` as PNG (best compression) at ``path``, through a temporary file and a rename; OSError (its str() one
    line) when refused or not written."""

    def write(tmp: Path) -> None:
        # the format named: the temporary file's suffix says nothing. PySide6's stub types it as bytes; the binding
        # takes str (a const char*) and refuses bytes, so the stub is told so here.
        if not img.save(str(tmp), "PNG", 0):  # type: ignore[call-overload]
            raise OSError(f"{path}: Qt could not write the picture")

    return replace_atomically(path, write)


def save_text(text: str, path: str | Path) -> Path:
    """``text`` at ``path`` (UTF-8), through a temporary file and a rename; OSError when refused or not written."""
    return write_text_atomic(path, text)
