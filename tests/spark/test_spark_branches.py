"""Spark reads and writes of a table's branch: ``load(path + "$branch_<name>")`` or option ``branch``, as
Paimon's ``t$branch_<name>`` and its ``branch`` option."""
from __future__ import annotations

import pyarrow as pa
import pytest

import spark_glue
from engine import Catalog
from engine.errors import TableNotFound

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([pa.field("k", pa.int64(), nullable=False), ("v", pa.string())])


def _sorted(df):
    return sorted(tuple(r) for r in df.collect())


@pytest.fixture
def table(spark, tmp_path):
    """``db.t`` (k=1 a, k=2 b) with branch ``dev`` made from tag ``t1``, then k=3 c written on main only."""
    spark_glue.register(spark)
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    t = cat.create_table("db.t", SCHEMA, primary_key=["k"], options={"bucket": "2"})
    t.write(pa.table({"k": [1, 2], "v": ["a", "b"]}, schema=SCHEMA))
    t.create_tag("t1")
    t.create_branch("dev", tag="t1")
    t.write(pa.table({"k": [3], "v": ["c"]}, schema=SCHEMA))
    return t


def test_spark_reads_a_branch_by_path_or_option(spark, table):
    root = table.root
    assert _sorted(spark.read.format("lakemerge").load(root + "$branch_dev")) == [(1, "a"), (2, "b")]
    assert _sorted(spark.read.format("lakemerge").option("branch", "dev").load(root)) == [(1, "a"), (2, "b")]
    assert _sorted(spark.read.format("lakemerge").option("branch", "main").load(root)) == [(1, "a"), (2, "b"),
                                                                                          (3, "c")]
    snaps = spark.read.format("lakemerge").load(root + "$branch_dev$snapshots").collect()
    assert [r.snapshot_id for r in snaps] == [s.id for s in table.branch("dev").snapshots()]


def test_spark_writes_go_to_the_branch_only(spark, table):
    root = table.root
    df = spark.createDataFrame([(2, "B"), (4, "d")], "k long, v string")
    df.write.format("lakemerge").mode("append").option("branch", "dev").save(root)
    spark_glue.write_table(df.selectExpr("k + 10 as k", "v"), root + "$branch_dev")
    assert sorted(table.branch("dev").read().to_pylist(), key=lambda r: r["k"]) == [
        {"k": 1, "v": "a"}, {"k": 2, "v": "B"}, {"k": 4, "v": "d"}, {"k": 12, "v": "B"}, {"k": 14, "v": "d"}]
    assert sorted(table.read().to_pylist(), key=lambda r: r["k"]) == [  # main unchanged
        {"k": 1, "v": "a"}, {"k": 2, "v": "b"}, {"k": 3, "v": "c"}]
    spark_glue.delete_where(spark, root + "$branch_dev", "k > 10")
    assert sorted(r["k"] for r in table.branch("dev").read().to_pylist()) == [1, 2, 4]
    assert sorted(r["k"] for r in table.read().to_pylist()) == [1, 2, 3]
    main_latest = table.latest_snapshot_id()
    sid = spark_glue.compact(spark, root + "$branch_dev", full=True)
    branch = table.branch("dev")
    assert sid == branch.latest_snapshot_id() and branch.snapshot(sid).commit_kind == "COMPACT"
    assert table.latest_snapshot_id() == main_latest
    assert sorted(r["k"] for r in branch.read().to_pylist()) == [1, 2, 4]


def test_spark_branch_errors(spark, table):
    root = table.root
    with pytest.raises(Exception, match="no branch 'nope'"):
        spark.read.format("lakemerge").load(root + "$branch_nope").collect()
    with pytest.raises(Exception, match="branch named twice"):
        spark.read.format("lakemerge").option("branch", "x").load(root + "$branch_dev").collect()
    with pytest.raises(TableNotFound, match="no branch"):  # a write never creates a branch
        spark_glue.write_table(spark.createDataFrame([(1, "x")], "k long, v string"), root + "$branch_new")
    assert table.branches() == ["dev"]


def test_spark_merge_into_a_branch(spark, table):
    root = table.root
    source = spark.createDataFrame([(1, "A"), (7, "g")], "k long, v string")
    spark_glue.merge_into(spark, root + "$branch_dev", source, on=["k"])
    assert sorted((r["k"], r["v"]) for r in table.branch("dev").read().to_pylist()) == [(1, "A"), (2, "b"),
                                                                                        (7, "g")]
    assert sorted((r["k"], r["v"]) for r in table.read().to_pylist()) == [(1, "a"), (2, "b"), (3, "c")]


def test_spark_branch_option_with_a_system_table_path(spark, table):
    """Option ``branch`` applies to a system-table path too: ``t$snapshots`` is read as ``t$branch_dev$snapshots``
    (before, the branch was appended after the kind and the read failed with TableNotFound)."""
    root = table.root
    dev_ids = [s.id for s in table.branch("dev").snapshots()]
    assert dev_ids != [s.id for s in table.snapshots()]
    for path in (root + "$snapshots", root + "$branch_dev$snapshots"):
        rows = spark.read.format("lakemerge").option("branch", "dev").load(path).collect()
        assert [r.snapshot_id for r in rows] == dev_ids, path
    with pytest.raises(Exception, match="branch named twice"):  # option main against a branch path
        spark.read.format("lakemerge").option("branch", "main").load(root + "$branch_dev").collect()


def test_spark_helpers_take_the_branch_option(spark, table):
    """``write_table(df, path, branch=...)`` writes the branch, as ``df.write.option("branch", ...)`` does (before,
    the option was ignored and the rows went to main)."""
    root = table.root
    main_latest = table.latest_snapshot_id()
    spark_glue.write_table(spark.createDataFrame([(8, "h")], "k long, v string"), root, branch="dev")
    assert sorted(r["k"] for r in table.branch("dev").read().to_pylist()) == [1, 2, 8]
    assert table.latest_snapshot_id() == main_latest
    assert _sorted(spark_glue.read_table(spark, root, Branch="dev")) == [(1, "a"), (2, "b"), (8, "h")]
    with pytest.raises(Exception, match="branch named twice"):
        spark_glue.write_table(spark.createDataFrame([(9, "i")], "k long, v string"), root + "$branch_dev",
                               branch="other")
