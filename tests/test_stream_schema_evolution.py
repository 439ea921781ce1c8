"""A stream keeps the table schema it started with across ALTER TABLE (files read by field id)."""
from __future__ import annotations

import pyarrow as pa
import pytest

from engine.errors import SchemaMismatch

SCHEMA = pa.schema([pa.field("k", pa.int64(), False), pa.field("v", pa.string()), pa.field("n", pa.int32())])


def test_table_stream_keeps_its_schema_when_its_table_object_is_altered(catalog):
    t = catalog.create_table("db.t", SCHEMA, ["k"], options={"bucket": "1"})
    t.write(pa.table({"k": [1], "v": ["a"], "n": pa.array([1], pa.int32())}, schema=SCHEMA))
    stream = t.stream("latest-full", poll_interval=0, idle_timeout=0)
    first = next(stream)
    assert first.to_pylist() == [{"k": 1, "v": "a", "n": 1, "_row_kind": "+I"}]
    # the same table object: rename v -> w, a new column v, n widened to bigint
    t.alter().rename_column("v", "w").add_column("v", pa.string()).update_column_type("n", pa.int64()).commit()
    t.write(pa.table({"k": [2], "w": ["b"], "n": [2], "v": ["new"]}))
    t.alter().drop_column("w").commit()
    t.write(pa.table({"k": [3], "n": [3], "v": ["newer"]}))
    batches = list(stream)
    got = [r for b in batches for r in b.to_pylist()]
    # v keeps its meaning (field id): the renamed column's values, then null once it was dropped; n stays int32
    assert got == [{"k": 2, "v": "b", "n": 2, "_row_kind": "+I"}, {"k": 3, "v": None, "n": 3, "_row_kind": "+I"}]
    assert [b.schema.field("n").type for b in batches] == [pa.int32(), pa.int32()]
    # a stream started now reads through the current schema, older files by field id
    now = list(t.stream("from-snapshot", snapshot_id=1, poll_interval=0, idle_timeout=0))
    assert [r for b in now for r in b.to_pylist()] == [
        {"k": 1, "n": 1, "v": None, "_row_kind": "+I"}, {"k": 2, "n": 2, "v": "new", "_row_kind": "+I"},
        {"k": 3, "n": 3, "v": "newer", "_row_kind": "+I"}]


@pytest.mark.parametrize("pk", [True, False], ids=["pk", "append"])
def test_a_read_opened_before_a_widening_names_the_value_it_cannot_take(catalog, pk):
    """A stream (and a Table object) keeps the schema it was opened with; when another writer's merge-schema write
    widened INT -> BIGINT and stored a value beyond INT, reading that newer file through the old type raises
    SchemaMismatch naming the file, schema and column (was a bare pyarrow ArrowInvalid from every read path)."""
    schema = pa.schema([pa.field("k", pa.int64(), False), pa.field("n", pa.int32())])
    t = catalog.create_table("db.t", schema, ["k"] if pk else None, options={"bucket": "1" if pk else "-1"})
    t.write(pa.table({"k": [1], "n": pa.array([1], pa.int32())}, schema=schema))
    stream = t.stream("latest-full", poll_interval=0, idle_timeout=0)
    next(stream)
    catalog.get_table("db.t").write(pa.table({"k": [2], "n": [2 ** 40]}), merge_schema=True, type_widening=True)
    for read in (lambda: list(stream), t.read, lambda: list(t.to_reader())):
        with pytest.raises(SchemaMismatch, match=r"schema 1, newer than this read's schema 0.*column 'n'") as e:
            read()
        assert e.value.column == "n"
    assert catalog.get_table("db.t").read().sort_by("k").column("n").to_pylist() == [1, 2 ** 40]


@pytest.mark.parametrize("column, old_type, new_type, value", [
    ("a", pa.list_(pa.int32()), pa.list_(pa.int64()), [2 ** 40]),
    ("m", pa.map_(pa.string(), pa.int32()), pa.map_(pa.string(), pa.int64()), [("x", 2 ** 40)]),
    ("s", pa.struct([("x", pa.int32())]), pa.struct([("x", pa.int64())]), {"x": 2 ** 40}),
], ids=["array-element", "map-value", "row-field"])
def test_a_read_opened_before_a_nested_widening_names_the_value_it_cannot_take(catalog, column, old_type, new_type,
                                                                                value):
    """As above for a widening inside a nested column (merge_schema widens ARRAY elements, MAP values and ROW
    fields): a Table object opened before reads the newer file's out-of-range value as SchemaMismatch naming the
    column, not a bare pyarrow ArrowInvalid."""
    old = pa.schema([pa.field("k", pa.int64(), False), pa.field(column, old_type)])
    t = catalog.create_table("db.t", old, ["k"], options={"bucket": "1"})
    t.write(pa.table({"k": [1], column: pa.array([None], old_type)}, schema=old))
    new = pa.schema([pa.field("k", pa.int64(), False), pa.field(column, new_type)])
    catalog.get_table("db.t").write(pa.table({"k": [2], column: pa.array([value], new_type)}, schema=new),
                                    merge_schema=True, type_widening=True)
    with pytest.raises(SchemaMismatch, match=rf"schema 1, newer than this read's schema 0.*column '{column}'") as e:
        t.read()
    assert e.value.column == column
    assert catalog.get_table("db.t").read().sort_by("k").column(column).to_pylist()[1] == value
