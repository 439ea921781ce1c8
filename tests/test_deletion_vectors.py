"""Deletion-vector mode (``deletion-vectors.enabled``, paimon-semantics §9): compaction marks superseded rows,
reads apply the vectors, batch reads hide level 0 and read files without merging."""
from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.deletion_vectors.index_file import DV_INDEX
from engine.errors import InvalidOption, InvalidSchema
from engine.read.split_read import SplitReader

SCHEMA = pa.schema([("p", pa.string()), ("k", pa.int64()), ("v", pa.int64())])
ENGINES = {
    "deduplicate": {},
    "partial-update": {"merge-engine": "partial-update"},
    "aggregation": {"merge-engine": "aggregation", "fields.v.aggregate-function": "sum"},
}


def make(catalog, name="db.t", **options):
    opts = {"bucket": "1", "deletion-vectors.enabled": "true", **options}
    return catalog.create_table(name, SCHEMA, primary_key=["p", "k"], partition_keys=["p"], options=opts)


def batch(keys, values, p="a"):
    return pa.table({"p": [p] * len(keys), "k": keys, "v": values}, schema=SCHEMA)


def rows(table) -> list[tuple]:
    return sorted((r["p"], r["k"], r["v"]) for r in table.read().to_pylist())


def live_rows_above_level0(table, *, apply_vectors=True) -> list[tuple]:
    """Every row of every file above level 0, file by file, with (or without) the deletion vectors applied: what
    Paimon's raw DV read returns."""
    out = []
    for split in table.plan():
        reader = SplitReader(table.file_io, table.schema, table.schema_manager.schema)
        for f in split.files:
            if f.level == 0:
                continue
            got = reader.read_file(split, f, ["p", "k", "v"], live_only=apply_vectors)
            out += zip(got.column("p").to_pylist(), got.column("k").to_pylist(), got.column("v").to_pylist())
    return sorted(out)


def dv_records(table, snapshot_id=None) -> list[dict]:
    snap = table.snapshot(snapshot_id)
    return [r for r in table.manifests.index_records(snap.index_manifest) if r["_INDEX_TYPE"] == DV_INDEX]


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_each_key_has_one_live_row_above_level0(catalog, engine):
    # no size-amplification full compaction: each commit's level 0 goes one level up and older rows stay deeper
    t = make(catalog, **ENGINES[engine], **{"num-sorted-run.compaction-trigger": "10",
                                            "compaction.max-size-amplification-percent": "100000"})
    model: dict[int, int] = {}
    for step in range(6):  # a big first run, then small updates: size-ratio picking leaves the big run deepest
        keys = list(range(200)) if step == 0 else list(range(step, step + 20, 2))
        values = [step * 100 + k for k in keys]
        t.write(batch(keys, values))
        for k, v in zip(keys, values):
            model[k] = model.get(k, 0) + v if engine == "aggregation" else v
    expected = sorted(("a", k, v) for k, v in model.items())
    assert rows(t) == expected
    assert live_rows_above_level0(t) == expected  # no merge needed: one live row per key
    assert len(live_rows_above_level0(t, apply_vectors=False)) > len(expected)  # the vectors hide old versions
    assert dv_records(t), "compaction wrote no deletion vectors"
    assert all(f.level > 0 for sp in t.plan() for f in sp.files)  # writers compact level 0 before committing


def test_deletes_are_applied_and_dropped_above_level0(catalog):
    t = make(catalog)
    t.write(batch([1, 2, 3], [10, 20, 30]))
    t.write(batch([1, 2, 3], [11, 21, 31]))
    t.delete(batch([2], [0]))
    assert rows(t) == [("a", 1, 11), ("a", 3, 31)]
    assert live_rows_above_level0(t) == [("a", 1, 11), ("a", 3, 31)]
    assert all(f.delete_row_count == 0 for sp in t.plan() for f in sp.files if f.level > 0)


def test_level0_is_hidden_from_batch_reads_until_compacted(catalog):
    t = make(catalog, **{"write-only": "true"})
    t.write(batch([1, 2], [10, 20]))
    assert rows(t) == []  # Paimon: level-0 files of a DV table are visible only after compaction
    assert t.lookup(batch([1], [0])).num_rows == 0
    catalog.get_table("db.t").alter().set_option("deletion-vectors.merge-on-read", "true").commit()
    assert rows(catalog.get_table("db.t")) == [("a", 1, 10), ("a", 2, 20)]
    catalog.get_table("db.t").alter().set_option("deletion-vectors.merge-on-read", "false").commit()
    t = catalog.get_table("db.t")
    t.compact()
    assert rows(t) == [("a", 1, 10), ("a", 2, 20)]
    assert t.lookup(batch([2], [0])).to_pylist() == [{"p": "a", "k": 2, "v": 20}]


def test_vectors_land_with_the_compact_snapshot_only(catalog):
    t = make(catalog)
    t.write(batch([1, 2], [10, 20]))
    before = dv_records(t)
    sid = t.write(batch([1], [11]))
    append, compact = t.snapshot(sid - 1), t.snapshot(sid)
    assert (append.commit_kind, compact.commit_kind) == ("APPEND", "COMPACT")
    assert dv_records(t, append.id) == before  # the APPEND snapshot publishes no vector
    assert dv_records(t, compact.id) != before
    assert rows(t) == [("a", 1, 11), ("a", 2, 20)]
    assert rows_at(t, append.id) == [("a", 1, 10), ("a", 2, 20)]  # its level-0 file is not visible yet


def rows_at(table, snapshot_id):
    return sorted((r["p"], r["k"], r["v"]) for r in table.read(snapshot_id).to_pylist())


def test_concurrent_writers_of_one_bucket_keep_the_first_ones_marks(catalog, caplog):
    t = make(catalog)
    t.write(batch(list(range(10)), list(range(10))))
    t.compact(full=True)
    w1, w2 = t.new_write(), t.new_write()  # both start from the same snapshot and compact the same bucket
    w1.write(batch([1, 2], [101, 102]))
    w2.write(batch([3, 4], [203, 204]))
    m1, m2 = w1.prepare_commit(), w2.prepare_commit()
    assert all(m.dv_before is not None and m.dv_after for m in m1 + m2)
    t.commit(m1)
    with caplog.at_level("WARNING", logger="lakemerge.commit"):
        t.commit(m2)  # its data lands (re-sequenced after m1's); its compaction is dropped
    assert any("compaction was dropped" in r.message for r in caplog.records)
    t = catalog.get_table("db.t")
    names = set(t.file_io.list_names(f"{t.root}/index"))
    assert {r["_FILE_NAME"] for m in m1 for r in m.dv_after} <= names
    assert not {r["_FILE_NAME"] for m in m2 for r in m.dv_after} & names  # the dropped compaction's vectors
    expected = sorted([("a", k, k) for k in range(10) if k not in (1, 2, 3, 4)]
                      + [("a", 1, 101), ("a", 2, 102), ("a", 3, 203), ("a", 4, 204)])
    t.compact()
    t = catalog.get_table("db.t")
    assert rows(t) == expected
    assert live_rows_above_level0(t) == expected


def test_a_compaction_whose_bucket_vectors_changed_since_its_base_is_refused(catalog):
    from engine.commit.index_changes import next_index_manifest
    from engine.errors import CommitConflict
    t = make(catalog)
    t.write(batch([1, 2, 3], [1, 2, 3]))
    with t.new_write() as w:
        w.write(batch([1], [10]))
        (m,) = w.prepare_commit()
    assert m.dv_before == () and m.dv_after
    t.write(batch([2], [20]))  # another commit changes the bucket's vectors first
    assert dv_records(t)
    with pytest.raises(CommitConflict, match="deletion vectors of bucket 0"):
        next_index_manifest(t, t.snapshot(), [m], deletion_vectors=True)
    assert next_index_manifest(t, t.snapshot(), [m], deletion_vectors=False) == (t.snapshot().index_manifest, False)


def test_overwrite_drops_the_vectors_of_replaced_partitions(catalog):
    t = make(catalog)
    t.write(batch(list(range(100)), list(range(100)), p="a"))
    t.write(batch([1, 2], [11, 21], p="a"))
    t.write(batch(list(range(100)), list(range(100)), p="b"))
    t.write(batch([1], [31], p="b"))
    assert {r["_PARTITION"] for r in dv_records(t)} == {sp.partition for sp in t.plan()}
    with t.new_write() as w:
        w.write(batch([5], [50], p="a"))
        messages = w.prepare_commit()
    assert messages[0].dv_after  # the writer compacted its bucket's old files: the overwrite drops that
    t.commit_overwrite(messages, partitions=[("a",)])
    t = catalog.get_table("db.t")
    assert t.check().orphan_files == []  # the dropped compaction's DV index file is gone
    kept = dv_records(t)
    assert [r["_PARTITION"] for r in kept] == [sp.partition for sp in t.plan() if sp.partition_values == ("b",)]
    b_rows = [("b", k, 31 if k == 1 else k) for k in range(100)]
    # the overwrite's level-0 file is compacted right after it (Table.commit_overwrite), so reads see it
    assert rows(t) == [("a", 5, 50)] + b_rows
    assert t.snapshot().commit_kind == "COMPACT"


@pytest.mark.parametrize("options, reason", [
    ({"merge-engine": "first-row"}, "first-row"),
    ({"changelog-producer": "full-compaction"}, "full-compaction"),
])
def test_refused_combinations(catalog, options, reason):
    with pytest.raises(InvalidOption, match=reason):
        make(catalog, **options)
    t = catalog.create_table("db.plain", SCHEMA, primary_key=["p", "k"], partition_keys=["p"],
                             options={"bucket": "1", **options})
    with pytest.raises(InvalidOption, match=reason):
        t.alter().set_option("deletion-vectors.enabled", "true").commit()


def test_bitmap64_tables_round_trip(catalog):
    t = make(catalog, **{"deletion-vectors.bitmap64": "true"})
    t.write(batch(list(range(100)), [0] * 100))
    t.write(batch([1, 2, 3], [7, 7, 7]))
    assert rows(t) == sorted([("a", k, 7 if k in (1, 2, 3) else 0) for k in range(100)])
    assert live_rows_above_level0(t) == rows(t)
    data = t.file_io.read_bytes(f"{t.root}/index/{dv_records(t)[0]['_FILE_NAME']}")
    assert int.from_bytes(data[5:9], "little") == 1681511377  # the 64-bit magic after version byte and size


def test_force_lookup_aggregation_keeps_full_state_in_the_newest_level(catalog):
    """Paimon reads tables with lookup compaction (force-lookup too) taking only each key's newest record above
    level 0, so compaction must fold the older levels in (before, an aggregation table read 5 instead of 15)."""
    t = catalog.create_table("db.f", SCHEMA, primary_key=["p", "k"], partition_keys=["p"],
                             options={"bucket": "1", "force-lookup": "true", "merge-engine": "aggregation",
                                      "fields.v.aggregate-function": "sum", "num-sorted-run.compaction-trigger": "2"})
    for v in (1, 2, 3, 4, 5):
        t.write(batch([7], [v]))
    t.compact(full=True)
    t.write(batch([7], [0]))
    assert rows(t) == [("a", 7, 15)]
    newest = min((f for sp in t.plan() for f in sp.files if f.level > 0), key=lambda f: f.level)
    split = t.plan()[0]
    got = SplitReader(t.file_io, t.schema).read_file(split, newest, ["v"])
    assert got.column("v").to_pylist() == [15]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(["write", "delete", "compact", "full"]),
                          st.lists(st.integers(0, 12), min_size=1, max_size=8),
                          st.integers(0, 99)), min_size=1, max_size=10),
       st.sampled_from(sorted(ENGINES)), st.sampled_from(["1", "2"]), st.sampled_from(["2", "5"]))
def test_dv_table_reads_as_the_same_table_without_vectors(tmp_path_factory, ops, engine, buckets, trigger):
    """Random writes, deletes and compactions give the same rows with and without deletion vectors (both with
    lookup compaction, whose merge rules differ from plain merge-on-read for lone retracts)."""
    from engine import Catalog
    catalog = Catalog(str(tmp_path_factory.mktemp("wh")))
    catalog.create_database("db", ignore_if_exists=True)
    opts = {**ENGINES[engine], "bucket": buckets, "num-sorted-run.compaction-trigger": trigger}
    dv = make(catalog, "db.dv", **opts)
    ref = catalog.create_table("db.ref", SCHEMA, primary_key=["p", "k"], partition_keys=["p"],
                               options={**opts, "force-lookup": "true"})
    for op, keys, value in ops:
        for t in (dv, ref):
            if op == "write":
                t.write(pa.table({"p": ["a" if k % 3 else "b" for k in keys], "k": keys,
                                  "v": [value + k for k in keys]}, schema=SCHEMA))
            elif op == "delete" and engine != "partial-update":
                kinds = ["-D" if engine == "deduplicate" else "-U"] * len(keys)
                t.write(pa.table({"p": ["a" if k % 3 else "b" for k in keys], "k": keys, "v": [1] * len(keys)},
                                 schema=SCHEMA), row_kinds=kinds)
            elif op in ("compact", "full"):
                t.compact(full=op == "full")
        assert rows(catalog.get_table("db.dv")) == rows(catalog.get_table("db.ref"))
    assert live_rows_above_level0(catalog.get_table("db.dv")) == rows(catalog.get_table("db.dv"))


def test_check_verifies_vectors(catalog):
    t = make(catalog)
    t.write(batch(list(range(100)), list(range(100))))
    t.write(batch([1, 2], [0, 0]))
    report = t.check()
    assert report.ok and not report.warnings and not report.orphan_files, report.summary()
    (record,) = dv_records(t)
    path = f"{t.root}/index/{record['_FILE_NAME']}"
    data = bytearray(t.file_io.read_bytes(path))
    data[-5] ^= 0xFF  # a bitmap byte: same size, wrong checksum
    t.file_io.delete(path)
    t.file_io.write_bytes(path, bytes(data))
    assert "deletion-vector-unreadable" in catalog.get_table("db.t").check().kinds()


def test_changing_the_mode_of_a_table_with_data_needs_modifiable_and_check_finds_duplicates(catalog):
    t = catalog.create_table("db.mor", SCHEMA, primary_key=["p", "k"], partition_keys=["p"],
                             options={"bucket": "1", "num-sorted-run.compaction-trigger": "10",
                                      "compaction.max-size-amplification-percent": "100000",
                                      "compaction.force-up-level-0": "true"})
    t.write(batch(list(range(100)), list(range(100))))
    t.write(batch([1, 2], [0, 0]))  # merge-on-read: key 1 and 2 live in two levels, no vectors
    assert len({f.level for sp in t.plan() for f in sp.files}) == 2 and all(f.level for sp in t.plan()
                                                                            for f in sp.files)
    with pytest.raises(InvalidSchema, match="deletion-vectors.modifiable"):
        t.alter().set_option("deletion-vectors.enabled", "true").commit()
    t.alter().set_option("deletion-vectors.modifiable", "true").set_option("deletion-vectors.enabled", "true") \
        .commit()
    t = catalog.get_table("db.mor")
    assert len(t.read()) == 102  # what Paimon's raw DV read returns too: the stale versions of keys 1 and 2
    assert "deletion-vector-duplicate-keys" in t.check().kinds()
    t.compact(full=True)
    t = catalog.get_table("db.mor")
    assert rows(t) == sorted(("a", k, 0 if k in (1, 2) else k) for k in range(100))
    assert t.check().ok


def test_a_compaction_whose_index_file_is_gone_is_not_published(catalog, caplog):
    t = make(catalog)
    t.write(batch(list(range(100)), list(range(100))))
    with t.new_write() as w:
        w.write(batch([1], [10]))
        (m,) = w.prepare_commit()
    (record,) = m.dv_after
    t.file_io.delete(f"{t.root}/index/{record['_FILE_NAME']}")  # e.g. a replay after the file was cleaned up
    with caplog.at_level("WARNING", logger="lakemerge.commit"):
        t.commit([m])  # the data lands; the compaction naming the missing vectors does not
    assert any("no longer exists" in r.message for r in caplog.records)
    t = catalog.get_table("db.t")
    assert not dv_records(t) and t.check().ok
    t.compact()
    assert rows(catalog.get_table("db.t")) == sorted(("a", k, 10 if k == 1 else k) for k in range(100))


def test_table_indexes_system_table_lists_the_vectors(catalog):
    t = make(catalog)
    t.write(batch(list(range(100)), list(range(100))))
    t.write(batch([1, 2], [0, 0]))
    got = catalog.get_table("db.t$table_indexes").read().to_pylist()
    (record,) = dv_records(t)
    assert [(r["partition"], r["bucket"], r["index_type"], r["file_name"], r["file_size"], r["row_count"])
            for r in got] == [("{a}", 0, "DELETION_VECTORS", record["_FILE_NAME"], record["_FILE_SIZE"], 1)]
    (dv,) = got[0]["dv_ranges"]
    deep = next(f for sp in t.plan() for f in sp.files if f.level == max(g.level for g in sp.files))
    assert (dv["f0"], dv["_CARDINALITY"]) == (deep.file_name, 2)
    assert catalog.get_table("db.t$table_indexes").read(snapshot_id=1).num_rows == 0


@pytest.mark.parametrize("engine", ["deduplicate", "aggregation"])
def test_lookup_changelog_is_the_same_with_vectors(catalog, engine):
    opts = {**ENGINES[engine], "changelog-producer": "lookup"}
    dv, ref = make(catalog, "db.dv", **opts), catalog.create_table(
        "db.ref", SCHEMA, primary_key=["p", "k"], partition_keys=["p"], options={"bucket": "1", **opts})
    for t in (dv, ref):
        t.write(batch(list(range(50)), list(range(50))))
        t.write(batch([1, 2, 60], [10, 20, 60]))
        t.write(batch([2], [0]), row_kinds=["-D" if engine == "deduplicate" else "-U"])
        t.write(batch([1, 3], [11, 3]))

    def changes(t):
        got = t.read_changes(0)
        return sorted(zip(got.column("_row_kind").to_pylist(), got.column("k").to_pylist(),
                          got.column("v").to_pylist()))
    assert changes(catalog.get_table("db.dv")) == changes(catalog.get_table("db.ref"))
    assert rows(catalog.get_table("db.dv")) == rows(catalog.get_table("db.ref"))


def test_expiring_snapshots_frees_replaced_vector_files(catalog):
    from tests.conftest import expire_after_latest
    t = make(catalog)
    t.write(batch(list(range(200)), list(range(200))))
    for step in range(5):
        t.write(batch([step, step + 50], [1000 + step, 2000 + step]))
    before = set(t.file_io.list_names(f"{t.root}/index"))
    assert len(before) > 1
    expire_after_latest(t, retain_min=1, retain_max=1)
    t = catalog.get_table("db.t")
    assert set(t.file_io.list_names(f"{t.root}/index")) == {r["_FILE_NAME"] for r in dv_records(t)}
    assert t.check().ok and not t.check().orphan_files
    assert len(t.read()) == 200


@pytest.mark.parametrize("primary_key", [["p", "k"], ["k"]], ids=["dynamic-bucket", "cross-partition"])
def test_dynamic_bucket_tables_with_vectors(catalog, primary_key):
    """Dynamic bucket mode (no ``bucket`` option) with deletion vectors; with a key without the partition column,
    an upsert moves the key between partitions (a -D in the old one, compacted into a vector there)."""
    t = catalog.create_table("db.d", SCHEMA, primary_key=primary_key, partition_keys=["p"],
                             options={"deletion-vectors.enabled": "true"})
    t.write(batch(list(range(200)), [0] * 200))
    t.write(pa.table({"p": ["a", "b"], "k": [1, 2], "v": [1, 2]}, schema=SCHEMA))
    t.write(pa.table({"p": ["b"], "k": [1], "v": [3]}, schema=SCHEMA))
    t = catalog.get_table("db.d")
    if primary_key == ["k"]:
        expected = sorted([("a", k, 0) for k in range(200) if k not in (1, 2)] + [("b", 1, 3), ("b", 2, 2)])
    else:
        expected = sorted([("a", k, 1 if k == 1 else 0) for k in range(200)] + [("b", 1, 3), ("b", 2, 2)])
    assert rows(t) == expected
    assert live_rows_above_level0(t) == expected
    assert t.check().ok
