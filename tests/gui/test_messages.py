"""Issue #28: messages update in place, notes expire, errors outlive notes, colours follow the palette."""

from __future__ import annotations

import pytest
from PySide6.QtGui import QColor, QPalette

from app.gui.panels import messages as messages_mod
from app.gui.panels.messages import MessageArea, level_colours
from app.gui.sweep_controller import _tests_phrase


def test_a_repeated_key_updates_its_message_in_place(qtbot) -> None:  # noqa: ANN001
    area = MessageArea()
    qtbot.addWidget(area)
    area.add("Test 1 failed. file not found", "error", key="failed:x")
    area.add("something else", "error")
    area.add("Tests 1 and 2 failed. file not found", "error", key="failed:x")
    assert area.messages() == ["something else", "Tests 1 and 2 failed. file not found"]
    area.add("something else", "error")  # the same text is its own key: no repeat
    assert len(area.messages()) == 2
    area.remove_key("failed:x")
    assert area.messages() == ["something else"]


def test_notes_expire_and_errors_stay(qtbot, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    monkeypatch.setattr(messages_mod, "NOTE_EXPIRE_S", 0.05)
    area = MessageArea()
    qtbot.addWidget(area)
    area.add("a failure", "error")
    area.add("machine busy", "warning")
    assert len(area.messages()) == 2
    qtbot.waitUntil(lambda: area.messages() == ["a failure"], timeout=2000)


def test_an_error_outlives_the_notes_after_it(qtbot) -> None:  # noqa: ANN001
    area = MessageArea()
    qtbot.addWidget(area)
    area.add("the error", "error")
    for k in range(messages_mod.MAX_MESSAGES + 2):
        area.add(f"note {k}", "warning")
    assert len(area.messages()) == messages_mod.MAX_MESSAGES and "the error" in area.messages()


@pytest.mark.parametrize("base, text", [("#ffffff", "#000000"), ("#1e1e1e", "#e8e8e8")])
def test_message_colours_follow_the_palette(base: str, text: str) -> None:
    pal = QPalette()
    pal.setColor(QPalette.ColorRole.Base, QColor(base))
    pal.setColor(QPalette.ColorRole.Text, QColor(text))
    for level in ("error", "warning", "info"):
        bg, fg = level_colours(pal, level)
        assert fg == text
        # the tint stays on the palette's side: light stays light, dark stays dark
        assert (QColor(bg).lightness() > 128) == (QColor(base).lightness() > 128)


def test_failed_tests_are_named_in_one_phrase() -> None:
    assert _tests_phrase([3]) == "Test 3"
    assert _tests_phrase([1, 2]) == "Tests 1 and 2"
    assert _tests_phrase([1, 2, 5]) == "Tests 1, 2 and 5"
    assert _tests_phrase(list(range(1, 13))) == "Tests 1, 2, 3 … and 12 (12 tests)"
