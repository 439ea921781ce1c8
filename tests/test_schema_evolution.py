"""Schema evolution: Paimon's rules for each change, schema-N files, and old files read by field id."""
from __future__ import annotations

import json
import os

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.errors import CommitConflict, InvalidInput, InvalidSchema
from engine.schema_change import Move, SchemaChange, apply_changes, is_widening
from engine.types import parse_atomic

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("qty", pa.int32()), ("price", pa.float32())])


@pytest.fixture
def table(catalog):
    t = catalog.create_table("db.t", SCHEMA, primary_key="id", options={"bucket": "2"})
    t.write(pa.table({"id": [1, 2], "name": ["a", "b"], "qty": [10, 20], "price": [1.5, 2.5]}, schema=SCHEMA))
    return t


def schema_file(table, n: int) -> dict:
    with open(os.path.join(table.root, "schema", f"schema-{n}")) as f:
        return json.load(f)


def rows(t, **kw) -> list[dict]:
    return sorted(t.read(**kw).to_pylist(), key=lambda r: r["id"])


def test_add_column_gets_next_field_id_and_old_rows_read_null(table):
    table.alter().add_column("city", pa.string()).commit()
    js = schema_file(table, 1)
    assert js["id"] == 1 and js["highestFieldId"] == 4
    assert [(f["id"], f["name"]) for f in js["fields"]][-1] == (4, "city")
    assert schema_file(table, 0)["highestFieldId"] == 3  # schema-0 untouched
    assert [r["city"] for r in rows(table)] == [None, None]
    table.write(pa.table({"id": [3], "name": ["c"], "qty": [30], "price": [3.5], "city": ["Oslo"]}))
    assert [r["city"] for r in rows(table)] == [None, None, "Oslo"]


def test_add_column_positions(table):
    table.alter().add_column("f", pa.int8(), first=True).add_column("m", pa.int8(), after="name") \
        .add_column("b", pa.int8(), before="price").commit()
    assert table.schema.field_names == ("f", "id", "name", "m", "qty", "b", "price")
    assert table.read().column_names == ["f", "id", "name", "m", "qty", "b", "price"]
    assert [f.id for f in table.schema.fields] == [4, 0, 1, 5, 2, 6, 3]


def test_move_column(table):
    table.alter().move_column("price", first=True).commit()
    assert table.schema.field_names == ("price", "id", "name", "qty")
    table.alter().move_column("price", after="qty").commit()
    assert table.schema.field_names == ("id", "name", "qty", "price")
    assert rows(table)[0] == {"id": 1, "name": "a", "qty": 10, "price": 1.5}


def test_rename_column_found_by_field_id_in_old_files(table):
    table.alter().rename_column("name", "label").commit()
    assert [r["label"] for r in rows(table)] == ["a", "b"]
    # A new column that takes the old name is a different field: null in old files.
    table.alter().add_column("name", pa.string()).commit()
    assert [(r["label"], r["name"]) for r in rows(table)] == [("a", None), ("b", None)]
    assert rows(table, filter=[("label", "=", "b")])[0]["id"] == 2


def test_rename_primary_key_column_updates_key_and_reads_old_files(table):
    table.alter().rename_column("id", "order_id").commit()
    assert table.schema.primary_keys == ("order_id",)
    table.write(pa.table({"order_id": [2], "name": ["B"], "qty": [21], "price": [2.0]}))
    got = sorted(table.read().to_pylist(), key=lambda r: r["order_id"])
    assert [(r["order_id"], r["name"]) for r in got] == [(1, "a"), (2, "B")]
    assert table.lookup(pa.table({"order_id": [1]})).to_pylist()[0]["name"] == "a"
    report = table.check()  # files written before the rename hold _KEY_id, the key of the schema they name
    assert report.ok, report.problems


def test_drop_column_and_readd_same_name_is_a_new_column(table):
    table.alter().drop_column("qty").commit()
    assert "qty" not in table.read().column_names
    table.alter().add_column("qty", pa.int64()).commit()
    assert [r["qty"] for r in rows(table)] == [None, None]
    assert schema_file(table, 2)["highestFieldId"] == 4


def test_widen_types_cast_old_files(table):
    table.alter().update_column_type("qty", pa.int64()).update_column_type("price", "DOUBLE").commit()
    out = table.read()
    assert out.schema.field("qty").type == pa.int64() and out.schema.field("price").type == pa.float64()
    assert [r["qty"] for r in rows(table)] == [10, 20]
    table.write(pa.table({"id": [3], "name": ["c"], "qty": [2**40], "price": [0.1]}))
    assert rows(table)[-1]["qty"] == 2**40
    assert rows(table, filter=[("qty", ">", 15)])[0]["id"] == 2


def test_widen_decimal(catalog):
    from decimal import Decimal
    t = catalog.create_table("db.d", pa.schema([("id", pa.int32()), ("v", pa.decimal128(5, 2))]), "id",
                             options={"bucket": "1"})
    t.write(pa.table({"id": [1], "v": pa.array([Decimal("123.45")], pa.decimal128(5, 2))}))
    t.alter().update_column_type("v", "DECIMAL(10, 3)").commit()
    assert t.read().column("v").to_pylist() == [Decimal("123.450")]
    with pytest.raises(InvalidSchema, match="without losing information"):
        t.alter().update_column_type("v", "DECIMAL(10, 1)").commit()


@pytest.mark.parametrize("old,new,ok", [
    ("INT", "BIGINT", True), ("TINYINT", "INT", True), ("BIGINT", "INT", False), ("FLOAT", "DOUBLE", True),
    ("DOUBLE", "FLOAT", False), ("INT", "DOUBLE", True), ("BIGINT", "DOUBLE", False),
    ("INT", "DECIMAL(10, 0)", True), ("INT", "DECIMAL(9, 0)", False), ("DECIMAL(5, 2)", "DECIMAL(6, 3)", True),
    ("DECIMAL(5, 2)", "DECIMAL(5, 3)", False), ("VARCHAR(5)", "VARCHAR(10)", True), ("VARCHAR(10)", "VARCHAR(5)", False),
    ("CHAR(3)", "STRING", True), ("INT", "STRING", False), ("TIMESTAMP(3)", "TIMESTAMP(6)", True),
    ("TIMESTAMP(6)", "TIMESTAMP(3)", False), ("DATE", "TIMESTAMP(3)", False), ("BOOLEAN", "INT", False),
])
def test_widening_rules(old, new, ok):
    assert is_widening(parse_atomic(old), parse_atomic(new)) is ok


def test_nullability(table):
    with pytest.raises(InvalidSchema, match="NOT NULL"):
        table.alter().set_nullable("qty", False).commit()
    with pytest.raises(InvalidSchema, match="must stay NOT NULL"):
        table.alter().set_nullable("id", True).commit()
    assert table.schema.id == 0


def test_nullability_on_empty_table(catalog):
    t = catalog.create_table("db.e", SCHEMA, "id", options={"bucket": "1"})
    t.alter().set_nullable("qty", False).commit()
    assert not t.schema.field("qty").type.nullable
    t.alter().set_nullable("qty", True).commit()
    assert t.schema.field("qty").type.nullable


@pytest.mark.parametrize("change,match", [
    (SchemaChange.drop_column("id"), "primary key"),
    (SchemaChange.update_column_type("id", "INT"), "primary key"),
    (SchemaChange.add_column("name", pa.string()), "already exists"),
    (SchemaChange.add_column("z", "INT NOT NULL"), "NOT NULL"),
    (SchemaChange.rename_column("nope", "x"), "does not exist"),
    (SchemaChange.rename_column("name", "qty"), "already exists"),
    (SchemaChange.update_column_type("name", "INT"), "without losing information"),
    (SchemaChange.remove_option("bucket"), "Cannot reset bucket"),
    (SchemaChange.set_option("bucket", "-1"), "Cannot change bucket to -1"),
    (SchemaChange.set_option("merge-engine", "first-row"), "cannot be changed"),
    (SchemaChange.set_option("bucket-key", "name"), "cannot be changed"),
    (SchemaChange.update_column_position(Move.after("name", "name")), "itself"),
])
def test_invalid_changes_refused_and_nothing_written(table, change, match):
    with pytest.raises(InvalidSchema, match=match):
        table.alter_table([change])
    assert table.schema_manager.ids() == [0]
    assert rows(table)[0]["name"] == "a"


def test_partition_column_rules(catalog):
    s = pa.schema([("dt", pa.string()), ("id", pa.int64()), ("v", pa.int32())])
    t = catalog.create_table("db.p", s, ["dt", "id"], ["dt"], options={"bucket": "1"})
    for change in (SchemaChange.rename_column("dt", "day"), SchemaChange.drop_column("dt"),
                   SchemaChange.update_column_type("dt", "STRING")):
        with pytest.raises(InvalidSchema, match="partition"):
            t.alter_table([change])


def test_options_set_and_remove(table):
    table.alter().set_option("target-file-size", "64 mb").set_option("my.custom", "1").commit()
    assert table.options["target-file-size"] == "64 mb"
    table.alter().remove_option("my.custom").commit()
    assert "my.custom" not in table.options
    from engine.errors import InvalidOption
    with pytest.raises(InvalidOption):
        table.alter().set_option("target-file-size", "lots").commit()


def test_bucket_change_allowed_before_data(catalog):
    t = catalog.create_table("db.nb", SCHEMA, "id", options={"bucket": "2"})
    t.alter().set_option("bucket", "4").commit()
    assert t.schema.table_options.bucket == 4


def test_rename_updates_sequence_field_option(catalog):
    t = catalog.create_table("db.s", SCHEMA, "id", options={"bucket": "1", "sequence.field": "qty"})
    t.write(pa.table({"id": [1], "name": ["a"], "qty": [5], "price": [1.0]}))
    t.alter().rename_column("qty", "version").commit()
    assert t.options["sequence.field"] == "version"
    t.write(pa.table({"id": [1], "name": ["old"], "version": [4], "price": [1.0]}))
    assert t.read().column("name").to_pylist() == ["a"]  # lower sequence loses, across schemas
    with pytest.raises(InvalidSchema, match="sequence.field"):
        t.alter().drop_column("version").commit()


def test_catalog_alter_table(catalog, table):
    catalog.alter_table("db.t", [SchemaChange.add_column("x", pa.int16())])
    assert catalog.get_table("db.t").schema.field("x").id == 4
    assert catalog.alter_table("db.missing", [], ignore_if_not_exists=True) is None


def test_concurrent_alters_both_land(catalog, table):
    other = catalog.get_table("db.t")
    table.alter().add_column("a1", pa.int8()).commit()
    other.alter().add_column("a2", pa.int8()).commit()  # re-applied on top of schema-1
    assert other.schema.id == 2 and other.schema.field_names[-2:] == ("a1", "a2")
    assert other.schema.highest_field_id == 5


def test_commit_prepared_under_old_schema_lands_when_compatible(catalog, table):
    with table.new_write() as w:
        w.write(pa.table({"id": [5], "name": ["e"], "qty": [50], "price": [5.0]}, schema=SCHEMA))
        msgs = w.prepare_commit()
    catalog.get_table("db.t").alter().rename_column("name", "label").update_column_type("qty", pa.int64()) \
        .add_column("extra", pa.string()).commit()
    table.commit(msgs)
    t = catalog.get_table("db.t")
    got = {r["id"]: r for r in t.read().to_pylist()}
    assert got[5] == {"id": 5, "label": "e", "qty": 50, "price": 5.0, "extra": None}


def test_commit_prepared_under_incompatible_schema_is_refused(catalog, table):
    with table.new_write() as w:
        w.write(pa.table({"id": [5], "name": ["e"], "qty": [50], "price": [5.0]}, schema=SCHEMA))
        msgs = w.prepare_commit()
    # Another engine narrows a type (Paimon allows explicit casts): files with the old type must not land.
    other = catalog.get_table("db.t")
    narrowed = apply_changes(other.schema, [SchemaChange.set_option("x", "1")], table="db.t")
    from dataclasses import replace
    fields = tuple(replace(f, type=parse_atomic("SMALLINT")) if f.name == "qty" else f for f in narrowed.fields)
    assert other.schema_manager.commit(replace(narrowed, fields=fields))
    before = table.latest_snapshot_id()
    with pytest.raises(CommitConflict, match="schema 0 .* schema 1.*qty"):
        table.commit(msgs)
    assert table.latest_snapshot_id() == before
    for m in msgs:
        for f in m.new_files:
            assert not os.path.exists(os.path.join(table.bucket_dir(m.partition_values, m.bucket), f.file_name))


# --- property: random change sequences interleaved with writes match a model keyed by field id ------------
_OPS = st.lists(st.tuples(st.sampled_from(["add", "drop", "rename", "widen", "write", "move", "compact"]),
                          st.integers(0, 1000), st.lists(st.integers(0, 7), min_size=1, max_size=5)),
                min_size=1, max_size=12)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_OPS)
def test_random_evolution_matches_model(tmp_path_factory, ops):
    """Random ALTERs, writes and compactions match a model keyed by field id, at the latest snapshot and at every
    earlier one (time travel reads through the schema each snapshot was committed under)."""
    from engine import Catalog
    cat = Catalog(str(tmp_path_factory.mktemp("wh")))
    cat.create_database("db")
    t = cat.create_table("db.r", pa.schema([("id", pa.int32()), ("c0", pa.int32())]), "id",
                         options={"bucket": "2"})
    model: dict[int, dict[int, int]] = {}  # id -> {field id: value}
    at_snapshot: dict[int, tuple] = {}  # snapshot id -> (its schema's fields, model then)
    for counter, (op, r, ids) in enumerate(ops, start=1):
        names = [f.name for f in t.schema.fields if f.name != "id"]
        if op == "add":
            t.alter().add_column(f"n{counter}", pa.int32(), after=(names[r % len(names)] if names and r % 2
                                                                     else None)).commit()
        elif op == "drop" and names:
            t.alter().drop_column(names[r % len(names)]).commit()
        elif op == "rename" and names:
            t.alter().rename_column(names[r % len(names)], f"r{counter}").commit()
        elif op == "widen" and names:
            name = names[r % len(names)]
            if t.schema.field(name).type.root == "INT":
                t.alter().update_column_type(name, pa.int64()).commit()
        elif op == "move" and names:
            t.alter().move_column(names[r % len(names)], first=True).commit()
        elif op == "compact" and t.latest_snapshot_id() is not None:
            t.compact(full=bool(r % 2))
        elif op == "write":
            ids = sorted(set(ids))
            data = {"id": pa.array(ids, pa.int32())}
            for f in t.schema.fields:
                if f.name != "id":
                    data[f.name] = [i * 1000 + f.id + r for i in ids]
            t.write(pa.table(data))
            for i in ids:
                model[i] = {f.id: i * 1000 + f.id + r for f in t.schema.fields if f.name != "id"}
        sid = t.latest_snapshot_id()
        if sid is not None and sid not in at_snapshot:
            fields = cat.get_table("db.r").schema_manager.schema(t.snapshot(sid).schema_id).fields
            at_snapshot[sid] = (fields, {i: dict(v) for i, v in model.items()})
        fresh = cat.get_table("db.r")
        got = {row["id"]: row for row in fresh.read().to_pylist()}
        expected = {i: {"id": i, **{f.name: vals.get(f.id) for f in fresh.schema.fields if f.name != "id"}}
                    for i, vals in model.items()}
        assert got == expected
        assert fresh.read().column_names == list(fresh.schema.field_names)
    fresh = cat.get_table("db.r")
    for sid, (fields, then) in at_snapshot.items():
        old = fresh.read(snapshot_id=sid)
        assert old.column_names == [f.name for f in fields]
        assert {row["id"]: row for row in old.to_pylist()} == \
            {i: {"id": i, **{f.name: vals.get(f.id) for f in fields if f.name != "id"}} for i, vals in then.items()}


def test_comments(table):
    table.alter().update_comment("orders").update_column_comment("qty", "units").commit()
    js = schema_file(table, 1)
    assert js["comment"] == "orders"
    assert [f.get("description") for f in js["fields"] if f["name"] == "qty"] == ["units"]


def test_bucket_key_type_cannot_change_on_append_table(catalog):
    t = catalog.create_table("db.a", SCHEMA, options={"bucket": "2", "bucket-key": "qty"})
    with pytest.raises(InvalidSchema, match="bucket-key"):
        t.alter().update_column_type("qty", pa.int64()).commit()
    t.alter().rename_column("qty", "units").commit()
    assert t.options["bucket-key"] == "units"


def test_add_column_before_partition_option(catalog):
    s = pa.schema([("id", pa.int64()), ("v", pa.int32()), ("dt", pa.string())])
    t = catalog.create_table("db.p", s, ["id", "dt"], ["dt"],
                             options={"bucket": "1", "add-column-before-partition": "true"})
    t.alter().add_column("w", pa.int8()).commit()
    assert t.schema.field_names == ("id", "v", "w", "dt")


def test_partial_update_sequence_group_follows_renames_and_its_columns_cannot_be_dropped(catalog):
    """Paimon's SchemaManager.applyRenameColumnsToOptions renames both the key and the value of
    fields.<g>.sequence-group; SchemaValidation refuses a sequence group naming a missing column, so a column in
    one cannot be dropped (dropping the group with it would change how the other columns merge)."""
    s = pa.schema([pa.field("k", pa.int32(), False), ("a", pa.int32()), ("b", pa.string()), ("g", pa.int64())])
    t = catalog.create_table("db.pu", s, "k", options={"bucket": "1", "merge-engine": "partial-update",
                                                        "fields.g.sequence-group": "a,b"})
    t.write(pa.table({"k": pa.array([1], pa.int32()), "a": pa.array([1], pa.int32()), "b": ["x"], "g": [5]}))
    t.alter().rename_column("a", "amount").rename_column("g", "version").commit()
    assert t.options["fields.version.sequence-group"] == "amount,b" and "fields.g.sequence-group" not in t.options
    t.write(pa.table({"k": pa.array([1], pa.int32()), "amount": pa.array([2], pa.int32()), "b": ["old"],
                      "version": [4]}))  # an older group sequence than the row written under schema 0: ignored
    t.write(pa.table({"k": pa.array([1], pa.int32()), "amount": pa.array([3], pa.int32()), "b": [None],
                      "version": [6]}))
    assert t.read().to_pylist() == [{"k": 1, "amount": 3, "b": None, "version": 6}]
    for column in ("amount", "version"):
        with pytest.raises(InvalidSchema, match=f"cannot drop column '{column}'.*sequence-group"):
            t.alter().drop_column(column).commit()
    assert t.schema.id == 1 and t.options["fields.version.sequence-group"] == "amount,b"


def test_time_travel_reads_through_the_schema_of_that_snapshot(catalog):
    """Paimon's AbstractFileStoreTable.tryTimeTravel: scan.snapshot-id / scan.tag-name read with the schema the
    snapshot was committed under (its names and types), not the latest one; the latest read is unchanged."""
    s = pa.schema([pa.field("k", pa.int32(), False), ("a", pa.int32()), ("b", pa.string())])
    t = catalog.create_table("db.tt", s, "k", options={"bucket": "1"})
    t.write(pa.table({"k": pa.array([1, 2], pa.int32()), "a": pa.array([10, 20], pa.int32()), "b": ["x", "y"]}))
    t.create_tag("before-alter")
    t.alter().rename_column("a", "amount").update_column_type("amount", pa.int64()).drop_column("b") \
        .add_column("c", pa.string()).commit()
    assert t.read(snapshot_id=1).schema == s  # the latest snapshot, committed under schema 0
    t.write(pa.table({"k": pa.array([2, 3], pa.int32()), "amount": [2**40, 30], "c": ["n", "m"]}))
    t = catalog.get_table("db.tt")
    old = [{"k": 1, "a": 10, "b": "x"}, {"k": 2, "a": 20, "b": "y"}]
    assert t.read(snapshot_id=1).to_pylist() == old
    assert t.read(tag="before-alter").to_pylist() == old
    assert t.read(snapshot_id=1, columns=["b"], filter=[("a", ">", 15)]).to_pylist() == [{"b": "y"}]
    assert t.to_reader(snapshot_id=1).read_all().to_pylist() == old
    assert t.lookup(pa.table({"k": pa.array([2], pa.int32())}), snapshot_id=1).to_pylist() == [old[1]]
    assert len(t.plan(snapshot_id=1, filter=[("a", "=", 10)])) == 1
    with pytest.raises(InvalidInput, match="amount"):
        t.read(snapshot_id=1, columns=["amount"])
    assert t.read(snapshot_id=2).column_names == ["k", "amount", "c"]
    assert t.read().to_pylist() == [{"k": 1, "amount": 10, "c": None}, {"k": 2, "amount": 2**40, "c": "n"},
                                    {"k": 3, "amount": 30, "c": "m"}]
    assert t.schema.id == 1  # the table object itself keeps the latest schema


def test_time_travel_uses_the_current_options_restated_for_the_old_schema(catalog):
    """tryTimeTravel copies the old schema with the table's current options: an option set after the snapshot
    applies to it. Options naming columns follow them back by field id (a sequence.field renamed since orders the
    old rows by its old name) and leave out columns added since (Java's validation refuses such a time travel,
    pypaimon reads it: lakemerge reads it, with the options restated)."""
    t = catalog.create_table("db.to", SCHEMA, "id", options={"bucket": "1", "merge-engine": "aggregation",
                                                         "fields.price.aggregate-function": "sum"})
    t.write(pa.table({"id": [1], "name": ["a"], "qty": [10], "price": [1.5]}, schema=SCHEMA))
    t.write(pa.table({"id": [1], "name": ["older"], "qty": [9], "price": [0.5]}, schema=SCHEMA))
    assert t.read(snapshot_id=2).to_pylist() == [{"id": 1, "name": "older", "qty": 9, "price": 2.0}]
    t.alter().add_column("v", pa.int64()).set_option("fields.v.aggregate-function", "max") \
        .set_option("sequence.field", "qty").set_option("fields.name.aggregate-function", "last_value").commit()
    expected = [{"id": 1, "name": "a", "qty": 10, "price": 2.0}]  # ordered by qty now: "a" comes last
    assert t.read(snapshot_id=2).to_pylist() == expected
    t.alter().rename_column("qty", "version").rename_column("price", "amount").commit()
    assert t.options["sequence.field"] == "version"
    assert catalog.get_table("db.to").read(snapshot_id=2).to_pylist() == expected
    assert t.read().to_pylist() == [{"id": 1, "name": "a", "version": 10, "amount": 2.0, "v": None}]


def test_options_as_of_restates_column_options_for_an_older_schema():
    from engine.schema import TableSchema
    old = TableSchema.create(pa.schema([pa.field("k", pa.int32(), False), ("a", pa.int32()), ("b", pa.int32()),
                                        ("g", pa.int64())]), ["k"])
    current = apply_changes(old, [SchemaChange.rename_column("a", "b2"), SchemaChange.rename_column("b", "a"),
                                  SchemaChange.rename_column("b2", "b"), SchemaChange.add_column("n", pa.int32()),
                                  SchemaChange.add_column("h", pa.int64())])
    options = {"bucket": "1", "merge-engine": "partial-update", "sequence.field": "g,h",
               "fields.g.sequence-group": "a,n", "fields.h.sequence-group": "b", "fields.a.aggregate-function": "sum",
               "fields.n.aggregate-function": "max", "fields.default-aggregate-function": "last_value"}
    from engine.schema_change import options_as_of
    assert options_as_of(options, current, old) == {
        "bucket": "1", "merge-engine": "partial-update", "sequence.field": "g", "fields.g.sequence-group": "b",
        "fields.b.aggregate-function": "sum", "fields.default-aggregate-function": "last_value"}


def test_filters_on_renamed_and_widened_columns_prune_with_stats_written_under_the_old_schema(catalog):
    """A file's value stats are stored in its own schema (old field name and type): they are decoded with that
    schema and matched to today's column by field id, so a filter on the renamed / widened column prunes the file
    exactly as before the ALTER, never losing a matching row."""
    from decimal import Decimal
    s = pa.schema([("id", pa.int32()), ("i", pa.int8()), ("d", pa.decimal128(5, 2)), ("f", pa.float32())])
    t = catalog.create_table("db.ap", s, options={"bucket": "-1"})
    t.write(pa.table({"id": pa.array([1, 2, 3], pa.int32()), "i": pa.array([-1, 2, 3], pa.int8()),
                      "d": pa.array([Decimal("-1.25"), Decimal("2.50"), Decimal("999.99")], pa.decimal128(5, 2)),
                      "f": pa.array([0.5, 1.5, 2.5], pa.float32())}))
    t.alter().rename_column("i", "level").update_column_type("level", "BIGINT").update_column_type("d", "DECIMAL(12, 4)") \
        .rename_column("f", "score").update_column_type("score", "DOUBLE").commit()

    def planned(flt):
        return sum(len(sp.files) for sp in t.plan(filter=flt))

    def ids(flt):
        return sorted(r["id"] for r in t.read(filter=flt).to_pylist())

    for flt in ([("level", ">", 127)], [("level", "<", -1)], [("d", ">", Decimal("999.99"))],
                [("d", "<", Decimal("-1.2501"))], [("score", "<", 0.5)]):
        assert planned(flt) == 0 and ids(flt) == [], flt
    # a float term a NaN satisfies ('>' in Java's order) never prunes: float stats leave NaNs out
    assert planned([("score", ">", 2.5)]) == 1 and ids([("score", ">", 2.5)]) == []
    for flt, expected in (([("level", "=", 2)], [2]), ([("level", "<=", -1)], [1]), ([("d", "=", Decimal("999.99"))], [3]),
                          ([("d", "<", Decimal("0"))], [1]), ([("score", ">=", 2.5)], [3])):
        assert planned(flt) == 1 and ids(flt) == expected, flt
    t.write(pa.table({"id": pa.array([4], pa.int32()), "level": [2**40], "d": [Decimal("12345678.1234")],
                      "score": [1e300]}))
    assert ids([("level", ">", 127)]) == [4] and ids([("d", ">", Decimal("999.99"))]) == [4]
    assert ids([("score", ">", 2.5)]) == [4] and ids([("level", "=", 2)]) == [2]


def test_rename_carries_the_per_field_options_paimon_renames_and_refuses_the_others(catalog):
    """Paimon's applyRenameColumnsToOptions renames fields.<f>.aggregate-function / ignore-retract / distinct /
    list-agg-delimiter and the key of fields.<f>.nested-key; any other fields.<f>.* option would name no column, which
    SchemaValidation.validateFieldsPrefix refuses, so that rename is refused (it silently lost the option: a
    fields.<f>.default-value column read its nulls as null after the rename)."""
    row = pa.struct([("id", pa.int32()), ("name", pa.string())])
    s = pa.schema([pa.field("k", pa.int32(), False), ("items", pa.list_(row)), ("n", pa.int32())])
    t = catalog.create_table("db.nu", s, "k", options={
        "bucket": "1", "merge-engine": "aggregation", "fields.items.aggregate-function": "nested_update",
        "fields.items.nested-key": "id", "fields.n.default-value": "7"})
    t.write(pa.Table.from_pylist([{"k": 1, "items": [{"id": 1, "name": "a"}], "n": None}], schema=s))
    t.alter().rename_column("items", "lines").commit()
    assert t.options["fields.lines.nested-key"] == "id" and "fields.items.nested-key" not in t.options
    t.write(pa.Table.from_pylist([{"k": 1, "lines": [{"id": 1, "name": "A"}, {"id": 2, "name": "b"}], "n": None}]))
    assert t.read().to_pylist() == [{"k": 1, "lines": [{"id": 1, "name": "A"}, {"id": 2, "name": "b"}], "n": 7}]
    with pytest.raises(InvalidSchema, match="cannot rename column 'n': option 'fields.n.default-value'"):
        t.alter().rename_column("n", "m").commit()
    with pytest.raises(InvalidSchema, match="names no column"):
        t.alter().set_option("fields.nope.ignore-retract", "true").commit()
    assert t.schema.id == 1


@pytest.mark.parametrize("producer", ["input", "lookup", "none"])
def test_changes_across_an_alter_are_read_through_the_latest_schema(catalog, producer):
    """Incremental reads (Paimon's incremental-between is not time travel) read the changelog or level-0 files of
    every snapshot by field id into the latest schema: a renamed and widened column keeps its values, a column
    dropped and re-added under its name is a new (null) column in the files before."""
    s = pa.schema([pa.field("k", pa.int32(), False), ("a", pa.int32()), ("b", pa.string())])
    t = catalog.create_table("db.ch", s, "k", options={"bucket": "1", "changelog-producer": producer})
    t.write(pa.table({"k": pa.array([1, 2], pa.int32()), "a": pa.array([1, 2], pa.int32()), "b": ["x", "y"]}))
    t.alter().rename_column("a", "amount").update_column_type("amount", pa.int64()).drop_column("b") \
        .add_column("b", pa.string()).commit()
    t.write(pa.table({"k": pa.array([2], pa.int32()), "amount": [2**40], "b": ["new"]}))
    got = [(r["k"], r["amount"], r["b"], r["_row_kind"]) for r in t.read_changes().to_pylist()]
    update = [(2, 2, None, "-U"), (2, 2**40, "new", "+U")] if producer == "lookup" else [(2, 2**40, "new", "+I")]
    assert got == [(1, 1, None, "+I"), (2, 2, None, "+I")] + update
    assert t.read_changes(0, 1).column_names == ["k", "amount", "b", "_row_kind"]


def test_a_commit_after_an_alter_records_the_latest_schema(catalog, table):
    """Paimon's FileStoreCommitImpl writes the latest schema id into every snapshot, whatever schema the writer
    opened the table under; time travel to that snapshot reads through it (the stale writer's rows null in the
    added column)."""
    stale = catalog.get_table("db.t")
    table.alter().add_column("city", pa.string()).commit()
    sid = stale.write(pa.table({"id": [3], "name": ["c"], "qty": [30], "price": [3.5]}, schema=SCHEMA))
    assert stale.schema.id == 0 and table.snapshot(sid).schema_id == 1
    got = rows(catalog.get_table("db.t"), snapshot_id=sid)
    assert [r["city"] for r in got] == [None, None, None] and [r["id"] for r in got] == [1, 2, 3]


def test_a_committed_schema_with_a_stray_per_field_option_still_opens(catalog, table):
    """Paimon validates fields.<f>.* names only when a schema is created or altered, so a table another tool
    committed with, say, fields.<gone>.default-value opens and reads (the option names nothing); creating or
    altering into such a schema is refused."""
    path = os.path.join(table.root, "schema", "schema-0")
    js = schema_file(table, 0)
    js["options"]["fields.gone.default-value"] = "7"
    with open(path, "w") as f:
        json.dump(js, f)
    t = catalog.get_table("db.t")
    assert [r["id"] for r in rows(t)] == [1, 2]
    with pytest.raises(InvalidSchema, match="names no column"):
        t.alter().set_option("fields.nope.default-value", "1").commit()
    with pytest.raises(InvalidSchema, match="names no column"):
        catalog.create_table("db.u", SCHEMA, primary_key="id", options={"fields.gone.default-value": "7"})
