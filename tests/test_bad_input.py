"""Bad input is rejected with typed errors from engine.errors, and a rejected write leaves no trace.

After every rejected write: no file was added, removed or changed anywhere under the table directory, and
the table still reads its last good snapshot.
"""
from __future__ import annotations

import glob
import json
import logging
import os
from decimal import Decimal

import pyarrow as pa
import pytest

from tests.conftest import list_files
from tests.interop.pypaimon_util import assert_rows_equal, rows_of

SCHEMA = pa.schema([
    ("dt", pa.string()),
    ("order_id", pa.int64()),
    ("qty", pa.int32()),
    ("amount", pa.decimal128(10, 2)),
    ("note", pa.string()),
])
PK = ["dt", "order_id"]
GOOD_ROWS = [
    {"dt": "2024-01-01", "order_id": 1, "qty": 2, "amount": Decimal("9.99"), "note": "a"},
    {"dt": "2024-01-01", "order_id": 2, "qty": 1, "amount": Decimal("1.00"), "note": None},
    {"dt": "2024-01-02", "order_id": 3, "qty": 5, "amount": Decimal("-3.50"), "note": "c"},
]


def _tree_snapshot(root: str) -> dict[str, tuple[int, int]]:
    out = {}
    for rel in list_files(root):
        st = os.stat(os.path.join(root, rel))
        out[rel] = (st.st_size, st.st_mtime_ns)
    return out


@pytest.fixture
def orders(catalog, warehouse):
    from engine import errors  # noqa: F401  (fail early with a clear import error if the engine is missing)

    t = catalog.create_table("db.orders", schema=SCHEMA, primary_key=PK, partition_keys=["dt"],
                             options={"bucket": "2"})
    sid = t.write(pa.Table.from_pylist(GOOD_ROWS, schema=SCHEMA))
    assert sid == 1
    return t


def table_dir(warehouse, name="orders"):
    return os.path.join(warehouse, "db.db", name)


class Rejected:
    """Run a write that must fail; check the error type, its message, and that nothing changed."""

    def __init__(self, catalog, warehouse, table, name="orders", pk=PK):
        self.catalog, self.table, self.pk = catalog, table, list(pk)
        self.root = table_dir(warehouse, name)
        self.identifier = f"db.{name}"

    def __call__(self, exc_type, fn, *names_in_message):
        PK = self.pk
        before_rows = rows_of(self.table.read(), PK)
        before_snaps = [s.id for s in self.table.snapshots()]
        before_files = _tree_snapshot(self.root)
        with pytest.raises(exc_type) as ei:
            fn()
        msg = str(ei.value)
        for n in names_in_message:
            assert n in msg, f"error message {msg!r} does not name {n!r}"
        after_files = _tree_snapshot(self.root)
        added = sorted(set(after_files) - set(before_files))
        removed = sorted(set(before_files) - set(after_files))
        changed = sorted(k for k in before_files if k in after_files and before_files[k] != after_files[k])
        assert not (added or removed or changed), \
            f"rejected write touched the table directory: added={added} removed={removed} changed={changed}"
        fresh = self.catalog.get_table(self.identifier)
        assert [s.id for s in fresh.snapshots()] == before_snaps
        assert_rows_equal(rows_of(fresh.read(), PK), before_rows, PK, "read after a rejected write")
        assert_rows_equal(rows_of(self.table.read(), PK), before_rows, PK, "read (same handle) after rejection")
        return ei.value


@pytest.fixture
def rejected(catalog, warehouse, orders):
    return Rejected(catalog, warehouse, orders)


def good(**overrides):
    row = dict(GOOD_ROWS[0])
    row.update(overrides)
    return row


# ------------------------------------------------------------------------------------------------------
# wrong schema
# ------------------------------------------------------------------------------------------------------
def test_missing_column(orders, rejected):
    from engine.errors import SchemaMismatch

    data = pa.Table.from_pylist([good()], schema=SCHEMA).drop_columns(["note"])
    e = rejected(SchemaMismatch, lambda: orders.write(data), "note", "orders")
    assert e.column == "note"


def test_missing_primary_key_column_in_delete(orders, rejected):
    from engine.errors import SchemaMismatch

    keys = pa.table({"dt": ["2024-01-01"]})
    e = rejected(SchemaMismatch, lambda: orders.delete(keys), "order_id")
    assert e.column == "order_id"


def test_extra_column(orders, rejected):
    from engine.errors import SchemaMismatch

    data = pa.Table.from_pylist([good()], schema=SCHEMA).append_column("bogus", pa.array([1]))
    e = rejected(SchemaMismatch, lambda: orders.write(data), "bogus")
    assert e.column == "bogus"


@pytest.mark.parametrize("column,array", [
    ("order_id", pa.array(["x1"])),                       # string -> BIGINT
    ("order_id", pa.array([1.5])),                        # fractional double -> BIGINT
    ("qty", pa.array([2**40], pa.int64())),               # overflows INT
    ("amount", pa.array([Decimal("1.234")], pa.decimal128(10, 3))),  # loses a digit of scale
    ("note", pa.array([b"\xff\xfe"], pa.binary())),        # bytes that are not UTF-8 -> STRING
])
def test_type_that_cannot_be_cast_safely(orders, rejected, column, array):
    from engine.errors import SchemaMismatch

    data = pa.Table.from_pylist([good()], schema=SCHEMA)
    data = data.set_column(data.schema.get_field_index(column), column, array)
    e = rejected(SchemaMismatch, lambda: orders.write(data), column)
    assert e.column == column


def test_safe_cast_is_accepted(orders):
    # the counterpart of the test above: lossless casts (int32 -> BIGINT, int64 that fits -> INT) are fine
    data = pa.table({"dt": ["2024-01-03"], "order_id": pa.array([10], pa.int32()),
                     "qty": pa.array([7], pa.int64()), "amount": pa.array([Decimal("2.5")], pa.decimal128(5, 1)),
                     "note": ["ok"]})
    assert orders.write(data) == 2
    got = orders.lookup(pa.table({"dt": ["2024-01-03"], "order_id": pa.array([10], pa.int64())}))
    assert got.to_pylist() == [{"dt": "2024-01-03", "order_id": 10, "qty": 7, "amount": Decimal("2.50"),
                                "note": "ok"}]
    assert got.schema.field("amount").type == pa.decimal128(10, 2)


# ------------------------------------------------------------------------------------------------------
# null keys, bad row kinds
# ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("column", ["order_id", "dt"])
def test_null_primary_key(orders, rejected, column):
    from engine.errors import NullPrimaryKey

    data = pa.Table.from_pylist([GOOD_ROWS[2], good(**{column: None})], schema=SCHEMA)
    e = rejected(NullPrimaryKey, lambda: orders.write(data), column)
    assert e.column == column


def test_null_primary_key_in_delete(orders, rejected):
    from engine.errors import NullPrimaryKey

    keys = pa.table({"dt": ["2024-01-01", "2024-01-01"], "order_id": pa.array([1, None], pa.int64())})
    rejected(NullPrimaryKey, lambda: orders.delete(keys), "order_id")


NESTED_NOT_NULL = pa.schema([pa.field("id", pa.int64(), False),
                             ("r", pa.struct([pa.field("a", pa.int32(), False), ("b", pa.string())])),
                             ("l", pa.list_(pa.field("item", pa.int32(), False))),
                             ("m", pa.map_(pa.string(), pa.field("value", pa.int32(), False)))])


@pytest.mark.parametrize("fmt", ["parquet", "orc", "avro"])
@pytest.mark.parametrize("column,value,path", [("r", {"a": None, "b": "x"}, "r.a"), ("l", [1, None], "l.element"),
                                               ("m", [("k", None)], "m.value")])
def test_null_in_not_null_nested_field(catalog, warehouse, fmt, column, value, path):
    """Arrow does not enforce nested nullability (Table.from_pylist keeps the null): the write is refused naming
    the field, nothing written. (ORC files stored such nulls, committing a table no read could decode.)"""
    from engine.errors import InvalidInput

    t = catalog.create_table("db.nested", schema=NESTED_NOT_NULL, primary_key=["id"],
                             options={"bucket": "1", "file.format": fmt})
    t.write(pa.Table.from_pylist([{"id": 1, "r": None, "l": None, "m": None}], schema=NESTED_NOT_NULL))
    bad = pa.Table.from_pylist([{"id": 2, "r": {"a": 1, "b": None}, "l": [], "m": [], column: value}],
                               schema=NESTED_NOT_NULL)
    rejected = Rejected(catalog, warehouse, t, name="nested", pk=["id"])
    e = rejected(InvalidInput, lambda: t.write(bad), path, column)
    assert e.column == column


@pytest.mark.parametrize("kinds", [["+I", "+X"], [0, 7], ["+I", None], pa.array([0, -1], pa.int8()), ["+I"]])
def test_invalid_row_kind(orders, rejected, kinds):
    from engine.errors import InvalidInput, InvalidRowKind

    data = pa.Table.from_pylist([GOOD_ROWS[2], good(order_id=99)], schema=SCHEMA)
    # a wrong number of kinds may be reported as InvalidRowKind or as its parent InvalidInput
    rejected(InvalidInput if len(kinds) != 2 else InvalidRowKind, lambda: orders.write(data, row_kinds=kinds))


def test_invalid_row_kind_in_rowkind_field(catalog, warehouse):
    from engine.errors import InvalidRowKind

    schema = pa.schema([("id", pa.int64()), ("op", pa.string())])
    t = catalog.create_table("db.rk", schema=schema, primary_key=["id"], options={"bucket": "1",
                                                                                   "rowkind.field": "op"})
    t.write(pa.table({"id": pa.array([1], pa.int64()), "op": ["+I"]}))
    r = Rejected(catalog, warehouse, t, name="rk", pk=["id"])
    r(InvalidRowKind, lambda: t.write(pa.table({"id": pa.array([2, 3], pa.int64()), "op": ["+I", "D"]})), "op")
    r(InvalidRowKind, lambda: t.write(pa.table({"id": pa.array([2], pa.int64()),
                                                "op": pa.array([None], pa.string())})), "op")


def test_rejected_batch_in_new_write_leaves_nothing(orders, rejected):
    from engine.errors import NullPrimaryKey

    def go():
        with orders.new_write() as w:
            w.write(pa.Table.from_pylist([good(order_id=50), good(order_id=51)], schema=SCHEMA))
            w.write(pa.Table.from_pylist([good(order_id=None)], schema=SCHEMA))
            orders.commit(w.prepare_commit())

    rejected(NullPrimaryKey, go, "order_id")


def test_good_write_after_rejections_gets_next_snapshot(orders, rejected):
    from engine.errors import SchemaMismatch

    rejected(SchemaMismatch, lambda: orders.write(pa.table({"dt": ["x"]})))
    assert orders.write(pa.Table.from_pylist([good(order_id=7)], schema=SCHEMA)) == 2
    assert [s.id for s in orders.snapshots()] == [1, 2]


# ------------------------------------------------------------------------------------------------------
# options
# ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("key,value", [
    ("merge-engine", "bogus"),
    ("bucket", "abc"),
    ("bucket", "0"),
    ("bucket", "1_0"),  # Python's int() reads digit separators, Java's Integer.parseInt does not
    ("scan.timestamp-millis", "1_000"),
])
def test_invalid_option_value(catalog, warehouse, key, value):
    from engine.errors import InvalidOption, TableNotFound

    opts = {"bucket": "2", key: value}
    before = list_files(warehouse)
    with pytest.raises(InvalidOption) as ei:
        catalog.create_table("db.badopt", schema=SCHEMA, primary_key=PK, partition_keys=["dt"], options=opts)
    assert key in str(ei.value) and value in str(ei.value)
    assert ei.value.key == key
    assert list_files(warehouse) == before, "a rejected create_table left files behind"
    assert not os.path.exists(table_dir(warehouse, "badopt"))
    assert "badopt" not in catalog.list_tables("db")
    with pytest.raises(TableNotFound):
        catalog.get_table("db.badopt")


def test_unknown_option_key_is_kept_and_logged(catalog, warehouse, caplog):
    caplog.set_level(logging.WARNING)
    opts = {"bucket": "2", "my.custom-key": "42"}
    t = catalog.create_table("db.custom", schema=SCHEMA, primary_key=PK, partition_keys=["dt"], options=opts)
    hits = [r for r in caplog.records if r.name.startswith("lakemerge") and "my.custom-key" in r.getMessage()
            and r.levelno >= logging.WARNING]
    assert hits, f"no lakemerge warning naming the unknown option; got {[(r.name, r.getMessage()) for r in caplog.records]}"
    schema_files = glob.glob(os.path.join(table_dir(warehouse, "custom"), "schema", "schema-*"))
    assert schema_files, "no schema file written"
    with open(sorted(schema_files)[-1]) as f:
        stored = json.load(f)
    assert stored["options"].get("my.custom-key") == "42"
    # the table is usable and the key survives re-opening
    t.write(pa.Table.from_pylist([good()], schema=SCHEMA))
    caplog.clear()
    again = catalog.get_table("db.custom")
    assert rows_of(again.read(), PK)[0]["order_id"] == 1


def test_known_options_do_not_warn(catalog, caplog):
    caplog.set_level(logging.WARNING)
    catalog.create_table("db.quiet", schema=SCHEMA, primary_key=PK, partition_keys=["dt"],
                         options={"bucket": "2", "merge-engine": "deduplicate", "file.format": "parquet"})
    noisy = [r.getMessage() for r in caplog.records if r.name.startswith("lakemerge")
             and any(k in r.getMessage() for k in ("bucket", "merge-engine", "file.format"))]
    assert not noisy, noisy


# ------------------------------------------------------------------------------------------------------
# catalog errors
# ------------------------------------------------------------------------------------------------------
def test_unknown_table(catalog):
    from engine.errors import TableNotFound

    with pytest.raises(TableNotFound) as ei:
        catalog.get_table("db.nope")
    assert "nope" in str(ei.value)
    with pytest.raises(TableNotFound) as ei:
        catalog.drop_table("db.nope")
    assert "nope" in str(ei.value)


def test_dropped_table_is_gone(catalog, warehouse, orders):
    from engine.errors import TableNotFound

    assert "orders" in catalog.list_tables("db")
    catalog.drop_table("db.orders")
    assert "orders" not in catalog.list_tables("db")
    assert not os.path.exists(table_dir(warehouse))
    with pytest.raises(TableNotFound) as ei:
        catalog.get_table("db.orders")
    assert "orders" in str(ei.value)
    catalog.drop_table("db.orders", ignore_if_not_exists=True)
    # the name can be reused and starts from snapshot 1
    t = catalog.create_table("db.orders", schema=SCHEMA, primary_key=PK, partition_keys=["dt"],
                             options={"bucket": "1"})
    assert t.snapshots() == []
    assert t.read().num_rows == 0
    assert t.write(pa.Table.from_pylist([good()], schema=SCHEMA)) == 1


def test_unknown_database(catalog):
    from engine.errors import DatabaseNotFound, LakemergeError, TableNotFound

    with pytest.raises(DatabaseNotFound) as ei:
        catalog.list_tables("nodb")
    assert "nodb" in str(ei.value)
    with pytest.raises(DatabaseNotFound) as ei:
        catalog.create_table("nodb.t", schema=SCHEMA, primary_key=PK, options={"bucket": "1"})
    assert "nodb" in str(ei.value)
    with pytest.raises((DatabaseNotFound, TableNotFound)) as ei:
        catalog.get_table("nodb.t")
    assert isinstance(ei.value, LakemergeError) and "nodb" in str(ei.value)


def test_already_exists(catalog, orders):
    from engine.errors import DatabaseAlreadyExists, TableAlreadyExists

    with pytest.raises(DatabaseAlreadyExists) as ei:
        catalog.create_database("db")
    assert "db" in str(ei.value)
    catalog.create_database("db", ignore_if_exists=True)
    with pytest.raises(TableAlreadyExists) as ei:
        catalog.create_table("db.orders", schema=SCHEMA, primary_key=PK, options={"bucket": "1"})
    assert "orders" in str(ei.value)


def test_unknown_snapshot(orders):
    from engine.errors import SnapshotNotFound

    with pytest.raises(SnapshotNotFound) as ei:
        orders.read(snapshot_id=42)
    assert "42" in str(ei.value) and ei.value.snapshot_id == 42
    with pytest.raises(SnapshotNotFound):
        orders.lookup(pa.table({"dt": ["2024-01-01"], "order_id": pa.array([1], pa.int64())}), snapshot_id=42)


def test_invalid_table_definition(catalog, warehouse):
    from engine.errors import InvalidSchema

    before = list_files(warehouse)
    with pytest.raises(InvalidSchema) as ei:
        catalog.create_table("db.badpk", schema=SCHEMA, primary_key=["missing_col"], options={"bucket": "1"})
    assert "missing_col" in str(ei.value)
    from engine.errors import InvalidOption

    # Paimon: with a fixed bucket the primary key must contain every partition key
    with pytest.raises((InvalidSchema, InvalidOption)) as ei:
        catalog.create_table("db.badpk", schema=SCHEMA, primary_key=PK, partition_keys=["note"],
                             options={"bucket": "1"})
    assert "note" in str(ei.value)
    assert list_files(warehouse) == before
