"""Sweep editor: a preset, then every list in llama-bench syntax (``128,512`` or ``128-1024*2``), checked as typed."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QComboBox,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.gui import theme
from app.paths import SWEEP_PRESETS_DIR
from app.run.params import LIST_PARAMS, PARAM, Param
from app.run.plan import PlanError, SweepSpec, load_sweep_preset, preset_names

#: The form's fields, in the order shown: the list parameters of the one parameter table (app/run/params.py).
FORM: tuple[Param, ...] = tuple(p for p in LIST_PARAMS if p.label)
REPETITIONS = PARAM["repetitions"]
MAX_REPETITIONS = 100


class SweepEditor(QWidget):
    """Preset combo + form; ``spec()`` gives a validated SweepSpec or None (errors shown under the form)."""

    runRequested = Signal()
    cancelRequested = Signal()
    changed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.preset = QComboBox(self)
        self.preset.addItems(preset_names())
        self.preset.addItem("custom")
        self.preset.setToolTip("Sweep presets from profiles/sweeps/*.toml")
        self.preset.currentTextChanged.connect(self._preset_chosen)
        self.description = QLabel(self)
        theme.set_role(self.description, "muted")
        self.edits: dict[str, QLineEdit] = {}
        grid = self._build_form()
        self.error = QLabel(self)
        theme.set_role(self.error, "bad")
        self.error.setWordWrap(True)
        self.error.setVisible(False)
        self.count = QLabel(self)
        theme.set_role(self.count, "muted")
        run = self._build_run_row()
        top = QHBoxLayout()
        top.addWidget(QLabel("Preset:", self))
        top.addWidget(self.preset)
        top.addWidget(self.description, 1)
        top.addWidget(self.count)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(3)
        lay.addLayout(top)
        lay.addLayout(grid)
        lay.addWidget(self.error)
        lay.addLayout(run)
        self._loading = False
        self.models: list[str] = []
        self.set_preset("quick")

    def _build_form(self, per_row: int = 4) -> QGridLayout:
        """One labelled field per list parameter of the table, ``per_row`` to a row, then the repetitions."""
        grid = QGridLayout()
        grid.setContentsMargins(0, 0, 0, 0)
        grid.setHorizontalSpacing(6)
        grid.setVerticalSpacing(3)
        for k, prm in enumerate(FORM):
            edit = QLineEdit(self)
            edit.setToolTip(prm.tip)
            edit.setMinimumWidth(70)
            if prm.optional:
                edit.setPlaceholderText("same as K")
            edit.textEdited.connect(self._edited)
            self.edits[prm.name] = edit
            lab = QLabel(prm.label + ":", self)
            lab.setToolTip(prm.tip)
            r, c = divmod(k, per_row)
            grid.addWidget(lab, r, 2 * c)
            grid.addWidget(edit, r, 2 * c + 1)
        self.reps = QSpinBox(self)
        self.reps.setRange(REPETITIONS.min or 1, MAX_REPETITIONS)
        self.reps.setToolTip(REPETITIONS.tip)
        self.reps.valueChanged.connect(self._edited)
        r, c = divmod(len(FORM), per_row)
        grid.addWidget(QLabel(REPETITIONS.label + ":", self), r, 2 * c)
        grid.addWidget(self.reps, r, 2 * c + 1)
        return grid

    def _build_run_row(self) -> QHBoxLayout:
        """Run and Cancel buttons, the progress bar and the status text."""
        self.run_button = QPushButton("▶ Run", self)
        self.run_button.setToolTip("Run the sweep on the selected model(s) (Ctrl+R)")
        self.run_button.clicked.connect(self.runRequested)
        self.cancel_button = QPushButton("■ Cancel", self)
        self.cancel_button.setToolTip("Stop now and keep the finished tests (Esc)")
        self.cancel_button.setEnabled(False)
        self.cancel_button.clicked.connect(self.cancelRequested)
        self.progress = QProgressBar(self)
        self.progress.setRange(0, 1000)
        self.progress.setTextVisible(True)
        self.progress.setFormat("ready")
        self.status = QLabel(self)
        self.status.setMinimumWidth(200)
        run = QHBoxLayout()
        run.addWidget(self.run_button)
        run.addWidget(self.cancel_button)
        run.addWidget(self.progress, 2)
        run.addWidget(self.status, 3)
        return run

    # --- presets and state ----------------------------------------------------------------------
    def set_preset(self, name: str) -> None:
        i = self.preset.findText(name)
        if i >= 0:
            if self.preset.currentIndex() == i:
                self._preset_chosen(name)
            else:
                self.preset.setCurrentIndex(i)

    def _preset_chosen(self, name: str) -> None:
        if name == "custom" or self._loading:
            return
        try:
            spec = load_sweep_preset(SWEEP_PRESETS_DIR / f"{name}.toml")
        except PlanError as e:
            self._show_errors([str(e)])
            return
        self.load_spec(spec)
        self.description.setText(spec.description)

    def load_spec(self, spec: SweepSpec) -> None:
        self._loading = True
        for name, edit in self.edits.items():
            edit.setText(PARAM[name].text(getattr(spec, name)))
            edit.setStyleSheet("")
        self.reps.setValue(spec.repetitions)
        self._loading = False
        self._validate()

    def state(self) -> dict[str, Any]:
        return {"preset": self.preset.currentText(), "fields": {n: e.text() for n, e in self.edits.items()},
                "repetitions": self.reps.value(), "description": self.description.text()}

    def restore(self, state: dict[str, Any]) -> None:
        preset = str(state.get("preset") or "quick")
        self.set_preset(preset if self.preset.findText(preset) >= 0 else "quick")
        values = state.get("fields") or {}
        self._loading = True
        for name, edit in self.edits.items():
            if isinstance(values.get(name), str):
                edit.setText(values[name])
        try:
            self.reps.setValue(int(state.get("repetitions") or self.reps.value()))
        except (TypeError, ValueError):
            pass
        self.description.setText(str(state.get("description") or self.description.text()))
        self._loading = False
        self._validate()

    def _edited(self, *_args: Any) -> None:
        if self._loading:
            return
        if self.preset.currentText() != "custom":
            self._loading = True
            self.preset.setCurrentIndex(self.preset.findText("custom"))
            self._loading = False
        self._validate()
        self.changed.emit()

    # --- validation -----------------------------------------------------------------------------
    def _parse(self) -> tuple[SweepSpec | None, dict[str, str], list[str]]:
        spec = SweepSpec(name=self.preset.currentText(), description=self.description.text())
        errors: dict[str, str] = {}
        for prm in FORM:
            text = self.edits[prm.name].text().strip()
            if not text and prm.optional:
                setattr(spec, prm.name, [])
                continue
            try:
                setattr(spec, prm.name, prm.parse_text(text, prm.label))
            except PlanError as e:
                errors[prm.name] = str(e)
        spec.repetitions = self.reps.value()
        general: list[str] = []
        if not errors:
            try:
                spec.models = self.models or ["(model)"]
                spec.validate("sweep")
            except PlanError as e:
                msg = str(e).removeprefix("sweep: ")
                hit = next((p.name for p in FORM if p.name in msg), None)
                if hit:
                    errors[hit] = msg
                else:
                    general.append(msg)
        return (None if errors or general else spec), errors, general

    def _validate(self) -> SweepSpec | None:
        spec, errors, general = self._parse()
        for name, edit in self.edits.items():
            edit.setStyleSheet(error_style() if name in errors else "")
        self._show_errors(list(errors.values()) + general)
        if spec is not None:
            n = len(replace(spec, models=["m"]).tests())
            models = max(len(self.models), 1)
            self.count.setText(f"{n * models} test{'s' if n * models != 1 else ''} × {spec.repetitions} rep"
                               f"{'s' if spec.repetitions != 1 else ''} (+1 warmup each)")
        else:
            self.count.setText("")
        return spec

    def _show_errors(self, messages: list[str]) -> None:
        self.error.setText("\n".join(messages))
        self.error.setVisible(bool(messages))

    def spec(self, models: list[str]) -> SweepSpec | None:
        """A validated SweepSpec for ``models``, or None with the errors shown."""
        self.models = list(models)
        spec = self._validate()
        if spec is None:
            return None
        return replace(spec, models=list(models))

    def set_models(self, models: list[str]) -> None:
        self.models = list(models)
        self._validate()

    def set_running(self, running: bool) -> None:
        self.run_button.setEnabled(not running)
        self.cancel_button.setEnabled(running)
        self.preset.setEnabled(not running)
        for e in self.edits.values():
            e.setReadOnly(running)
        self.reps.setEnabled(not running)


def error_style() -> str:
    """A field with an error: the page's "bad" colour as its border and a tint of it behind the text."""
    bad = theme.ink("bad")
    return f"QLineEdit {{ border: 1px solid {bad}; background: {theme.tint(bad, 0.12).name()}; }}"
