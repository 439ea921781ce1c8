"""Option ``follow-latest``: a temporary view (or a reused DataFrame) over the source reads the latest snapshot at
every query, although Spark 4.3 keeps the relation's first read plan (spark_glue.reading, MergedTableReader)."""
from __future__ import annotations

import pyarrow as pa
import pytest

import spark_glue
from engine import Catalog

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([("k", pa.int64()), ("v", pa.string())])


def _rows(spark, sql):
    return sorted(tuple(r) for r in spark.sql(sql).collect())


def test_view_with_follow_latest_sees_every_commit(spark, tmp_path):
    spark_glue.register(spark)
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    t = cat.create_table("db.t", SCHEMA, ["k"], [], {"bucket": "2"})
    a = cat.create_table("db.a", SCHEMA, [], [], {})
    for table in (t, a):
        table.write(pa.table({"k": [1, 2, 3], "v": ["a", "b", "c"]}, schema=SCHEMA))
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW fl_stale USING lakemerge OPTIONS (path '{t.root}')")
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW fl_t USING lakemerge OPTIONS (path '{t.root}', "
              "`follow-latest` 'true')")
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW fl_a USING lakemerge OPTIONS (path '{a.root}', "
              "`follow-latest` 'true')")
    first = [(1, "a"), (2, "b"), (3, "c")]
    assert _rows(spark, "SELECT * FROM fl_stale") == _rows(spark, "SELECT * FROM fl_t") == first
    assert _rows(spark, "SELECT * FROM fl_a") == first
    t.write(pa.table({"k": [2, 4], "v": ["B", "d"]}, schema=SCHEMA))
    t.delete(pa.table({"k": [1]}, schema=pa.schema([("k", pa.int64())])))
    a.write(pa.table({"k": [4], "v": ["d"]}, schema=SCHEMA))
    # without the option the view keeps its first plan (Spark 4.3); with it every query reads the latest snapshot
    assert _rows(spark, "SELECT * FROM fl_stale") == first
    assert _rows(spark, "SELECT * FROM fl_t") == [(2, "B"), (3, "c"), (4, "d")]
    assert _rows(spark, "SELECT count(*) FROM fl_a") == [(4,)]
    assert spark.table("fl_t").rdd.getNumPartitions() == 1  # one task resolves the snapshot for the query

    # a pruning reader's pushed filter must not leak into a later query of the view that pushes none
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW fl_p USING lakemerge OPTIONS (path '{t.root}', "
              "`follow-latest` 'true', `filter-pushdown` 'true', `filter-pushdown.prune` 'true')")
    assert _rows(spark, "SELECT * FROM fl_p WHERE k = 3") == [(3, "c")]
    t.write(pa.table({"k": [5], "v": ["e"]}, schema=SCHEMA))
    assert _rows(spark, "SELECT * FROM fl_p") == [(2, "B"), (3, "c"), (4, "d"), (5, "e")]

    # time travel pins a snapshot: refused with the option
    with pytest.raises(Exception, match="follow-latest"):
        spark.read.format("lakemerge").option("follow-latest", "true").option("scan.snapshot-id", "1") \
            .load(t.root).collect()


def test_view_reads_through_the_schema_it_was_planned_under(spark, tmp_path):
    """ALTER TABLE after a view's first query: the view keeps its columns and reads them by field id, as Paimon's
    table object of that schema does (a renamed column under its old name, a dropped one from the files that
    still hold it), instead of failing
    with a KeyError or, when a new column took an old name, returning that new column's values."""
    spark_glue.register(spark)
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    t = cat.create_table("db.t", SCHEMA, ["k"], [], {"bucket": "2"})
    t.write(pa.table({"k": [1, 2], "v": ["a", "b"]}, schema=SCHEMA))
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW fs_stale USING lakemerge OPTIONS (path '{t.root}')")
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW fs_t USING lakemerge OPTIONS (path '{t.root}', "
              "`follow-latest` 'true')")
    assert _rows(spark, "SELECT * FROM fs_t") == _rows(spark, "SELECT * FROM fs_stale") == [(1, "a"), (2, "b")]
    t.alter().rename_column("v", "w").add_column("v", pa.string()).commit()  # v is now another column
    t.write(pa.table({"k": [3], "w": ["c"], "v": ["new"]}))
    assert _rows(spark, "SELECT * FROM fs_stale") == [(1, "a"), (2, "b")]
    assert _rows(spark, "SELECT * FROM fs_t") == [(1, "a"), (2, "b"), (3, "c")]
    t.alter().drop_column("w").commit()
    t.write(pa.table({"k": [4], "v": ["x"]}))
    # the dropped column still reads from the files that hold it, a file written after the drop gives null
    assert _rows(spark, "SELECT * FROM fs_t") == [(1, "a"), (2, "b"), (3, "c"), (4, None)]

    # a view whose columns are gone before its first query fails naming the column
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW fs_gone USING lakemerge OPTIONS (path '{t.root}', "
              "`follow-latest` 'true')")
    t.alter().rename_column("v", "z").commit()
    with pytest.raises(Exception, match="column 'v' of this read is not in the table's schema"):
        spark.sql("SELECT * FROM fs_gone").collect()
