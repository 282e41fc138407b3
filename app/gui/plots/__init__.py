"""The plots: one class per plot (``PlotPanel`` subclasses) and ``LivePlots``, the window's grid of five."""

from app.gui.plots.live_plots import LivePlots

__all__ = ["LivePlots"]
