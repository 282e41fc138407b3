"""Issue #54 item 2: the window's own outputs (the screenshot, the plots' PNG, exported tables) take the one rule of
every output: never over a model or a link to one, never into a FIFO or a device; whole or not at all."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import pytest
from PySide6.QtGui import QColor, QImage

from app.gui.saved_files import save_png, save_text
from tests.gguf_synth import write_synthetic_gguf


def test_a_picture_or_a_table_never_replaces_a_model_a_link_to_one_or_a_fifo(tmp_path: Path) -> None:
    model = write_synthetic_gguf(tmp_path / "m.gguf")
    before = hashlib.sha256(model.read_bytes()).hexdigest()
    link = tmp_path / "plots.png"
    link.symlink_to(model)
    fifo = tmp_path / "table.csv"
    os.mkfifo(fifo)
    img = QImage(4, 4, QImage.Format.Format_RGB32)
    img.fill(QColor("white"))
    for target, says in ((model, "is a GGUF model"), (link, "is a GGUF model (through a symbolic link)"),
                         (fifo, "is a FIFO (named pipe), not a regular file")):
        with pytest.raises(OSError, match="^" + re.escape(f"{target}: {says}")):
            save_png(img, target)
        with pytest.raises(OSError, match="not a regular file|is a GGUF model"):
            save_text("a,b\n", target)
    assert hashlib.sha256(model.read_bytes()).hexdigest() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.gguf", "plots.png", "table.csv"]  # no temporary left
    good = save_png(img, tmp_path / "shot.png")
    assert good.read_bytes().startswith(b"\x89PNG")
