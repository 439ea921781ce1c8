"""Spark batch reads of tables with ``scan.fallback-branch`` / ``scan.primary-branch``: the same rows as the
engine (engine.read.fallback_branch), splits of both branches read through each branch's own schema."""
from __future__ import annotations

import dataclasses

import pyarrow as pa
import pytest

import spark_glue
from engine import Catalog
from tests.test_fallback_branch import add_main_column_to_branch
from engine.paths import TablePaths

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([pa.field("pt", pa.int32(), nullable=False), pa.field("k", pa.int32(), nullable=False),
                    ("v", pa.string())])


def _rows(*rows):
    return pa.table({"pt": [r[0] for r in rows], "k": [r[1] for r in rows], "v": [r[2] for r in rows]},
                    schema=SCHEMA)


def _sorted(rows):
    return sorted(tuple(r.asDict().values()) if hasattr(r, "asDict") else tuple(r.values()) for r in rows)


@pytest.fixture
def tables(spark, tmp_path):
    """An append main (pt=1, pt=3) and a primary-key branch ``pk`` (pt=1 and pt=2 upserts, a column renamed)."""
    spark_glue.register(spark)
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    t = cat.create_table("db.t", SCHEMA, partition_keys=["pt"], options={"bucket": "-1"})
    t.write(_rows((1, 10, "apple"), (1, 20, "banana")))
    t.create_branch("pk")
    b = t.branch("pk")
    s = b.schema  # what Paimon's ALTER TABLE `t$branch_pk` SET ('primary-key' ...) plus a rename leave
    new = dataclasses.replace(s, id=s.id + 1, primary_keys=("pt", "k"), options={**s.options, "bucket": "2"},
                              fields=tuple(dataclasses.replace(f, name="value") if f.name == "v" else f
                                           for f in s.fields))
    t.file_io.write_bytes(TablePaths(t.root, b.paths.meta_root).schema(new.id), new.to_json().encode())
    b = t.branch("pk")
    branch_rows = _rows((1, 20, "cat"), (2, 10, "tiger"), (2, 20, "wolf")).rename_columns(["pt", "k", "value"])
    b.write(branch_rows.cast(b.arrow_schema))
    b.write(_rows((2, 10, "lion")).rename_columns(["pt", "k", "value"]).cast(b.arrow_schema))
    t.write(_rows((3, 10, "horse")))
    return t


def test_spark_reads_the_fallback_branch_partitions(spark, tables):
    t = tables
    t.alter().set_option("scan.fallback-branch", "pk").commit()
    want = [(1, 10, "apple"), (1, 20, "banana"), (2, 10, "lion"), (2, 20, "wolf"), (3, 10, "horse")]
    assert _sorted(t.read().to_pylist()) == want
    df = spark.read.format("lakemerge").load(t.root)
    assert _sorted(df.collect()) == want
    assert _sorted(df.where("pt = 2").collect()) == [(2, 10, "lion"), (2, 20, "wolf")]
    assert _sorted(spark_glue.read_table(spark, t.root, prune=True).where("v = 'wolf' or pt = 1").collect()) == \
        [(1, 10, "apple"), (1, 20, "banana"), (2, 20, "wolf")]
    # time travel by snapshot id: main's snapshot 1 predates the branch's pt=2 writes except its first (id 1)
    first = spark.read.format("lakemerge").option("scan.snapshot-id", "1").load(t.root).collect()
    assert _sorted(first) == _sorted(t.read(snapshot_id=1).to_pylist())
    assert _sorted(spark.read.format("lakemerge").option("follow-latest", "true").load(t.root).collect()) == want


def test_spark_reads_the_primary_branch_partitions(spark, tables):
    t = tables
    t.alter().set_option("scan.primary-branch", "pk").commit()
    want = [(1, 20, "cat"), (2, 10, "lion"), (2, 20, "wolf"), (3, 10, "horse")]
    assert _sorted(t.read().to_pylist()) == want
    assert _sorted(spark.read.format("lakemerge").load(t.root).collect()) == want
    assert _sorted(spark.read.format("lakemerge").option("columns", "v").load(t.root).collect()) == \
        sorted((r[2],) for r in want)


def test_time_travel_reads_both_branches_through_their_snapshots_schemas(spark, tmp_path):
    """Spark time travel of a fallback-branch table read the latest schema; as Table.read(snapshot_id=...) (Paimon's
    FallbackReadFileStoreTable.copy time-travels both tables), a snapshot from before a column both branches added
    reads both branches through their pinned snapshots' schemas, with the table's current options (the fallback
    option was set after main's snapshot 1) restated for them; by snapshot id, tag and version."""
    spark_glue.register(spark)
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    t = cat.create_table("db.t", pa.schema([("pt", pa.int32()), ("v", pa.int32())]), partition_keys=["pt"],
                         options={"bucket": "-1"})
    t.write(pa.table({"pt": [1], "v": [110]}, schema=t.arrow_schema))
    t.create_tag("first", 1)
    t.create_branch("test")
    t.branch("test").write(pa.table({"pt": [2], "v": [210]}, schema=t.arrow_schema))
    t.branch("test").create_tag("first", 1)
    t.alter().set_option("scan.fallback-branch", "test").add_column("v2", pa.int32()).commit()
    add_main_column_to_branch(t, "test", "v2")
    t.write(pa.table({"pt": [1], "v": [120], "v2": [1200]}, schema=t.arrow_schema))
    t.branch("test").write(pa.table({"pt": [2], "v": [220], "v2": [2200]}, schema=t.arrow_schema))

    def load(**opts):
        df = spark.read.format("lakemerge").options(**opts).load(t.root)
        return df.columns, _sorted(df.collect())
    old = t.read(snapshot_id=1)
    assert (old.column_names, _sorted(old.to_pylist())) == (["pt", "v"], [(1, 110), (2, 210)])
    assert load(**{"scan.snapshot-id": "1"}) == load(**{"scan.tag-name": "first"}) == (["pt", "v"], [(1, 110), (2, 210)])
    got = spark_glue.read_table(spark, t.root, prune=True, versionAsOf="1").where("v > 0")
    assert (got.columns, _sorted(got.collect())) == (["pt", "v"], [(1, 110), (2, 210)])
    latest = t.read()
    assert load() == (latest.column_names, _sorted(latest.to_pylist())) == \
        (["pt", "v", "v2"], [(1, 110, None), (1, 120, 1200), (2, 210, None), (2, 220, 2200)])


def test_read_table_guard_keeps_the_other_branch_null_rows(spark, tmp_path):
    """read_table's always-true ``<column> IS NOT NULL`` guard must be NOT NULL on both branches: main's key ``k``
    is nullable on the append fallback branch, whose row with a null ``k`` must still be read."""
    spark_glue.register(spark)
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    t = cat.create_table("db.t", SCHEMA, primary_key=["k", "pt"], partition_keys=["pt"], options={"bucket": "1"})
    t.write(_rows((1, 10, "apple")))
    t.create_branch("b")
    b = t.branch("b")
    s = b.schema
    loose = dataclasses.replace(s, id=s.id + 1, primary_keys=(), options={**s.options, "bucket": "-1"},
                                fields=tuple(dataclasses.replace(f, type=f.type.with_nullable(True))
                                             if f.name == "k" else f for f in s.fields))
    t.file_io.write_bytes(TablePaths(t.root, b.paths.meta_root).schema(loose.id), loose.to_json().encode())
    t.branch("b").write(pa.table({"pt": [2], "k": [None], "v": ["null key"]}, schema=t.branch("b").arrow_schema))
    t.alter().set_option("scan.fallback-branch", "b").commit()
    got = spark_glue.read_table(spark, t.root, filter_pushdown=True).collect()
    assert sorted((r.pt, r.k, r.v) for r in got if r.k is not None) == [(1, 10, "apple")]
    assert [(r.pt, r.v) for r in got if r.k is None] == [(2, "null key")]


def test_a_batch_read_merges_a_postponed_merge_on_read_branch_as_the_engine_does(tmp_path):
    """The fallback branch is a ``bucket = -2`` table with ``postpone.merge-on-read = true``: its partitions that
    hold only postponed records are read from it, merged (engine.postpone.merge_on_read), by Table.read and by the
    Spark planning alike."""
    from engine.read.split_read import SplitReader
    from spark_glue.reading import plan_batch
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    t = cat.create_table("db.t", SCHEMA, primary_key=["pt", "k"], partition_keys=["pt"], options={"bucket": "1"})
    t.write(_rows((1, 1, "main")))
    t.create_branch("b")
    b = t.branch("b")
    s = b.schema
    new = dataclasses.replace(s, id=s.id + 1, options={**s.options, "bucket": "-2", "postpone.merge-on-read": "true",
                                                       "postpone.batch-write-fixed-bucket": "false"})
    t.file_io.write_bytes(TablePaths(t.root, b.paths.meta_root).schema(new.id), new.to_json().encode())
    t.branch("b").write(_rows((2, 1, "postponed")))
    t.branch("b").write(_rows((2, 1, "newer"), (2, 2, "two")))
    t.alter().set_option("scan.fallback-branch", "b").commit()
    expected = [(1, 1, "main"), (2, 1, "newer"), (2, 2, "two")]
    assert sorted((r["pt"], r["k"], r["v"]) for r in t.read().to_pylist()) == expected
    splits, branch_schemas = plan_batch(t, t.snapshot(), None, {})
    got = []
    for sp in splits:
        line = t if sp.branch is None else t.branch(sp.branch)
        reader = SplitReader(line.file_io, line.schema, line.schema_manager.schema)
        got += [(r["pt"], r["k"], r["v"]) for r in reader.read(sp, ["pt", "k", "v"]).to_pylist()]
    assert sorted(got) == expected


@pytest.mark.parametrize("option", ["scan.fallback-branch", "scan.primary-branch"])
def test_append_row_level_commands_change_the_table_files_only(spark, tmp_path, option):
    """DELETE / UPDATE / MERGE of an append table change the files of the table's own snapshot (Paimon's row-level commands
    take their candidate splits from the table's snapshot reader, main's), whatever the other branch supplies to
    reads; they failed (KeyError on the other branch's bucket) when their read also held the other branch's rows."""
    from pyspark.sql import functions as F
    spark_glue.register(spark)
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    t = cat.create_table("db.t", SCHEMA, partition_keys=["pt"], options={"bucket": "-1"})
    t.write(_rows((1, 10, "x"), (1, 20, "keep"), (3, 10, "x")))
    t.create_branch("b")
    b = t.branch("b")
    b.write(_rows((1, 30, "x"), (2, 10, "x"), (2, 20, "keep")))
    t.alter().set_option(option, "b").commit()
    branch_rows = _sorted(b.read().to_pylist())
    assert spark_glue.delete_where(spark, t.root, "v = 'x' and k = 10") is not None
    assert spark_glue.update_where(spark, t.root, {"v": F.lit("y")}, "k = 20") is not None
    source = spark.createDataFrame([(2, 20, "gone")], "pt int, k int, v string")  # only the branch has (2, 20)
    assert spark_glue.merge_into(spark, t.root, source, ["pt", "k"], when_matched="delete",
                                 when_not_matched=None) is None
    assert _sorted(t.branch("b").read().to_pylist()) == branch_rows
    t.alter().remove_option(option).commit()
    assert _sorted(t.read().to_pylist()) == [(1, 20, "y")]


def test_file_rewriting_delete_of_a_primary_key_table_changes_the_table_files_only(spark, tmp_path):
    """A first-row table's DELETE deletes from its files (Paimon's performNonPrimaryKeyDelete, whose splits come
    from the table's own snapshot reader): a matching row of the fallback branch is not the table's and stays
    (the read held it too, and its key, found in none of the table's files, failed the job)."""
    spark_glue.register(spark)
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    t = cat.create_table("db.t", SCHEMA, primary_key=["pt", "k"], partition_keys=["pt"],
                         options={"bucket": "1", "merge-engine": "first-row"})
    t.write(_rows((1, 10, "main"), (1, 20, "main")))
    t.create_branch("b")
    t.branch("b").write(_rows((2, 10, "branch"), (2, 20, "branch")))
    t.alter().set_option("scan.fallback-branch", "b").commit()
    assert spark_glue.delete_where(spark, t.root, "k = 10") is not None
    assert _sorted(t.read().to_pylist()) == [(1, 20, "main"), (2, 10, "branch"), (2, 20, "branch")]


@pytest.mark.parametrize("option", ["scan.fallback-branch", "scan.primary-branch"])
def test_primary_key_row_level_commands_refuse_rows_the_other_branch_supplies(spark, tmp_path, option):
    """As the engine (tests/test_fallback_branch.py): a DELETE / UPDATE / MERGE of a primary-key table writes delete
    and update records to the table's own branch; for a row the other branch supplies that would hide the
    partition's other rows (Paimon's result) or change nothing visible, so it is refused with nothing written. The
    table's own rows still change, and a MERGE that only inserts is a plain write."""
    from pyspark.sql import functions as F
    spark_glue.register(spark)
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    t = cat.create_table("db.t", SCHEMA, primary_key=["pt", "k"], partition_keys=["pt"], options={"bucket": "1"})
    t.write(_rows((1, 10, "main"), (1, 20, "main")))
    t.create_branch("b")
    t.branch("b").write(_rows((2, 10, "branch"), (2, 20, "branch")))
    t.alter().set_option(option, "b").commit()
    sid = t.latest_snapshot_id()
    with pytest.raises(Exception, match=r"delete_where matches rows of partition\(s\) \[\(2,\)\]"):
        spark_glue.delete_where(spark, t.root, "k = 10")
    with pytest.raises(Exception, match="update_where matches rows"):
        spark_glue.update_where(spark, t.root, {"v": F.lit("new")}, "k = 20")
    source = spark.createDataFrame([(2, 20, "gone")], "pt int, k int, v string")
    with pytest.raises(Exception, match="merge_into matches rows"):
        spark_glue.merge_into(spark, t.root, source, ["pt", "k"], when_matched="delete", when_not_matched=None)
    assert t.latest_snapshot_id() == sid
    assert spark_glue.delete_where(spark, t.root, "pt = 1 and k = 10") is not None
    assert spark_glue.update_where(spark, t.root, {"v": F.lit("new")}, "pt = 1") is not None
    fresh = spark.createDataFrame([(2, 10, "dup"), (3, 30, "new")], "pt int, k int, v string")
    assert spark_glue.merge_into(spark, t.root, fresh, ["pt", "k"], when_matched=None) is not None
    assert _sorted(cat.get_table("db.t").read().to_pylist()) == [(1, 20, "new"), (2, 10, "branch"),
                                                               (2, 20, "branch"), (3, 30, "new")]
