"""The PySide6 refcount guard: thousands of void Qt calls and signal emits must not free None or True."""

from __future__ import annotations

import sys

from app.gui.qt_compat import guard_none_refcount, singleton_leak_per_call


def test_many_void_calls_and_emits_are_safe() -> None:
    from PySide6.QtCore import QObject, QPoint

    guard_none_refcount()
    point, obj = QPoint(), QObject()
    for _ in range(20_000):  # more than None's whole reference count on Python 3.11 without the guard
        point.setX(1)
        obj.objectNameChanged.emit("x")
    assert sys.getrefcount(None) > 1000 and sys.getrefcount(True) > 1000


def test_leak_probe_reports_a_rate() -> None:
    assert 0.0 <= singleton_leak_per_call(8) <= 2.0
