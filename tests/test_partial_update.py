"""merge-engine=partial-update (paimon-semantics §6.2), including Paimon's documented sequence-group example."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine.errors import InvalidInput, InvalidSchema
from tests.conftest import list_files

I = pa.int32()
GROUPS = pa.schema([("k", I), ("a", I), ("b", I), ("g_1", I), ("c", I), ("d", I), ("g_2", I)])
GROUP_OPTS = {"bucket": "1", "merge-engine": "partial-update", "fields.g_1.sequence-group": "a,b",
              "fields.g_2.sequence-group": "c,d"}
DOC_ROWS = [(1, 1, 1, 1, 1, 1, 1), (1, 2, 2, 2, 2, 2, None), (1, 3, 3, 1, 3, 3, 3),
            (1, 3, 3, 3, 2, 2, None), (1, 4, 4, 4, 2, 2, None), (1, 5, 5, 3, 5, None, 4)]


def _batch(schema, rows):
    return pa.Table.from_pylist([dict(zip(schema.names, r)) for r in rows], schema=schema)


def _one(t):
    rows = t.read().to_pylist()
    assert len(rows) == 1
    return tuple(rows[0].values())


@pytest.mark.parametrize("commits", ["one-per-row", "one-buffer"])
def test_paimon_sequence_group_example(catalog, commits):
    t = catalog.create_table("db.t", GROUPS, primary_key=["k"], options=GROUP_OPTS)
    if commits == "one-per-row":
        for r in DOC_ROWS[:3]:
            t.write(_batch(GROUPS, [r]))
        assert _one(t) == (1, 2, 2, 2, 3, 3, 3)
        for r in DOC_ROWS[3:]:
            t.write(_batch(GROUPS, [r]))
    else:
        t.write(_batch(GROUPS, DOC_ROWS[:3]))
        assert _one(t) == (1, 2, 2, 2, 3, 3, 3)
        t.write(_batch(GROUPS, DOC_ROWS[3:]))
    row = _one(t)
    assert (row[1], row[2]) == (4, 4) and (row[4], row[5]) == (5, None)
    assert row == (1, 4, 4, 4, 5, None, 4)
    got = t.lookup(pa.table({"k": pa.array([1], I)}))
    assert tuple(got.to_pylist()[0].values()) == row
    # projection still decodes the group sequence fields it needs
    assert t.read(columns=["c", "d"]).to_pylist() == [{"c": 5, "d": None}]


def test_group_retract_with_newer_sequence_nulls_the_group(catalog):
    t = catalog.create_table("db.t", GROUPS, primary_key=["k"], options=GROUP_OPTS)
    t.write(_batch(GROUPS, [(1, 1, 1, 1, 1, 1, 1)]))
    t.write(_batch(GROUPS, [(1, 9, 9, 2, 9, 9, 0)]), row_kinds=["-U"])  # g_1 newer: nulls a, b; g_2 older: no-op
    assert _one(t) == (1, None, None, 2, 1, 1, 1)
    t.write(_batch(GROUPS, [(1, 5, 5, 1, None, None, None)]))  # older g_1: ignored; null g_2: ignored
    assert _one(t) == (1, None, None, 2, 1, 1, 1)


def test_later_non_null_values_overwrite(catalog):
    s = pa.schema([("k", I), ("a", pa.string()), ("b", pa.int64()), ("c", pa.float64())])
    t = catalog.create_table("db.p", s, primary_key=["k"], options={"bucket": "2", "merge-engine": "partial-update"})
    t.write(_batch(s, [(1, "x", None, None), (2, None, 5, None), (1, None, 7, None)]))
    t.write(_batch(s, [(1, None, None, 1.5), (2, "y", None, None), (3, None, None, None)]))
    t.write(_batch(s, [(1, "z", None, None)]))
    got = {r["k"]: (r["a"], r["b"], r["c"]) for r in t.read().to_pylist()}
    assert got == {1: ("z", 7, 1.5), 2: ("y", 5, None), 3: (None, None, None)}
    assert t.lookup(pa.table({"k": pa.array([2, 1, 2], I)})).num_rows == 2
    # files hold the writer's merged partial records, level-0 runs stay mergeable
    first = {r["k"]: (r["a"], r["b"], r["c"]) for r in t.read(snapshot_id=1).to_pylist()}
    assert first == {1: ("x", 7, None), 2: (None, 5, None)}


def test_retracts_are_rejected_unless_configured(catalog, warehouse):
    s = pa.schema([("k", I), ("a", I)])
    t = catalog.create_table("db.r", s, primary_key=["k"], options={"bucket": "1", "merge-engine": "partial-update"})
    t.write(_batch(s, [(1, 1)]))
    before = list_files(warehouse)
    with pytest.raises(InvalidInput, match="partial-update cannot take -U/-D"):
        t.delete(pa.table({"k": pa.array([1], I)}))
    assert list_files(warehouse) == before
    for key in ("ignore-delete", "partial-update.ignore-delete"):
        u = catalog.create_table(f"db.{key.replace('.', '_').replace('-', '_')}", s, primary_key=["k"],
                                 options={"bucket": "1", "merge-engine": "partial-update", key: "true"})
        u.write(_batch(s, [(1, 1)]))
        u.delete(pa.table({"k": pa.array([1], I)}))
        assert u.read().to_pylist() == [{"k": 1, "a": 1}]


def test_remove_record_on_delete(catalog):
    s = pa.schema([("k", I), ("a", I), ("b", I)])
    t = catalog.create_table("db.rm", s, primary_key=["k"], options={
        "bucket": "1", "merge-engine": "partial-update", "partial-update.remove-record-on-delete": "true"})
    t.write(_batch(s, [(1, 1, 1), (2, 2, 2)]))
    t.write(_batch(s, [(1, None, None)]), row_kinds=["-D"])
    t.write(_batch(s, [(2, 5, None)]), row_kinds=["-U"])  # -U is ignored
    assert {r["k"]: (r["a"], r["b"]) for r in t.read().to_pylist()} == {2: (2, 2)}
    t.write(_batch(s, [(1, None, 3)]))  # starts from the -D record's values
    assert {r["k"]: (r["a"], r["b"]) for r in t.read().to_pylist()} == {1: (None, 3), 2: (2, 2)}
    # the same inside one buffer
    t.write(_batch(s, [(3, 1, 1), (3, 4, None), (3, None, None)]), row_kinds=["+I", "-D", "+I"])
    assert {r["k"]: (r["a"], r["b"]) for r in t.read().to_pylist()}[3] == (4, None)


def test_aggregate_functions_inside_sequence_groups(catalog):
    # Paimon docs: 'fields.a.sequence-group'='b', 'fields.b.aggregate-function'='first_value',
    # 'fields.c.sequence-group'='d', 'fields.d.aggregate-function'='sum' -> 1, 2, 1, 2, 3
    s = pa.schema([("k", I), ("a", I), ("b", I), ("c", I), ("d", I)])
    t = catalog.create_table("db.ag", s, primary_key=["k"], options={
        "bucket": "1", "merge-engine": "partial-update", "fields.a.sequence-group": "b",
        "fields.b.aggregate-function": "first_value", "fields.c.sequence-group": "d",
        "fields.d.aggregate-function": "sum"})
    for r in [(1, 1, 1, None, None), (1, None, None, 1, 1), (1, 2, 2, None, None), (1, None, None, 2, 2)]:
        t.write(_batch(s, [r]))
    assert _one(t) == (1, 2, 1, 2, 3)


def test_default_value_fills_fields_never_written(catalog):
    s = pa.schema([("k", I), ("a", I), ("b", pa.string())])
    t = catalog.create_table("db.dv", s, primary_key=["k"], options={
        "bucket": "1", "merge-engine": "partial-update", "fields.b.default-value": "none yet",
        "fields.a.default-value": "-1"})
    t.write(_batch(s, [(1, 5, None), (2, None, "x")]))
    assert sorted(tuple(r.values()) for r in t.read().to_pylist()) == [(1, 5, "none yet"), (2, -1, "x")]
    assert t.lookup(pa.table({"k": pa.array([1], I)})).to_pylist() == [{"k": 1, "a": 5, "b": "none yet"}]


@pytest.mark.parametrize("opts, match", [
    ({"fields.g_1.sequence-group": "a,b", "fields.g_2.sequence-group": "b,c"}, "more than one sequence group"),
    ({"fields.g_1.sequence-group": "a,zz"}, "'zz' is not a column"),
    ({"fields.g_1.sequence-group": "k"}, "primary-key field"),
    ({"fields.a.aggregate-function": "sum"}, "not in a sequence group"),
    # Paimon's getAggFuncName applies the default function to every field outside groups too, and refuses it
    ({"fields.g_1.sequence-group": "a", "fields.default-aggregate-function": "sum"}, "'b' .* not in a sequence"),
    ({"fields.g_1.sequence-group": "a", "fields.a.aggregate-function": "bool_or"}, "does not accept"),
    ({"partial-update.remove-record-on-delete": "true", "ignore-delete": "true"}, "cannot be combined"),
    ({"partial-update.remove-record-on-delete": "true", "fields.g_1.sequence-group": "a"}, "cannot be combined"),
    # Paimon's PartialUpdateMergeFunction.Factory: conflicting behaviour
    ({"fields.g_1.sequence-group": "a", "partial-update.remove-record-on-sequence-group": "g_1",
      "ignore-delete": "true"}, "remove-record-on-sequence-group cannot be combined with ignore-delete"),
])
def test_invalid_partial_update_settings(catalog, opts, match):
    with pytest.raises(InvalidSchema, match=match):
        catalog.create_table("db.bad", GROUPS, primary_key=["k"],
                             options={"bucket": "1", "merge-engine": "partial-update", **opts})


def test_sequence_fields_and_keys_take_no_aggregate_function(catalog):
    """Paimon's PartialUpdateMergeFunction.getAggFuncName gives a group's sequence field no aggregator (its
    fields.<f>.aggregate-function is ignored), and a default function last_non_null_value is allowed outside
    groups (inside them it keeps b although the newer record's b is null)."""
    t = catalog.create_table("db.sq", GROUPS, primary_key=["k"], options={
        **GROUP_OPTS, "fields.g_1.aggregate-function": "sum", "fields.a.aggregate-function": "sum",
        "fields.default-aggregate-function": "last_non_null_value"})
    t.write(_batch(GROUPS, [(1, 1, 1, 5, 1, 1, 1), (1, 2, None, 7, None, None, None)]))
    assert _one(t) == (1, 3, 1, 7, 1, 1, 1)


def test_data_file_holds_partial_records(catalog, warehouse):
    s = pa.schema([("k", I), ("a", I), ("b", I)])
    t = catalog.create_table("db.f", s, primary_key=["k"], options={"bucket": "1", "merge-engine": "partial-update"})
    t.write(_batch(s, [(1, 1, None), (1, None, 2), (2, None, None)]))
    files = [f for f in list_files(warehouse) if f.endswith(".parquet")]
    assert len(files) == 1
    rows = pq.ParquetFile(f"{warehouse}/{files[0]}").read().select(["k", "a", "b", "_VALUE_KIND"]).to_pylist()
    assert rows == [{"k": 1, "a": 1, "b": 2, "_VALUE_KIND": 0}, {"k": 2, "a": None, "b": None, "_VALUE_KIND": 0}]


@pytest.mark.parametrize("one_buffer", [False, True])
def test_group_aggregators_with_out_of_order_group_sequence(catalog, one_buffer):
    """Older group sequences fold as agg(in, acc) (Paimon's aggReversed); the group's other fields keep the
    newest group sequence's values."""
    s = pa.schema([("k", I), ("g", I), ("a", pa.string()), ("b", pa.int64()), ("c", pa.string()),
                   ("d", pa.string())])
    t = catalog.create_table("db.oo", s, primary_key=["k"], options={
        "bucket": "1", "merge-engine": "partial-update", "fields.g.sequence-group": "a,b,c,d",
        "fields.a.aggregate-function": "first_value", "fields.b.aggregate-function": "sum",
        "fields.c.aggregate-function": "listagg"})
    rows = [(1, 2, "x", 1, "p", "two"), (1, 1, "y", 2, "q", "one"), (1, 3, "z", 4, "r", "three")]
    if one_buffer:
        t.write(_batch(s, rows))
    else:
        for r in rows:
            t.write(_batch(s, [r]))
    assert _one(t) == (1, 3, "y", 7, "q,p,r", "three")


@pytest.mark.parametrize("ignore_retract", [False, True])
def test_group_collect_with_older_group_sequence(catalog, ignore_retract):
    """FieldCollectAgg.aggReversed is agg(acc, in): the older record's elements go last. With
    fields.<f>.ignore-retract Paimon wraps the function in FieldIgnoreRetractAgg, which has no aggReversed of its
    own: FieldAggregator's default agg(in, acc) runs, so the older record's elements go first."""
    s = pa.schema([("k", I), ("g", I), ("c", pa.list_(I))])
    opts = {"bucket": "1", "merge-engine": "partial-update", "fields.g.sequence-group": "c",
            "fields.c.aggregate-function": "collect"}
    if ignore_retract:
        opts["fields.c.ignore-retract"] = "true"
    t = catalog.create_table("db.gc", s, primary_key=["k"], options=opts)
    t.write(_batch(s, [(1, 5, [1]), (1, 3, [2])]))
    assert t.read().to_pylist()[0]["c"] == ([2, 1] if ignore_retract else [1, 2])


def test_group_bitmap_and_nested_update_with_out_of_order_group_sequence(catalog):
    """Every aggregate function takes an older group sequence as Paimon's aggReversed, agg(in, acc): rbm32 and
    nested_update were refused (UnsupportedFeature) there."""
    import pyroaring

    row = pa.struct([("id", I), ("v", pa.string())])
    s = pa.schema([("k", I), ("g", I), ("r", pa.binary()), ("n", pa.list_(row))])
    t = catalog.create_table("db.rb", s, primary_key=["k"], options={
        "bucket": "1", "merge-engine": "partial-update", "fields.g.sequence-group": "r,n",
        "fields.r.aggregate-function": "rbm32", "fields.n.aggregate-function": "nested_update",
        "fields.n.nested-key": "id"})
    t.write(_batch(s, [(1, 5, pyroaring.BitMap([1, 2]).serialize(), [{"id": 1, "v": "new"}]),
                       (1, 3, pyroaring.BitMap([7]).serialize(), [{"id": 1, "v": "old"}, {"id": 2, "v": "x"}])]))
    got = t.read().to_pylist()[0]
    assert sorted(pyroaring.BitMap.deserialize(got["r"])) == [1, 2, 7]
    # agg(in, acc): the older record's rows first, the newer ones upserted over them
    assert sorted(got["n"], key=lambda e: e["id"]) == [{"id": 1, "v": "new"}, {"id": 2, "v": "x"}]


@pytest.mark.parametrize("one_buffer", [False, True])
def test_group_first_value_functions_reversed_as_java(catalog, one_buffer):
    """Paimon's FieldFirstValueAgg / FieldFirstNonNullValueAgg have no aggReversed of their own: an older group
    sequence calls agg(in, acc) on the stateful function. Once initialised it returns the older record's value,
    a null one too (key 1: first_non_null_value becomes null); before, it keeps acc and initialises
    (key 2: a retract took the group without initialising them, ignore-retract). A first retract seeds the row
    (initRow) without initialising them either (key 3). pypaimon has no sequence groups; this follows the Java
    code."""
    s = pa.schema([("k", I), ("g", I), ("fv", pa.string()), ("fnn", pa.string())])
    opts = {"bucket": "1", "merge-engine": "partial-update", "fields.g.sequence-group": "fv,fnn",
            "fields.fv.aggregate-function": "first_value", "fields.fnn.aggregate-function": "first_non_null_value",
            "fields.fv.ignore-retract": "true", "fields.fnn.ignore-retract": "true"}
    if not one_buffer:
        opts["write-only"] = "true"
    t = catalog.create_table("db.fr", s, primary_key=["k"], options=opts)
    history = [("+I", (1, 5, "a", "a")), ("+I", (1, 3, "old", None)),
               ("+I", (2, None, "q", "q")), ("-U", (2, 5, "x", "x")), ("+I", (2, 3, "old", "old")),
               ("+I", (2, 7, "new", "new")), ("-U", (3, 5, "x", "x")), ("+I", (3, 7, "new", "new"))]
    if one_buffer:
        t.write(_batch(s, [r for _, r in history]), row_kinds=[k for k, _ in history])
    else:
        for kind, row in history:
            t.write(_batch(s, [row]), row_kinds=[kind])
    assert {r["k"]: (r["g"], r["fv"], r["fnn"]) for r in t.read().to_pylist()} == {
        1: (5, "old", None), 2: (7, None, "new"), 3: (7, "new", "new")}


def test_paimon_unit_test_partial_update_with_aggregation(catalog):
    """Paimon's PartialUpdateMergeFunctionTest.testPartialUpdateWithAggregation replayed one record per commit
    (the pk listagg left out: lakemerge rejects aggregate functions on primary keys). Its last step: a -D whose
    group sequence is older than the stored one still retracts the group's aggregated field ("retract for old
    sequence"), but leaves the group's other fields alone."""
    s = pa.schema([(f"f{i}", I) for i in range(8)])
    t = catalog.create_table("db.pa", s, primary_key=["f0"], options={
        "bucket": "1", "merge-engine": "partial-update", "write-only": "true",
        "fields.f1.sequence-group": "f2,f3,f4", "fields.f7.sequence-group": "f6",
        "fields.f2.aggregate-function": "sum", "fields.f4.aggregate-function": "last_value",
        "fields.f6.aggregate-function": "last_non_null_value", "fields.f4.ignore-retract": "true",
        "fields.f6.ignore-retract": "true"})

    def add(*row, kind="+I"):
        t.write(_batch(s, [row]), row_kinds=[kind])

    N = None
    add(1, 1, 1, 1, 1, 1, 1, 1)
    add(1, 2, 1, 2, 2, 2, 2, 0)
    assert _one(t) == (1, 2, 2, 2, 2, 2, 1, 1)
    add(1, 1, 1, 1, 1, 1, 2, 0)  # neither group sequence advances
    assert _one(t) == (1, 2, 3, 2, 2, 1, 1, 1)
    add(1, 1, -1, 1, 1, 2, 2, 0)
    add(1, 3, N, N, N, N, N, 2)
    assert _one(t) == (1, 3, 2, N, N, 2, 1, 2)
    add(1, 3, 1, 1, 1, 1, 1, 3)
    assert _one(t) == (1, 3, 3, 1, 1, 1, 1, 3)
    add(1, 3, 2, 1, 1, 1, 1, 3, kind="-U")
    assert _one(t) == (1, 3, 1, N, 1, 1, 1, 3)
    add(1, 3, 2, 1, 1, 1, 1, 3, kind="-D")
    assert _one(t) == (1, 3, -1, N, 1, 1, 1, 3)
    add(1, 2, 2, 1, 1, 1, 1, 3, kind="-D")  # retract for old sequence
    assert _one(t) == (1, 3, -3, N, 1, 1, 1, 3)
    t.compact(full=True)
    assert _one(t) == (1, 3, -3, N, 1, 1, 1, 3)


def test_group_retract_with_older_sequence_retracts_aggregated_fields(catalog):
    s = pa.schema([("k", I), ("g", I), ("v", pa.int64()), ("w", I)])
    t = catalog.create_table("db.ro", s, primary_key=["k"], options={
        "bucket": "1", "merge-engine": "partial-update", "fields.g.sequence-group": "v,w",
        "fields.v.aggregate-function": "sum"})
    t.write(_batch(s, [(1, 5, 10, 1), (1, 3, 7, 2)]))
    assert _one(t) == (1, 5, 17, 1)
    t.write(_batch(s, [(1, 3, 7, 2)]), row_kinds=["-U"])  # older: v retracted, g and w kept
    assert _one(t) == (1, 5, 10, 1)
    t.write(_batch(s, [(1, None, 10, 1)]), row_kinds=["-U"])  # null group sequence: skipped
    assert _one(t) == (1, 5, 10, 1)



@pytest.mark.parametrize("commits", ["one-buffer", "commit-per-record"])
def test_remove_record_on_delete_follows_paimon_kinds_and_first_retract(catalog, commits):
    """Paimon's PartialUpdateMergeFunction: an insert before a -D still counts (meetInsert), so only a -D as the
    key's last record deletes it (+I, -D, -U is an insert with the -D's values); a key whose first record is a
    retract starts from that record's values (initRow)."""
    s = pa.schema([("k", I), ("a", I), ("b", I)])
    opts = {"bucket": "1", "merge-engine": "partial-update", "partial-update.remove-record-on-delete": "true"}
    if commits == "commit-per-record":
        opts["write-only"] = "true"
    t = catalog.create_table("db.rmk", s, primary_key=["k"], options=opts)
    history = [("+I", (1, 1, 1)), ("-D", (1, 7, 8)), ("-U", (1, 5, 5)),
               ("+I", (2, 1, 1)), ("-D", (2, 7, 8)),
               ("-U", (3, 4, 4)), ("+I", (3, None, 6)),
               ("-U", (4, 4, 4))]
    if commits == "one-buffer":
        t.write(_batch(s, [r for _, r in history]), row_kinds=[k for k, _ in history])
    else:
        for kind, row in history:
            t.write(_batch(s, [row]), row_kinds=[kind])
    assert {r["k"]: (r["a"], r["b"]) for r in t.read().to_pylist()} == {1: (7, 8), 3: (4, 6)}

@pytest.mark.parametrize("commits", ["one-buffer", "commit-per-record"])
def test_first_retract_seeds_the_row_with_sequence_groups(catalog, commits):
    """Paimon's PartialUpdateMergeFunction.add: a key's first record, if a retract, is copied whole into the row
    (initRow) before it is processed, with sequence groups too: a group whose sequence is null in it keeps the
    retract's values, fields outside groups keep them until a non-null add, and an aggregated field retracts
    from the retract's own value (sum: v - v = 0). pypaimon refuses retracts for partial-update."""
    s = pa.schema([("k", I), ("a", I), ("b", pa.string()), ("g", I), ("v", pa.int64())])
    opts = {"bucket": "1", "merge-engine": "partial-update", "fields.g.sequence-group": "a,v",
            "fields.v.aggregate-function": "sum"}
    if commits == "commit-per-record":
        opts["write-only"] = "true"
    t = catalog.create_table("db.seed", s, primary_key=["k"], options=opts)
    history = [("-U", (1, 1, "x", None, 5)), ("+I", (1, None, None, None, None)),
               ("-D", (2, 1, "x", 3, 5)), ("+I", (2, 7, None, 2, 2))]
    if commits == "one-buffer":
        t.write(_batch(s, [r for _, r in history]), row_kinds=[k for k, _ in history])
    else:
        for kind, row in history:
            t.write(_batch(s, [row]), row_kinds=[kind])
    want = {1: (1, "x", None, 5), 2: (None, "x", 3, 2)}
    assert {r["k"]: (r["a"], r["b"], r["g"], r["v"]) for r in t.read().to_pylist()} == want
    t.compact(full=True)
    assert {r["k"]: (r["a"], r["b"], r["g"], r["v"]) for r in t.read().to_pylist()} == want


@pytest.mark.parametrize("nested_key", [None, "id"])
def test_first_retract_seeds_a_nested_update_group_field_as_is(catalog, nested_key):
    """Paimon's PartialUpdateMergeFunction.initRow copies the first retract's value as is; it does not call the
    aggregator (FieldNestedUpdateAgg.agg(null, v) would drop null rows and merge rows of one nested key). The
    retract's group sequence is null, so nothing later touches the field. pypaimon has no sequence groups; this
    follows the Java code."""
    row = pa.struct([("id", I), ("v", pa.string())])
    s = pa.schema([("k", I), ("g", I), ("n", pa.list_(row)), ("b", pa.string())])
    opts = {"bucket": "1", "merge-engine": "partial-update", "fields.g.sequence-group": "n",
            "fields.n.aggregate-function": "nested_update"}
    if nested_key:
        opts["fields.n.nested-key"] = nested_key
    t = catalog.create_table("db.seednu", s, primary_key=["k"], options=opts)
    raw = [{"id": 1, "v": "a"}, None, {"id": 1, "v": "b"}]
    t.write(_batch(s, [(1, None, raw, None), (1, None, None, "x")]), row_kinds=["-U", "+I"])
    assert t.read().to_pylist() == [{"k": 1, "g": None, "n": raw, "b": "x"}]


def test_remove_record_on_sequence_group(catalog):
    s = pa.schema([("k", I), ("a", I), ("g1", I), ("b", I), ("g2", I)])
    t = catalog.create_table("db.rsg", s, primary_key=["k"], options={
        "bucket": "1", "merge-engine": "partial-update", "fields.g1.sequence-group": "a",
        "fields.g2.sequence-group": "b", "partial-update.remove-record-on-sequence-group": "g1"})
    t.write(_batch(s, [(1, 1, 1, 1, 1), (2, 2, 1, 2, 1)]))
    t.write(_batch(s, [(1, None, 2, None, None), (2, None, None, None, 5)]), row_kinds=["-D", "-D"])
    # key 1: the -D takes g1 (the removing group) -> the record is gone; key 2: the -D only takes g2 -> b nulled
    assert {r["k"]: (r["a"], r["g1"], r["b"], r["g2"]) for r in t.read().to_pylist()} == {2: (2, 1, None, 5)}


def test_group_retract_checked_only_against_the_groups_it_reaches(catalog, warehouse):
    """Paimon skips a group whose sequence is all null in a retract, so g1's max never sees a -U that only
    carries g2; a retract with a g1 sequence would reach max, which cannot retract, and is rejected."""
    s = pa.schema([("k", I), ("g1", I), ("a", I), ("g2", I), ("b", I)])
    t = catalog.create_table("db.gr", s, primary_key=["k"], options={
        "bucket": "1", "merge-engine": "partial-update", "fields.g1.sequence-group": "a",
        "fields.a.aggregate-function": "max", "fields.g2.sequence-group": "b"})
    t.write(_batch(s, [(1, 1, 10, 1, 20)]))
    t.write(_batch(s, [(1, None, None, 2, 20)]), row_kinds=["-U"])
    assert _one(t) == (1, 1, 10, 2, None)
    before = list_files(warehouse)
    with pytest.raises(InvalidInput, match="'max' cannot take -U/-D"):
        t.write(_batch(s, [(1, None, None, 3, 20), (1, 0, 5, None, None)]), row_kinds=["-U", "-U"])
    assert list_files(warehouse) == before


RSG = pa.schema([("k", I), ("g", I), ("a", I), ("g2", I), ("b", I), ("c", I)])
RSG_OPTS = {"bucket": "1", "merge-engine": "partial-update", "fields.g.sequence-group": "a",
            "fields.g2.sequence-group": "b", "partial-update.remove-record-on-sequence-group": "g"}


@pytest.mark.parametrize("mode", ["commit-per-record", "one-buffer", "compact-each"])
def test_remove_record_on_sequence_group_restarts_from_the_delete(catalog, mode):
    """Paimon's retractWithSequenceGroup: a -D taking a removing group resets the whole row to the -D record
    (initRow) and later records build on that, so the deleted row's other groups and fields do not come back."""
    opts = dict(RSG_OPTS, **({"write-only": "true"} if mode == "commit-per-record" else {}))
    t = catalog.create_table("db.rs", RSG, primary_key=["k"], options=opts)
    N = None
    history = [("+I", (1, 1, 10, 1, 20, 9)), ("-D", (1, 2, N, N, N, N)), ("+I", (1, 3, 5, N, N, N)),
               ("+I", (2, 1, 10, 1, 20, 9)), ("-D", (2, 2, N, N, 7, N)), ("+I", (2, 1, 5, N, N, 4)),
               ("+I", (3, 5, 10, 1, 20, 9)), ("-D", (3, 2, N, N, N, N)), ("+I", (3, 6, 5, N, N, N))]
    if mode == "one-buffer":
        t.write(_batch(RSG, [r for _, r in history]), row_kinds=[k for k, _ in history])
    else:
        for kind, row in history:
            t.write(_batch(RSG, [row]), row_kinds=[kind])
            if mode == "compact-each":
                t.compact(full=True)
    got = {r["k"]: tuple(r.values())[1:] for r in t.read().to_pylist()}
    assert got == {
        1: (3, 5, N, N, N),  # not (3, 5, 1, 20, 9)
        # the older +I does not take g: the row is the -D's values (b=7 included) plus c, as an insert; once a
        # full compaction has dropped the -D (as Paimon does at the top level) the +I starts from nothing
        2: (1, 5, N, N, 4) if mode == "compact-each" else (2, N, N, 7, 4),
        3: (6, 5, 1, 20, 9),  # the older -D takes no group and removes nothing
    }


def test_value_filters_apply_to_merged_rows(catalog):
    s = pa.schema([("k", I), ("a", I), ("b", I)])
    t = catalog.create_table("db.vf", s, primary_key=["k"], options={"bucket": "1", "merge-engine": "partial-update"})
    t.write(_batch(s, [(1, 10, None)]))
    t.write(_batch(s, [(1, None, 1)]))
    assert t.read(filter=[("a", ">", 5), ("b", "<", 3)]).to_pylist() == [{"k": 1, "a": 10, "b": 1}]
