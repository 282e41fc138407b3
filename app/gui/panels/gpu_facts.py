"""The inspector's GPU line: what llama.cpp can offload to, the GPUs this machine has, and the fix command.

Shows :func:`app.doctor.report.short_summary` (one line), the fix commands below it (selectable, to copy), and the
whole ``gguf-bench doctor`` report as the tooltip.
"""

from __future__ import annotations

from html import escape

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QWidget

from app.doctor.report import DoctorReport, Level, report_text, short_summary
from app.gui import theme

CHECKING = "GPU check: asking llama.cpp and the machine…"


class GpuFacts(QLabel):
    """One wrapped label; :meth:`show_report` fills it from a doctor report."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(CHECKING, parent)
        self.setWordWrap(True)
        self.setTextFormat(Qt.TextFormat.RichText)
        self.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.setObjectName("gpuFacts")
        self.report: DoctorReport | None = None

    def show_report(self, report: DoctorReport) -> None:
        self.report = report
        html = f"<small>{escape(short_summary(report))}</small>"
        for a in report.advice:
            if a.level in (Level.FIX, Level.ERROR):
                colour = theme.ink("bad" if a.level is Level.ERROR else "warn")
                html += f"<br><small style='color:{colour}'>{escape(a.text)}</small>"
                if a.command:
                    html += f"<br><small><code>{escape(a.command)}</code></small>"
        self.setText(html)
        self.setToolTip(f"<pre>{escape(report_text(report))}</pre>")

    def show_error(self, error: str) -> None:
        self.setText(f"<small>GPU check failed: {escape(error)}</small>")
        self.setToolTip("")
