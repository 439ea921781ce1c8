"""merge-engine=first-row (paimon-semantics §6.4): the oldest record of each key wins, visible at every level."""
from __future__ import annotations

import pyarrow as pa
import pytest

from engine.errors import InvalidInput, InvalidSchema

I = pa.int32()
S = pa.schema([("k", I), ("v", pa.string())])


def _batch(rows):
    return pa.Table.from_pylist([dict(zip(S.names, r)) for r in rows], schema=S)


def test_first_record_wins_in_buffer_and_across_level0_runs(catalog):
    t = catalog.create_table("db.f", S, primary_key=["k"], options={"bucket": "2", "merge-engine": "first-row"})
    t.write(_batch([(1, "a"), (1, "b"), (2, None)]))
    t.write(_batch([(1, "c"), (2, "x"), (3, "y")]))
    assert {r["k"]: r["v"] for r in t.read().to_pylist()} == {1: "a", 2: None, 3: "y"}
    got = {r["k"]: r["v"] for r in t.lookup(pa.table({"k": pa.array([3, 1], I)})).to_pylist()}
    assert got == {1: "a", 3: "y"}


def test_deletes(catalog):
    t = catalog.create_table("db.f", S, primary_key=["k"], options={"bucket": "1", "merge-engine": "first-row"})
    t.write(_batch([(1, "a")]))
    with pytest.raises(InvalidInput, match="first-row cannot take -U/-D"):
        t.delete(pa.table({"k": pa.array([1], I)}))
    for key in ("ignore-delete", "first-row.ignore-delete"):
        u = catalog.create_table(f"db.{key.replace('.', '_').replace('-', '_')}", S, primary_key=["k"],
                                 options={"bucket": "1", "merge-engine": "first-row", key: "true"})
        u.write(_batch([(1, "a")]))
        u.delete(pa.table({"k": pa.array([1], I)}))
        u.write(_batch([(1, "b")]))
        assert u.read().to_pylist() == [{"k": 1, "v": "a"}]


def test_rejects_sequence_field(catalog):
    s = pa.schema([("k", I), ("ts", pa.int64())])
    with pytest.raises(InvalidSchema, match="first-row does not allow sequence.field"):
        catalog.create_table("db.f", s, primary_key=["k"],
                             options={"bucket": "1", "merge-engine": "first-row", "sequence.field": "ts"})
