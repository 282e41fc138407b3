"""The sweep editor's form comes from the parameter table; flash attention takes 0, 1 and auto."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from PySide6.QtWidgets import QLabel

from app.gui import theme
from app.gui.panels.sweep_editor import SweepEditor
from app.run.params import LIST_PARAMS, PARAM
from app.run.plan import SweepSpec


@pytest.fixture
def editor(qtbot) -> Iterator[SweepEditor]:  # noqa: ANN001 - qtbot is pytest-qt's
    ed = SweepEditor()
    qtbot.addWidget(ed)
    yield ed


def _type(ed: SweepEditor, name: str, text: str) -> None:
    ed.edits[name].setText(text)
    ed.edits[name].textEdited.emit(text)


def test_every_list_parameter_has_a_form_row_with_the_table_label_and_tooltip(editor: SweepEditor) -> None:
    labels = {lab.text(): lab for lab in editor.findChildren(QLabel)}
    assert list(editor.edits) == [p.name for p in LIST_PARAMS if p.label]  # unlabelled: CLI/TOML only (issue #27)
    for prm in (p for p in LIST_PARAMS if p.label):
        assert editor.edits[prm.name].toolTip() == prm.tip
        assert labels[prm.label + ":"].toolTip() == prm.tip
    assert PARAM["repetitions"].label + ":" in labels and editor.reps.toolTip() == PARAM["repetitions"].tip


def test_flash_attention_field_shows_auto_and_takes_0_1_auto(editor: SweepEditor) -> None:
    assert editor.edits["flash_attn"].text() == "auto"  # the default, as llama-bench
    _type(editor, "flash_attn", "0,1,auto")
    spec = editor.spec(["m.gguf"])
    assert spec is not None and spec.flash_attn == [0, 1, -1]
    assert editor.count.text().startswith("3 tests")
    _type(editor, "flash_attn", "no")
    assert editor.spec(["m.gguf"]) is None and "'no'" in editor.error.text()
    assert theme.ink("bad") in editor.edits["flash_attn"].styleSheet()  # marked as an error
    editor.load_spec(SweepSpec(flash_attn=[0, -1, True]))
    assert editor.edits["flash_attn"].text() == "0,auto,1"


def test_empty_v_cache_means_same_as_k(editor: SweepEditor) -> None:
    _type(editor, "type_k", "f16,q8_0")
    _type(editor, "type_v", "")
    spec = editor.spec(["m.gguf"])
    assert spec is not None and spec.type_v == []
    assert [(t.type_k, t.type_v) for t in spec.tests()] == [("f16", "f16"), ("q8_0", "q8_0")]
    assert editor.count.text().startswith("2 tests")
