"""Model tests for nested_partial_update and merge_map_with_keytime: random histories of writes (several records
per key and commit) read back equal a plain-Python fold written from Paimon's rules (FieldNestedPartialUpdateAgg,
FieldMergeMapWithKeyTimeAgg), with Paimon's lone-record rule (a key's only record is returned unchanged)."""
from __future__ import annotations

import tempfile

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.slow

ROW = pa.struct([("id", pa.int32()), ("a", pa.string()), ("b", pa.int32())])
VALUE = pa.struct([("v", pa.string()), ("ts", pa.string())])
SCHEMA = pa.schema([("k", pa.int32()), ("n", pa.list_(ROW)), ("m", pa.map_(pa.string(), VALUE))])

nested_row = st.one_of(st.none(), st.fixed_dictionaries({
    "id": st.one_of(st.none(), st.integers(0, 3)), "a": st.one_of(st.none(), st.sampled_from(["x", "y", "z"])),
    "b": st.one_of(st.none(), st.integers(-2, 2))}))
map_entry = st.tuples(st.sampled_from(["p", "q"]), st.one_of(st.none(), st.fixed_dictionaries({
    "v": st.one_of(st.none(), st.sampled_from(["1", "2", "3"])),
    "ts": st.one_of(st.none(), st.sampled_from(["5", "10", "7"]))})))
record = st.tuples(st.integers(0, 1), st.one_of(st.none(), st.lists(nested_row, max_size=4)),
                   st.one_of(st.none(), st.lists(map_entry, max_size=3, unique_by=lambda e: e[0])))
histories = st.lists(st.lists(record, min_size=1, max_size=5), min_size=1, max_size=4)


def nested_partial_update(acc, x):
    if x is None:
        return acc
    merged: dict = {}
    for row in (acc or []) + x:
        if row is None:
            continue
        target = merged.setdefault(row["id"], {"id": None, "a": None, "b": None})
        target.update({f: v for f, v in row.items() if v is not None})
    return list(merged.values())


def merge_map_with_keytime(acc, x):
    if acc is None or x is None:
        return x if acc is None else acc
    out = dict(acc)
    for key, value in x:
        if value is None:
            out.pop(key, None)
        elif value["ts"] is None:
            continue
        elif out.get(key) is None or out[key]["ts"] is None or value["ts"] > out[key]["ts"]:
            out[key] = value
    return list(out.items())


def fold(records):
    """Paimon's merge of one key's records, oldest first: a lone record unchanged, else agg from null."""
    if len(records) == 1:
        return records[0]
    n = m = None
    for rn, rm in records:
        n, m = nested_partial_update(n, rn), merge_map_with_keytime(m, rm)
    return n, m


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories, st.booleans())
def test_nested_functions_fold_like_paimon(history, compact):
    from engine import Catalog
    with tempfile.TemporaryDirectory(prefix="lakemerge-nested-model-") as d:
        cat = Catalog(d)
        cat.create_database("db")
        t = cat.create_table("db.t", SCHEMA, primary_key=["k"], options={
            "bucket": "1", "merge-engine": "aggregation", "write-only": "true",
            "fields.n.aggregate-function": "nested_partial_update", "fields.n.nested-key": "id",
            "fields.m.aggregate-function": "merge_map_with_keytime"})
        per_key: dict[int, list] = {}
        for commit in history:
            t.write(pa.Table.from_pylist([{"k": k, "n": n, "m": m} for k, n, m in commit], schema=SCHEMA))
            by_key: dict[int, list] = {}
            for k, n, m in commit:
                by_key.setdefault(k, []).append((n, m))
            for k, recs in by_key.items():  # the writer folds a key's records of one commit
                per_key.setdefault(k, []).append(fold(recs))
        if compact:  # a full compaction folds every commit's record (merge_map_with_keytime is not associative,
            t.compact(full=True)  # so only full compactions, which fold all records in order, keep the model)
        expected = {k: fold(recs) for k, recs in per_key.items()}
        got = {r["k"]: (r["n"], r["m"]) for r in t.read().to_pylist()}
        assert got == expected
