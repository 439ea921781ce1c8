"""Cross-partition upsert (primary key without the partition field, bucket=-1): a key lives in one partition."""
from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.errors import CommitConflict, InvalidSchema
from engine.options import TableOptions

SCHEMA = pa.schema([("dt", pa.string()), ("id", pa.int64()), ("v", pa.string())])


def rows(dts, ids, vals):
    return pa.table({"dt": dts, "id": ids, "v": vals}, schema=SCHEMA)


def make(catalog, name="db.x", **opts):
    return catalog.create_table(name, SCHEMA, ["id"], ["dt"], options={"bucket": "-1", **opts})


def state(t) -> dict:
    return {r["id"]: (r["dt"], r["v"]) for r in t.read().to_pylist()}


def test_requires_dynamic_bucket(catalog):
    with pytest.raises(InvalidSchema, match="bucket=-1"):
        catalog.create_table("db.f", SCHEMA, ["id"], ["dt"], options={"bucket": "2"})
    assert make(catalog).schema.cross_partition_update


def test_deduplicate_moves_the_row(catalog):
    t = make(catalog)
    t.write(rows(["a", "a", "b"], [1, 2, 3], ["x", "y", "z"]))
    t.write(rows(["b", "c"], [1, 2], ["x2", "y2"]))
    assert state(t) == {1: ("b", "x2"), 2: ("c", "y2"), 3: ("b", "z")}
    assert t.read(filter=[("dt", "=", "a")]).num_rows == 0  # -D landed in the old partition
    assert sorted(r["id"] for r in t.lookup(pa.table({"id": [2, 3, 9]})).to_pylist()) == [2, 3]


def test_delete_by_key_without_partition(catalog):
    t = make(catalog)
    t.write(rows(["a", "b"], [1, 2], ["x", "y"]))
    t.delete(pa.table({"id": [1, 7]}))
    assert state(t) == {2: ("b", "y")}
    t.write(rows(["c"], [1], ["back"]))
    assert state(t) == {1: ("c", "back"), 2: ("b", "y")}


def test_versions_of_a_key_in_one_batch_apply_in_order(catalog):
    t = make(catalog)
    t.write(rows(["a", "b", "a", "c"], [1, 1, 1, 1], ["1", "2", "3", "4"]))
    assert state(t) == {1: ("c", "4")}
    t.write(rows(["c", "a"], [1, 1], ["5", "6"]), row_kinds=["-D", "+I"])
    assert state(t) == {1: ("a", "6")}


@pytest.mark.parametrize("engine,expected", [("first-row", {1: ("a", "x")}), ("partial-update", {1: ("a", "new")})])
def test_other_merge_engines_keep_the_old_partition(catalog, engine, expected):
    t = make(catalog)
    t.write(rows(["a"], [1], ["x"]))
    with t.new_write() as w:
        w.options = TableOptions({**t.options, "merge-engine": engine})  # routing rule only
        w.write(rows(["b"], [1], ["new"]))
        t.commit(w.prepare_commit())
    assert state(t) == expected


def test_index_ttl_forgets_old_keys(catalog):
    t = make(catalog, **{"cross-partition-upsert.index-ttl": "1 ms"})
    t.write(rows(["a"], [1], ["x"]))
    import time
    time.sleep(0.01)
    t.write(rows(["b"], [1], ["y"]))  # the index no longer knows key 1: Paimon's TTL semantics, a duplicate
    assert sorted((r["dt"], r["v"]) for r in t.read().to_pylist()) == [("a", "x"), ("b", "y")]


def test_concurrent_writers_conflict(catalog):
    t = make(catalog)
    t.write(rows(["a"], [1], ["x"]))
    w1, w2 = t.new_write(), t.new_write()
    w1.write(rows(["b"], [1], ["w1"]))
    w2.write(rows(["c"], [1], ["w2"]))
    m1, m2 = w1.prepare_commit(), w2.prepare_commit()
    t.commit(m1)
    with pytest.raises(CommitConflict, match="cross-partition"):
        t.commit(m2)
    assert state(t) == {1: ("b", "w1")}


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=st.lists(st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 6),
                                           st.sampled_from(["+I", "-D"])), min_size=1, max_size=8),
                        min_size=1, max_size=5))
def test_matches_a_model(tmp_path_factory, batches):
    from engine import Catalog
    cat = Catalog(str(tmp_path_factory.mktemp("wh")))
    cat.create_database("db")
    t = make(cat, **{"dynamic-bucket.target-row-num": "2"})
    model: dict[int, tuple] = {}
    for n, batch in enumerate(batches):
        t.write(rows([b[0] for b in batch], [b[1] for b in batch], [f"{n}.{i}" for i in range(len(batch))]),
                row_kinds=[b[2] for b in batch])
        for i, (dt, k, kind) in enumerate(batch):
            if kind == "-D":
                model.pop(k, None)
            else:
                model[k] = (dt, f"{n}.{i}")
        assert state(t) == model
        assert t.read().num_rows == len(model)  # no key in two partitions


def test_ignore_delete_keeps_a_moved_keys_old_row(catalog):
    """With ignore-delete the writer drops every -D record, the one retracting a moved key's old partition too
    (Paimon: DeleteExistingProcessor's retract goes through TableWriteImpl's RowKindFilter), so the key then has a
    row in both partitions; a later DELETE is dropped as well."""
    t = make(catalog, **{"ignore-delete": "true"})
    t.write(rows(["a"], [1], ["x"]))
    t.write(rows(["b"], [1], ["y"]))
    t.delete(pa.table({"id": [1]}))
    assert sorted((r["dt"], r["v"]) for r in t.read().to_pylist()) == [("a", "x"), ("b", "y")]
