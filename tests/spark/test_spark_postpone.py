"""Spark writes into postpone-bucket primary-key tables (``bucket = -2``), as Paimon's PaimonSparkWriter.

Paimon facts (PaimonSparkWriter.scala, SparkPostponeStagedCommitter.scala): with postpone.batch-write-fixed-bucket
(the default) a Spark write -- batch job or streaming micro-batch (PaimonSink goes through the same writer) --
stages postponed files, then rewrites them into real buckets at commit: a partition keeps the bucket count its
real-bucket files record (an overwrite decides afresh), a new one gets postpone.default-bucket-num or an estimate
from the staged rows and sizes; only the real-bucket files are committed and the staged files are deleted.
With the option false the postponed files are committed as they are.
"""
from __future__ import annotations

import glob
import os

import pyarrow as pa
import pytest

import spark_glue
from engine import Catalog
from engine.postpone import POSTPONE_BUCKET

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([("dt", pa.string()), ("id", pa.int64()), ("v", pa.string())])
DDL = "dt string, id long, v string"


def make(tmp_path, **options):
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    return cat.create_table("db.t", SCHEMA, ["dt", "id"], ["dt"], {"bucket": "-2", **options})


def rows(t) -> list[tuple]:
    return sorted((r["dt"], r["id"], r["v"]) for r in t.read().to_pylist())


def counts(t) -> dict:
    """Partition -> the set of totalBuckets its live files record."""
    out: dict = {}
    for e in t.manifests.live_entries(t.snapshot()):
        out.setdefault(t.scan().partition_values(e.partition)[0], set()).add(e.total_buckets)
    return out


def files_on_disk(t) -> set[str]:
    return {os.path.basename(p) for p in glob.glob(os.path.join(t.root, "**", "bucket-*", "*"), recursive=True)}


def live_files(t) -> set[str]:
    return {e.file.file_name for e in t.manifests.live_entries(t.snapshot())}


@pytest.mark.interop
def test_write_table_puts_rows_in_real_buckets_with_a_count_per_partition(spark, tmp_path):
    """A partition with real buckets keeps their count, a new one gets postpone.default-bucket-num; the staged
    postponed files are gone; both engines read the rows."""
    from tests.interop.pypaimon_util import pp_get_table, pp_read
    t = make(tmp_path, **{"postpone.default-bucket-num": "2"})
    t.write(pa.table({"dt": ["a"] * 4, "id": [1, 2, 3, 4], "v": ["e"] * 4}, schema=SCHEMA))  # engine: 2 buckets
    t.alter().set_option("postpone.default-bucket-num", "3").commit()
    data = [("a", i, f"s{i}") for i in range(3, 30)] + [("b", i, f"s{i}") for i in range(20)]
    spark_glue.write_table(spark.createDataFrame(data, DDL), t.root)
    t = Catalog(str(tmp_path / "wh")).get_table("db.t")
    assert counts(t) == {"a": {2}, "b": {3}}
    expected = sorted([("a", 1, "e"), ("a", 2, "e")] + data)
    assert rows(t) == expected
    got = pp_read(pp_get_table(str(tmp_path / "wh"), "db.t")).to_pylist()
    assert sorted((r["dt"], r["id"], r["v"]) for r in got) == expected
    assert files_on_disk(t) == live_files(t)  # staged files deleted
    assert t.snapshot().commit_kind in ("APPEND", "COMPACT")


def test_data_source_writes_without_placement_order_a_key_across_tasks(spark, tmp_path):
    """df.write.format("lakemerge") cannot place rows: two tasks stage records of one key on separate sequence
    lanes, and the rewrite into real buckets keeps the winner a fixed-bucket write on those lanes picks (the
    larger staged sequence number: task 0's second record beats task 1's first), not the order of the tasks."""
    t = make(tmp_path, **{"postpone.default-bucket-num": "1"})
    df = spark.createDataFrame([("a", 2, "x"), ("a", 1, "x"), ("a", 1, "y"), ("a", 3, "y")], DDL).repartition(1)
    df = spark.createDataFrame(df.collect(), df.schema)  # two slices: (2, x), (1, x) | (1, y), (3, y)
    assert [[r.id for r in part] for part in df.rdd.glom().collect()] == [[2, 1], [1, 3]]
    df.write.format("lakemerge").mode("append").save(t.root)
    assert rows(t) == [("a", 1, "x"), ("a", 2, "x"), ("a", 3, "y")]
    assert all(e.bucket != POSTPONE_BUCKET for e in t.manifests.live_entries(t.snapshot()))
    assert files_on_disk(t) == live_files(t)


def test_overwrite_decides_the_partition_count_afresh_and_drops_postponed_rows(spark, tmp_path):
    t = make(tmp_path, **{"postpone.default-bucket-num": "2"})
    t.write(pa.table({"dt": ["a", "b"], "id": [1, 1], "v": ["old", "old"]}, schema=SCHEMA))
    with t.new_write(commit_identifier=5) as w:  # a postponed (streaming) write into partition a
        w.write(pa.table({"dt": ["a"], "id": [9], "v": ["postponed"]}, schema=SCHEMA))
        t.commit(w.prepare_commit())
    t.alter().set_option("postpone.default-bucket-num", "4").commit()
    spark.createDataFrame([("a", 5, "new")], DDL).write.format("lakemerge").mode("overwrite").save(t.root)
    t = Catalog(str(tmp_path / "wh")).get_table("db.t")
    assert rows(t) == [("a", 5, "new"), ("b", 1, "old")]
    assert counts(t) == {"a": {4}, "b": {2}}
    t.compact()
    assert rows(t) == [("a", 5, "new"), ("b", 1, "old")]  # the postponed row was replaced too


def test_without_fixed_bucket_writes_spark_commits_postponed_files(spark, tmp_path):
    t = make(tmp_path, **{"postpone.batch-write-fixed-bucket": "false", "postpone.default-bucket-num": "2"})
    spark_glue.write_table(spark.createDataFrame([("a", i, "p") for i in range(10)], DDL), t.root)
    entries = t.manifests.live_entries(t.snapshot())
    assert {(e.bucket, e.file.file_name.rsplit(".", 1)[1]) for e in entries} == {(POSTPONE_BUCKET, "avro")}
    assert rows(t) == []  # invisible to batch reads until compacted
    t.compact()
    assert rows(t) == [("a", i, "p") for i in range(10)]


def test_streaming_micro_batches_go_to_real_buckets_exactly_once(spark, tmp_path):
    """PaimonSink writes micro-batches through PaimonSparkWriter: fixed buckets too, not postponed."""
    t = make(tmp_path, **{"postpone.default-bucket-num": "2"})
    write = spark_glue.stream_batch_writer(t.root, commit_user="pipeline")
    write(spark.createDataFrame([("a", 1, "b0"), ("a", 2, "b0")], DDL), 0)
    write(spark.createDataFrame([("a", 1, "b1")], DDL), 1)
    write(spark.createDataFrame([("a", 1, "replay")], DDL), 1)  # replayed batch id: skipped
    t = Catalog(str(tmp_path / "wh")).get_table("db.t")
    assert rows(t) == [("a", 1, "b1"), ("a", 2, "b0")]
    assert counts(t) == {"a": {2}}
    assert files_on_disk(t) == live_files(t) | {e.file.file_name for e in t.manifests.live_entries(t.snapshot(1))}


def test_write_stream_to_a_postpone_table(spark, tmp_path):
    import pyarrow.parquet as pq
    t = make(tmp_path, **{"postpone.default-bucket-num": "2"})
    src = tmp_path / "in"
    src.mkdir()
    pq.write_table(pa.table({"dt": ["a", "a"], "id": [1, 2], "v": ["s1", "s2"]}), str(src / "a.parquet"))
    q = (spark.readStream.schema(DDL).parquet(str(src)).writeStream.format("lakemerge")
         .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start(t.root))
    q.awaitTermination(120)
    t = Catalog(str(tmp_path / "wh")).get_table("db.t")
    assert rows(t) == [("a", 1, "s1"), ("a", 2, "s2")]
    assert counts(t) == {"a": {2}}


def test_dml_on_a_deduplicate_postpone_table(spark, tmp_path):
    t = make(tmp_path, **{"postpone.default-bucket-num": "2"})
    spark_glue.write_table(spark.createDataFrame([("a", i, f"v{i}") for i in range(6)], DDL), t.root)
    spark_glue.update_where(spark, t.root, {"v": "'upd'"}, "id < 2")
    spark_glue.delete_where(spark, t.root, "id = 5")
    spark_glue.merge_into(spark, t.root, spark.createDataFrame([("a", 3, "m3"), ("b", 7, "m7")], DDL),
                          on=["dt", "id"])
    t = Catalog(str(tmp_path / "wh")).get_table("db.t")
    assert rows(t) == [("a", 0, "upd"), ("a", 1, "upd"), ("a", 2, "v2"), ("a", 3, "m3"), ("a", 4, "v4"),
                       ("b", 7, "m7")]
    assert counts(t) == {"a": {2}, "b": {2}}
    assert files_on_disk(t) == live_files(t) | {
        f for s in t.snapshots() for f in (e.file.file_name for e in t.manifests.live_entries(s))}


def test_a_failed_rewrite_leaves_the_table_and_storage_unchanged(spark, tmp_path, monkeypatch):
    import engine.postpone.staged as staged
    t = make(tmp_path, **{"postpone.default-bucket-num": "2"})
    spark_glue.write_table(spark.createDataFrame([("a", 1, "x")], DDL), t.root)
    before = (t.latest_snapshot_id(), files_on_disk(t))

    def boom(*a, **kw):
        raise RuntimeError("rewrite failed")
    monkeypatch.setattr(staged, "batch_write_buckets", boom)
    with pytest.raises(RuntimeError, match="rewrite failed"):
        spark_glue.write_table(spark.createDataFrame([("b", 1, "y")], DDL), t.root)  # b needs a new count
    assert (t.latest_snapshot_id(), files_on_disk(t)) == before

