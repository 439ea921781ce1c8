"""Distributed compaction, streaming reads and system tables through Spark (one local SparkSession, conftest.py)."""
from __future__ import annotations

import glob
import os
import shutil

import pyarrow as pa
import pytest

import spark_glue
from engine import Catalog
from engine.meta.snapshot import COMMIT_KIND_COMPACT
from spark_glue.compaction import CompactionJob
from tests.spark.stream_sink import run_available_now

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([("region", pa.string()), ("id", pa.int64()), ("qty", pa.int32())])


def _rows(table_or_rows, keys=("region", "id")):
    rows = table_or_rows.to_pylist() if isinstance(table_or_rows, pa.Table) else [r.asDict() for r in table_or_rows]
    return sorted(rows, key=lambda r: tuple(str(r[k]) for k in keys))


def _files_on_disk(root):
    return {os.path.basename(p) for p in glob.glob(os.path.join(root, "**", "bucket-*", "*"), recursive=True)}


def _referenced(table):
    """Data files of the latest snapshot plus changelog files of every snapshot."""
    names = {e.file.file_name for e in table.manifests.live_entries(table.snapshot())}
    for s in table.snapshots():
        if s.changelog_manifest_list:
            names |= {e.file.file_name for m in table.manifests.manifest_list(s.changelog_manifest_list)
                      for e in table.manifests.manifest(m.file_name)}
    return names


def _table(tmp_path, name="t", options=None):
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db", ignore_if_exists=True)
    return cat.create_table(f"db.{name}", SCHEMA, ["region", "id"], ["region"], {"bucket": "2", **(options or {})})


def _fill(table, commits=4):
    for c in range(commits):
        ids = list(range(c * 5, c * 5 + 20))
        table.write(pa.table({"region": ["eu" if i % 2 else "us" for i in ids], "id": ids,
                              "qty": pa.array([c] * len(ids), pa.int32())}))
    table.delete(pa.table({"region": ["us"], "id": [0]}))


# --- compaction ---------------------------------------------------------------------------------------------
@pytest.mark.interop
@pytest.mark.parametrize("full", [True, False])
def test_spark_compaction_equals_engine_compaction(spark, tmp_path, full):
    from tests.interop.pypaimon_util import pp_get_table, pp_read
    t = _table(tmp_path, options={"num-sorted-run.compaction-trigger": "3", "write-only": "true"})
    _fill(t)
    twin_root = str(tmp_path / "wh" / "db.db" / "twin")
    shutil.copytree(t.root, twin_root)
    twin = Catalog(str(tmp_path / "wh")).get_table("db.twin")
    before = _rows(t.read())
    latest = t.latest_snapshot_id()

    sid = spark_glue.compact(spark, t.root, full=full)
    expected_sid = twin.compact(full=full)
    assert sid == expected_sid == latest + 1
    assert t.snapshot().commit_kind == COMMIT_KIND_COMPACT and len(t.snapshots()) == latest + 1
    assert _rows(t.read()) == before == _rows(twin.read())

    def layout(table):
        return sorted((e.partition, e.bucket, e.file.level, e.file.row_count)
                      for e in table.manifests.live_entries(table.snapshot()))
    assert layout(t) == layout(twin)
    if full:
        from engine.compact.picker import CompactionSettings
        top = CompactionSettings.of(t.schema.table_options).num_levels - 1
        assert {lvl for _, _, lvl, _ in layout(t)} == {top}
    assert _files_on_disk(t.root) == _referenced(t) | {e.file.file_name for s in t.snapshots()
                                                       for e in t.manifests.live_entries(s)}
    assert _rows(pp_read(pp_get_table(str(tmp_path / "wh"), "db.t"))) == before
    assert spark_glue.compact(spark, t.root, full=False) is None  # nothing left to do


def test_spark_compaction_of_some_partitions_with_lookup_changelog(spark, tmp_path):
    t = _table(tmp_path, options={"changelog-producer": "lookup", "write-only": "true"})
    _fill(t, commits=2)
    assert t.read_changes().num_rows == 0  # write-only: the lookup changelog comes with compaction
    sid = spark_glue.compact(spark, t.root, full=True, partitions={"region": "eu"})
    snap = t.snapshot(sid)
    delta = [e for m in t.manifests.manifest_list(snap.delta_manifest_list) for e in t.manifests.manifest(m.file_name)]
    assert {t.scan().partition_values(e.partition) for e in delta} == {("eu",)}
    assert {e.file.level for e in t.manifests.live_entries(snap) if e.partition == delta[0].partition} == {5}
    changes = t.read_changes(sid - 1, sid)
    assert set(changes.column("region").to_pylist()) == {"eu"} and changes.num_rows > 0
    with pytest.raises(Exception, match="not a partition key"):
        spark_glue.compact(spark, t.root, partitions={"id": 1})


class FailFirstAttempt(CompactionJob):
    """Compacts, then fails the first attempt of task 0 after its files are written (Spark retries it)."""

    def compact_group(self, index):
        from pyspark import TaskContext
        messages = super().compact_group(index)
        if index == 0 and TaskContext.get().attemptNumber() == 0:
            raise RuntimeError("injected failure after writing compaction files")
        return messages


class AlwaysFail(CompactionJob):
    def compact_group(self, index):
        super().compact_group(index)
        raise RuntimeError("injected failure")


def test_retried_compaction_task_leaves_no_duplicates_or_orphans(spark, tmp_path):
    t = _table(tmp_path)
    _fill(t)
    before = _rows(t.read())
    latest = t.latest_snapshot_id()
    with pytest.raises(Exception, match="injected failure"):
        AlwaysFail(t.root, full=True).run(spark)
    assert t.latest_snapshot_id() == latest
    assert _files_on_disk(t.root) == _referenced(t) | {e.file.file_name for s in t.snapshots()
                                                       for e in t.manifests.live_entries(s)}
    sid = FailFirstAttempt(t.root, full=True).run(spark)
    assert sid == latest + 1 and _rows(t.read()) == before
    assert all(e.file.level == 5 for e in t.manifests.live_entries(t.snapshot()))  # default num-levels 6
    live = {e.file.file_name for e in t.manifests.live_entries(t.snapshot())}
    older = {e.file.file_name for s in t.snapshots()[:-1] for e in t.manifests.live_entries(s)}
    assert _files_on_disk(t.root) == live | older  # the failed attempt's files were removed


# --- streaming reads ----------------------------------------------------------------------------------------
def _changes(t, start, end=None):
    return _rows(t.read_changes(start, end), keys=("region", "id", "qty", "_row_kind"))


def _parquet_rows(spark, out):
    import pyarrow.parquet as pq
    files = glob.glob(os.path.join(out, "*.parquet"))
    rows = pa.concat_tables([pq.ParquetFile(f).read() for f in files]) if files else None
    return [] if rows is None else _rows(rows.select(["region", "id", "qty", "_row_kind"]),
                                         keys=("region", "id", "qty", "_row_kind"))


@pytest.mark.parametrize("producer", ["none", "input"])
def test_stream_restart_from_checkpoint_delivers_every_change_once(spark, tmp_path, producer):
    t = _table(tmp_path, options={"changelog-producer": producer})
    _fill(t, commits=2)
    out, ck = str(tmp_path / "out"), str(tmp_path / "ck")
    run_available_now(spark, t.root, out, ck, **{"scan.mode": "from-snapshot", "scan.snapshot-id": 1})
    first = t.latest_snapshot_id()
    assert _parquet_rows(spark, out) == _changes(t, 0, first)
    t.write(pa.table({"region": ["eu", "us"], "id": [1, 100], "qty": pa.array([7, 7], pa.int32())}))
    t.delete(pa.table({"region": ["eu"], "id": [3]}))
    t.compact(full=True)  # a COMPACT snapshot (changes only with a compaction-time producer)
    run_available_now(spark, t.root, out, ck, **{"scan.mode": "from-snapshot", "scan.snapshot-id": 1})
    assert _parquet_rows(spark, out) == _changes(t, 0)
    kinds = [r["_row_kind"] for r in _parquet_rows(spark, out)]
    assert "-D" in kinds  # the engine delete arrives as a delete
    run_available_now(spark, t.root, out, ck)  # nothing new: nothing more
    assert _parquet_rows(spark, out) == _changes(t, 0)


def test_stream_latest_full_then_changes_and_consumer(spark, tmp_path):
    t = _table(tmp_path)
    _fill(t, commits=2)
    full = _rows(t.read())
    out, ck = str(tmp_path / "out"), str(tmp_path / "ck")
    run_available_now(spark, t.root, out, ck, **{"consumer-id": "spark-job"})
    got = _parquet_rows(spark, out)
    assert {r["_row_kind"] for r in got} == {"+I"}
    assert [{k: r[k] for k in ("region", "id", "qty")} for r in got] == full
    latest = t.latest_snapshot_id()
    # Spark commits a batch's source offsets when it starts the next batch: the consumer trails by one batch
    assert t.consumers() == {}
    t.write(pa.table({"region": ["eu"], "id": [500], "qty": pa.array([1], pa.int32())}))
    run_available_now(spark, t.root, out, ck, **{"consumer-id": "spark-job"})
    assert len(_parquet_rows(spark, out)) == len(full) + 1 and t.consumers() == {"spark-job": latest + 1}
    # a new query (no checkpoint) with the same consumer id starts at the consumer's next snapshot
    out2, ck2 = str(tmp_path / "out2"), str(tmp_path / "ck2")
    t.write(pa.table({"region": ["us"], "id": [501], "qty": pa.array([2], pa.int32())}))
    run_available_now(spark, t.root, out2, ck2, **{"consumer-id": "spark-job"})
    assert _parquet_rows(spark, out2) == [{"region": "eu", "id": 500, "qty": 1, "_row_kind": "+I"},
                                          {"region": "us", "id": 501, "qty": 2, "_row_kind": "+I"}]
    with pytest.raises(Exception, match="scan.mode"):
        run_available_now(spark, t.root, str(tmp_path / "o3"), str(tmp_path / "c3"), **{"scan.mode": "nope"})


# --- system tables ------------------------------------------------------------------------------------------
def test_system_tables_through_spark(spark, tmp_path):
    from engine.system_tables import SystemTable
    t = _table(tmp_path)
    _fill(t, commits=2)
    t.compact(full=True)
    snaps = spark.read.format("lakemerge").load(t.root + "$snapshots").orderBy("snapshot_id").collect()
    expected = SystemTable(t, "snapshots").read()
    assert [r.snapshot_id for r in snaps] == expected.column("snapshot_id").to_pylist()
    assert [r.commit_kind for r in snaps] == expected.column("commit_kind").to_pylist()
    assert [r.commit_time for r in snaps] == expected.column("commit_time").to_pylist()
    files = spark.read.format("lakemerge").option("system-table", "files").load(t.root).collect()
    assert sorted(r.file_path for r in files) == sorted(SystemTable(t, "files").read().column("file_path").to_pylist())
    old = (spark.read.format("lakemerge").option("scan.snapshot-id", "1").load(t.root + "$files")
           .select("file_path").collect())
    assert sorted(r.file_path for r in old) == sorted(SystemTable(t, "files").read(1).column("file_path").to_pylist())
    audit = spark.read.format("lakemerge").load(t.root + "$audit_log")
    assert audit.columns[0] == "rowkind" and audit.count() == t.read().num_rows
    with pytest.raises(Exception, match="unknown system table"):
        spark.read.format("lakemerge").load(t.root + "$nope").collect()
    with pytest.raises(Exception, match="read-only"):
        spark.createDataFrame([(1,)], "x long").write.format("lakemerge").mode("append").save(t.root + "$files")


def test_spark_compaction_of_a_postpone_table_moves_postponed_records_into_real_buckets(spark, tmp_path):
    cat = Catalog(str(tmp_path / "wh_postpone"))
    cat.create_database("db")
    t = cat.create_table("db.p", SCHEMA, ["region", "id"], ["region"],
                         {"bucket": "-2", "postpone.batch-write-fixed-bucket": "false",
                          "postpone.default-bucket-num": "2"})
    t.write(pa.table({"region": ["eu", "us"], "id": [1, 2], "qty": [5, 6]}, schema=SCHEMA))
    assert t.read().num_rows == 0  # postponed
    sid = spark_glue.compact(spark, t.root)
    assert t.snapshot(sid).commit_kind == COMMIT_KIND_COMPACT
    assert _rows(t.read()) == [{"region": "eu", "id": 1, "qty": 5}, {"region": "us", "id": 2, "qty": 6}]
    assert {e.total_buckets for e in t.manifests.live_entries(t.snapshot())} == {2}


def test_spark_batch_read_of_a_merge_on_read_postpone_table_merges_the_postponed_records(spark, tmp_path):
    """With postpone.merge-on-read=true Paimon's batch reads (Spark's PostponeMergeOnRead) include the postponed
    records, routed to their real buckets and newer than the records there; Spark's reads through lakemerge give
    the rows the engine's read gives, and after the postpone compaction the same rows."""
    cat = Catalog(str(tmp_path / "wh_mor"))
    cat.create_database("db")
    t = cat.create_table("db.p", SCHEMA, ["region", "id"], ["region"],
                         {"bucket": "-2", "postpone.batch-write-fixed-bucket": "false",
                          "postpone.default-bucket-num": "2", "postpone.merge-on-read": "true"})
    t.alter().set_option("postpone.batch-write-fixed-bucket", "true").commit()
    t.write(pa.table({"region": ["eu", "eu", "eu"], "id": [1, 2, 3], "qty": [1, 1, 1]}, schema=SCHEMA))  # real
    t.alter().set_option("postpone.batch-write-fixed-bucket", "false").commit()
    t.write(pa.table({"region": ["eu", "us"], "id": [1, 4], "qty": [5, 7]}, schema=SCHEMA))  # postponed
    t.delete(pa.table({"region": ["eu"], "id": [2]}))  # postponed delete
    expected = [("eu", 1, 5), ("eu", 3, 1), ("us", 4, 7)]
    assert sorted(tuple(r.values()) for r in t.read().to_pylist()) == expected

    def spark_rows(df):
        return sorted((r.region, r.id, r.qty) for r in df.collect())
    assert spark_rows(spark_glue.read_table(spark, t.root)) == expected
    assert spark_rows(spark.read.format("lakemerge").load(t.root)) == expected
    assert spark_rows(spark_glue.read_table(spark, t.root, filter_pushdown=True).where("qty < 5")) == [("eu", 3, 1)]
    # a tiny split target: each bucket of a partition in its own task, every task routing the postponed records
    assert spark_rows(spark.read.format("lakemerge").option("source.split.target-size", "1b").load(t.root)) == expected
    t.compact()
    assert spark_rows(spark.read.format("lakemerge").load(t.root)) == expected