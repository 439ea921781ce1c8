"""Every Spark path on deletion-vector tables (``deletion-vectors.enabled``): batch reads and time travel, bucket-
parallel and unplaced writes, Spark compaction (also losing a race or failing), row-level helpers, streaming reads
and partition overwrite. References: the engine's reads and a dict model of the rows; storage: every DV index file
the latest snapshot lists exists and no file (index files included) is left unreferenced."""
from __future__ import annotations

import os
import shutil

import pyarrow as pa
import pytest

import spark_glue
from engine import Catalog
from spark_glue.compaction import CompactionJob
from tests.test_deletion_vectors import SCHEMA, dv_records, live_rows_above_level0

pytestmark = pytest.mark.spark

DDL = "p string, k long, v long"


def _table(tmp_path, name="t", **options):
    """A DV table; no size-amplification full compaction (small files are all overhead), so level 0 goes one
    level up and the vectors mark the rows it supersedes below."""
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db", ignore_if_exists=True)
    return cat.create_table(f"db.{name}", SCHEMA, ["p", "k"], ["p"],
                            {"bucket": "2", "deletion-vectors.enabled": "true",
                             "compaction.max-size-amplification-percent": "100000", **options})


def _engine_rows(table: pa.Table) -> list[tuple]:
    return sorted((r["p"], r["k"], r["v"]) for r in table.to_pylist())


def _spark_rows(rows) -> list[tuple]:
    return sorted((r.p, r.k, r.v) for r in rows)


def _model_rows(model: dict) -> list[tuple]:
    return sorted((p, k, v) for (p, k), v in model.items())


def _arrow(model_part: dict) -> pa.Table:
    items = sorted(model_part.items())
    return pa.table({"p": [p for (p, _), _ in items], "k": [k for (_, k), _ in items],
                     "v": [v for _, v in items]}, schema=SCHEMA)


def _df(spark, changes: dict):
    return spark.createDataFrame([(p, k, v) for (p, k), v in sorted(changes.items())], DDL)


def _spark_read(spark, t, **options):
    reader = spark.read.format("lakemerge")
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return _spark_rows(reader.load(t.root).collect())


def _index_files(t) -> set[str]:
    d = os.path.join(t.root, "index")
    return set(os.listdir(d)) if os.path.isdir(d) else set()


def _storage_ok(t) -> list[dict]:
    """The latest snapshot's DV records (asserting each names an existing index file), after asserting that
    ``check`` finds no problem and no unreferenced file (data, changelog or index)."""
    report = t.check()
    assert report.ok, report.problems
    assert report.orphan_files == []
    records = dv_records(t) if t.snapshot() is not None else []
    assert all(os.path.exists(t.scan().index_file_path(r)) for r in records)
    return records


def _upserts(step: int, keys) -> dict:
    """Rows of keys ``keys`` in both partitions; the values barely compress, so files are mostly data and
    compaction leaves small level-0 outputs above the big runs (and their vectors) instead of rewriting all."""
    return {(p, k): (k * 2654435761 + step * 40503 + len(p)) % 2**40 for p in ("a", "b") for k in keys}


# --- batch reads --------------------------------------------------------------------------------------------
def test_batch_reads_and_time_travel_equal_the_engine(spark, tmp_path):
    """Spark reads every snapshot as ``Table.read`` does: an APPEND snapshot's level-0 file stays hidden until
    the COMPACT snapshot after it, whose vectors hide the old versions (raw, unmerged reads)."""
    t = _table(tmp_path)
    t.write(_arrow(_upserts(0, range(100))))
    t.write(_arrow(_upserts(1, range(0, 100, 3))))
    t.delete(_arrow({("a", 4): 0, ("b", 5): 0}))
    assert dv_records(t)
    kinds = {s.id: s.commit_kind for s in t.snapshots()}
    at = {sid: _spark_read(spark, t, **{"scan.snapshot-id": sid}) for sid in kinds}
    assert at == {sid: _engine_rows(t.read(sid)) for sid in kinds}
    appends = [sid for sid, kind in kinds.items() if kind == "APPEND" and sid > 1 and kinds.get(sid + 1) == "COMPACT"]
    assert appends
    for sid in appends:  # level 0 hidden: the APPEND snapshot reads as the one before, unlike the COMPACT after it
        assert at[sid] == at[sid - 1] != at[sid + 1]
    assert _spark_read(spark, t) == at[max(kinds)]
    pruned = spark_glue.read_table(spark, t.root, prune=True)
    assert _spark_rows(pruned.where("p = 'a' AND k = 3").collect()) == [("a", 3, _upserts(1, [3])[("a", 3)])]
    assert _spark_rows(pruned.where("v > 600000000000").collect()) == \
        _engine_rows(t.read(filter=[("v", ">", 600000000000)]))
    projected = spark_glue.read_table(spark, t.root, columns=["k", "v"]).collect()
    assert sorted((r.k, r.v) for r in projected) == sorted((p, k, v)[1:] for p, k, v in at[max(kinds)])
    # merge-on-read: batch reads merge level 0 too, in Spark as in the engine
    t.write(_arrow({("a", 1): -1}))
    t.alter().set_option("deletion-vectors.merge-on-read", "true").commit()
    t = Catalog(str(tmp_path / "wh")).get_table("db.t")
    append = t.latest_snapshot_id() - 1
    assert ("a", 1, -1) in _engine_rows(t.read(append))
    assert _spark_read(spark, t, **{"scan.snapshot-id": append}) == _engine_rows(t.read(append))


# --- writes -------------------------------------------------------------------------------------------------
def test_write_table_commits_the_tasks_vectors(spark, tmp_path):
    """Bucket-parallel writes: each task compacts its buckets, its message carries the new vectors, the driver
    commits them with the COMPACT snapshot. One live row per key above level 0, equal to the model."""
    t = _table(tmp_path)
    model: dict = {}
    for step, keys in enumerate([range(150), range(0, 150, 4), range(1, 150, 5)]):
        changes = _upserts(step, keys)
        sid = spark_glue.write_table(_df(spark, changes), t.root)
        model.update(changes)
        assert t.snapshot(sid).commit_kind == "COMPACT"
        if step:  # the APPEND snapshot publishes no vector; the COMPACT one does
            assert dv_records(t, sid - 1) == dv_records(t, sid - 2)
            assert dv_records(t, sid) != dv_records(t, sid - 1)
    deletes = spark.createDataFrame([("a", 8, 0, "-D"), ("b", 9, 0, "-D")], DDL + ", kind string")
    spark_glue.write_table(deletes, t.root, **{"rowkind.column": "kind"})
    del model[("a", 8)], model[("b", 9)]
    assert _spark_read(spark, t) == _engine_rows(t.read()) == _model_rows(model)
    assert live_rows_above_level0(t) == _model_rows(model)
    assert _storage_ok(t)


@pytest.mark.parametrize("changelog", ["none", "lookup"])
def test_unplaced_writes_drop_task_vectors_and_compact_on_the_driver(spark, tmp_path, changelog):
    """``df.write.format`` without placement: tasks share buckets, so their compactions (and the DV index files
    they wrote) are dropped and the driver compacts the shared buckets, writing the vectors once."""
    t = _table(tmp_path, **{"changelog-producer": changelog})
    model: dict = {}
    for step, keys in enumerate([range(400), range(0, 400, 20), range(0, 400, 30)]):
        changes = _upserts(step, keys)
        _df(spark, changes).repartition(2).write.format("lakemerge").mode("append").save(t.root)
        model.update(changes)
        assert t.snapshot().commit_kind == "COMPACT"
        assert _spark_read(spark, t) == _engine_rows(t.read()) == _model_rows(model)
        assert live_rows_above_level0(t) == _model_rows(model)
        assert all(f.level > 0 for sp in t.plan() for f in sp.files)
        records = _storage_ok(t)  # the driver's vectors are there; the tasks' dropped ones are gone
        assert records or step != 1
    if changelog == "lookup":
        kinds = t.read_changes().column("_row_kind").to_pylist()
        assert kinds.count("+I") == 800 and kinds.count("+U") == kinds.count("-U") == 2 * (20 + 14)


# --- compaction ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("full", [False, True])
def test_spark_compaction_equals_engine_compaction(spark, tmp_path, full):
    t = _table(tmp_path, **{"write-only": "true"})
    model = _upserts(0, range(400))
    t.write(_arrow(model))
    assert spark_glue.compact(spark, t.root, full=True) == 2
    for step, keys in ((1, range(0, 400, 20)), (2, range(0, 400, 30))):
        changes = _upserts(step, keys)
        t.write(_arrow(changes))
        model.update(changes)
    assert _engine_rows(t.read()) == _model_rows(_upserts(0, range(400)))  # level 0 not compacted yet
    twin_root = str(tmp_path / "wh" / "db.db" / "twin")
    shutil.copytree(t.root, twin_root)
    twin = Catalog(str(tmp_path / "wh")).get_table("db.twin")
    latest = t.latest_snapshot_id()
    sid = spark_glue.compact(spark, t.root, full=full)
    assert sid == twin.compact(full=full) == latest + 1 and t.snapshot().commit_kind == "COMPACT"
    assert _spark_read(spark, t) == _engine_rows(t.read()) == _engine_rows(twin.read()) == _model_rows(model)
    assert live_rows_above_level0(t) == _model_rows(model)

    def vectors(table):
        return sorted((r["_PARTITION"], r["_BUCKET"], tuple(sorted((x["f0"], x["_CARDINALITY"])
                                                                    for x in r["_DELETIONS_VECTORS_RANGES"])))
                      for r in dv_records(table))
    assert vectors(t) == vectors(twin)
    assert bool(vectors(t)) != full  # a full compaction rewrites every file: no vector is left
    _storage_ok(t)


class _ConcurrentCompaction(CompactionJob):
    """Task 0 compacts, then an engine compaction of the same buckets commits before the job's commit."""

    def compact_group(self, index):
        from spark_glue.tables import open_table
        messages = super().compact_group(index)
        open_table(self.path).compact()
        return messages


class _FailFirstAttempt(CompactionJob):
    def compact_group(self, index):
        from pyspark import TaskContext
        messages = super().compact_group(index)
        if index == 0 and TaskContext.get().attemptNumber() == 0:
            raise RuntimeError("injected failure after writing compaction files")
        return messages


class _AlwaysFail(CompactionJob):
    def compact_group(self, index):
        super().compact_group(index)
        raise RuntimeError("injected failure")


def _level0_updates(tmp_path):
    """A write-only DV table whose buckets hold compacted rows plus uncompacted updates, and its model."""
    t = _table(tmp_path, **{"write-only": "true"})
    model = _upserts(0, range(400))
    t.write(_arrow(model))
    t.compact(full=True)
    changes = _upserts(1, range(0, 400, 20))
    t.write(_arrow(changes))
    model.update(changes)
    return t, model


def test_spark_compaction_that_loses_a_race_or_fails_leaves_no_index_file(spark, tmp_path):
    t, model = _level0_updates(tmp_path)
    before = _index_files(t)
    with pytest.raises(Exception, match="injected failure"):
        _AlwaysFail(t.root).run(spark)
    assert _index_files(t) == before
    _storage_ok(t)
    with pytest.raises(Exception, match="conflict|changed|no longer"):
        _ConcurrentCompaction(t.root, tasks=1).run(spark)
    assert _engine_rows(t.read()) == _model_rows(model)
    assert _storage_ok(t)  # the lost compaction's index files are gone, the winner's are there

    t, model = _level0_updates(tmp_path / "retry")
    sid = _FailFirstAttempt(t.root).run(spark)
    assert t.snapshot(sid).commit_kind == "COMPACT" and dv_records(t)
    assert _spark_read(spark, t) == _model_rows(model) == live_rows_above_level0(t)
    assert _storage_ok(t)  # the failed attempt's index file was deleted


# --- job file cleanup ---------------------------------------------------------------------------------------
def test_replayed_and_failed_write_jobs_leave_no_index_file(spark, tmp_path):
    """Job cleanup finds the DV index files a job's tasks wrote (their names carry the job's tag, as its data
    files do): a replayed identifier and a failed job, whose succeeded task compacted and wrote vectors but
    whose messages Spark dropped, leave no index file behind."""
    from spark_glue.api import distribute_by_bucket
    from spark_glue.writing import WriteJob, run_write_job
    t = _table(tmp_path)
    spark_glue.write_table(_df(spark, _upserts(0, range(1000))), t.root)
    options = {"path": t.root, "commit.user": "pipeline", "commit.identifier": "7"}
    first, replay = WriteJob(options, overwrite=False), WriteJob(options, overwrite=False)  # same base snapshot
    placed = distribute_by_bucket(_df(spark, _upserts(1, range(0, 1000, 50))), t.root, num_tasks=2)
    sid = run_write_job(placed, first)
    assert dv_records(t, sid)
    files = _index_files(t)
    assert run_write_job(placed, replay) == sid  # already published: its tasks' vectors are deleted
    assert _index_files(t) == files and _storage_ok(t)
    placed = distribute_by_bucket(_df(spark, _upserts(2, range(0, 1000, 45))), t.root, num_tasks=2)
    with pytest.raises(Exception, match="injected failure"):
        run_write_job(placed.mapInArrow(_fail_task_1, placed.schema), WriteJob({"path": t.root}, overwrite=False))
    assert t.latest_snapshot_id() == sid and _index_files(t) == files and _storage_ok(t)
    spark_glue.write_table(_df(spark, _upserts(2, range(0, 1000, 45))), t.root)  # the same rows, now committed
    assert _index_files(t) != files and _storage_ok(t)


def _fail_task_1(batches):
    """mapInArrow pass-through whose task 1 fails on every attempt, after task 0 had time to finish."""
    import time
    from pyspark import TaskContext
    if TaskContext.get().partitionId() == 1:
        time.sleep(1.0)
        raise RuntimeError("injected failure of task 1")
    yield from batches


# --- row-level helpers --------------------------------------------------------------------------------------
def test_delete_update_merge_on_a_dv_table(spark, tmp_path):
    t = _table(tmp_path)
    model = _upserts(0, range(300))
    spark_glue.write_table(_df(spark, model), t.root)
    spark_glue.delete_where(spark, t.root, "p = 'a' AND k % 7 = 0")
    model = {key: v for key, v in model.items() if not (key[0] == "a" and key[1] % 7 == 0)}
    spark_glue.update_where(spark, t.root, {"v": "v + 1"}, "k < 40")
    model = {key: v + 1 if key[1] < 40 else v for key, v in model.items()}
    assert dv_records(t)
    source = _df(spark, {("a", 1): 5, ("a", 7): 6, ("b", 2): 7, ("b", 999): 8})
    spark_glue.merge_into(spark, t.root, source, on=["p", "k"], when_matched="update", when_not_matched="insert")
    model.update({("a", 1): 5, ("a", 7): 6, ("b", 2): 7, ("b", 999): 8})
    spark_glue.merge_into(spark, t.root, _df(spark, {("b", 3): 0, ("b", 4): 0}), on=["p", "k"],
                          when_matched="delete", when_not_matched=None)
    del model[("b", 3)], model[("b", 4)]
    assert _spark_read(spark, t) == _engine_rows(t.read()) == _model_rows(model)
    assert live_rows_above_level0(t) == _model_rows(model)
    _storage_ok(t)


# --- streaming reads ----------------------------------------------------------------------------------------
def _stream_rows(spark, t, out, ck, **options):
    import glob
    import pyarrow.parquet as pq
    q = (spark_glue.read_stream(spark, t.root, **options).writeStream.format("parquet")
         .option("checkpointLocation", ck).option("path", out).trigger(availableNow=True).start())
    q.awaitTermination(120)
    assert q.exception() is None
    files = glob.glob(os.path.join(out, "*.parquet"))
    rows = pa.concat_tables([pq.read_table(f) for f in files]).to_pylist() if files else []
    return sorted((r["p"], r["k"], r["v"], r["_row_kind"]) for r in rows)


def test_stream_latest_full_reads_level0_of_its_start_snapshot_then_changes(spark, tmp_path):
    """The full read of the start snapshot merges every level (level 0 too, which batch reads hide) and applies
    the vectors; later snapshots arrive as changes."""
    t, model = _level0_updates(tmp_path)
    t.compact()
    assert dv_records(t)
    updates = _upserts(2, range(1, 400, 25))
    t.write(_arrow(updates))  # uncompacted: hidden from batch reads
    model.update(updates)
    assert _engine_rows(t.read()) != _model_rows(model)
    out, ck = str(tmp_path / "out"), str(tmp_path / "ck")
    full = _stream_rows(spark, t, out, ck)
    assert full == sorted(row + ("+I",) for row in _model_rows(model))
    start = t.latest_snapshot_id()
    t.write(_arrow({("a", 2): 1, ("b", 500): 2}))
    t.delete(_arrow({("a", 3): 0}))
    changes = sorted((r["p"], r["k"], r["v"], r["_row_kind"]) for r in t.read_changes(start).to_pylist())
    assert {c[-1] for c in changes} == {"+I", "-D"}
    assert _stream_rows(spark, t, out, ck) == sorted(full + changes)


# --- overwrite ----------------------------------------------------------------------------------------------
def test_overwrite_of_a_partition_drops_its_vectors(spark, tmp_path):
    t = _table(tmp_path)
    model = _upserts(0, range(400))
    spark_glue.write_table(_df(spark, model), t.root)
    changes = _upserts(1, range(0, 400, 20))
    spark_glue.write_table(_df(spark, changes), t.root)
    model.update(changes)
    a_part = next(sp.partition for sp in t.plan() if sp.partition_values == ("a",))
    before = dv_records(t)
    assert {r["_PARTITION"] for r in before} == {sp.partition for sp in t.plan()}
    new_a = {("a", k): k for k in range(5, 50, 5)}
    _df(spark, new_a).write.format("lakemerge").mode("overwrite").save(t.root)
    model = {**{key: v for key, v in model.items() if key[0] == "b"}, **new_a}
    assert "OVERWRITE" in {s.commit_kind for s in t.snapshots()}
    assert _spark_read(spark, t) == _engine_rows(t.read()) == _model_rows(model)
    assert dv_records(t) == [r for r in before if r["_PARTITION"] != a_part]  # b's vectors kept as they were
    _storage_ok(t)
