"""Issue #44, the window's share of "every value from outside checked where it enters": an unknown ``--sweep`` preset
is refused in one line before any window opens (the same check as ``gguf-bench run --sweep``), and text from outside
(a file name, a server's reply) reaches the window's messages, status bar and stderr lines with its control
characters escaped (the command line's helper, :func:`app.shown_text.escape_controls`)."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from app.gui import main as gui_main
from app.gui.panels.messages import MessageArea
from app.run.plan import PlanError, preset_names, sweep_path

EVIL = "evil\x1b]0;owned\x07\x1b[2J\u202egnp.gguf"
SHOWN = "evil\\x1b]0;owned\\x07\\x1b[2J\\u202egnp.gguf"


def test_an_unknown_sweep_is_refused_in_one_line_before_any_window(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import app.gui.main_window as main_window

    def no_window(*_a: object, **_k: object) -> None:
        raise AssertionError("a window opened for an unknown --sweep")

    monkeypatch.setattr(main_window, "MainWindow", no_window)
    monkeypatch.setattr(gui_main, "_self_test", no_window)
    assert gui_main.main(["--demo-run", "--sweep", "nosuch"]) == gui_main.EXIT_USAGE
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("gguf-workbench: --sweep nosuch: no such sweep preset (presets: quick, standard")
    assert all(name in lines[0] for name in preset_names())


def test_the_window_and_the_command_line_check_sweep_names_in_one_place() -> None:
    assert sweep_path("quick", files=False).name == "quick.toml"
    for bad in ("nosuch", "../sweeps/quick", "", "  "):
        with pytest.raises(PlanError, match="presets: quick"):
            sweep_path(bad, files=False)
    with pytest.raises(PlanError, match=r"no such sweep file or preset \(presets: .*, or a TOML file\)"):
        sweep_path("nosuch")
    with pytest.raises(PlanError) as caught:
        sweep_path("x" * 5000, files=False)
    assert len(str(caught.value)) < 300  # the value named, not 5,000 characters of it


def test_a_message_shows_control_characters_escaped(qtbot) -> None:  # noqa: ANN001 - qtbot is pytest-qt's
    area = MessageArea()
    qtbot.addWidget(area)
    area.add(f"cannot read {EVIL}: not a GGUF file", "error")
    assert area.messages() == [f"cannot read {SHOWN}: not a GGUF file"]
    shown = area._rows[0].label.text() + area._rows[0].label.toolTip()
    assert not any(ord(c) < 0x20 or 0x7f <= ord(c) <= 0x9f or c == "\u202e" for c in shown), repr(shown)


@pytest.mark.heavy  # the real window (the default model's facts)
def test_a_file_name_in_the_status_bar_is_text_with_controls_escaped(window) -> None:  # noqa: ANN001
    window.notify(f"Exported 3 row(s) to /tmp/<b>{EVIL}</b>.csv", "info")
    assert window.status_label.text() == f"Exported 3 row(s) to /tmp/<b>{SHOWN}</b>.csv"
    assert window.status_label.textFormat() == Qt.TextFormat.PlainText  # "<b>" in a name is shown, not obeyed


def test_the_scripted_modes_stderr_line_escapes_control_characters(capsys: pytest.CaptureFixture[str]) -> None:
    gui_main.say(f"cannot replay {EVIL}: it holds no events")
    assert capsys.readouterr().err == f"gguf-workbench: cannot replay {SHOWN}: it holds no events\n"
