"""Every ``--json`` document the command line prints, each carrying its ``schema_version``.

A document's version goes up when a key changes meaning, is renamed or goes away; adding a key leaves it as it is
(readers ignore keys they do not know). docs/commands.md lists each document's fields, and
``tests/cli/test_json_schema.py`` pins them. A renamed key stays beside its new form for one version, documented as
deprecated (``predict``'s version-1 flat keys: :mod:`app.cli.predict_json`).

``history --json`` prints a list (a list stays a list, so scripts that read it keep working): each run carries the
version.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from app.json_text import standard_json

#: The ``--json`` document versions of the commands whose documents have no version of their own: ``predict``'s is
#: ``app.cli.predict_cmd.PREDICT_SCHEMA_VERSION``, ``choose``'s its report's (``app.choose.chooser.
#: CHOOSE_SCHEMA_VERSION``), each beside the code that shapes the document.
SCHEMA_VERSIONS: dict[str, int] = {
    "inspect": 1,
    "history": 1,
    "hw": 1,
    "doctor": 1,
    "compare": 1,
    "calibrate": 1,
}


def versioned(doc: Mapping[str, Any] | Sequence[Mapping[str, Any]], schema_version: int) -> Any:
    """``doc`` with ``schema_version`` first (in each entry of a list)."""
    if isinstance(doc, Mapping):
        return {"schema_version": schema_version, **{k: v for k, v in doc.items() if k != "schema_version"}}
    return [{"schema_version": schema_version, **entry} for entry in doc]


def json_text(doc: Mapping[str, Any] | Sequence[Mapping[str, Any]], schema_version: int, **dumps: Any) -> str:
    """A ``--json`` document as printed: :func:`versioned`, then standard JSON (:func:`app.json_text.standard_json`,
    with ``json.dumps``'s keywords: a value that is not a finite number is null, never NaN or Infinity)."""
    return standard_json(versioned(doc, schema_version), **dumps)
