"""Spark writes into postpone-bucket primary-key tables (``bucket = -2``), as Paimon's PaimonSparkWriter.

Paimon facts (PaimonSparkWriter.scala, SparkPostponeStagedCommitter.scala, PostponeUtils.decideFixedBucketNum): with
postpone.batch-write-fixed-bucket (the default) a Spark write -- batch job or streaming micro-batch (PaimonSink
goes through the same writer) -- lands in real buckets: a partition keeps the bucket count its real-bucket files
record (an overwrite decides afresh), a new one gets postpone.default-bucket-num or an estimate from its rows or
size. Paimon routes rows straight to buckets when the default is set and the table has no real buckets (or for an
overwrite), else it stages postponed files and rewrites them in a second Spark job. lakemerge's write_table always
decides the counts on the driver first (one aggregation of the input when the default is unset) and its tasks
write real buckets; df.write.format without the default still stages (spark_glue.writing). With the option false
the postponed files are committed as they are.
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


def test_postponed_write_table_spreads_a_new_partition_over_the_tasks(spark, tmp_path):
    """Without postpone.batch-write-fixed-bucket the rows stay in bucket -2, which has no bucket count: write_table
    places them by the key hash modulo the task count (local[2]: two tasks, two postponed-file writers), not as
    one real bucket of a partition without a count."""
    t = make(tmp_path, **{"postpone.batch-write-fixed-bucket": "false"})
    spark_glue.write_table(spark.range(0, 2000).selectExpr("'a' AS dt", "id", "'v' AS v"), t.root)
    names = [e.file.file_name for e in t.manifests.live_entries(t.snapshot())]
    assert len({n.split("-w-")[0] for n in names}) == 2  # <prefix>-u-<user>-s-<writer id>-w-: one per task
    t.compact()
    assert len(rows(t)) == 2000


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


def twin_tables(tmp_path, **options):
    """Two postpone tables with ``options``: one for the engine API, one for Spark."""
    return (make(tmp_path / "engine", **options), make(tmp_path / "spark", **options))


def no_staged_rewrite(monkeypatch):
    """Make the driver-side rewrite of staged files fail: a write that still used it would raise."""
    import engine.postpone.staged as staged

    def refuse(*a, **kw):
        raise AssertionError("the driver rewrote staged postponed files")
    monkeypatch.setattr(staged, "rewrite_staged", refuse)


ESTIMATES = [{"postpone.target-row-num-per-bucket": "4"}, {"postpone.target-size-per-bucket": "300b"},
             {"postpone.default-bucket-num": "3"}]


@pytest.mark.interop
@pytest.mark.parametrize("options", ESTIMATES, ids=["target-rows", "target-size", "default"])
def test_write_table_decides_bucket_counts_as_the_engine_and_tasks_write_real_buckets(spark, tmp_path, monkeypatch,
                                                                                      options):
    """Existing partitions keep their count, new ones get the engine's (estimated or default) count; the tasks
    write the real buckets (no staged files for the driver to rewrite); pypaimon reads the same rows."""
    from tests.interop.pypaimon_util import pp_get_table, pp_read
    no_staged_rewrite(monkeypatch)
    engine_t, spark_t = twin_tables(tmp_path, **options)
    first = pa.table({"dt": ["a"] * 8, "id": list(range(8)), "v": ["first"] * 8}, schema=SCHEMA)
    for t in (engine_t, spark_t):
        t.write(first)
    data = ([("a", i, f"s{i}") for i in range(4, 44)] + [("b", i, f"s{i}") for i in range(20)]
            + [("c", i, f"s{i}") for i in range(3)])
    engine_t.write(pa.table({"dt": [r[0] for r in data], "id": [r[1] for r in data], "v": [r[2] for r in data]},
                            schema=SCHEMA))
    spark_glue.write_table(spark.createDataFrame(data, DDL).repartition(2), spark_t.root)
    assert counts(spark_t) == counts(engine_t)
    assert len(counts(spark_t)) == 3 and all(len(c) == 1 for c in counts(spark_t).values())
    assert rows(spark_t) == rows(engine_t) == sorted([("a", i, "first") for i in range(4)] + data)
    assert all(e.bucket != POSTPONE_BUCKET for e in spark_t.manifests.live_entries(spark_t.snapshot()))
    got = pp_read(pp_get_table(str(tmp_path / "spark" / "wh"), "db.t")).to_pylist()
    assert sorted((r["dt"], r["id"], r["v"]) for r in got) == rows(engine_t)


def test_write_table_overwrite_decides_counts_afresh_from_the_input(spark, tmp_path, monkeypatch):
    no_staged_rewrite(monkeypatch)
    engine_t, spark_t = twin_tables(tmp_path, **{"postpone.target-row-num-per-bucket": "4"})
    for t in (engine_t, spark_t):
        t.write(pa.table({"dt": ["a"] * 4 + ["b"], "id": list(range(5)), "v": ["old"] * 5}, schema=SCHEMA))
    data = [("a", i, "new") for i in range(30)]
    with engine_t.new_write(overwrite=True) as w:
        w.write(pa.table({"dt": ["a"] * 30, "id": list(range(30)), "v": ["new"] * 30}, schema=SCHEMA))
        engine_t.commit_overwrite(w.prepare_commit(), "dynamic")
    spark_glue.write_table(spark.createDataFrame(data, DDL), spark_t.root, mode="overwrite")
    assert counts(spark_t) == counts(engine_t) == {"a": {8}, "b": {1}}
    assert rows(spark_t) == rows(engine_t) == sorted(data + [("b", 4, "old")])


def test_data_source_without_a_default_count_stages_new_partitions_and_matches_the_engine(spark, tmp_path):
    """df.write.format cannot measure its input before the tasks run: without postpone.default-bucket-num its
    tasks write partitions with a known count straight to their buckets and stage the new ones, which the driver
    rewrites (engine.postpone.staged) with the engine's counts."""
    engine_t, spark_t = twin_tables(tmp_path, **{"postpone.target-row-num-per-bucket": "4"})
    for t in (engine_t, spark_t):
        t.write(pa.table({"dt": ["a"] * 8, "id": list(range(8)), "v": ["first"] * 8}, schema=SCHEMA))
    data = ([("a", i, f"s{i}") for i in range(4, 30)] + [("b", i, f"s{i}") for i in range(20)]
            + [("c", i, f"s{i}") for i in range(3)])
    engine_t.write(pa.table({"dt": [r[0] for r in data], "id": [r[1] for r in data], "v": [r[2] for r in data]},
                            schema=SCHEMA))
    spark.createDataFrame(data, DDL).repartition(2).write.format("lakemerge").mode("append").save(spark_t.root)
    assert counts(spark_t) == counts(engine_t) == {"a": {2}, "b": {8}, "c": {1}}
    assert rows(spark_t) == rows(engine_t)
    assert all(e.bucket != POSTPONE_BUCKET for e in spark_t.manifests.live_entries(spark_t.snapshot()))
    older = {e.file.file_name for s in spark_t.snapshots() for e in spark_t.manifests.live_entries(s)}
    assert files_on_disk(spark_t) == older  # staged files deleted


def _fail_first_attempt_of_task_0(batches):
    """mapInArrow pass-through whose task 0 fails on its first attempt after two batches (Spark retries it)."""
    from pyspark import TaskContext
    ctx = TaskContext.get()
    for i, batch in enumerate(batches):
        yield batch
        if ctx.partitionId() == 0 and ctx.attemptNumber() == 0 and i >= 1:
            raise RuntimeError("injected failure")


def test_a_retried_write_task_leaves_no_duplicate_or_orphan(spark, tmp_path):
    """A task attempt that wrote real-bucket files and failed is dropped and its files deleted; the retry's rows
    land once."""
    from spark_glue.api import distribute_by_bucket
    from spark_glue.postpone_buckets import decide_bucket_counts
    from spark_glue.writing import WriteJob, run_write_job
    t = make(tmp_path, **{"postpone.target-row-num-per-bucket": "500", "write-buffer-size": "1kb"})
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "200")
    try:
        df = spark.range(0, 3000, 1, 2).selectExpr("CAST(id % 2 AS STRING) AS dt", "id", "'x' AS v")
        job = WriteJob({"path": t.root, "commit.user": "u"}, overwrite=False)
        job.use_bucket_counts(decide_bucket_counts(df, t.root, job.base_id, overwrite=False))
        placed = distribute_by_bucket(df, t.root, num_tasks=2, bucket_counts=job.bucket_counts)
        # the failing step runs after the shuffle, in the writer's stage, so the failed attempt did write files
        sid = run_write_job(placed.mapInArrow(_fail_first_attempt_of_task_0, placed.schema), job)
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    assert sid == t.latest_snapshot_id()
    assert counts(t) == {"0": {4}, "1": {4}}  # 1500 rows / 500 -> 3 -> 4
    assert sorted(r[1] for r in rows(t)) == list(range(3000))
    report = t.check()
    assert report.ok and report.orphan_files == []


def test_a_failed_direct_write_leaves_the_table_and_storage_unchanged(spark, tmp_path):
    """A task fails (a null key in partition b) after others wrote real-bucket files: nothing is committed and
    every file of the job is deleted."""
    t = make(tmp_path, **{"postpone.default-bucket-num": "2"})
    spark_glue.write_table(spark.createDataFrame([("a", 1, "x")], DDL), t.root)
    before = (t.latest_snapshot_id(), files_on_disk(t))
    bad = spark.createDataFrame([("a", i, "y") for i in range(50)] + [("b", None, "z")], DDL)
    with pytest.raises(Exception, match="null"):
        spark_glue.write_table(bad, t.root)
    assert (t.latest_snapshot_id(), files_on_disk(t)) == before


def test_write_stream_without_a_default_count_matches_the_engine_per_micro_batch(spark, tmp_path):
    """PaimonSink writes each micro-batch through PaimonSparkWriter: real buckets, not postponed. Micro-batch 0
    creates partition a (staged, rewritten with the estimated count); micro-batch 1 writes a's known buckets from
    the tasks and stages the new partition b."""
    import pyarrow.parquet as pq
    engine_t, spark_t = twin_tables(tmp_path, **{"postpone.target-row-num-per-bucket": "4"})
    src = tmp_path / "in"
    src.mkdir()
    batches = [pa.table({"dt": ["a"] * 10, "id": list(range(10)), "v": ["s0"] * 10}, schema=SCHEMA),
               pa.table({"dt": ["a"] * 3 + ["b"] * 9, "id": list(range(8, 11)) + list(range(9)), "v": ["s1"] * 12},
                        schema=SCHEMA)]
    for i, batch in enumerate(batches):
        pq.write_table(batch, str(src / f"{i}.parquet"))
        engine_t.write(batch)
    q = (spark.readStream.schema(DDL).option("maxFilesPerTrigger", 1).parquet(str(src)).writeStream
         .format("lakemerge").option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True)
         .start(spark_t.root))
    q.awaitTermination(180)
    assert {s.commit_identifier for s in spark_t.snapshots()} == {0, 1}  # two micro-batches
    assert counts(spark_t) == counts(engine_t) == {"a": {4}, "b": {4}}  # ceil(10/4)=3 -> 4; ceil(9/4)=3 -> 4
    assert rows(spark_t) == rows(engine_t)
    assert all(e.bucket != POSTPONE_BUCKET for e in spark_t.manifests.live_entries(spark_t.snapshot()))


def test_a_micro_batch_whose_tasks_disagree_on_a_partitions_count_is_refused(tmp_path):
    """A streaming data-source task takes the latest snapshot as its base: a concurrent commit that gives a new
    partition real buckets mid-batch makes an early task stage the partition and a later one write it directly.
    The driver's rewrite of the staged records would number them from the latest snapshot too, so a key written
    by both tasks could get one sequence number twice (readers would pick either). The commit is refused
    (CommitConflict), every file of the micro-batch is deleted and the table keeps the concurrent snapshot; the
    replayed micro-batch then writes the partition's known buckets."""
    from engine.errors import CommitConflict
    from engine.postpone.staged import PartlyStagedWrite
    from spark_glue.job_files import tag_files
    from spark_glue.writing import TaskFiles, WriteJob
    t = make(tmp_path, **{"postpone.target-row-num-per-bucket": "100"})
    job = WriteJob({"path": t.root, "commit.user": "stream"}, overwrite=False, streaming=True)
    tag = job.tag_for(0)
    batch = pa.table({"dt": ["b"] * 10, "id": list(range(10)), "v": ["s"] * 10}, schema=SCHEMA)
    early = PartlyStagedWrite(tag_files(Catalog(str(tmp_path / "wh")).get_table("db.t"), tag),
                              commit_user="stream", commit_identifier=0, sequence_lane=(0, 2))
    early.write(batch)
    t.write(pa.table({"dt": ["b"] * 4, "id": list(range(4)), "v": ["c"] * 4}, schema=SCHEMA))  # concurrent
    late = PartlyStagedWrite(tag_files(Catalog(str(tmp_path / "wh")).get_table("db.t"), tag),
                             commit_user="stream", commit_identifier=0, sequence_lane=(1, 2))
    late.write(batch)
    tasks = [TaskFiles(tuple(w.prepare_commit()), tag) for w in (early, late)]
    assert {m.bucket == POSTPONE_BUCKET for tf in tasks for m in tf.messages} == {True, False}
    sid = t.latest_snapshot_id()
    with pytest.raises(CommitConflict, match="partition"):
        job.commit_job(tasks, identifier=0)
    assert t.latest_snapshot_id() == sid and files_on_disk(t) == live_files(t)  # the job's files are gone
    assert rows(t) == [("b", i, "c") for i in range(4)]
    replay = PartlyStagedWrite(tag_files(Catalog(str(tmp_path / "wh")).get_table("db.t"), tag),
                               commit_user="stream", commit_identifier=0, sequence_lane=(0, 2))
    replay.write(batch)
    job.commit_job([TaskFiles(tuple(replay.prepare_commit()), tag)], identifier=0)
    assert rows(t) == [("b", i, "s") for i in range(10)] and counts(t) == {"b": {1}}
