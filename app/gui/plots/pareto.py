"""The chooser's plots: quality loss (KLD) against expected decode speed, and each file's memory against the device.

Pareto plot: one point per file, x the decode tok/s at the chosen context (expected, else the ceiling), y the mean
KLD against the full-precision model, measured here where it was (filled) or expected from what is published for
the file's type (hollow); point area grows with the file size; files that do not fit are grey. Names are placed
where they cover no other name or circle, and left out (in the point's tooltip) where no such spot exists. The
Pareto front (no other fitting file is both faster and closer to the reference) is a dashed line. The recommended
file is drawn above the others and ringed, so no other point hides it.
Memory bars: weights, KV cache, compute buffers and the GPU allowance per file, against the device's memory.
:func:`pareto_explanation` and :func:`memory_explanation` are the lines the window shows under each plot.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt

from app.choose.verdicts import FileChoice
from app.gui.plots.items import style_plot
from app.gui.plots.style import color
from app.gui.theme import ink, plot_background, plot_foreground, series_colour
from app.predict.answer import DEFAULT_GPU_OVERHEAD_BYTES, UNIFIED_USABLE_FRACTION

GREY = "#b0b0b0"
FRONT = "#d62728"
#: Memory bar segments: (FileChoice attribute, label, colour).
SEGMENTS: tuple[tuple[str, str, str], ...] = (
    ("weights_bytes", "weights", "#1f77b4"), ("kv_bytes", "KV cache", "#2ca02c"),
    ("compute_bytes", "compute", "#ff7f0e"), ("overhead_bytes", "GPU allowance", "#9467bd"),
)
GIB = 1024.0**3
MIB = 1024.0**2
SMALLEST_POINT_PX = 10.0
LARGEST_POINT_PX = 36.0
#: the least blank (px) between the "quality not measured" label and a circle or a file's name
LABEL_GAP_PX = 3.0
#: the blank (px) between the memory bars' legend and the device's line
LEGEND_GAP_PX = 8
#: The recommended file's point and ring sit above every other item of the plot (pyqtgraph draws by z-value).
CHOSEN_Z = 10.0


def point_size(size_bytes: int, smallest: int, largest: int) -> float:
    """Marker diameter (px): area proportional to the file size, 10–36 px across the set."""
    if largest <= smallest:
        return 18.0
    span = LARGEST_POINT_PX - SMALLEST_POINT_PX
    return SMALLEST_POINT_PX + span * math.sqrt((size_bytes - smallest) / (largest - smallest))


def pareto_explanation(floor_tps: float | None = None) -> str:
    """What the Pareto plot's marks mean (shown under it)."""
    floor = f" Vertical dashed: your speed floor ({floor_tps:g} tok/s)." if floor_tps else ""
    return (f"Point area grows with the file's size ({SMALLEST_POINT_PX:.0f}–{LARGEST_POINT_PX:.0f} px). Red dashed: "
            "the Pareto front (no other fitting file is both faster and lower in KLD). Ringed: the recommendation, "
            "drawn on top. Filled: KLD measured here; hollow: expected from what is published for the file's type "
            f"(gguf-bench quality measures it). Grey: does not fit. A name with no free spot is in its point's "
            f"tooltip.{floor}")


def memory_explanation(choices: Sequence[FileChoice], profile_kind: str) -> str:
    """What the memory bars hold and what the GPU allowance is, for a device of ``profile_kind`` (shown under
    them); the figures are app.predict.memory.fit's, whose fit check decides what fits."""
    if profile_kind == "cpu":
        return ("Each bar: the memory a file needs at the chosen context (weights, KV cache, compute buffers); "
                "the line: this machine's memory.")
    if profile_kind == "unified":
        return ("Each bar: the memory a file needs at the chosen context (weights, KV cache, compute buffers); the "
                f"line: the {UNIFIED_USABLE_FRACTION:.0%} of unified memory the GPU may use by default (no GPU "
                "allowance on unified memory).")
    allowances = {c.overhead_bytes for c in choices if c.overhead_bytes}
    mib = (max(allowances) if allowances else DEFAULT_GPU_OVERHEAD_BYTES) / MIB
    margin = max((c.margin_bytes for c in choices), default=0) / MIB
    kept = (f"; the line: what a placement may use, the GPU's memory (dotted) less {margin:.0f} MiB kept free "
            "(llama.cpp's --fit-target)" if margin else "; the line: the GPU's memory")
    return ("Each bar: the GPU memory a file needs at the chosen context (offloaded weights, their KV cache, compute "
            f"buffers, GPU allowance){kept}. GPU allowance: {mib:.0f} MiB for the CUDA context, cuBLAS workspace "
            "and memory pools whenever layers are on the GPU (a rough allowance, not measured).")


def pareto_front(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """The (speed, kld) points no other point beats on both (faster and lower KLD), by speed."""
    front = [p for p in points if not any(q[0] >= p[0] and q[1] <= p[1] and q != p for q in points)]
    return sorted(set(front))


def short_labels(names: Sequence[str]) -> list[str]:
    """File names without ".gguf" and without the prefix they all share (cut at a separator): "Q4_K_M", "Q8_0"."""
    stems = [n[:-5] if n.lower().endswith(".gguf") else n for n in names]
    common = os.path.commonprefix(stems) if len(stems) > 1 else ""
    cut = max(common.rfind(sep) for sep in "-_. ") + 1 if common else 0
    return [stem[cut:] or stem for stem in stems]


def kld_of(c: FileChoice) -> float | None:
    """The file's expected loss as the chooser ranks it: measured here, else published for its type, else from
    its bits (None where there is no figure at all)."""
    q = c.total_quality
    return q.kld if q is not None else None


def measured_kld(c: FileChoice) -> bool:
    q = c.total_quality
    return q is not None and q.kind in ("measured", "reference")


def _dress(plot: pg.PlotWidget, title: str, bottom: str, left: str = "") -> None:
    """The page's colours, title, axis labels and a light grid."""
    plot.setTitle(title)
    plot.setLabel("bottom", bottom)
    if left:
        plot.setLabel("left", left)
    plot.showGrid(x=True, y=bool(left), alpha=0.2)
    style_plot(plot)


def clear_of_point(label: pg.TextItem, point_px: float, below: bool) -> tuple[float, float]:
    """The anchor that sets ``label`` beside a point (or ring) ``point_px`` across, up and to the right of it (or
    down, ``below``: the recommended file's, so two files at one spot stay readable), clear of its circle: an
    anchor is a fraction of the text's own size, so the circle's radius is turned into that fraction."""
    rect = label.textItem.boundingRect()
    w, h = max(rect.width(), 1.0), max(rect.height(), 1.0)
    reach = 0.72 * point_px / 2 + 1  # the circle's edge along the diagonal, plus a pixel
    return -reach / w, -reach / h if below else 1 + reach / h


class ParetoPlot(pg.PlotWidget):
    """Quality loss (mean KLD) against expected decode tok/s for the chosen device."""

    def __init__(self, parent: object = None) -> None:
        super().__init__(parent)
        _dress(self, "Quality loss vs decode speed", "decode tok/s at the context (expected, else ceiling)",
               "mean KLD (lower is better)")
        self.getAxis("left").enableAutoSIPrefix(False)
        self.points: list[tuple[str, float, float | None, bool]] = []  # (file, tok/s, kld, fits)
        self.point_items: dict[str, pg.PlotDataItem] = {}  # file name -> its point
        self.name_labels: list[pg.TextItem] = []  # each point's file name
        self._label_point: dict[int, float] = {}  # a name's point's diameter (px), by id of its label
        self._chosen_label: pg.TextItem | None = None
        self.ring: pg.PlotDataItem | None = None  # around the recommended file's point
        self.front: list[tuple[float, float]] = []
        self.unmeasured_y = 0.0
        self.unmeasured_line: pg.InfiniteLine | None = None  # where some file's quality is not measured
        # the free spots are in pixels: found again whenever the view's scale or size changes
        self.getViewBox().sigTransformChanged.connect(lambda *_a: self.place_labels())

    def show_choices(self, choices: Sequence[FileChoice], floor_tps: float | None = None,
                     chosen: FileChoice | None = None) -> None:
        """One point per file; the speed floor as a vertical line and the recommended file ringed."""
        self.clear()
        self.points = [(c.filename, c.decode_tps.value, kld_of(c), c.usable) for c in choices]
        self.point_items = {}
        self.name_labels = []
        self._label_point = {}
        self._chosen_label = None
        self.ring = None
        self.unmeasured_line = None
        if not choices:
            return
        sizes = [c.size_bytes for c in choices]
        measured = [k for _, _, k, _ in self.points if k is not None]
        top = max(measured) if measured else 0.0
        top = top if top > 0 else max(measured, default=0.0)
        self.unmeasured_y = top * 1.25 if top > 0 else 1.0
        labels = short_labels([c.filename for c in choices])
        grey = series_colour(GREY)
        for i, c in enumerate(choices):
            kld = kld_of(c)
            colour = color(i) if c.usable else grey
            y = kld if kld is not None else self.unmeasured_y
            brush = pg.mkBrush(colour) if measured_kld(c) else pg.mkBrush(0, 0, 0, 0)  # hollow: not measured
            item = self.plot([c.decode_tps.value], [y], pen=None, symbol="o", symbolPen=pg.mkPen(colour, width=2),
                             symbolBrush=brush, symbolSize=point_size(c.size_bytes, min(sizes), max(sizes)))
            text = labels[i] if c.usable else f"{labels[i]} (does not fit)"
            label = pg.TextItem(f"{text} (recommended)" if c is chosen else text, color=colour)
            label.setAnchor(clear_of_point(label, point_size(c.size_bytes, min(sizes), max(sizes))
                                           + (12 if c is chosen else 0), below=c is chosen))
            label.setPos(c.decode_tps.value, y)
            label.setToolTip(f"{c.filename}: {c.decode_tps.value:,.1f} tok/s, "
                             + (c.total_quality.text() if c.total_quality is not None else "quality unknown"))
            item.setToolTip(label.toolTip())
            self.addItem(label)
            self.name_labels.append(label)
            self._label_point[id(label)] = point_size(c.size_bytes, min(sizes), max(sizes)) + (12 if c is chosen
                                                                                               else 0)
            if c is chosen:
                self._chosen_label = label
            if c is chosen:
                item.setZValue(CHOSEN_Z)
                label.setZValue(CHOSEN_Z + 1)
            self.point_items[c.filename] = item
        if len(measured) < len(choices):
            line = pg.InfiniteLine(pos=self.unmeasured_y, angle=0, pen=pg.mkPen(grey, style=Qt.PenStyle.DotLine),
                                   label="quality not measured",
                                   # the text's left edge at the position, above the line: never cut by the axis
                                   labelOpts={"position": 0.01, "color": ink("muted"), "anchors": [(0, 1), (0, 1)]})
            self.addItem(line)
            self.unmeasured_line = line
        if floor_tps:
            dashed = pg.mkPen(plot_foreground(), style=Qt.PenStyle.DashLine)
            self.addItem(pg.InfiniteLine(pos=floor_tps, angle=90, pen=dashed, label=f"floor {floor_tps:g} tok/s",
                                         labelOpts={"position": 0.9, "color": plot_foreground()}))
        if chosen is not None:
            kld = kld_of(chosen)
            self.ring = self.plot([chosen.decode_tps.value], [kld if kld is not None else self.unmeasured_y],
                                  pen=None, symbol="o",
                                  symbolSize=point_size(chosen.size_bytes, min(sizes), max(sizes)) + 12,
                                  symbolPen=pg.mkPen(plot_foreground(), width=2.5), symbolBrush=pg.mkBrush(0, 0, 0, 0))
            self.ring.setZValue(CHOSEN_Z + 1)
        self.front = pareto_front([(s, k) for _, s, k, ok in self.points if ok and k is not None])
        if len(self.front) > 1:
            self.plot([p[0] for p in self.front], [p[1] for p in self.front],
                      pen=pg.mkPen(series_colour(FRONT), width=1.5, style=Qt.PenStyle.DashLine))
        speeds = [s for _, s, _, _ in self.points]
        self.setXRange(0, max(speeds) * 1.4 if max(speeds) > 0 else 1.0, padding=0)
        # room above the top points for their names, which stand up and to the right of circles up to 48 px across
        self.setYRange(-0.05 * self.unmeasured_y, self.unmeasured_y * 1.4, padding=0)
        self.place_labels()

    def _taken_rects(self, names: bool = True, inner: bool = False) -> list[QRectF]:
        """The scene rectangles of every point's circle (the recommendation's ring included; ``inner``: the square
        inside the circle, which a name at its corner does not cover) and, with ``names``, every name shown."""
        vb = self.getViewBox()
        rects: list[QRectF] = []
        for item in [*self.point_items.values(), *([self.ring] if self.ring is not None else [])]:
            xs, ys = item.getData()
            if xs is None or not len(xs):
                continue
            centre = vb.mapViewToScene(pg.Point(float(xs[0]), float(ys[0])))
            r = float(item.opts["symbolSize"]) / 2 * (0.7 if inner else 1.0)
            rects.append(QRectF(centre.x() - r, centre.y() - r, 2 * r, 2 * r))
        if names:
            rects += [t.textItem.sceneBoundingRect() for t in self.name_labels if t.isVisible()]
        return rects

    def place_labels(self) -> None:
        """Each file's name beside its point where it covers no circle and no name placed before it (the
        recommendation's first, then by speed): up-right, down-right, up-left, down-left of the point; a name with
        no free spot is hidden (its point's tooltip still names the file). Then the line's label."""
        vb = self.getViewBox()
        if vb.width() <= 0 or not self.name_labels:
            self.place_line_label()
            return
        placed: list[QRectF] = []
        order = sorted(self.name_labels, key=lambda t: (t is not self._chosen_label, -t.pos().x()))
        for label in order:
            label.setVisible(True)
            diameter = self._label_point.get(id(label), 18.0)
            centre = vb.mapViewToScene(label.pos())
            circles = [r for r in self._taken_rects(names=False, inner=True) if not r.contains(centre)]
            spot = None
            first = label is self._chosen_label
            tries = [(below, left, lift) for lift in (0, 1, 2) for below, left in
                     ((first, False), (not first, False), (False, True), (True, True))]
            for below, left, lift in tries:  # beside the point, then a line or two further up or down
                ax, ay = clear_of_point(label, diameter, below)
                ay = ay - lift if below else ay + lift
                label.setAnchor((1 - ax, ay) if left else (ax, ay))
                rect = label.textItem.sceneBoundingRect()
                inside = vb.sceneBoundingRect().contains(rect)
                own = QRectF(rect)
                if inside and not any(own.intersects(r) for r in placed + circles):
                    spot = rect
                    break
            if spot is None:
                label.setVisible(False)
            else:
                placed.append(spot.adjusted(-LABEL_GAP_PX, -LABEL_GAP_PX, LABEL_GAP_PX, LABEL_GAP_PX))
        self.place_line_label()

    def place_line_label(self) -> None:
        """Set the "quality not measured" label at the leftmost spot along its line where it covers no circle and
        no file's name (at the left edge it sat on a slow file's circle); where the line has no such spot, at the
        left edge."""
        line = self.unmeasured_line
        if line is None or self.getViewBox().width() <= 0:
            return
        label = line.label
        taken = [r.adjusted(-LABEL_GAP_PX, -LABEL_GAP_PX, LABEL_GAP_PX, LABEL_GAP_PX) for r in self._taken_rects()]
        for step in range(0, 96):
            label.setPosition(0.01 + step / 100)
            rect = label.textItem.sceneBoundingRect()
            if rect.right() > self.getViewBox().sceneBoundingRect().right():
                break
            if not any(rect.intersects(t) for t in taken):
                return
        label.setPosition(0.01)


class MemoryBars(pg.PlotWidget):
    """Memory per file at the chosen context (stacked segments), with the device's usable memory as a line."""

    def __init__(self, parent: object = None) -> None:
        super().__init__(parent)
        _dress(self, "Memory at the chosen context vs the device", "GiB")
        self.legend = self.addLegend(offset=(-40, -10), verSpacing=-6)  # compact: it shares the right with a label
        self.totals_gib: list[float] = []
        self.budget_gib = 0.0

    def show_choices(self, choices: Sequence[FileChoice]) -> None:
        self.clear()
        self.totals_gib = [c.memory_bytes / GIB for c in choices]
        if not choices:
            return
        self.legend.setLabelTextColor(plot_foreground())  # the colour new entries take: the page's, now
        rows = list(range(len(choices)))[::-1]  # first file at the top
        left = [0.0] * len(choices)
        for attr, label, colour in SEGMENTS:
            widths = [getattr(c, attr) / GIB for c in choices]
            if not any(widths):
                continue
            shade, grey = series_colour(colour), series_colour(GREY)
            bars = pg.BarGraphItem(x0=left, y=rows, height=0.6, width=widths, brush=shade,
                                   brushes=[pg.mkBrush(shade if c.usable else grey) for c in choices],
                                   pen=pg.mkPen(plot_background()))
            self.addItem(bars)
            self.legend.addItem(bars, label)
            left = [a + b for a, b in zip(left, widths, strict=True)]
        self.budget_gib = choices[0].budget_bytes / GIB
        margin_gib = choices[0].margin_bytes / GIB
        said = f"usable {self.budget_gib:.1f} GiB" if margin_gib else f"device {self.budget_gib:.1f} GiB"
        # the line's label to its right, at the top: over the bars it covered the first file's
        self.addItem(pg.InfiniteLine(pos=self.budget_gib, angle=90, pen=pg.mkPen(plot_foreground(), width=2),
                                     label=said, labelOpts={"position": 0.02, "color": plot_foreground(),
                                                            "anchors": [(-0.03, 1), (-0.03, 1)]}))
        if margin_gib:  # the card's whole memory, dotted: the margin is the strip between the two lines
            self.addItem(pg.InfiniteLine(pos=self.budget_gib + margin_gib, angle=90,
                                         pen=pg.mkPen(plot_foreground(), width=1, style=Qt.PenStyle.DotLine)))
        labels = short_labels([c.filename for c in choices])
        self.getAxis("left").setTicks([list(zip(rows, labels, strict=True))])
        # room right of the device's lines for the legend: over the bars it hid their ends (1366x768, 1920x1080)
        x_max = max(max(self.totals_gib), self.budget_gib + margin_gib) * 1.45
        self.setXRange(0, x_max, padding=0)
        self.setYRange(-0.6, len(choices) - 0.4, padding=0)
        # at the top right, right of the device's lines; the line's label at the foot: neither covers the other
        self.legend.anchor(itemPos=(1, 0), parentPos=(1, 0), offset=(-LEGEND_GAP_PX, 2))
