"""Issue #28: on X11 a missing system library is named with its package, instead of Qt's "Aborted"."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from app.gui.platform_check import XCB_LIBRARIES, wants_xcb, xcb_plugin_path, xcb_problem


def test_xcb_is_expected_only_where_x11_will_be_used() -> None:
    assert wants_xcb({"DISPLAY": ":0"}, "linux")
    assert not wants_xcb({"DISPLAY": ":0", "QT_QPA_PLATFORM": "offscreen"}, "linux")
    assert wants_xcb({"QT_QPA_PLATFORM": "xcb"}, "linux")
    assert not wants_xcb({"DISPLAY": ":0", "WAYLAND_DISPLAY": "wayland-0"}, "linux")
    assert not wants_xcb({"DISPLAY": ":0"}, "darwin")


@pytest.mark.heavy  # a subprocess
@pytest.mark.skipif(shutil.which("ldd") is None or xcb_plugin_path() is None, reason="needs ldd and PySide6's xcb")
def test_the_named_libraries_are_the_ones_the_loader_lacks() -> None:
    """Checked against ldd on this machine: whatever this machine lacks (nothing, or some), the line says the same."""
    ldd = subprocess.run(["ldd", str(xcb_plugin_path())], capture_output=True, text=True, check=True).stdout
    lacking = {line.split("=>")[0].strip() for line in ldd.splitlines() if "not found" in line}
    problem = xcb_problem()
    if not lacking:
        assert problem is None
        return
    assert problem is not None and "\n" not in problem
    for lib in lacking & set(XCB_LIBRARIES):
        assert lib in problem and XCB_LIBRARIES[lib] in problem
