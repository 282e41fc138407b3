"""``gguf-bench`` imports a command's module only when that command runs (issue #54): ``--help`` and ``predict``
pull in neither numpy, scipy, Qt nor llama.cpp, nor the other commands' modules; the parser built that way is the
one every command had before."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from app.cli.main import COMMANDS, build_parser, is_user_error, parse_args
from app.paths import REPO_ROOT

#: What no `--help` or `predict` import chain may pull in: the heavy libraries and every other command's module.
FORBIDDEN_TOP = ("numpy", "scipy", "PySide6", "pyqtgraph", "llama_cpp", "gguf", "yaml")
OTHER_COMMANDS = ("app.cli.run_cmd", "app.cli.choose_cmd", "app.cli.calibrate_cmd", "app.cli.quantize_cmd",
                  "app.cli.quality_cmd", "app.cli.compare_cmd", "app.cli.doctor_cmd", "app.cli.import_cmd",
                  "app.cli.read_cmds", "app.cli.remote_cmd", "app.calibrate", "app.choose", "app.quality",
                  "app.quantize", "app.remote", "app.compare", "app.doctor", "app.bench_import", "app.run.session",
                  "app.gui")

_LOADED = """
import json, sys
from app.cli.main import parse_args
try:
    parse_args(sys.argv[1:])
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)))
"""


def _modules_after_parsing(*argv: str) -> set[str]:
    """The modules a fresh interpreter holds once ``gguf-bench ARGV`` is parsed (its command module imported)."""
    proc = subprocess.run([sys.executable, "-c", _LOADED, *argv], capture_output=True, text=True, cwd=REPO_ROOT,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    return set(json.loads(proc.stdout.splitlines()[-1]))


def _pulled_in(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == n or m.startswith(n + ".") for n in names))


@pytest.mark.heavy  # fresh interpreters in subprocesses
@pytest.mark.parametrize("argv", [("--help",), ("predict", "--help"), ("predict", "-m", "model.gguf")])
def test_help_and_predict_import_no_heavy_library_and_no_other_command(argv: tuple[str, ...]) -> None:
    modules = _modules_after_parsing(*argv)
    assert _pulled_in(modules, FORBIDDEN_TOP) == []
    assert _pulled_in(modules, OTHER_COMMANDS) == []
    if "predict" in argv:
        assert "app.cli.predict_cmd" in modules  # the check can fail: the command's own module is there
    else:
        assert "app.cli.predict_cmd" not in modules


@pytest.mark.heavy  # a fresh interpreter in a subprocess
def test_another_command_imports_its_own_module_only() -> None:
    modules = _modules_after_parsing("choose", "a.gguf")
    assert "app.cli.choose_cmd" in modules
    assert _pulled_in(modules, ("app.cli.calibrate_cmd", "app.cli.quality_cmd", "app.cli.import_cmd")) == []


def test_the_lazy_parser_lists_every_command_as_the_full_one_does() -> None:
    """The one-line help main.py keeps for each command is the help its module gives its parser."""
    assert build_parser(real=()).format_help() == build_parser().format_help()
    assert [name for name, _, _ in COMMANDS] == list(build_parser()._subparsers._group_actions[0].choices)


@pytest.mark.parametrize("argv, command", [
    (["predict"], "predict"), (["--store", "s.db", "history"], "history"), (["--store=s.db", "export", "last"],
                                                                           "export"),
    (["--sto", "s.db", "hw", "--no-probe"], "hw"), (["inspect", "m.gguf", "--json"], "inspect"),
])
def test_the_command_given_is_the_one_parsed(argv: list[str], command: str) -> None:
    args = parse_args(argv)
    assert args.command == command and callable(args.func)
    assert args == build_parser().parse_args(argv)  # the same namespace as the parser of every command


def test_a_bad_command_or_flag_is_refused_as_before(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["nosuch"], ["predict", "--nosuch"], []):
        with pytest.raises(SystemExit) as info:
            parse_args(argv)
        assert info.value.code == 2
    assert "invalid choice: 'nosuch'" in capsys.readouterr().err


def test_user_errors_are_known_without_importing_their_modules() -> None:
    from app.cli.errors import UserError
    from app.model.gguf_facts import GGUFFileError

    assert is_user_error(UserError("x")) and is_user_error(GGUFFileError("m.gguf", "bad"))
    assert not is_user_error(ValueError("a bug"))
