"""Deduplicate options (sequence.field, descending, rowkind.field, ignore-delete) and sequence.auto-padding."""
from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from engine.errors import InvalidSchema

SCHEMA = pa.schema([("id", pa.int32()), ("s1", pa.int64()), ("s2", pa.string()), ("v", pa.string())])


def _t(catalog, name, schema=SCHEMA, **opts):
    return catalog.create_table(f"db.{name}", schema, primary_key=["id"],
                                options={"bucket": "1", **{k.replace("_", "."): v for k, v in opts.items()}})


def _rows(t):
    return {r["id"]: r["v"] for r in t.read().to_pylist()}


def test_several_sequence_fields_compare_in_order(catalog):
    t = catalog.create_table("db.m", SCHEMA, primary_key=["id"], options={"bucket": "1", "sequence.field": "s1,s2"})
    t.write(pa.table({"id": pa.array([1, 2, 3], pa.int32()), "s1": [5, 5, 5], "s2": ["b", "b", None],
                      "v": ["first", "first", "first"]}))
    t.write(pa.table({"id": pa.array([1, 2, 3], pa.int32()), "s1": [5, 4, 5], "s2": ["a", "z", "a"],
                      "v": ["older-s2", "older-s1", "null-loses"]}))
    assert _rows(t) == {1: "first", 2: "first", 3: "null-loses"}
    # the same inside one write buffer, and equal sequence values fall back to arrival order
    t.write(pa.table({"id": pa.array([4, 4, 4], pa.int32()), "s1": [7, 9, 9], "s2": ["x", "a", "a"],
                      "v": ["a", "b", "c"]}))
    assert _rows(t)[4] == "c"
    assert t.lookup(pa.table({"id": pa.array([1, 4], pa.int32())})).column("v").to_pylist() == ["first", "c"]


def test_descending_sequence_field_null_is_oldest(catalog):
    t = catalog.create_table("db.d", SCHEMA, primary_key=["id"],
                             options={"bucket": "1", "sequence.field": "s1", "sequence.field.sort-order": "descending"})
    t.write(pa.table({"id": pa.array([1, 2], pa.int32()), "s1": [10, None], "v": ["ten", "null"],
                      "s2": [None, None]}))
    t.write(pa.table({"id": pa.array([1, 2], pa.int32()), "s1": [11, 3], "v": ["eleven", "three"],
                      "s2": [None, None]}))
    # descending: the smaller value is newer, but a null is still the oldest (Paimon compares sequence fields
    # with nullIsLast=false and negates only non-null comparisons; the shared spec §2.3 says "nulls last")
    assert _rows(t) == {1: "ten", 2: "three"}
    t.compact(full=True)
    assert _rows(t) == {1: "ten", 2: "three"}


@pytest.mark.parametrize("engine", ["deduplicate", "partial-update"])
def test_descending_string_sequence_field_null_is_oldest(catalog, engine):
    t = catalog.create_table(f"db.ds_{engine.replace('-', '_')}", SCHEMA, primary_key=["id"],
                             options={"bucket": "1", "sequence.field": "s2", "sequence.field.sort-order": "descending",
                                      "merge-engine": engine})
    # in one write buffer and across files
    t.write(pa.table({"id": pa.array([1, 1, 2], pa.int32()), "s1": [None] * 3, "s2": [None, "b", None],
                      "v": ["null", "b", "null"]}))
    t.write(pa.table({"id": pa.array([2], pa.int32()), "s1": [None], "s2": ["c"], "v": ["c"]}))
    assert _rows(t) == {1: "b", 2: "c"}


def test_rowkind_field_deletes_and_updates(catalog):
    schema = pa.schema([("id", pa.int32()), ("op", pa.string()), ("v", pa.string())])
    t = catalog.create_table("db.rk", schema, primary_key=["id"], options={"bucket": "1", "rowkind.field": "op"})
    t.write(pa.table({"id": pa.array([1, 2, 3], pa.int32()), "op": ["+I", "+I", "+I"], "v": ["a", "b", "c"]}))
    t.write(pa.table({"id": pa.array([1, 2, 2], pa.int32()), "op": ["-D", "-U", "+U"], "v": [None, "b", "B"]}))
    assert sorted((r["id"], r["op"], r["v"]) for r in t.read().to_pylist()) == [(2, "+U", "B"), (3, "+I", "c")]


def test_ignore_delete_drops_retracts_at_write_and_in_old_files(catalog, warehouse):
    t = _t(catalog, "ig")
    t.write(pa.table({"id": pa.array([1, 2], pa.int32()), "s1": [1, 1], "s2": ["x", "x"], "v": ["a", "b"]}))
    t.delete(pa.table({"id": pa.array([1], pa.int32())}))  # written before ignore-delete is on: a -D in a file
    assert _rows(t) == {2: "b"}
    import json
    import pathlib

    from engine import Catalog
    # Re-open with ignore-delete=true (as an ALTER TABLE would): the old -D is skipped when merging
    path = pathlib.Path(warehouse, "db.db", "ig", "schema", "schema-0")
    obj = json.loads(path.read_text())
    obj["options"]["ignore-delete"] = "true"
    path.write_text(json.dumps(obj))
    t2 = Catalog(warehouse).get_table("db.ig")
    assert _rows(t2) == {1: "a", 2: "b"}
    t2.delete(pa.table({"id": pa.array([2], pa.int32())}))  # dropped at write
    assert _rows(t2) == {1: "a", 2: "b"}


@pytest.mark.parametrize("key", ["ignore-delete", "deduplicate.ignore-delete"])
def test_ignore_delete_aliases(catalog, key):
    t = catalog.create_table("db.a", SCHEMA, primary_key=["id"], options={"bucket": "1", key: "true"})
    t.write(pa.table({"id": pa.array([1], pa.int32()), "s1": [1], "s2": ["x"], "v": ["a"]}))
    t.delete(pa.table({"id": pa.array([1], pa.int32())}))
    assert _rows(t) == {1: "a"}


def test_auto_padding_orders_by_legacy_long_values(catalog):
    schema = pa.schema([("id", pa.int32()), ("ts", pa.timestamp("us")), ("v", pa.string())])
    t = catalog.create_table("db.p", schema, primary_key=["id"],
                             options={"bucket": "1", "sequence.field": "ts",
                                      "sequence.auto-padding": "row-kind-flag,second-to-micro"})
    base = dt.datetime(2024, 1, 1, 0, 0, 0)
    t.write(pa.table({"id": pa.array([1, 2], pa.int32()),
                      "ts": pa.array([base + dt.timedelta(milliseconds=900), base], pa.timestamp("us")),
                      "v": ["a", "b"]}))
    # same second: padding compares seconds only, so arrival order decides (the later record wins)
    t.write(pa.table({"id": pa.array([1, 2], pa.int32()),
                      "ts": pa.array([base + dt.timedelta(milliseconds=100), base - dt.timedelta(seconds=1)],
                                     pa.timestamp("us")), "v": ["a2", "b2"]}))
    assert _rows(t) == {1: "a2", 2: "b"}
    m = catalog.create_table("db.q", schema, primary_key=["id"],
                             options={"bucket": "1", "sequence.field": "ts",
                                      "sequence.auto-padding": "millis-to-micro"})
    m.write(pa.table({"id": pa.array([1], pa.int32()),
                      "ts": pa.array([base + dt.timedelta(microseconds=900)], pa.timestamp("us")), "v": ["a"]}))
    m.write(pa.table({"id": pa.array([1], pa.int32()),
                      "ts": pa.array([base + dt.timedelta(microseconds=100)], pa.timestamp("us")), "v": ["a2"]}))
    assert _rows(m) == {1: "a2"}  # equal millis: arrival decides
    n = catalog.create_table("db.n", schema, primary_key=["id"], options={"bucket": "1", "sequence.field": "ts"})
    n.write(pa.table({"id": pa.array([1], pa.int32()),
                      "ts": pa.array([base + dt.timedelta(microseconds=900)], pa.timestamp("us")), "v": ["a"]}))
    n.write(pa.table({"id": pa.array([1], pa.int32()),
                      "ts": pa.array([base + dt.timedelta(microseconds=100)], pa.timestamp("us")), "v": ["a2"]}))
    assert _rows(n) == {1: "a"}  # without padding the full value decides


def test_auto_padding_rejects_bad_values(catalog):
    with pytest.raises(InvalidSchema, match="auto-padding"):
        catalog.create_table("db.x", SCHEMA, primary_key=["id"],
                             options={"bucket": "1", "sequence.field": "s1", "sequence.auto-padding": "nanos"})
    with pytest.raises(InvalidSchema, match="needs sequence.field"):
        catalog.create_table("db.y", SCHEMA, primary_key=["id"],
                             options={"bucket": "1", "sequence.auto-padding": "row-kind-flag"})
