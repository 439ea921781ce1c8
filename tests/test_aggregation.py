"""merge-engine=aggregation (paimon-semantics §6.3): every documented function, retraction rules, type checks."""
from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest

from engine.errors import InvalidInput, InvalidSchema, MergeFunctionError
from tests.conftest import list_files

I = pa.int32()


def _table(catalog, schema, name="t", bucket="1", **fields):
    opts = {"bucket": bucket, "merge-engine": "aggregation"}
    for f, fn in fields.items():
        opts[f"fields.{f}.aggregate-function"] = fn
    return catalog.create_table(f"db.{name}", schema, primary_key=["k"], options=opts)


def _batch(schema, rows):
    return pa.Table.from_pylist([dict(zip(schema.names, r)) for r in rows], schema=schema)


def _by_key(t, **kw):
    return {r.pop("k"): r for r in t.read(**kw).to_pylist()}


NUMERIC = pa.schema([("k", I), ("s8", pa.int8()), ("s64", pa.int64()), ("pf", pa.float64()), ("mx", pa.int32()),
                     ("mn", pa.float32()), ("dec", pa.decimal128(10, 2)), ("pd", pa.decimal128(10, 2)),
                     ("last", pa.string()), ("lastnn", pa.string()), ("first", pa.string()),
                     ("firstnn", pa.string())])
NUMERIC_FNS = dict(s8="sum", s64="sum", pf="product", mx="max", mn="min", dec="sum", pd="product",
                   last="last_value", lastnn="last_non_null_value", first="first_value",
                   firstnn="first_non_null_value")


@pytest.mark.parametrize("split", [False, True])
def test_numeric_and_value_functions(catalog, split):
    t = _table(catalog, NUMERIC, **NUMERIC_FNS)
    rows = [(1, 1, 10, 2.0, 5, 1.5, Decimal("1.25"), Decimal("2.00"), "a", "a", None, None),
            (1, None, 5, None, 7, -0.5, Decimal("0.75"), Decimal("1.50"), None, None, "b", "b"),
            (1, 3, None, 4.0, None, None, None, None, "c", "c", "c", "c"),
            (2, 9, 1, 1.0, 1, 1.0, None, None, None, None, None, None)]
    if split:
        for r in rows:
            t.write(_batch(NUMERIC, [r]))
    else:
        t.write(_batch(NUMERIC, rows))
    got = _by_key(t)
    assert got[1] == dict(s8=4, s64=15, pf=8.0, mx=7, mn=-0.5, dec=Decimal("2.00"), pd=Decimal("3.00"),
                          last="c", lastnn="c", first=None, firstnn="b")
    assert got[2]["s8"] == 9 and got[2]["last"] is None
    assert t.lookup(pa.table({"k": pa.array([1], I)})).to_pylist()[0]["s64"] == 15


def test_default_function_is_last_non_null_value(catalog):
    s = pa.schema([("k", I), ("v", pa.string()), ("n", pa.int64())])
    t = catalog.create_table("db.d", s, primary_key=["k"], options={"bucket": "1", "merge-engine": "aggregation"})
    t.write(_batch(s, [(1, "a", 1)]))
    t.write(_batch(s, [(1, None, 2)]))
    assert _by_key(t) == {1: {"v": "a", "n": 2}}
    u = catalog.create_table("db.e", s, primary_key=["k"], options={
        "bucket": "1", "merge-engine": "aggregation", "fields.default-aggregate-function": "sum",
        "fields.v.aggregate-function": "listagg"})
    u.write(_batch(s, [(1, "a", 1), (1, "b", 2)]))
    assert _by_key(u) == {1: {"v": "a,b", "n": 3}}


def test_string_and_boolean_functions(catalog):
    s = pa.schema([("k", I), ("la", pa.string()), ("ld", pa.string()), ("lx", pa.string()), ("ba", pa.bool_()),
                   ("bo", pa.bool_()), ("smax", pa.string()), ("bmin", pa.binary()), ("ts", pa.timestamp("us")),
                   ("dt", pa.date32())])
    t = catalog.create_table("db.s", s, primary_key=["k"], options={
        "bucket": "1", "merge-engine": "aggregation", "fields.la.aggregate-function": "listagg",
        "fields.ld.aggregate-function": "listagg", "fields.ld.list-agg-delimiter": "|",
        "fields.lx.aggregate-function": "listagg", "fields.lx.distinct": "true",
        "fields.lx.list-agg-delimiter": ";",
        "fields.ba.aggregate-function": "bool_and", "fields.bo.aggregate-function": "bool_or",
        "fields.smax.aggregate-function": "max", "fields.bmin.aggregate-function": "min",
        "fields.ts.aggregate-function": "max", "fields.dt.aggregate-function": "min"})
    t0 = dt.datetime(2024, 5, 1)
    t.write(_batch(s, [(1, "x", "x", "a;b", True, False, "b", b"\x02", t0, dt.date(2024, 1, 2)),
                       (1, " ", None, "b;c", None, None, "ab", b"\x01\xff", t0 + dt.timedelta(1), None)]))
    t.write(_batch(s, [(1, "é", "y", "a", False, True, "c", b"\x01", None, dt.date(2023, 1, 1))]))
    assert _by_key(t) == {1: dict(la="x,é", ld="x|y", lx="a;b;c", ba=False, bo=True, smax="c", bmin=b"\x01",
                                  ts=t0 + dt.timedelta(1), dt=dt.date(2023, 1, 1))}


def test_listagg_blank_is_java_whitespace(catalog):
    """FieldListaggAgg skips StringUtils.isBlank inputs (Character.isWhitespace): U+3000 and U+2003 are blank,
    the no-break spaces U+00A0 and U+2007 are not."""
    s = pa.schema([("k", I), ("la", pa.string()), ("lx", pa.string())])
    t = catalog.create_table("db.lw", s, primary_key=["k"], options={
        "bucket": "1", "merge-engine": "aggregation", "fields.la.aggregate-function": "listagg",
        "fields.lx.aggregate-function": "listagg", "fields.lx.distinct": "true"})
    t.write(_batch(s, [(1, "a", "a"), (1, "\u3000", "\u3000"), (1, " \u2003", "b,\u2003"),
                       (1, "\u00a0", "\u00a0"), (1, "\u2007", "\u2007")]))
    assert _by_key(t) == {1: dict(la="a,\u00a0,\u2007", lx="a,b,\u00a0,\u2007")}


def test_collect_merge_map_and_bitmaps(catalog):
    import pyroaring

    s = pa.schema([("k", I), ("c", pa.list_(pa.int32())), ("cd", pa.list_(pa.string())),
                   ("m", pa.map_(pa.string(), pa.int32())), ("r", pa.binary()), ("r64", pa.binary())])
    t = catalog.create_table("db.c", s, primary_key=["k"], options={
        "bucket": "1", "merge-engine": "aggregation", "fields.c.aggregate-function": "collect",
        "fields.cd.aggregate-function": "collect", "fields.cd.distinct": "true",
        "fields.m.aggregate-function": "merge_map", "fields.r.aggregate-function": "rbm32",
        "fields.r64.aggregate-function": "rbm64"})
    b1 = pyroaring.BitMap([1, 5]).serialize()
    b2 = pyroaring.BitMap([5, 9]).serialize()
    w1 = pyroaring.BitMap64([1, 2 ** 40]).serialize()
    t.write(_batch(s, [(1, [1, 2], ["a", "b"], [("x", 1), ("y", 2)], b1, w1)]))
    t.write(_batch(s, [(1, [2, 3], ["b", "c"], [("y", 3)], b2, None)]))
    got = _by_key(t)[1]
    assert got["c"] == [1, 2, 2, 3] and got["cd"] == ["a", "b", "c"]
    assert dict(got["m"]) == {"x": 1, "y": 3}
    assert sorted(pyroaring.BitMap.deserialize(got["r"])) == [1, 5, 9]
    assert sorted(pyroaring.BitMap64.deserialize(got["r64"])) == [1, 2 ** 40]


def test_sketches(catalog):
    ds = pytest.importorskip("datasketches")
    s = pa.schema([("k", I), ("th", pa.binary()), ("hll", pa.binary())])
    t = catalog.create_table("db.sk", s, primary_key=["k"], options={
        "bucket": "1", "merge-engine": "aggregation", "fields.th.aggregate-function": "theta_sketch",
        "fields.hll.aggregate-function": "hll_sketch"})
    for lo in (0, 500):
        th = ds.update_theta_sketch()
        h = ds.hll_sketch(12)
        for i in range(lo, lo + 1000):
            th.update(i)
            h.update(i)
        t.write(_batch(s, [(1, th.compact().serialize(), h.serialize_compact())]))
    got = _by_key(t)[1]
    assert ds.compact_theta_sketch.deserialize(got["th"]).get_estimate() == pytest.approx(1500, rel=0.05)
    assert ds.hll_sketch.deserialize(got["hll"]).get_estimate() == pytest.approx(1500, rel=0.05)


def test_retraction_rules(catalog, warehouse):
    s = pa.schema([("k", I), ("s", pa.int64()), ("p", pa.int64()), ("lv", pa.int64()), ("ln", pa.int64()),
                   ("c", pa.list_(pa.int64())), ("m", pa.map_(pa.string(), pa.int64())), ("mx", pa.int64())])
    t = catalog.create_table("db.r", s, primary_key=["k"], options={
        "bucket": "1", "merge-engine": "aggregation", "fields.s.aggregate-function": "sum",
        "fields.p.aggregate-function": "product", "fields.lv.aggregate-function": "last_value",
        "fields.c.aggregate-function": "collect", "fields.m.aggregate-function": "merge_map",
        "fields.mx.aggregate-function": "max", "fields.mx.ignore-retract": "true"})
    t.write(_batch(s, [(1, 10, 12, 1, 1, [1, 2, 2], [("a", 1), ("b", 2)], 5),
                       (2, 1, 1, 1, 1, None, None, 1)]))
    t.write(_batch(s, [(1, 3, 5, 7, 9, [2], [("a", 0)], 99), (2, None, None, None, None, None, None, None)]),
            row_kinds=["-U", "-D"])
    got = _by_key(t)
    assert got[1] == dict(s=7, p=2, lv=None, ln=None, c=[1, 2], m=[("b", 2)], mx=5)
    assert got[2] == dict(s=1, p=1, lv=None, ln=1, c=None, m=None, mx=1)
    # a function that cannot retract: rejected at write, nothing written
    u = catalog.create_table("db.u", s, primary_key=["k"], options={
        "bucket": "1", "merge-engine": "aggregation", "fields.mx.aggregate-function": "max"})
    u.write(_batch(s, [(1, 1, 1, 1, 1, None, None, 1)]))
    before = list_files(warehouse)
    with pytest.raises(InvalidInput, match="'max' cannot take -U/-D"):
        u.delete(pa.table({"k": pa.array([1], I)}))
    assert list_files(warehouse) == before


def test_remove_record_on_delete(catalog):
    s = pa.schema([("k", I), ("s", pa.int64()), ("mx", pa.int64())])
    t = catalog.create_table("db.rm", s, primary_key=["k"], options={
        "bucket": "1", "merge-engine": "aggregation", "aggregation.remove-record-on-delete": "true",
        "fields.s.aggregate-function": "sum", "fields.mx.aggregate-function": "max"})
    t.write(_batch(s, [(1, 1, 1), (2, 2, 2)]))
    t.delete(pa.table({"k": pa.array([1], I)}))
    assert _by_key(t) == {2: {"s": 2, "mx": 2}}
    t.write(_batch(s, [(1, 5, 3)]))  # starts again from nothing
    assert _by_key(t) == {1: {"s": 5, "mx": 3}, 2: {"s": 2, "mx": 2}}


@pytest.mark.parametrize("split", [False, True])
def test_remove_record_on_delete_seeds_later_records_with_the_delete_values(catalog, split):
    """Paimon's AggregateMergeFunction.add: a -D with remove-record-on-delete copies all its fields into the
    accumulator (initRow, nulls included) and resets no aggregator, so later adds aggregate onto the -D's values;
    first_value / first_non_null_value keep the seed once an earlier add initialised them. (pypaimon refuses
    -D records for aggregation tables; this follows the Java code.) The first_value state and a blank listagg
    seed depend on which records meet in one merge, so the table is write-only (no compaction between writes)."""
    s = pa.schema([("k", I), ("s", pa.int64()), ("mx", pa.int64()), ("fv", pa.string()), ("fnn", pa.string()),
                   ("la", pa.string()), ("lv", pa.string())])
    t = catalog.create_table("db.rmseed", s, primary_key=["k"], options={
        "bucket": "1", "merge-engine": "aggregation", "aggregation.remove-record-on-delete": "true",
        "write-only": "true", "fields.s.aggregate-function": "sum", "fields.mx.aggregate-function": "max",
        "fields.fv.aggregate-function": "first_value", "fields.fnn.aggregate-function": "first_non_null_value",
        "fields.la.aggregate-function": "listagg"})
    rows = [(1, 1, 9, "a", "a", "p", "x"), (1, 5, 2, "d", "d", "q", "y"), (1, 3, 1, "b", "b", "r", None),
            (2, 5, 2, "d", None, " ", "y"), (2, 3, 1, "b", None, " ", None), (2, None, None, None, "c", None, None)]
    kinds = ["+I", "-D", "+I", "-D", "+I", "+U"]
    if split:  # lone records pass through each commit; the read folds them all in one merge
        for r, kind in zip(rows, kinds):
            t.write(_batch(s, [r]), row_kinds=[kind])
    else:
        t.write(_batch(s, rows), row_kinds=kinds)
    want = {1: dict(s=8, mx=2, fv="d", fnn="d", la="q,r", lv="y"),
            2: dict(s=8, mx=2, fv="b", fnn="c", la=" ", lv="y")}
    assert _by_key(t) == want
    t.compact(full=True)
    assert _by_key(t) == want


def test_remove_record_on_delete_lone_delete_beside_merged_keys(catalog):
    """A key's lone -D in a batch where another key has several records: Paimon passes the -D through
    (ReducerMergeFunctionWrapper) and never retracts a -D with remove-record-on-delete (AggregateMergeFunction.add),
    so ``max``, which cannot retract, must not raise."""
    s = pa.schema([("k", I), ("mx", pa.int64())])
    t = catalog.create_table("db.rm1", s, primary_key=["k"], options={
        "bucket": "1", "merge-engine": "aggregation", "aggregation.remove-record-on-delete": "true",
        "fields.mx.aggregate-function": "max"})
    t.write(_batch(s, [(1, 1), (1, 3), (2, None)]), row_kinds=["+I", "+I", "-D"])
    assert _by_key(t) == {1: {"mx": 3}}
    t.write(_batch(s, [(1, 0), (3, 7)]), row_kinds=["+I", "-D"])
    assert _by_key(t) == {1: {"mx": 3}}


def test_sequence_field_uses_last_value(catalog):
    s = pa.schema([("k", I), ("ts", pa.int64()), ("s", pa.int64()), ("v", pa.string())])
    t = catalog.create_table("db.sq", s, primary_key=["k"], options={
        "bucket": "1", "merge-engine": "aggregation", "sequence.field": "ts", "fields.s.aggregate-function": "sum",
        "fields.ts.aggregate-function": "max"})  # ignored: sequence fields always use last_value
    t.write(_batch(s, [(1, 5, 1, "newest")]))
    t.write(_batch(s, [(1, 3, 2, "late but older")]))
    assert _by_key(t) == {1: {"ts": 5, "s": 3, "v": "newest"}}


def test_integer_overflow_raises(catalog):
    s = pa.schema([("k", I), ("s", pa.int8())])
    t = _table(catalog, s, s="sum")
    t.write(_batch(s, [(1, 100)]))
    t.write(_batch(s, [(1, 100)]))
    with pytest.raises(MergeFunctionError, match="'s': sum overflow"):
        t.read()


@pytest.mark.parametrize("split", [False, True])
def test_float_sum_and_product_round_to_float_every_step(catalog, split):
    """FieldSumAgg / FieldProductAgg compute FLOAT in Java float: (float) acc + (float) in, at every step."""
    import numpy as np
    s = pa.schema([("k", I), ("s", pa.float32()), ("p", pa.float32()), ("big", pa.float32())])
    t = _table(catalog, s, s="sum", p="product", big="sum")
    rows = [(1, 0.1, 1.1, x) for x in (16777216.0, 1.0, 1.0)] + [(1, 0.1, 1.1, None)] * 7
    for batch in ([[r] for r in rows] if split else [rows]):
        t.write(_batch(s, batch))
    with t.new_write() as w:
        w.write(_batch(s, [(1, 0.1, 1.1, 1.0)]), row_kinds=["-U"])
        t.commit(w.prepare_commit())
    f = np.float32
    acc_s, acc_p = f(0.1), f(1.1)
    for _ in range(9):
        acc_s, acc_p = f(acc_s + f(0.1)), f(acc_p * f(1.1))
    acc_s, acc_p = f(acc_s - f(0.1)), f(acc_p / f(1.1))
    got = _by_key(t)[1]
    assert (f(got["s"]), f(got["p"]), got["big"]) == (acc_s, acc_p, 16777215.0)


@pytest.mark.parametrize("field_type, fn, match", [
    (pa.string(), "sum", "does not accept"), (pa.int32(), "listagg", "does not accept"),
    (pa.int32(), "bool_and", "does not accept"), (pa.string(), "collect", "does not accept"),
    (pa.list_(pa.int32()), "max", "does not accept"), (pa.int64(), "rbm32", "does not accept"),
    (pa.int64(), "no_such_fn", "unknown aggregate function"), (pa.int64(), "count", "no 'count'"),
])
def test_type_checks_at_create_table(catalog, field_type, fn, match):
    s = pa.schema([("k", I), ("v", field_type)])
    with pytest.raises(InvalidSchema, match=f"field 'v'.*{match}|{match}"):
        _table(catalog, s, v=fn)


def test_nested_partial_update(catalog):
    row = pa.struct([("id", I), ("a", pa.string()), ("b", I)])
    s = pa.schema([("k", I), ("n", pa.list_(row))])
    t = catalog.create_table("db.np", s, primary_key=["k"], options={
        "bucket": "1", "merge-engine": "aggregation", "fields.n.aggregate-function": "nested_partial_update",
        "fields.n.nested-key": "id"})

    def r(i, a, b):
        return {"id": i, "a": a, "b": b}
    t.write(_batch(s, [(1, [r(1, "x", None), r(2, None, 20), None]), (2, None)]))
    t.write(_batch(s, [(1, [r(1, None, 10), r(3, "z", None)]), (2, [r(5, "e", 5), r(5, None, 6)])]))
    t.write(_batch(s, [(1, [r(2, "y", None), r(1, "X", None)]), (1, None)]))  # a null array changes nothing
    got = _by_key(t)
    assert got[1]["n"] == [r(1, "X", 10), r(2, "y", 20), r(3, "z", None)]
    assert got[2]["n"] == [r(5, "e", 6)]  # rows of one key in one array merge too
    t.compact(full=True)
    assert _by_key(t) == got
    with pytest.raises(InvalidInput, match="nested_partial_update"):
        t.write(_batch(s, [(1, [r(1, "q", 1)])]), row_kinds=["-U"])


def test_nested_partial_update_null_key_strategies(catalog):
    row = pa.struct([("id", I), ("a", pa.string())])
    s = pa.schema([("k", I), ("n", pa.list_(row))])
    # two records of key 1 (a lone record is returned unchanged, as Paimon's ReducerMergeFunctionWrapper does)
    data = [(1, [{"id": None, "a": "p"}]), (1, [{"id": 1, "a": "q"}, {"id": None, "a": None}])]
    expected = {"merge": [{"id": None, "a": "p"}, {"id": 1, "a": "q"}], "ignore": [{"id": 1, "a": "q"}]}
    for strategy in ("merge", "ignore", "error"):
        t = catalog.create_table(f"db.s_{strategy}", s, primary_key=["k"], options={
            "bucket": "1", "merge-engine": "aggregation", "fields.n.aggregate-function": "nested_partial_update",
            "fields.n.nested-key": "id", "fields.n.nested-key-null-strategy": strategy})
        if strategy == "error":
            with pytest.raises(MergeFunctionError, match="contains nulls"):
                t.write(_batch(s, data))
                t.read()
        else:
            t.write(_batch(s, data))
            assert _by_key(t)[1]["n"] == expected[strategy]


@pytest.mark.parametrize("options, match", [
    ({}, "needs fields.n.nested-key"),
    ({"fields.n.nested-key": "zz"}, "'zz' is not in the ROW type"),
    ({"fields.n.nested-key": "id", "fields.n.nested-key-null-strategy": "drop"}, "must be merge, ignore or error"),
])
def test_nested_partial_update_options_checked(catalog, options, match):
    s = pa.schema([("k", I), ("n", pa.list_(pa.struct([("id", I), ("a", I)])))])
    with pytest.raises(InvalidSchema, match=match):
        catalog.create_table("db.bad", s, primary_key=["k"], options={
            "bucket": "1", "merge-engine": "aggregation", "fields.n.aggregate-function": "nested_partial_update",
            **options})
    with pytest.raises(InvalidSchema, match="ARRAY<ROW>"):
        catalog.create_table("db.bad2", pa.schema([("k", I), ("n", pa.list_(I))]), primary_key=["k"], options={
            "bucket": "1", "merge-engine": "aggregation", "fields.n.aggregate-function": "nested_partial_update",
            "fields.n.nested-key": "id"})


KEYTIME_VALUE = pa.struct([("value", pa.string()), ("ts", pa.string())])
KEYTIME = pa.schema([("k", pa.string()), ("m", pa.map_(pa.string(), KEYTIME_VALUE))])


def _keytime_table(catalog, name="kt", **extra):
    return catalog.create_table(f"db.{name}", KEYTIME, primary_key=["k"], options={
        "bucket": "1", "merge-engine": "aggregation", "fields.m.aggregate-function": "merge_map_with_keytime",
        **extra})


def _map(**entries):
    return [(k, None if v is None else {"value": v[0], "ts": v[1]}) for k, v in entries.items()]


def test_merge_map_with_keytime_paimon_docs_example(catalog):
    t = _keytime_table(catalog, **{"fields.m.ts-field": "ts"})
    t.write(_batch(KEYTIME, [("1", _map(product_name=("iPhone", "100"), color=("Black", "100")))]))
    t.write(_batch(KEYTIME, [("1", _map(product_name=("iPad", "200"), price=("999", "200")))]))
    # Paimon's docs write "50" here and say Black stays; Paimon's code compares timestamps as strings, where
    # "50" > "100" (White would win). Paimon's behaviour wins: the docs' intent holds for a same-width "050".
    t.write(_batch(KEYTIME, [("1", _map(color=("White", "050")))]))
    want = {"product_name": {"value": "iPad", "ts": "200"}, "color": {"value": "Black", "ts": "100"},
            "price": {"value": "999", "ts": "200"}}
    assert dict(_by_key(t)["1"]["m"]) == want
    t.compact(full=True)
    assert dict(_by_key(t)["1"]["m"]) == want


def test_merge_map_with_keytime_removal_null_timestamps_and_default_ts_field(catalog):
    t = _keytime_table(catalog)  # ts-field defaults to the ROW's last field
    t.write(_batch(KEYTIME, [("1", _map(a=("1", "5"), b=("2", "5"), c=("3", "5")))]))
    t.write(_batch(KEYTIME, [("1", _map(a=None, b=("new", None), c=("3b", "6"), d=("4", None)))]))
    assert dict(_by_key(t)["1"]["m"]) == {"b": {"value": "2", "ts": "5"}, "c": {"value": "3b", "ts": "6"}}
    t.write(_batch(KEYTIME, [("1", _map(c=("older", "10")))]))  # string order: "10" < "6"
    t.write(_batch(KEYTIME, [("1", _map(c=("same", "6")))]))  # an equal timestamp keeps the entry
    assert _by_key(t)["1"]["m"][1] == ("c", {"value": "3b", "ts": "6"})
    with pytest.raises(InvalidInput, match="merge_map_with_keytime"):
        t.write(_batch(KEYTIME, [("1", _map(a=("1", "9")))]), row_kinds=["-D"])
    t2 = _keytime_table(catalog, "kt2", **{"fields.m.ignore-retract": "true"})
    t2.write(_batch(KEYTIME, [("1", _map(a=("1", "9")))]))
    t2.write(_batch(KEYTIME, [("1", _map(a=("1", "9")))]), row_kinds=["-U"])
    assert dict(_by_key(t2)["1"]["m"]) == {"a": {"value": "1", "ts": "9"}}


@pytest.mark.parametrize("value_type, extra, match", [
    (pa.string(), {}, "MAP<K, ROW"),
    (pa.struct([("ts", pa.string())]), {}, "at least 2 fields"),
    (KEYTIME_VALUE, {"fields.m.ts-field": "when"}, "'when' is not in the ROW type"),
    (pa.struct([("v", pa.string()), ("ts", pa.int64())]), {}, "must be a string"),
])
def test_merge_map_with_keytime_types_checked(catalog, value_type, extra, match):
    s = pa.schema([("k", I), ("m", pa.map_(pa.string(), value_type))])
    with pytest.raises(InvalidSchema, match=match):
        catalog.create_table("db.bad", s, primary_key=["k"], options={
            "bucket": "1", "merge-engine": "aggregation", "fields.m.aggregate-function": "merge_map_with_keytime",
            **extra})


def test_nested_update(catalog):
    row = pa.struct([("id", I), ("ver", I), ("name", pa.string())])
    s = pa.schema([("k", I), ("kv", pa.list_(row)), ("app", pa.list_(row))])
    t = catalog.create_table("db.n", s, primary_key=["k"], options={
        "bucket": "1", "merge-engine": "aggregation", "fields.kv.aggregate-function": "nested_update",
        "fields.kv.nested-key": "id", "fields.kv.nested-sequence-field": "ver",
        "fields.app.aggregate-function": "nested_update", "fields.app.count-limit": "3"})

    def r(i, v, n):
        return {"id": i, "ver": v, "name": n}
    t.write(_batch(s, [(1, [r(1, 1, "a"), r(2, 1, "b")], [r(1, 1, "a"), r(2, 1, "b")])]))
    t.write(_batch(s, [(1, [r(2, 2, "B"), r(1, 0, "old"), r(3, 1, "c")], [r(3, 1, "c"), r(4, 1, "d")])]))
    got = _by_key(t)[1]
    assert got["kv"] == [r(1, 1, "a"), r(2, 2, "B"), r(3, 1, "c")]
    assert got["app"] == [r(1, 1, "a"), r(2, 1, "b"), r(3, 1, "c")]  # count-limit 3
    t.write(_batch(s, [(1, [r(2, 0, None)], [r(1, 1, "a")])]), row_kinds=["-U"])  # retract by key / equal row
    got = _by_key(t)[1]
    assert got["kv"] == [r(1, 1, "a"), r(3, 1, "c")]
    assert got["app"] == [r(2, 1, "b"), r(3, 1, "c")]
    with pytest.raises(InvalidSchema, match="'zz' is not in the ROW type"):
        catalog.create_table("db.bad", s, primary_key=["k"], options={
            "bucket": "1", "merge-engine": "aggregation", "fields.kv.aggregate-function": "nested_update",
            "fields.kv.nested-key": "zz"})


def test_value_filters_apply_to_merged_rows(catalog):
    s = pa.schema([("k", I), ("s", pa.int64())])
    t = _table(catalog, s, s="sum")
    t.write(_batch(s, [(1, 6), (2, 1)]))
    t.write(_batch(s, [(1, 6)]))
    assert t.read(filter=[("s", ">", 10)]).to_pylist() == [{"k": 1, "s": 12}]


def test_lookup_merges_every_run_once_per_record(catalog):
    s = pa.schema([("p", pa.string()), ("k", I), ("s", pa.int64())])
    t = catalog.create_table("db.lk", s, primary_key=["p", "k"], partition_keys=["p"], options={
        "bucket": "2", "merge-engine": "aggregation", "fields.s.aggregate-function": "sum"})
    t.write(_batch(s, [("a", 1, 1), ("b", 1, 10)]))
    t.write(_batch(s, [("a", 1, 2), ("a", 2, 5)]))
    t.write(_batch(s, [("a", 1, 4)]))
    probes = pa.table({"p": ["a", "a", "b", "a", "c"], "k": pa.array([1, 1, 1, 3, 1], I)})
    got = sorted((r["p"], r["k"], r["s"]) for r in t.lookup(probes).to_pylist())
    assert got == [("a", 1, 7), ("b", 1, 10)]
