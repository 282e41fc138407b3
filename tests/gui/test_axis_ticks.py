"""Issue #44: the decode plot over a large context, at the widths a 1366×768 or 1920×1080 window gives it, draws
tick labels that stand apart (neither overlapping nor touching), and writes large numbers plainly (``131,072``,
not ``1e+06``), on its log axis (its default) and its linear one."""

from __future__ import annotations

import math

import numpy as np
import pytest
from PySide6.QtGui import QImage, QPainter
from PySide6.QtWidgets import QApplication

from app.gui.plots.decode import DecodePlot
from app.gui.plots.items import log_tick_text, log_ticks

#: the least blank between two drawn tick labels: less reads as one number ("10,00030,000")
MIN_GAP_PX = 8.0


def drawn_labels(panel: DecodePlot) -> list[tuple[float, float, str]]:
    """(left, right, text) of every tick label the bottom axis draws, as pyqtgraph lays them out to paint."""
    axis = panel.plot.getAxis("bottom")
    image = QImage(8, 8, QImage.Format.Format_ARGB32)
    painter = QPainter(image)
    try:
        specs = axis.generateDrawSpecs(painter)
    finally:
        painter.end()
    texts = specs[2] if specs else []
    return sorted((rect.left(), rect.right(), text) for rect, _flags, text in texts)


@pytest.mark.parametrize("log", [True, False])
def test_decode_tick_labels_stand_apart_over_large_contexts(qtbot, log: bool) -> None:  # noqa: ANN001
    panel = DecodePlot()
    qtbot.addWidget(panel.widget)
    panel.set_log_scale(log)
    panel.widget.show()
    crowded = []
    for context in (8_192, 32_768, 131_072, 1_048_576):
        xs = np.geomspace(16, context, 40)
        item = panel.plot.plot(xs, 300 - 250 * xs / context)
        for width in (240, 290, 360, 440, 560, 700):
            panel.widget.resize(width, 260)
            panel.plot.enableAutoRange()
            for _ in range(4):
                QApplication.processEvents()
            labels = drawn_labels(panel)
            assert len(labels) >= 2, (context, width, labels)
            assert not any("e+" in t for _l, _r, t in labels), labels  # 1e+06 is no way to write a context
            for (_l0, r0, t0), (l1, _r1, t1) in zip(labels, labels[1:], strict=False):
                if l1 - r0 < MIN_GAP_PX:
                    crowded.append((context, width, t0, t1, round(l1 - r0, 1)))
        panel.plot.removeItem(item)
    assert not crowded, crowded


def test_log_ticks_leave_room_for_their_labels() -> None:
    def labels(lo: float, hi: float, px: float) -> list[str]:
        return [log_tick_text(v) for v in log_ticks(math.log10(lo), math.log10(hi), px, lambda t: 7.0 * len(t))]

    # 16..131,072 on 390 px: 1-3 steps put "10,000" and "30,000" 48 px apart, 42 px wide each: decades instead
    assert labels(16, 131_072, 390) == ["100", "1,000", "10,000", "100,000"]
    assert labels(4, 110, 300) == ["5", "10", "20", "50", "100"]  # short labels: 1-2-5 where there is room
    assert labels(2_000, 8_000, 300) == ["2,000", "5,000"]  # not the 1-9 steps: 7,000 and 8,000 are 29 px apart
