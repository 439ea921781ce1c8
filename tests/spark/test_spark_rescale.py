"""Spark writes after ``ALTER ... SET ('bucket')`` (rescale-bucket): an append into a partition still written with
the old count fails with Paimon's message and leaves the table unchanged; an overwrite rewrites the partition with
the new count (Paimon's RescaleProcedureTest "rescale with ALTER TABLE and write validation"); and
``spark_glue.rescale``, Paimon's Spark rescale procedure distributed, checked against Table.rescale."""
from __future__ import annotations

import glob
import os

import pyarrow as pa
import pytest

import spark_glue
from spark_glue.rescale import RescaleJob
from engine import Catalog

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([("region", pa.string()), ("id", pa.int64()), ("qty", pa.int32())])
DDL = "region string, id long, qty int"


def _counts(t) -> dict:
    out: dict = {}
    for e in t.manifests.live_entries(t.snapshot()):
        out.setdefault(t.scan().partition_values(e.partition)[0], set()).add(e.total_buckets)
    return out


def _files(root) -> set:
    return {os.path.relpath(p, root) for p in glob.glob(os.path.join(root, "**", "bucket-*", "*"), recursive=True)}


def test_spark_append_into_an_old_layout_partition_fails_and_overwrite_rescales(spark, tmp_path):
    spark_glue.register(spark)
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    t = cat.create_table("db.orders", SCHEMA, ["region", "id"], ["region"], {"bucket": "2"})
    data = [("eu", i, 1) for i in range(30)] + [("us", i, 2) for i in range(20)]
    spark_glue.write_table(spark.createDataFrame(data, DDL), t.root)
    t.alter().set_option("bucket", "4").commit()
    sid, files = t.latest_snapshot_id(), _files(t.root)
    df = spark.createDataFrame([("eu", 100, 9)], DDL)
    for write in (lambda: df.write.format("lakemerge").mode("append").save(t.root),
                  lambda: spark_glue.write_table(df, t.root)):
        with pytest.raises(Exception, match=r"Try to write partition \{region=eu\} with a new bucket num 4, but the "
                                            r"previous bucket num is 2"):
            write()
        assert t.latest_snapshot_id() == sid and _files(t.root) == files
    new_eu = [("eu", i, 3) for i in range(0, 30, 3)]
    spark.createDataFrame(new_eu, DDL).write.format("lakemerge").mode("overwrite").save(t.root)
    assert _counts(t) == {"eu": {4}, "us": {2}}
    spark_glue.write_table(spark.createDataFrame([("us", i, 4) for i in range(5)], DDL), t.root, mode="overwrite")
    assert _counts(t) == {"eu": {4}, "us": {4}}
    df.write.format("lakemerge").mode("append").save(t.root)
    got = sorted((r["region"], r["id"], r["qty"]) for r in t.read().to_pylist())
    assert got == sorted(new_eu + [("us", i, 4) for i in range(5)] + [("eu", 100, 9)])
    for k in (0, 3, 100):  # bucket pruning by the new count finds every key
        assert t.read(filter=[("region", "=", "eu"), ("id", "=", k)]).num_rows == 1


def test_spark_overwrite_of_a_lookup_changelog_table_emits_no_changelog(spark, tmp_path):
    """Paimon's overwrite commits no changelog (FileStoreCommitImpl.overwritePartition), nor does the compaction of
    the buckets the overwrite's tasks shared: a rescale by INSERT OVERWRITE streams no row again."""
    spark_glue.register(spark)
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    t = cat.create_table("db.orders", SCHEMA, ["region", "id"], ["region"],
                         {"bucket": "1", "changelog-producer": "lookup"})
    data = [("eu", i, 1) for i in range(40)]
    t.write(pa.table({"region": [r for r, _, _ in data], "id": [i for _, i, _ in data],
                      "qty": pa.array([q for _, _, q in data], pa.int32())}))
    t.compact(full=True)
    sid = t.latest_snapshot_id()
    t.alter().set_option("bucket", "2").commit()
    spark.createDataFrame(data, DDL).repartition(2).write.format("lakemerge").mode("overwrite").save(t.root)
    assert _counts(t) == {"eu": {2}} and t.read().num_rows == 40
    assert t.read_changes(sid).num_rows == 0


# --- spark_glue.rescale ------------------------------------------------------------------------------------
def _rescale_table(tmp_path, name="orders", options=None):
    """Partitions eu and us written with 2 buckets in several commits (levels 0 and 5, an update, a delete)."""
    cat = Catalog(str(tmp_path / "wh"))
    if "db" not in cat.list_databases():
        cat.create_database("db")
    t = cat.create_table(f"db.{name}", SCHEMA, ["region", "id"], ["region"], {"bucket": "2", **(options or {})})
    t.write(_arrow([("eu", i, 1) for i in range(40)] + [("us", i, 1) for i in range(30)]))
    t.compact(full=True)
    t.write(_arrow([("eu", i, 2) for i in range(0, 40, 4)] + [("us", 100, 2)]))
    t.delete(pa.table({"region": ["eu"], "id": [1]}))
    return t


def _arrow(data):
    return pa.table({"region": [r for r, _, _ in data], "id": [i for _, i, _ in data],
                     "qty": pa.array([q for _, _, q in data], pa.int32())})


def _content(t) -> list:
    return sorted((r["region"], r["id"], r["qty"]) for r in t.read().to_pylist())


def _layout(t) -> dict:
    """(region, bucket, total buckets) -> live rows: the same rows land in the same buckets."""
    out: dict = {}
    for e in t.manifests.live_entries(t.snapshot()):
        key = (t.scan().partition_values(e.partition)[0], e.bucket, e.total_buckets)
        out[key] = out.get(key, 0) + e.file.row_count - (e.file.delete_row_count or 0)
    return out


def _live_names(t, region) -> set:
    return {e.file.file_name for e in t.manifests.live_entries(t.snapshot())
            if t.scan().partition_values(e.partition)[0] == region}


def _snapshot_files(t) -> set:
    """Every file some snapshot lists: anything else under bucket-* is an orphan."""
    return {e.file.file_name for s in t.snapshots() for e in t.manifests.live_entries(s)}


def _names_on_disk(root) -> set:
    return {os.path.basename(p) for p in _files(root)}


@pytest.mark.interop
def test_spark_rescale_equals_table_rescale(spark, tmp_path):
    import shutil

    from engine.meta.snapshot import COMMIT_KIND_OVERWRITE
    from tests.interop.pypaimon_util import pp_get_table, pp_read
    t = _rescale_table(tmp_path)
    t.alter().set_option("bucket", "4").commit()
    shutil.copytree(t.root, str(tmp_path / "wh" / "db.db" / "twin"))
    twin = Catalog(str(tmp_path / "wh")).get_table("db.twin")
    before, us_files, sid = _content(t), _live_names(t, "us"), t.latest_snapshot_id()

    got = spark_glue.rescale(spark, t.root, partitions={"region": "eu"})
    assert got == twin.rescale(partitions={"region": "eu"}) == sid + 1
    assert t.snapshot().commit_kind == COMMIT_KIND_OVERWRITE
    assert _counts(t) == {"eu": {4}, "us": {2}} and _live_names(t, "us") == us_files  # us untouched
    assert _content(t) == before == _content(twin) and _layout(t) == _layout(twin)
    assert _names_on_disk(t.root) == _snapshot_files(t)  # no leftovers
    for k in (0, 4, 39):  # bucket pruning by the new count finds every key
        assert t.read(filter=[("region", "=", "eu"), ("id", "=", k)]).num_rows == 1

    assert spark_glue.rescale(spark, t.root, 3) == twin.rescale(3)  # to a count other than the option: all
    assert _counts(t) == {"eu": {3}, "us": {3}} and t.schema.table_options.bucket == 4
    assert _content(t) == before and _layout(t) == _layout(twin)
    rows = pp_read(pp_get_table(str(tmp_path / "wh"), "db.orders")).to_pylist()
    assert sorted((r["region"], r["id"], r["qty"]) for r in rows) == before
    assert spark_glue.rescale(spark, t.root, partitions={"region": "zz"}) is None  # nothing there: no snapshot


def test_spark_rescale_of_an_append_table_and_a_branch(spark, tmp_path):
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    t = cat.create_table("db.log", SCHEMA, [], ["region"], {"bucket": "2", "bucket-key": "id"})
    t.write(_arrow([("eu", i % 7, i) for i in range(50)]))
    t.write(_arrow([("eu", i % 7, 100 + i) for i in range(10)]))
    t.create_tag("t1")
    t.create_branch("dev", tag="t1")
    main_sid, main_files = t.latest_snapshot_id(), _names_on_disk(t.root)
    branch = t.branch("dev")
    before = _content(branch)
    sid = spark_glue.rescale(spark, t.root + "$branch_dev", 3)
    branch = t.branch("dev")
    assert sid == branch.latest_snapshot_id() and branch.snapshot(sid).commit_kind == "OVERWRITE"
    assert _content(branch) == before and {e.total_buckets for e in branch.manifests.live_entries(
        branch.snapshot())} == {3}
    assert t.latest_snapshot_id() == main_sid and _counts(t) == {"eu": {2}}
    assert _names_on_disk(t.root) == main_files | {e.file.file_name for e in branch.manifests.live_entries(
        branch.snapshot())}  # the branch's files only (main's layout untouched)


def test_spark_rescale_fails_on_a_concurrent_commit_and_leaves_the_table_unchanged(spark, tmp_path, monkeypatch):
    """Strict mode, as Paimon's RescaleProcedure (commit.strict-mode.last-safe-snapshot = the planned snapshot):
    a commit to a rescaled partition while the job ran makes it fail; the job's files are deleted."""
    import importlib

    from engine.errors import CommitConflict
    rescale_mod = importlib.import_module("spark_glue.rescale")  # the package's attribute is the function
    t = _rescale_table(tmp_path)
    before_files = _names_on_disk(t.root)
    real = rescale_mod.commit_rescale
    concurrent: set = set()

    def concurrent_then_commit(table, plan, messages, **kw):
        seen = _names_on_disk(t.root)
        t.write(_arrow([("eu", 500, 9)]))  # lands between the plan and the rescale's commit
        concurrent.update(_names_on_disk(t.root) - seen)
        return real(table, plan, messages, **kw)
    monkeypatch.setattr(rescale_mod, "commit_rescale", concurrent_then_commit)
    with pytest.raises(CommitConflict):
        spark_glue.rescale(spark, t.root, 4, partitions={"region": "eu"})
    assert concurrent and _names_on_disk(t.root) == before_files | concurrent
    assert _counts(t) == {"eu": {2}, "us": {2}} and ("eu", 500, 9) in _content(t)


class _FailFirstWrite(RescaleJob):
    """Writes, then fails the first attempt of write task 0 (Spark retries it)."""

    def write_task(self, batches):
        from pyspark import TaskContext
        out = list(super().write_task(batches))
        ctx = TaskContext.get()
        if ctx.partitionId() == 0 and ctx.attemptNumber() == 0:
            raise RuntimeError("injected failure after writing rescale files")
        yield from out


class _AlwaysFailWrite(RescaleJob):
    def write_task(self, batches):
        list(super().write_task(batches))
        raise RuntimeError("injected failure")


def test_failed_or_retried_rescale_tasks_leave_no_snapshot_or_orphans(spark, tmp_path):
    t = _rescale_table(tmp_path)
    before, sid, files = _content(t), t.latest_snapshot_id(), _names_on_disk(t.root)
    with pytest.raises(Exception, match="injected failure"):
        _AlwaysFailWrite.for_table(t.root, 3).run(spark)
    assert t.latest_snapshot_id() == sid and _names_on_disk(t.root) == files
    assert _FailFirstWrite.for_table(t.root, 3).run(spark) == sid + 1
    assert _content(t) == before and _counts(t) == {"eu": {3}, "us": {3}}
    assert _names_on_disk(t.root) == _snapshot_files(t)  # the failed attempt's files were removed


def test_spark_rescale_of_a_postpone_table(spark, tmp_path):
    from engine.errors import InvalidInput
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    t = cat.create_table("db.pp", SCHEMA, ["region", "id"], ["region"], {"bucket": "-2"})
    t.write(_arrow([("eu", i, 1) for i in range(40)] + [("us", i, 1) for i in range(10)]))  # 1 bucket each
    us_files, before = _live_names(t, "us"), _content(t)
    with pytest.raises(InvalidInput, match="you must provide the resulting bucket number"):
        spark_glue.rescale(spark, t.root)
    assert spark_glue.rescale(spark, t.root, 5, partitions={"region": "eu"}) == t.latest_snapshot_id()
    assert _counts(t) == {"eu": {5}, "us": {1}} and _live_names(t, "us") == us_files and _content(t) == before
    assert len({b for (r, b, _) in _layout(t) if r == "eu"}) > 1  # 40 keys spread over the 5 buckets
    t.write(_arrow([("eu", 100, 2)]))  # later writes keep the partition's new count
    assert _counts(t)["eu"] == {5}
    t.alter().set_option("postpone.batch-write-fixed-bucket", "false").commit()
    t.write(_arrow([("us", 100, 2)]))  # us now holds postponed files: refused, as Table.rescale
    with pytest.raises(InvalidInput, match="postponed files"):
        spark_glue.rescale(spark, t.root, 2, partitions={"region": "us"})


@pytest.mark.parametrize("options", [{"changelog-producer": "lookup"}, {"changelog-producer": "input"},
                                     {"deletion-vectors.enabled": "true", "changelog-producer": "lookup"}])
def test_spark_rescale_emits_no_changelog(spark, tmp_path, options):
    """Paimon's overwrite commits no changelog (FileStoreCommitImpl.overwritePartition), so a rescale streams no
    row again; a deletion-vector table's rescaled level-0 rows are readable at once (as Table.rescale)."""
    t = _rescale_table(tmp_path, options=options)
    before, sid = _content(t), t.latest_snapshot_id()
    assert spark_glue.rescale(spark, t.root, 3) is not None
    assert _content(t) == before and _counts(t) == {"eu": {3}, "us": {3}}
    assert t.read_changes(sid).num_rows == 0
    from engine.check import check_table
    report = check_table(t)  # the tasks' changelog files (producer input) were not published: none stays behind
    assert report.ok and report.orphan_files == []


def test_spark_rescale_refuses_nanosecond_timestamps(spark, tmp_path):
    """Spark holds microseconds: rows passing through it would lose digits, so lakemerge refuses (before any job)
    where Paimon's Spark procedure would truncate; Table.rescale keeps them."""
    from engine.errors import UnsupportedFeature
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    schema = pa.schema([("id", pa.int64()), ("ts", pa.timestamp("ns"))])
    t = cat.create_table("db.ts", schema, ["id"], options={"bucket": "1"})
    t.write(pa.table({"id": [1, 2], "ts": pa.array([1_000_000_001, 5], pa.timestamp("ns"))}, schema=schema))
    sid, files = t.latest_snapshot_id(), _files(t.root)
    with pytest.raises(UnsupportedFeature, match="column 'ts' holds nanosecond timestamps"):
        spark_glue.rescale(spark, t.root, 2)
    assert t.latest_snapshot_id() == sid and _files(t.root) == files
    t.rescale(2)
    assert sorted(t.read().column("ts").cast(pa.int64()).to_pylist()) == [5, 1_000_000_001]


def test_spark_rescale_fails_on_a_concurrent_deletion_vector_delete(spark, tmp_path, monkeypatch):
    """A DELETE of a deletion-vector append table writes only vectors; landing while the rescale ran, it fails the
    rescale (Paimon's StrictModeChecker.hasOverlappedIndexPartition) instead of being undone by the overwrite."""
    import importlib

    from engine.check import check_table
    from engine.errors import CommitConflict
    rescale_mod = importlib.import_module("spark_glue.rescale")
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    t = cat.create_table("db.log", SCHEMA, [], ["region"], {"bucket": "2", "bucket-key": "id",
                                                            "deletion-vectors.enabled": "true"})
    t.write(_arrow([("eu", i, 1) for i in range(30)]))
    real = rescale_mod.commit_rescale

    def delete_then_commit(table, plan, messages, **kw):
        t.delete_where([("id", "=", 7)])  # lands between the plan and the rescale's commit: vectors only
        return real(table, plan, messages, **kw)
    monkeypatch.setattr(rescale_mod, "commit_rescale", delete_then_commit)
    with pytest.raises(CommitConflict, match="deletion vectors"):
        spark_glue.rescale(spark, t.root, 3)
    assert _counts(t) == {"eu": {2}} and ("eu", 7, 1) not in _content(t) and len(_content(t)) == 29
    report = check_table(t)
    assert report.ok and report.orphan_files == []
