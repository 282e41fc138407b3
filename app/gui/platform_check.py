"""Before the window opens on X11: the system libraries Qt's xcb platform plugin needs, named when missing.

Without them Qt prints "Could not load the Qt platform plugin "xcb"" and aborts the process ("Aborted"), which
tells a user on a minimal Linux nothing they can act on. The plugin is loaded here first (the dynamic loader names
the first library it lacks); then each library the plugin links against is looked up, so one line can name every
missing one with its Debian/Ubuntu package.
"""

from __future__ import annotations

import ctypes
import os
import sys
from pathlib import Path

#: shared libraries Qt 6's xcb plugin links against (ldd of PySide6's libqxcb.so) → the Debian/Ubuntu package
XCB_LIBRARIES: dict[str, str] = {
    "libxcb-cursor.so.0": "libxcb-cursor0",
    "libxcb-icccm.so.4": "libxcb-icccm4",
    "libxcb-keysyms.so.1": "libxcb-keysyms1",
    "libxcb-image.so.0": "libxcb-image0",
    "libxcb-util.so.1": "libxcb-util1",
    "libxcb-randr.so.0": "libxcb-randr0",
    "libxcb-render-util.so.0": "libxcb-render-util0",
    "libxcb-shape.so.0": "libxcb-shape0",
    "libxcb-shm.so.0": "libxcb-shm0",
    "libxcb-sync.so.1": "libxcb-sync1",
    "libxcb-xfixes.so.0": "libxcb-xfixes0",
    "libxcb-xkb.so.1": "libxcb-xkb1",
    "libxkbcommon-x11.so.0": "libxkbcommon-x11-0",
    "libxkbcommon.so.0": "libxkbcommon0",
    "libX11-xcb.so.1": "libx11-xcb1",
}


def wants_xcb(env: dict[str, str] | None = None, platform: str = sys.platform) -> bool:
    """Whether Qt will open the window through X11's xcb plugin here."""
    env = dict(os.environ) if env is None else env
    chosen = env.get("QT_QPA_PLATFORM", "")
    if not platform.startswith("linux"):
        return False
    if chosen:
        return chosen.split(":")[0] == "xcb"
    return bool(env.get("DISPLAY")) and not env.get("WAYLAND_DISPLAY")


def xcb_plugin_path() -> Path | None:
    """PySide6's xcb platform plugin, if this PySide6 has one."""
    try:
        import PySide6
    except ImportError:
        return None
    path = Path(PySide6.__file__).parent / "Qt" / "plugins" / "platforms" / "libqxcb.so"
    return path if path.is_file() else None


def _loads(name: str) -> bool:
    try:
        ctypes.CDLL(name)
    except OSError:
        return False
    return True


def missing_xcb_libraries(plugin: Path | None = None) -> tuple[list[str], str]:
    """(missing library names, the loader's own message) for the xcb plugin; ``([], "")`` when it loads."""
    plugin = plugin or xcb_plugin_path()
    if plugin is None:
        return [], ""
    try:
        ctypes.CDLL(str(plugin))
    except OSError as e:
        missing = [lib for lib in XCB_LIBRARIES if not _loads(lib)]
        return missing, str(e)
    return [], ""


def xcb_problem(plugin: Path | None = None) -> str | None:
    """One line naming what X11 needs and how to install it, or None when the plugin loads."""
    missing, loader_says = missing_xcb_libraries(plugin)
    if not missing and not loader_says:
        return None
    if missing:
        packages = " ".join(dict.fromkeys(XCB_LIBRARIES[lib] for lib in missing))
        return (f"Qt's X11 plugin cannot start: missing {', '.join(missing)}. Install them (Debian/Ubuntu: "
                f"sudo apt install {packages}), or run with QT_QPA_PLATFORM=wayland on a Wayland desktop.")
    return f"Qt's X11 plugin cannot start: {loader_says}"
