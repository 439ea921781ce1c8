"""Spark paths on deletion-vector tables (``deletion-vectors.enabled``). References: the engine's reads and a
dict model of the rows; storage: every DV index file the latest snapshot lists exists and no file (index files
included) is left unreferenced."""
from __future__ import annotations

import os

import pyarrow as pa
import pytest

import spark_glue
from engine import Catalog
from engine.deletion_vectors.index_file import index_file_path
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
    assert all(os.path.exists(index_file_path(t.root, r)) for r in records)
    return records


def _upserts(step: int, keys) -> dict:
    """Rows of keys ``keys`` in both partitions; the values barely compress, so files are mostly data and
    compaction leaves small level-0 outputs above the big runs (and their vectors) instead of rewriting all."""
    return {(p, k): (k * 2654435761 + step * 40503 + len(p)) % 2**40 for p in ("a", "b") for k in keys}


# --- compaction ---------------------------------------------------------------------------------------------
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
