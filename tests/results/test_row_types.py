"""The typed rows: each class is its field table (a column added to one and not the other fails here), decodes and
checks a row where it enters, and gives back exactly what it was given."""

from __future__ import annotations

import copy
import pickle
import typing

import pytest

from app.results.fields import FIELD_TABLE, QUALITY_TABLE, QUANTIZE_TABLE, Field, RowStatus
from app.results.row_types import QualityRow, QuantizeRow, ResultRow, Row, RowError


def _declared(row_type: type[Row]) -> dict[str, object]:
    hints = typing.get_type_hints(row_type)
    return {k: v for k, v in hints.items() if k not in ("TABLE", "KIND", "_values")}


def _expected(table: tuple[Field, ...]) -> dict[str, object]:
    want = {list: list[typing.Any]}
    return {f.name: want.get(f.type, f.type) | None for f in table}


@pytest.mark.parametrize(("row_type", "table"), [(ResultRow, FIELD_TABLE), (QualityRow, QUALITY_TABLE),
                                                  (QuantizeRow, QUANTIZE_TABLE)])
def test_each_row_class_declares_its_table(row_type: type[Row], table: tuple[Field, ...]) -> None:
    assert _declared(row_type) == _expected(table)
    assert list(_declared(row_type)) == [f.name for f in table]  # the CSV's order, too
    assert all(isinstance(getattr(row_type, f.name), property) for f in table)


def test_a_field_is_none_where_the_row_does_not_hold_it() -> None:
    row = ResultRow(test_index=3, status=RowStatus.OK, decode_tps=41.5)
    assert (row.test_index, row.status, row.decode_tps, row.prefill_tps) == (3, "ok", 41.5, None)
    assert row.holds("decode_tps") and not row.holds("prefill_tps")


def test_a_row_is_read_by_attributes_not_as_a_mapping() -> None:
    row = ResultRow(test_index=3, decode_tps=41.5)
    for mapping_only in ("get", "keys", "items", "__getitem__", "__iter__", "__len__", "__contains__"):
        assert not hasattr(row, mapping_only), mapping_only
    with pytest.raises(TypeError):
        row["decode_tps"]  # type: ignore[index]
    with pytest.raises(TypeError):
        dict(row)  # type: ignore[call-overload]
    # the printers the field table drives read a field by its name; a name outside the table is a KeyError
    assert (row.value("decode_tps"), row.value("prefill_tps")) == (41.5, None)
    with pytest.raises(KeyError, match="decode_tok_s"):
        row.value("decode_tok_s")
    assert QualityRow(ppl=9.5).value("ppl") == 9.5


def test_a_row_is_frozen_and_replace_makes_a_new_one() -> None:
    row = ResultRow(test_index=0, status=RowStatus.PENDING)
    with pytest.raises(AttributeError, match="frozen"):
        row.status = RowStatus.OK  # type: ignore[misc]
    done = row.replace(status=RowStatus.OK, decode_tps=12.0)
    assert (row.status, done.status, done.decode_tps) == ("pending", "ok", 12.0)
    assert list(done.to_mapping()) == ["test_index", "status", "decode_tps"]  # a held key keeps its place


def test_a_name_outside_the_table_is_refused_where_code_makes_a_row() -> None:
    with pytest.raises(TypeError, match="no field 'decode_tok_s'"):
        ResultRow(decode_tok_s=1.0)
    with pytest.raises(TypeError, match="no field 'ppl'"):
        ResultRow().replace(ppl=1.0)


def test_a_wrong_typed_value_is_refused_in_one_line_naming_the_field() -> None:
    with pytest.raises(RowError) as e:
        ResultRow.from_mapping({"test_index": 1, "decode_tps": "fast"})
    assert str(e.value) == "result row: decode_tps: str 'fast' where the field table has float"
    with pytest.raises(RowError, match="^quality row: is_reference: int 1 where the field table has bool$"):
        QualityRow.from_mapping({"is_reference": 1})
    with pytest.raises(RowError, match="n_gen: bool True"):
        ResultRow(n_gen=True)
    with pytest.raises(RowError, match="not a table"):
        ResultRow.from_mapping([("n_gen", 1)])  # type: ignore[arg-type]


def test_an_old_row_with_missing_and_extra_keys_decodes_and_gives_them_back() -> None:
    old = {"test_index": 0, "status": "ok", "n_prompt": 8, "prefill_tps": 95.0, "kv_type": "f16",
           "model_size": 96573849.6}  # no decode column, a key no build writes now, a byte count as a float
    row = ResultRow.from_mapping(old)
    assert (row.decode_tps, row.model_size, row.extra) == (None, 96573850, {"kv_type": "f16"})
    assert row.to_mapping() == {**old, "model_size": 96573850}
    assert list(row.to_mapping()) == list(old)
    assert ResultRow.from_mapping(row.to_mapping()) == row


def test_rows_compare_copy_and_pickle_by_value() -> None:
    row = ResultRow.from_mapping({"test_index": 2, "samples_ns": [1, 2], "odd": {"a": 1}})
    assert row == ResultRow.from_mapping(row.to_mapping()) and row != QuantizeRow()
    assert copy.deepcopy(row) == row and pickle.loads(pickle.dumps(row)) == row
    assert row != ResultRow(test_index=2)
    assert "test_index=2" in repr(row)


def test_a_quantize_row_is_its_table() -> None:
    from app.quantize.session import QUANTIZE_COLUMNS

    assert QUANTIZE_COLUMNS == tuple(f.name for f in QUANTIZE_TABLE)
    row = QuantizeRow(type="q4_k_m", output_index=1, reference_is_dequantized=False)
    assert (row.type, row.output_index, row.model_size) == ("q4_k_m", 1, None)
