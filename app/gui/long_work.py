"""Long work off the GUI thread (calibrate, quantize, quality): its thread and its progress dialog.

The work runs on a plain thread that never touches a widget; it reports through the owner's signals, and the dialog's
Cancel stops it. :class:`LongWork` holds the thread (one at a time, cancelled when the application quits);
:func:`long_work_dialog` makes the dialog every such job shows.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from PySide6.QtCore import QObject, Qt
from PySide6.QtWidgets import QApplication, QProgressDialog, QWidget

#: a long-work dialog's value at 100 %: fine enough steps for a bar, and the dialog never closes itself there
PROGRESS_STEPS = 1000


def long_work_dialog(parent: QWidget, title: str, text: str, on_cancel: Callable[[], None],
                     min_width_px: int = 560) -> QProgressDialog:
    """The shown, window-modal progress dialog of long work: a bar of PROGRESS_STEPS, a label of up to three lines
    that leaves Cancel inside, shown at once, closed only by its owner (not when the bar fills), Cancel calling
    ``on_cancel``."""
    dialog = QProgressDialog(text, "Cancel", 0, PROGRESS_STEPS, parent)
    dialog.setWindowTitle(title)
    dialog.setMinimumWidth(min_width_px)
    dialog.setWindowModality(Qt.WindowModality.WindowModal)
    dialog.setAutoClose(False)
    dialog.setAutoReset(False)
    dialog.setMinimumDuration(0)
    dialog.canceled.connect(on_cancel)
    dialog.show()
    return dialog


class LongWork(QObject):
    """The thread of one long job at a time; :meth:`cancel` (which subclasses define) runs when the application
    quits, so no worker process outlives the window."""

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.dialog: QProgressDialog | None = None
        self._thread: threading.Thread | None = None
        app = QApplication.instance()
        if app is not None:
            app.aboutToQuit.connect(self.cancel)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def cancel(self) -> None:
        raise NotImplementedError

    def close_dialog(self) -> None:
        """Close and drop the progress dialog (its Cancel no longer cancels), if one is shown."""
        if self.dialog is not None:
            self.dialog.canceled.disconnect(self.cancel)
            self.dialog.close()
            self.dialog.deleteLater()
            self.dialog = None

    def start_thread(self, target: Callable[..., None], name: str, *args: object) -> None:
        self._thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        self._thread.start()

    def wait(self, timeout_s: float = 60.0) -> bool:
        """Join the job's thread (tests, shutdown); True when it has ended."""
        if self._thread is not None:
            self._thread.join(timeout_s)
        return not self.running
