"""Schema merging on write (Paimon's write.merge-schema, SchemaMergingUtils.merge): Table.write(merge_schema=True)
and Table.merge_schema evolve the table through the alter path, checked against a dict-of-rows model."""
from __future__ import annotations

import decimal

import pyarrow as pa
import pytest

from engine.errors import InvalidInput, InvalidSchema, SchemaMismatch, UnsupportedFeature
from engine.merge_schema import with_missing_columns
from engine.schema_change import AddColumn, UpdateColumnType, alter_table, apply_changes
from engine.types import parse_atomic

BASE = pa.schema([pa.field("id", pa.int64(), nullable=False), ("qty", pa.int32()), ("name", pa.string())])


def _model_rows(model: dict, columns: list[str]) -> list[dict]:
    """The model's rows by id, every column present (absent values are None)."""
    return [{c: row.get(c) for c in columns} for _, row in sorted(model.items())]


def _upsert(model: dict, rows: list[dict]) -> None:
    for r in rows:
        model[r["id"]] = dict(r)


@pytest.fixture(params=[["id"], []], ids=["pk", "append"])
def table(request, catalog):
    options = {"bucket": "2"} if request.param else {"bucket": "-1"}
    t = catalog.create_table("db.t", BASE, primary_key=request.param, options=options)
    first = [{"id": 1, "qty": 10, "name": "a"}, {"id": 2, "qty": 20, "name": "b"}]
    t.write(pa.Table.from_pylist(first, schema=BASE))
    return t


def _read(t) -> list[dict]:
    return sorted(t.read().to_pylist(), key=lambda r: r["id"])


def test_new_columns_are_added_at_the_end_in_input_order_and_old_rows_read_null(table, catalog):
    model: dict = {}
    _upsert(model, [{"id": 1, "qty": 10, "name": "a"}, {"id": 2, "qty": 20, "name": "b"}])
    before = table.schema
    # input order differs from the table's, and two new columns come in the order z, c
    rows = [{"z": 1.5, "id": 3, "name": "c", "c": "x"}]
    data = pa.table({"z": [1.5], "id": [3], "name": ["c"], "c": ["x"]})
    table.write(data, merge_schema=True)
    _upsert(model, rows)

    after = catalog.get_table("db.t").schema
    assert after.id == before.id + 1
    assert after.field_names == ("id", "qty", "name", "z", "c")
    assert [f.id for f in after.fields][:3] == [f.id for f in before.fields]
    assert {after.field("z").id, after.field("c").id} == {before.highest_field_id + 1, before.highest_field_id + 2}
    assert after.field("z").id < after.field("c").id
    assert after.field("z").type.root == "DOUBLE" and after.field("z").type.nullable
    assert after.field("c").type.nullable
    assert _read(catalog.get_table("db.t")) == _model_rows(model, after.field_names)


def test_without_merge_schema_a_new_column_is_still_refused(table):
    with pytest.raises(SchemaMismatch, match="not in the table"):
        table.write(pa.table({"id": [3], "extra": [1]}))
    assert table.schema_manager.latest().field_names == ("id", "qty", "name")


def test_a_new_not_null_input_column_is_added_nullable_as_paimon(table):
    """Paimon's merge copies a new field as nullable (DataField.copy(true)): old rows have no value."""
    data = pa.Table.from_pylist([{"id": 3, "flag": True}],
                                schema=pa.schema([pa.field("id", pa.int64(), False),
                                                  pa.field("flag", pa.bool_(), nullable=False)]))
    table.write(data, merge_schema=True)
    assert table.schema_manager.latest().field("flag").type.nullable
    assert [r["flag"] for r in _read(table)] == [None, None, True]


def test_existing_types_are_kept_and_input_cast_without_type_widening(table):
    table.write(pa.table({"id": [3], "qty": pa.array([30], pa.int64())}), merge_schema=True)
    assert table.schema_manager.latest().field("qty").type.root == "INT"
    assert table.schema_manager.latest().id == 0  # nothing to merge: no schema published
    with pytest.raises(SchemaMismatch, match="qty"):  # the writer's safe cast refuses a value INT cannot hold
        table.write(pa.table({"id": [4], "qty": pa.array([2 ** 40], pa.int64())}), merge_schema=True)


def test_type_widening_widens_int_to_bigint_and_old_files_are_cast(table):
    table.write(pa.table({"id": [3], "qty": pa.array([2 ** 40], pa.int64())}), merge_schema=True,
                type_widening=True)
    schema = table.schema_manager.latest()
    assert schema.field("qty").type.root == "BIGINT"
    assert [r["qty"] for r in _read(table)] == [10, 20, 2 ** 40]


def test_type_widening_refuses_narrowing_and_incompatible_types(table):
    with pytest.raises(SchemaMismatch, match="'qty'.*not a widening") as e:
        table.write(pa.table({"id": [3], "qty": pa.array([1], pa.int16())}), merge_schema=True,
                    type_widening=True)
    assert e.value.column == "qty" and "t" in str(e.value)
    with pytest.raises(SchemaMismatch, match="'name'"):
        table.write(pa.table({"id": [3], "name": pa.array([True])}), merge_schema=True, type_widening=True)
    assert table.schema_manager.latest().id == 0
    assert len(_read(table)) == 2


def test_a_lossy_change_paimon_would_make_is_unsupported(table):
    """Paimon's DataTypeCasts has INT -> FLOAT as an implicit cast, so its widening makes it; lakemerge refuses
    (FLOAT cannot hold every INT, and old files are read under the new type). explicit-cast (BIGINT -> INT in
    Paimon) is refused the same way."""
    with pytest.raises(UnsupportedFeature, match="qty"):
        table.write(pa.table({"id": [3], "qty": pa.array([1.5], pa.float32())}), merge_schema=True,
                    type_widening=True)
    with pytest.raises(UnsupportedFeature, match="explicit-cast"):
        table.write(pa.table({"id": [3], "qty": pa.array([1], pa.int16())}), merge_schema=True,
                    type_widening=True, explicit_cast=True)
    assert table.schema_manager.latest().id == 0


def test_primary_key_type_is_never_widened(catalog):
    t = catalog.create_table("db.k", pa.schema([pa.field("id", pa.int32(), False), ("v", pa.string())]),
                             primary_key=["id"], options={"bucket": "1"})
    with pytest.raises(InvalidSchema, match="primary key column 'id'"):
        t.write(pa.table({"id": pa.array([1], pa.int64()), "v": ["a"]}), merge_schema=True, type_widening=True)
    t.write(pa.table({"id": pa.array([1], pa.int64()), "v": ["a"]}), merge_schema=True)  # cast to INT
    assert t.read().to_pylist() == [{"id": 1, "v": "a"}]


def test_decimal_precision_grows_with_equal_scale_only(catalog):
    schema = pa.schema([pa.field("id", pa.int64(), False), ("amount", pa.decimal128(10, 2))])
    t = catalog.create_table("db.d", schema, primary_key=["id"], options={"bucket": "1"})
    t.write(pa.table({"id": [1], "amount": pa.array([decimal.Decimal("1.25")], pa.decimal128(10, 2))}))
    big = decimal.Decimal("123456789012.50")
    t.write(pa.table({"id": [2], "amount": pa.array([big], pa.decimal128(14, 2))}), merge_schema=True,
            type_widening=True)
    amount = t.schema_manager.latest().field("amount").type
    assert (amount.precision, amount.scale) == (14, 2)
    assert [r["amount"] for r in sorted(t.read().to_pylist(), key=lambda r: r["id"])] == \
        [decimal.Decimal("1.25"), big]
    with pytest.raises(SchemaMismatch, match="different scales"):  # Paimon refuses it even where it would fit
        t.write(pa.table({"id": [3], "amount": pa.array([big], pa.decimal128(16, 3))}), merge_schema=True,
                type_widening=True)


def test_nested_struct_fields_are_added_and_old_rows_read_null(catalog):
    inner = pa.struct([("x", pa.int32())])
    schema = pa.schema([pa.field("id", pa.int64(), False), ("r", inner), ("rs", pa.list_(inner))])
    t = catalog.create_table("db.n", schema, primary_key=["id"], options={"bucket": "1"})
    t.write(pa.Table.from_pylist([{"id": 1, "r": {"x": 1}, "rs": [{"x": 2}]}], schema=schema))
    wider = pa.struct([("x", pa.int32()), ("y", pa.string())])
    new_schema = pa.schema([pa.field("id", pa.int64(), False), ("r", wider), ("rs", pa.list_(wider))])
    before = t.schema
    t.write(pa.Table.from_pylist([{"id": 2, "r": {"x": 3, "y": "b"}, "rs": [{"x": 4, "y": "c"}]}],
                                 schema=new_schema), merge_schema=True)
    after = t.schema_manager.latest()
    assert after.id == before.id + 1
    r = after.field("r").type
    assert [f.name for f in r.fields] == ["x", "y"] and r.fields[0].id == before.field("r").type.fields[0].id
    assert r.fields[1].id > before.highest_field_id and r.fields[1].type.nullable
    assert [f.name for f in after.field("rs").type.element.fields] == ["x", "y"]
    assert sorted(t.read().to_pylist(), key=lambda row: row["id"]) == [
        {"id": 1, "r": {"x": 1, "y": None}, "rs": [{"x": 2, "y": None}]},
        {"id": 2, "r": {"x": 3, "y": "b"}, "rs": [{"x": 4, "y": "c"}]},
    ]


def test_a_failed_data_write_after_the_schema_commit_leaves_the_table_readable(table):
    """As in Paimon, the schema commit comes first and stays: the table reads its old rows under the new schema."""
    bad = pa.table({"id": pa.array([3, None], pa.int64()), "extra": ["e", "f"]})  # a null id: the write fails
    with pytest.raises(InvalidInput):
        table.write(bad, merge_schema=True)
    latest = table.schema_manager.latest()
    assert latest.field_names == ("id", "qty", "name", "extra")
    assert _read(table) == [{"id": 1, "qty": 10, "name": "a", "extra": None},
                            {"id": 2, "qty": 20, "name": "b", "extra": None}]


def test_a_writer_opened_before_the_merge_still_commits(table, catalog):
    """A writer holding the old schema commits after another merged a column in: its rows read null there
    (check_commit_schema accepts the added nullable column)."""
    other = catalog.get_table("db.t")
    w = table.new_write()
    w.write(pa.Table.from_pylist([{"id": 5, "qty": 50, "name": "e"}], schema=BASE))
    messages = w.prepare_commit()
    w.close()
    other.write(pa.table({"id": [6], "extra": ["f"]}), merge_schema=True)
    table.commit(messages)
    rows = {r["id"]: r for r in catalog.get_table("db.t").read().to_pylist()}
    assert rows[5]["extra"] is None and rows[6]["extra"] == "f" and rows[6]["qty"] is None


def test_a_writer_opened_before_a_nested_merge_still_commits(catalog):
    """Files without the merged-in struct field read null there, so the commit check accepts them."""
    schema = pa.schema([pa.field("id", pa.int64(), False), ("r", pa.struct([("x", pa.int32())]))])
    t = catalog.create_table("db.nw", schema, primary_key=["id"], options={"bucket": "1"})
    w = t.new_write()
    w.write(pa.Table.from_pylist([{"id": 1, "r": {"x": 1}}], schema=schema))
    messages = w.prepare_commit()
    w.close()
    wider = pa.schema([pa.field("id", pa.int64(), False), ("r", pa.struct([("x", pa.int32()), ("y", pa.string())]))])
    catalog.get_table("db.nw").write(pa.Table.from_pylist([{"id": 2, "r": {"x": 2, "y": "b"}}], schema=wider),
                                     merge_schema=True)
    t.commit(messages)
    assert sorted(catalog.get_table("db.nw").read().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "r": {"x": 1, "y": None}}, {"id": 2, "r": {"x": 2, "y": "b"}}]


def test_merge_schema_then_new_write(catalog):
    t = catalog.create_table("db.w", BASE, primary_key=["id"], options={"bucket": "1"})
    batch = pa.table({"id": [1], "v": [2.5]})
    assert t.merge_schema(batch.schema).field_names == ("id", "qty", "name", "v")
    assert t.merge_schema(batch.schema) is None  # already merged: nothing published
    with t.new_write() as w:
        w.write(with_missing_columns(batch, t.schema))
        t.commit(w.prepare_commit())
    assert t.read().to_pylist() == [{"id": 1, "qty": None, "name": None, "v": 2.5}]


@pytest.mark.interop
def test_pypaimon_reads_the_merged_table(catalog, warehouse):
    from tests.interop.pypaimon_util import pp_get_table, pp_read
    t = catalog.create_table("db.p", BASE, primary_key=["id"], options={"bucket": "2"})
    t.write(pa.Table.from_pylist([{"id": 1, "qty": 10, "name": "a"}], schema=BASE))
    t.write(pa.table({"id": [2], "qty": pa.array([2 ** 40]), "extra": ["x"]}), merge_schema=True,
            type_widening=True)
    got = pp_read(pp_get_table(warehouse, "db.p")).to_pylist()
    assert got == [{"id": 1, "qty": 10, "name": "a", "extra": None},
                   {"id": 2, "qty": 2 ** 40, "name": None, "extra": "x"}]


def test_a_stale_table_object_writes_a_column_another_writer_merged_in(table, catalog):
    """Another writer merged 'extra' in after this Table object was opened: nothing is left to merge, and the
    write goes through the latest schema (not refused as an unknown column)."""
    catalog.get_table("db.t").write(pa.table({"id": [3], "extra": ["x"]}), merge_schema=True)
    table.write(pa.table({"id": [4], "extra": ["y"]}), merge_schema=True)
    fresh = catalog.get_table("db.t")
    assert fresh.schema.id == 1 and fresh.schema.field_names == ("id", "qty", "name", "extra")
    assert [(r["id"], r["extra"]) for r in _read(fresh)] == [(1, None), (2, None), (3, "x"), (4, "y")]


def test_two_writers_merging_the_same_column_at_once_add_it_once(table, catalog, monkeypatch):
    """The other writer publishes the same new column between this merge's planning and its schema commit: the
    merge is planned again on the new schema (nothing left to add) instead of failing on a duplicate column."""
    import engine.merge_schema as ms
    plan = ms.merge_changes
    raced = []

    def racing(schema, *args, **kwargs):
        changes = plan(schema, *args, **kwargs)
        if not raced:
            raced.append(True)
            catalog.get_table("db.t").alter_table(changes)  # the other writer's identical merge lands first
        return changes
    monkeypatch.setattr(ms, "merge_changes", racing)
    table.write(pa.table({"id": [3], "extra": ["y"]}), merge_schema=True)
    fresh = catalog.get_table("db.t")
    assert [s.id for s in fresh.schemas()] == [0, 1]
    assert fresh.schema.field_names == ("id", "qty", "name", "extra")
    assert [(r["id"], r["extra"]) for r in _read(fresh)] == [(1, None), (2, None), (3, "y")]


def test_struct_fields_match_ignoring_case_when_the_merge_does(catalog):
    """Paimon's merge matches nested ROW fields with the same case rule as columns (SchemaMergingUtils
    buildFieldMap): a Spark input struct field 'X' is the table's 'x', not a new field beside it."""
    from engine.merge_schema import merge_changes
    from engine.schema_change import AddColumn
    schema = pa.schema([pa.field("id", pa.int64(), False), ("r", pa.struct([("x", pa.int32())]))])
    t = catalog.create_table("db.ci", schema, primary_key=["id"], options={"bucket": "1"})
    given = pa.schema([("ID", pa.int64()), ("R", pa.struct([("X", pa.int32()), ("y", pa.string())]))])
    changes = merge_changes(t.schema, given, table=t.name, case_sensitive=False)
    assert [(c.name, c.data_type.root) for c in changes] == [(("r", "y"), "VARCHAR")]
    assert all(isinstance(c, AddColumn) for c in changes)
    sensitive = merge_changes(t.schema, given, table=t.name, case_sensitive=True)
    assert [c.name for c in sensitive] == ["ID", "R"]


def test_an_input_the_merged_schema_would_refuse_leaves_the_schema_unchanged(catalog):
    """A missing NOT NULL column or struct fields in another order are refused by the columns alone (as Paimon's
    Spark writer refuses them while resolving the write, before its schema commit): nothing is published."""
    schema = pa.schema([pa.field("id", pa.int64(), False), pa.field("qty", pa.int32(), False),
                        ("r", pa.struct([("x", pa.int32()), ("z", pa.int32())]))])
    t = catalog.create_table("db.nn", schema, primary_key=["id"], options={"bucket": "1"})
    with pytest.raises(SchemaMismatch, match=r"missing column\(s\) \['qty'\]"):
        t.write(pa.table({"id": [1], "extra": ["e"]}), merge_schema=True)
    swapped = pa.array([{"z": 1, "x": 2}], pa.struct([("z", pa.int32()), ("x", pa.int32())]))
    with pytest.raises(SchemaMismatch, match="'r'"):
        t.write(pa.table({"id": [1], "qty": pa.array([1], pa.int32()), "r": swapped, "extra": ["e"]}),
                merge_schema=True)
    fresh = catalog.get_table("db.nn")
    assert [s.id for s in fresh.schemas()] == [0] and fresh.read().num_rows == 0


def test_map_values_and_array_elements_widen_but_map_keys_never_change(catalog):
    """SchemaMergingUtils.merge would merge a MAP's key type too, but Paimon's reader cannot read the older files
    afterwards (SchemaEvolutionUtil.createMapCastExecutor checks that the key types are equal), so lakemerge
    refuses a merge that would change a map key (a wider leaf key, a ROW key gaining fields) with
    UnsupportedFeature naming the column and publishes nothing; a map value and an array element widen (Java casts
    those) and old files are read through the new types."""
    key = pa.struct([("x", pa.int32())])
    schema = pa.schema([pa.field("id", pa.int64(), False), ("m", pa.map_(pa.int32(), pa.int32())),
                        ("mk", pa.map_(key, pa.string())), ("a", pa.list_(pa.int32()))])
    t = catalog.create_table("db.m", schema, primary_key=["id"], options={"bucket": "1"})
    old = {"id": 1, "m": [(1, 10)], "mk": [({"x": 1}, "one")], "a": [1]}
    t.write(pa.Table.from_pylist([old], schema=schema))
    wider_key = pa.struct([("x", pa.int32()), ("y", pa.string())])
    for m_type, mk_type, where in ((pa.map_(pa.int64(), pa.int64()), pa.map_(key, pa.string()), "m"),
                                   (pa.map_(pa.int32(), pa.int64()), pa.map_(wider_key, pa.string()), "mk")):
        new = pa.schema([pa.field("id", pa.int64(), False), ("m", m_type), ("mk", mk_type),
                         ("a", pa.list_(pa.int64()))])
        bad = pa.Table.from_pylist([{"id": 9, "m": [(2, 2)], "mk": [({"x": 2, "y": "k"}, "two")], "a": [2]}],
                                   schema=new)
        with pytest.raises(UnsupportedFeature, match=f"map key of column '{where}'.*Paimon cannot read"):
            t.write(bad, merge_schema=True, type_widening=True)
        assert t.schema_manager.latest().id == 0 and _read(t) == [old]
    new = pa.schema([pa.field("id", pa.int64(), False), ("m", pa.map_(pa.int32(), pa.int64())),
                     ("mk", pa.map_(key, pa.string())), ("a", pa.list_(pa.int64()))])
    row = {"id": 2, "m": [(2, 2 ** 41)], "mk": [({"x": 2}, "two")], "a": [2 ** 42]}
    t.write(pa.Table.from_pylist([row], schema=new), merge_schema=True, type_widening=True)
    after = t.schema_manager.latest()
    m = after.field("m").type
    assert after.id == 1 and (m.key.root, m.value.root, after.field("a").type.element.root) == (
        "INT", "BIGINT", "BIGINT")
    assert _read(t) == [old, row]


def test_alter_cannot_step_into_a_map_key(catalog):
    """Paimon's nested schema changes step into an ARRAY's element and a MAP's value only (SchemaManager): a path
    through a map key names nothing."""
    key = pa.struct([("x", pa.int32())])
    schema = pa.schema([pa.field("id", pa.int64(), False), ("mk", pa.map_(key, pa.string()))])
    t = catalog.create_table("db.k", schema, primary_key=["id"], options={"bucket": "1"})
    with pytest.raises(InvalidSchema, match="does not exist"):
        alter_table(t, [AddColumn(("mk", "key", "y"), parse_atomic("STRING"))])
    with pytest.raises(InvalidSchema, match="does not exist"):
        alter_table(t, [UpdateColumnType(("mk", "key", "x"), parse_atomic("BIGINT"))])
    assert t.schema_manager.latest().id == 0


def test_a_map_key_that_is_not_a_widening_is_refused(catalog):
    schema = pa.schema([pa.field("id", pa.int64(), False), ("m", pa.map_(pa.int64(), pa.string()))])
    t = catalog.create_table("db.m", schema, primary_key=["id"], options={"bucket": "1"})
    bad = pa.table({"id": [1], "m": pa.array([[("k", "v")]], pa.map_(pa.string(), pa.string()))})
    with pytest.raises(SchemaMismatch, match="'m.key' is BIGINT in the table and STRING in the input"):
        t.write(bad, merge_schema=True, type_widening=True)
    narrow = pa.table({"id": [1], "m": pa.array([[(1, "v")]], pa.map_(pa.int32(), pa.string()))})
    with pytest.raises(SchemaMismatch, match="'m.key' is BIGINT in the table and INT in the input"):
        t.write(narrow, merge_schema=True, type_widening=True)  # as a narrower column type
    t.write(narrow, merge_schema=True)  # without type widening the key is cast, its type kept
    assert t.schema_manager.latest().id == t.schema.id == 0 and _read(t) == [{"id": 1, "m": [(1, "v")]}]


def test_alter_cannot_change_a_type_inside_a_multiset():
    """Paimon's readers have no MULTISET cast (CastExecutors), so older files could not be read after a type change
    of a MULTISET's element or of a field nested in it; an ARRAY's element may widen."""
    from dataclasses import replace as dc_replace

    from engine.schema import TableSchema
    base = TableSchema.create(pa.schema([pa.field("id", pa.int64(), False), ("ms", pa.list_(pa.int32())),
                                         ("arr", pa.list_(pa.int32()))]), primary_keys=["id"])
    ms = dc_replace(base.fields[1], type=dc_replace(base.fields[1].type, root="MULTISET"))
    schema = dc_replace(base, fields=(base.fields[0], ms, base.fields[2]))
    with pytest.raises(InvalidSchema, match="inside a MULTISET"):
        apply_changes(schema, [UpdateColumnType(("ms", "element"), parse_atomic("BIGINT"))])
    widened = apply_changes(schema, [UpdateColumnType(("arr", "element"), parse_atomic("BIGINT"))])
    assert widened.fields[2].type.element.root == "BIGINT"
