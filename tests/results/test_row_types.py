"""The row types mirror the field tables key for key and type for type (a column added to one and not the other
fails here)."""

from __future__ import annotations

import typing

from app.results.fields import FIELD_TABLE, QUALITY_TABLE, Field
from app.results.row_types import QualityRow, ResultRow


def _declared(row_type: type) -> dict[str, object]:
    return typing.get_type_hints(row_type)


def _expected(table: tuple[Field, ...]) -> dict[str, object]:
    want = {list: list[typing.Any]}
    return {f.name: want.get(f.type, f.type) | None for f in table}


def test_result_row_is_the_field_table() -> None:
    assert _declared(ResultRow) == _expected(FIELD_TABLE)
    assert list(_declared(ResultRow)) == [f.name for f in FIELD_TABLE]  # the CSV's order, too
    assert not ResultRow.__required_keys__  # a failed test's row holds only what was known before it ran


def test_quality_row_is_the_quality_table() -> None:
    assert _declared(QualityRow) == _expected(QUALITY_TABLE)
