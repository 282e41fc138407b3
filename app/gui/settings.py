"""Window settings (QSettings): geometry, recent models, library folders, the last sweep.

``GGUF_WORKBENCH_DATA_DIR`` moves them into ``<dir>/workbench.ini`` (tests, portable installs), next to
the results store, which honours the same variable.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from PySide6.QtCore import QSettings

ORG = "gguf-workbench"
APP = "gguf-workbench"
MAX_RECENT = 10


def make_settings() -> QSettings:
    override = os.environ.get("GGUF_WORKBENCH_DATA_DIR")
    if override:
        Path(override).mkdir(parents=True, exist_ok=True)
        return QSettings(str(Path(override) / "workbench.ini"), QSettings.Format.IniFormat)
    return QSettings(QSettings.Format.IniFormat, QSettings.Scope.UserScope, ORG, APP)


class Settings:
    """Typed access to the few things the window remembers."""

    def __init__(self, qs: QSettings | None = None) -> None:
        self.qs = qs or make_settings()

    def _json(self, key: str, default: Any) -> Any:
        raw = self.qs.value(key, None)
        if raw is None:
            return default
        try:
            return json.loads(str(raw))
        except ValueError:
            return default

    def _set_json(self, key: str, value: Any) -> None:
        self.qs.setValue(key, json.dumps(value))

    # recent models (most recent first)
    def recent_models(self) -> list[str]:
        v = self._json("models/recent", [])
        return [str(x) for x in v] if isinstance(v, list) else []

    def add_recent_model(self, path: str) -> None:
        paths = [path] + [p for p in self.recent_models() if p != path]
        self._set_json("models/recent", paths[:MAX_RECENT])

    def remove_recent_model(self, path: str) -> None:
        self._set_json("models/recent", [p for p in self.recent_models() if p != path])

    def library_folders(self) -> list[str]:
        v = self._json("models/folders", [])
        return [str(x) for x in v] if isinstance(v, list) else []

    def set_library_folders(self, folders: list[str]) -> None:
        self._set_json("models/folders", list(dict.fromkeys(folders)))

    def selected_models(self) -> list[str]:
        v = self._json("models/selected", [])
        return [str(x) for x in v] if isinstance(v, list) else []

    def set_selected_models(self, paths: list[str]) -> None:
        self._set_json("models/selected", paths)

    # the last sweep: {"preset": name, "fields": {name: text}, "repetitions": n}
    def last_sweep(self) -> dict[str, Any] | None:
        v = self._json("sweep/last", None)
        return v if isinstance(v, dict) else None

    def set_last_sweep(self, sweep: dict[str, Any]) -> None:
        self._set_json("sweep/last", sweep)

    def value(self, key: str, default: Any = None) -> Any:
        return self.qs.value(key, default)

    def set_value(self, key: str, value: Any) -> None:
        self.qs.setValue(key, value)

    def sync(self) -> None:
        self.qs.sync()
