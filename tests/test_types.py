"""The type checker (mypy, configured in pyproject.toml) and the typed rows it guards.

mypy runs strict over ``app`` and ``engines``. Modules not yet clean are listed as exceptions in pyproject.toml (one
``[[tool.mypy.overrides]]`` table with ``ignore_errors``); the list only shrinks: a listed module that has become
clean fails here until it leaves the list, and the packages named in :data:`STRICT_PACKAGES` may never be on it.
Result columns are read by attributes; a column's name as a string key only where text enters or leaves, in the
files docs/architecture.md lists (:func:`test_string_keys_only_where_docs_say`).
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Packages checked strictly with no exception (issue #52): prediction, results, compare, choose, and the Qt-free
#: views where they exist.
STRICT_PACKAGES = ("app.predict", "app.results", "app.compare", "app.choose", "app.views")
#: The acceptance check of issue #52: a result column read as a key (``r.get("…")``, ``row["…"]``), or any dict read
#: by a literal key.
STRING_KEY = re.compile(r'\b(r|row|rows?\[[^]]*\])\.get\("|\["[a-z_]+"\]')
_ERROR = re.compile(r"^(?P<path>[\w/]+\.py):\d+: error: ")


def _mypy_config() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]


def _exceptions(config: dict[str, Any]) -> list[str]:
    """The modules listed as exceptions: the overrides that ignore errors."""
    return [m for o in config.get("overrides", []) if o.get("ignore_errors") for m in o["module"]]


def _covers(pattern: str, module: str) -> bool:
    """Whether mypy's override ``pattern`` (``a.b``, ``a.b.*``) applies to ``module``."""
    if pattern.endswith(".*"):
        return module == pattern[:-2] or module.startswith(pattern[:-1])
    return module == pattern


def _module_of(path: str) -> str:
    dotted = path.removesuffix(".py").replace("/", ".")
    return dotted.removesuffix(".__init__")


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return repr(value)


def _config_text(config: dict[str, Any], overrides: list[dict[str, Any]]) -> str:
    lines = ["[tool.mypy]", *(f"{k} = {_toml_value(v)}" for k, v in config.items() if k != "overrides")]
    for o in overrides:
        lines += ["", "[[tool.mypy.overrides]]", *(f"{k} = {_toml_value(v)}" for k, v in o.items())]
    return "\n".join(lines) + "\n"


def test_the_strict_packages_have_no_exception() -> None:
    """strict on, and none of the packages issue #52 names (nor a module in them) on the exception list."""
    config = _mypy_config()
    assert config["strict"] is True and config["files"] == ["app", "engines"]
    listed = _exceptions(config)
    assert listed == sorted(listed), "keep the exception list sorted"
    for package in STRICT_PACKAGES:
        for pattern in listed:
            assert not (_covers(pattern, package) or pattern.startswith(package + ".")), (pattern, package)
    for pattern in listed:  # an exception names a module that exists (a renamed one would silently check nothing)
        base = ROOT / pattern.removesuffix(".*").replace(".", "/")
        assert base.with_suffix(".py").is_file() or (base / "__init__.py").is_file(), pattern


@pytest.mark.heavy  # mypy over app and engines in a subprocess: a minute on two cores
def test_the_type_checker_finds_no_error_and_the_exception_list_only_shrinks(
        request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """One mypy run with the exceptions' errors shown: none outside the list, and each listed module still has one
    (a module that became clean leaves the list, so the list only shrinks)."""
    config = _mypy_config()
    kept = [o for o in config.get("overrides", []) if not o.get("ignore_errors")]
    (tmp_path / "mypy.toml").write_text(_config_text(config, kept), encoding="utf-8")
    cache = getattr(request.config, "cache", None)
    cache_dir = cache.mkdir("mypy") if cache is not None else tmp_path / "mypy-cache"
    proc = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(tmp_path / "mypy.toml"),
                           "--cache-dir", str(cache_dir), "--no-pretty", "--no-error-summary"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr  # 1: errors found; anything else: mypy failed
    errors = [line for line in proc.stdout.splitlines() if _ERROR.match(line)]
    listed = _exceptions(config)

    def excepted(line: str) -> bool:
        match = _ERROR.match(line)
        assert match is not None
        return any(_covers(p, _module_of(match["path"])) for p in listed)

    outside = [line for line in errors if not excepted(line)]
    assert not outside, "type errors outside pyproject.toml's exception list:\n" + "\n".join(outside)
    modules_with_errors = {_module_of(m["path"]) for line in errors if (m := _ERROR.match(line))}
    clean = [p for p in listed if not any(_covers(p, m) for m in modules_with_errors)]
    assert not clean, f"now clean: take {clean} off pyproject.toml's mypy exception list"


def _string_key_files() -> dict[str, int]:
    """Files of app/ the acceptance grep finds, with how many lines each."""
    found: dict[str, int] = {}
    for path in sorted((ROOT / "app").rglob("*.py")):
        n = sum(1 for line in path.read_text(encoding="utf-8").splitlines() if STRING_KEY.search(line))
        if n:
            found[path.relative_to(ROOT).as_posix()] = n
    return found


def _documented_files() -> set[str]:
    """The files docs/architecture.md lists under "Where string keys are read"."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("## Where string keys are read", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"`(app/[\w/]+\.py)`", section))


def test_string_keys_only_where_docs_say() -> None:
    """Issue #52's grep finds only the files docs/architecture.md lists (where text enters or leaves, and the few
    typed tables read by a fixed name), and each listed file still has a hit (the list stays true)."""
    found, documented = _string_key_files(), _documented_files()
    assert not set(found) - documented, f"string keys outside the listed files: {sorted(set(found) - documented)}"
    assert not documented - set(found), f"listed, but no string key there any more: {sorted(documented - set(found))}"
