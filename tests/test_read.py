"""Merge-on-read, projection, filters and pruning, lookups."""
from __future__ import annotations

import pyarrow as pa
import pytest

from engine import Catalog
from engine.errors import InvalidInput, SnapshotNotFound

SCHEMA = pa.schema([("dt", pa.string()), ("id", pa.int64()), ("v", pa.int64()), ("s", pa.string())])


@pytest.fixture
def table(tmp_path):
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    return cat.create_table("db.t", SCHEMA, primary_key=["dt", "id"], partition_keys=["dt"],
                            options={"bucket": "4"})


def rows(t, **kw):
    return sorted(t.read(**kw).to_pylist(), key=lambda r: (r.get("dt"), r.get("id")))


def test_value_filter_never_resurrects_an_older_version(table):
    table.write(pa.table({"dt": ["a"], "id": [1], "v": [5], "s": ["old"]}))
    table.write(pa.table({"dt": ["a"], "id": [1], "v": [7], "s": ["new"]}))
    assert rows(table, filter=[("v", "=", 5)]) == []
    assert rows(table, filter=[("v", "=", 7)]) == [{"dt": "a", "id": 1, "v": 7, "s": "new"}]
    assert rows(table, filter=[("s", "=", "old")]) == []


def test_value_stats_prune_whole_buckets_only(table):
    table.write(pa.table({"dt": ["a"] * 40, "id": list(range(40)), "v": list(range(40)), "s": ["x"] * 40}))
    assert len(table.plan()) == 4
    assert table.plan(filter=[("v", ">", 1000)]) == []
    table.write(pa.table({"dt": ["a"] * 3, "id": [100, 101, 102], "v": [5000] * 3, "s": ["y"] * 3}))
    buckets_with_new_keys = {sp.bucket for sp in table.plan(filter=[("id", ">=", 100)])}
    assert 0 < len(buckets_with_new_keys) < 4
    assert {sp.bucket for sp in table.plan(filter=[("v", ">=", 5000)])} == buckets_with_new_keys
    assert [r["id"] for r in rows(table, filter=[("v", ">=", 5000)])] == [100, 101, 102]


def test_partition_bucket_and_key_pruning(table):
    table.write(pa.table({"dt": ["a", "a", "b", "b"], "id": [1, 2, 1, 2], "v": [1, 2, 3, 4], "s": list("wxyz")}))
    assert {sp.partition_values for sp in table.plan(filter=[("dt", "=", "b")])} == {("b",)}
    point = table.plan(filter=[("dt", "=", "a"), ("id", "=", 2)])
    assert len(point) == 1 and point[0].partition_values == ("a",)
    assert table.plan(filter=[("id", ">", 100)]) == []
    assert rows(table, filter=[[("dt", "=", "a"), ("id", "=", 2)], [("dt", "=", "b"), ("id", "=", 1)]]) == [
        {"dt": "a", "id": 2, "v": 2, "s": "x"}, {"dt": "b", "id": 1, "v": 3, "s": "y"}]


def test_projection_and_time_travel(table):
    s1 = table.write(pa.table({"dt": ["a"], "id": [1], "v": [1], "s": ["one"]}))
    s2 = table.write(pa.table({"dt": ["a"], "id": [1], "v": [2], "s": ["two"]}))
    assert table.read(snapshot_id=s1, columns=["s"]).to_pylist() == [{"s": "one"}]
    assert table.read(snapshot_id=s2, columns=["s", "id"]).to_pylist() == [{"s": "two", "id": 1}]
    assert table.read(columns=["v"], filter=[("s", "=", "one")]).num_rows == 0
    with pytest.raises(SnapshotNotFound):
        table.read(snapshot_id=99)
    with pytest.raises(InvalidInput, match="nope"):
        table.read(columns=["nope"])
    with pytest.raises(InvalidInput, match="v"):
        table.read(filter=[("v", "~", 1)])


def test_many_runs_merge_newest_wins_and_deletes_hide(table):
    expected = {}
    for commit in range(12):
        ids = list(range(commit, commit + 20))
        table.write(pa.table({"dt": ["a"] * 20, "id": ids, "v": [commit] * 20, "s": [str(commit)] * 20}))
        expected.update({i: commit for i in ids})
        if commit % 3 == 2:
            table.delete(pa.table({"dt": ["a"], "id": [commit]}))
            expected.pop(commit)
    got = {r["id"]: r["v"] for r in table.read().to_pylist()}
    assert got == expected


def test_lookup(table):
    table.write(pa.table({"dt": ["a", "a", "b"], "id": [1, 2, 1], "v": [1, 2, 3], "s": ["p", "q", "r"]}))
    table.write(pa.table({"dt": ["a"], "id": [2], "v": [20], "s": ["q2"]}))
    table.delete(pa.table({"dt": ["b"], "id": [1]}))
    got = table.lookup(pa.table({"dt": ["a", "a", "b", "c", "a"], "id": [2, 1, 1, 1, 2]}))
    assert sorted(got.to_pylist(), key=lambda r: r["id"]) == [
        {"dt": "a", "id": 1, "v": 1, "s": "p"}, {"dt": "a", "id": 2, "v": 20, "s": "q2"}]
    assert table.lookup(pa.table({"dt": ["a"], "id": [2]}), snapshot_id=1).to_pylist() == [
        {"dt": "a", "id": 2, "v": 2, "s": "q"}]


def test_sequence_field_orders_records_across_commits(tmp_path):
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    t = cat.create_table("db.s", pa.schema([("id", pa.int32()), ("ts", pa.int64()), ("v", pa.string())]),
                         primary_key=["id"], options={"bucket": "1", "sequence.field": "ts"})
    t.write(pa.table({"id": pa.array([1, 2], pa.int32()), "ts": [10, 10], "v": ["new", "new"]}))
    t.write(pa.table({"id": pa.array([1, 2], pa.int32()), "ts": [5, 11], "v": ["late-old", "newer"]}))
    assert {r["id"]: r["v"] for r in t.read().to_pylist()} == {1: "new", 2: "newer"}
    d = cat.create_table("db.d", pa.schema([("id", pa.int32()), ("ts", pa.int64()), ("v", pa.string())]),
                         primary_key=["id"], options={"bucket": "1", "sequence.field": "ts",
                                                      "sequence.field.sort-order": "descending"})
    d.write(pa.table({"id": pa.array([1], pa.int32()), "ts": [10], "v": ["ten"]}))
    d.write(pa.table({"id": pa.array([1], pa.int32()), "ts": [5], "v": ["five"]}))
    assert d.read().column("v").to_pylist() == ["five"]


def test_writers_on_different_sequence_lanes_never_tie_in_a_shared_bucket(tmp_path):
    """Two writers of one commit that share a bucket (Spark tasks over input not placed by bucket) number their
    records on their own lanes: the same key written by both never gets one sequence number twice, the higher
    lane wins at the same position, and later writers continue above every lane."""
    from engine.write.table_write import TableWrite
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    t = cat.create_table("db.l", pa.schema([("id", pa.int64()), ("v", pa.string())]), primary_key=["id"],
                         options={"bucket": "1", "write-only": "true"})
    t.write(pa.table({"id": [9], "v": ["base"]}))  # sequence number 0
    messages = []
    for lane, v in ((1, "lane-1"), (0, "lane-0")):
        with TableWrite(t, commit_user="job", sequence_lane=(lane, 4)) as w:
            w.write(pa.table({"id": [1, 2 + lane], "v": [v, v]}))
            messages += w.prepare_commit()
    assert sorted((f.min_sequence_number, f.max_sequence_number) for m in messages for f in m.new_files) == [
        (1, 5), (2, 6)]  # lane 0: 1, 5; lane 1: 2, 6
    t.commit(messages)
    assert {r["id"]: r["v"] for r in t.read().to_pylist()} == {1: "lane-1", 2: "lane-0", 3: "lane-1", 9: "base"}
    t.write(pa.table({"id": [1], "v": ["later"]}))
    assert t.read(filter=[("id", "=", 1)]).column("v").to_pylist() == ["later"]
    with pytest.raises(ValueError, match="lane 4"):
        TableWrite(t, sequence_lane=(4, 4))


def test_timestamp0_key_stored_as_milliseconds_in_lookups_and_lookup_changelog(tmp_path):
    """Parquet has no seconds unit, so a TIMESTAMP(0) key is stored as timestamp[ms]; the key columns read back
    are the table's timestamp[s], so a reopened table (nothing cached in-process) can look the key up."""
    import datetime as dt
    schema = pa.schema([pa.field("k", pa.timestamp("s"), False), pa.field("v", pa.int64())])
    key = dt.datetime(2024, 1, 1, 12)
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    t = cat.create_table("db.t", schema, primary_key=["k"], options={"bucket": "1", "changelog-producer": "lookup"})
    t.write(pa.Table.from_pylist([{"k": key, "v": 1}], schema=schema))
    t = Catalog(str(tmp_path / "wh")).get_table("db.t")
    probe = pa.Table.from_pylist([{"k": key}], schema=pa.schema([("k", pa.timestamp("s"))]))
    assert t.lookup(probe).to_pylist() == [{"k": key, "v": 1}]
    t.write(pa.Table.from_pylist([{"k": key, "v": 2}], schema=schema))
    assert t.read().to_pylist() == [{"k": key, "v": 2}]
    assert [(r["_row_kind"], r["v"]) for r in t.read_changes().to_pylist()] == [("+I", 1), ("-U", 1), ("+U", 2)]


def test_not_in_never_matches_null(tmp_path):
    """Paimon's NotIn (SQL's NULL NOT IN (...)) is never true for a null, whether the null row is in a file that
    stats prune (all nulls) or in a file read and filtered row by row."""
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    pk = cat.create_table("db.pk", SCHEMA, primary_key=["dt", "id"], partition_keys=["dt"], options={"bucket": "1"})
    append = cat.create_table("db.append", SCHEMA, partition_keys=["dt"])
    data = pa.table({"dt": ["a", "b", "b"], "id": [1, 2, 3], "v": [None, None, 30], "s": ["x", None, "z"]},
                    schema=SCHEMA)
    for t in (pk, append):
        t.write(data)
        assert rows(t, filter=[("v", "not in", [10])]) == [{"dt": "b", "id": 3, "v": 30, "s": "z"}]
        assert rows(t, filter=[("v", "not in", [10])]) == rows(t, filter=[("v", "!=", 10)])
        assert rows(t, filter=[("s", "not in", ["q"]), ("id", ">", 0)]) == rows(t, filter=[("s", "!=", "q")])
        assert [r["id"] for r in rows(t, filter=[[("v", "not in", [10])], [("s", "=", "x")]])] == [1, 3]
