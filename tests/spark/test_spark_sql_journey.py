"""A data engineer's Spark journey over lakemerge tables: temporary views with INSERT / SELECT / joins, DataFrame
reads with filters on partition columns, empty writes, and the errors of writes that do not fit the table."""
from __future__ import annotations

import datetime as dt
import decimal

import pyarrow as pa
import pytest

import spark_glue
from engine import Catalog

pytestmark = pytest.mark.spark

D = dt.date


def _ids(rows):
    return sorted(r[0] for r in rows)


@pytest.fixture
def wh(spark, tmp_path):
    spark_glue.register(spark)
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    return cat


def test_views_insert_select_join_and_see_later_commits(spark, wh):
    """INSERT INTO a ``USING lakemerge`` view (VALUES, a column list, BY NAME), INSERT OVERWRITE (lakemerge
    replaces the partitions written, option dynamic-partition-overwrite; Paimon's connector replaces the whole table
    unless spark.sql.sources.partitionOverwriteMode=dynamic), SELECT with filters and a join of two views. A view
    keeps its first read plan in Spark 4.3 (spark-notes G1), so a view that must see later commits is made with
    option ``follow-latest``; a fresh DataFrame always reads the latest snapshot."""
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("d", pa.date32(), nullable=False),
                        ("s", pa.string()), ("amt", pa.decimal128(10, 2)), ("ts", pa.timestamp("us"))])
    t = wh.create_table("db.sales", schema, ["id", "d"], ["d"], {"bucket": "2"})
    dims = wh.create_table("db.dims", pa.schema([("s", pa.string()), ("label", pa.string())]), [], [], {})
    dims.write(pa.table({"s": ["a", "c"], "label": ["A", "C"]}))
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW sales USING lakemerge OPTIONS (path '{t.root}', "
              "`follow-latest` 'true')")
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW dims USING lakemerge OPTIONS (path '{dims.root}')")
    spark.sql("INSERT INTO sales VALUES (1, DATE'2024-01-01', 'a', 1.505, TIMESTAMP'2024-01-01 10:00:00'), "
              "(2, DATE'2024-01-02', NULL, NULL, NULL)")
    spark.sql("INSERT INTO sales (id, d, s) VALUES (3, DATE'2024-01-03', 'c')")
    spark.sql("INSERT INTO sales BY NAME SELECT 'c' AS s, DATE'2024-01-01' AS d, 4L AS id")
    assert t.latest_snapshot_id() == 3
    got = spark.sql("SELECT id, d, s, amt, ts FROM sales WHERE d <= DATE'2024-01-02' ORDER BY id").collect()
    assert [tuple(r) for r in got] == [(1, D(2024, 1, 1), "a", decimal.Decimal("1.51"), dt.datetime(2024, 1, 1, 10)),
                                       (2, D(2024, 1, 2), None, None, None), (4, D(2024, 1, 1), "c", None, None)]
    joined = spark.sql("SELECT sales.id, dims.label FROM sales JOIN dims ON sales.s = dims.s "
                       "WHERE sales.d >= '2024-01-01' ORDER BY sales.id").collect()
    assert [tuple(r) for r in joined] == [(1, "A"), (3, "C"), (4, "C")]
    # a later commit by another writer: the follow-latest view and a fresh DataFrame see it
    spark_glue.write_table(spark.createDataFrame([(5, D(2024, 1, 2), "a")], "id long, d date, s string"), t.root)
    assert _ids(spark.sql("SELECT id FROM sales").collect()) == [1, 2, 3, 4, 5]
    assert spark.read.format("lakemerge").load(t.root).count() == 5
    spark.sql("INSERT OVERWRITE sales VALUES (9, DATE'2024-01-01', 'z', 9.99, NULL)")
    assert sorted((r["id"], r["d"]) for r in t.read().to_pylist()) == [
        (2, D(2024, 1, 2)), (3, D(2024, 1, 3)), (5, D(2024, 1, 2)), (9, D(2024, 1, 1))]
    assert _ids(spark.sql("SELECT id FROM sales WHERE d = DATE'2024-01-01'").collect()) == [9]


def test_partition_filters_on_date_string_and_int_with_null_partitions(spark, wh):
    """Filters on DATE, STRING and INT partition columns, NULL partition values (Paimon's default partition) and an
    empty-string partition, with a plain read and a pruning read_table; selected columns in another order."""
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("d", pa.date32()), ("p", pa.string()),
                        ("q", pa.int32()), ("v", pa.string())])
    t = wh.create_table("db.events", schema, [], ["d", "p", "q"], {"bucket": "-1"})
    rows = [(1, D(2024, 1, 1), None, None, "x"), (2, D(2024, 1, 2), "a", 1, "y"), (3, None, "", 2, "z"),
            (4, D(2024, 1, 3), "b", 3, "w")]
    spark.createDataFrame(rows, "id long, d date, p string, q int, v string").write.format("lakemerge") \
        .mode("append").save(t.root)
    cases = {"d = DATE'2024-01-02'": [2], "d >= '2024-01-02'": [2, 4], "d IS NULL": [3],
             "d IN (DATE'2024-01-01', DATE'2024-01-03')": [1, 4], "p IS NULL": [1], "p = ''": [3],
             "p <> 'a'": [3, 4], "NOT (p = 'a')": [3, 4], "p LIKE 'b%'": [4], "p <=> NULL": [1], "q = 1": [2],
             "q = '1'": [2], "q > 1L": [3, 4], "q BETWEEN 2 AND 3": [3, 4], "q IS NULL": [1],
             "q IS NOT NULL AND d IS NOT NULL": [2, 4]}
    for where, want in cases.items():
        plain = spark.read.format("lakemerge").load(t.root).where(where)
        pruned = spark_glue.read_table(spark, t.root, prune=True).where(where)
        assert _ids(plain.select("id").collect()) == want, where
        assert _ids(pruned.select("id").collect()) == want, where
    got = spark_glue.read_table(spark, t.root, prune=True).select("v", "q", "id").where("q >= 2").orderBy("id")
    assert [tuple(r) for r in got.collect()] == [("z", 2, 3), ("w", 3, 4)]
    got = spark_glue.read_table(spark, t.root, columns=["v", "d"], prune=True).where("d = '2024-01-03'")
    assert [tuple(r) for r in got.collect()] == [("w", D(2024, 1, 3))]


def test_empty_writes_commit_nothing_but_an_empty_overwrite_replaces(spark, wh, tmp_path):
    """An empty DataFrame appended commits no snapshot (Paimon's batch commit ignores empty commits,
    BatchWriteBuilderImpl/InnerTableCommit); a first empty write creates the table without a snapshot; an empty
    overwrite of an unpartitioned table empties it, as Paimon's truncating overwrite does."""
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])
    t = wh.create_table("db.e", schema, ["id"], [], {"bucket": "1"})
    empty = spark.createDataFrame([], "id long, v string")
    empty.write.format("lakemerge").mode("append").save(t.root)
    assert spark_glue.write_table(empty, t.root) is None and t.latest_snapshot_id() is None
    path = str(tmp_path / "wh" / "db.db" / "fresh")
    empty.write.format("lakemerge").option("primary-key", "id").option("bucket", "1").mode("append").save(path)
    assert wh.get_table("db.fresh").latest_snapshot_id() is None
    spark_glue.write_table(spark.createDataFrame([(1, "a")], "id long, v string"), t.root)
    empty.write.format("lakemerge").mode("overwrite").save(t.root)
    assert t.snapshot().commit_kind == "OVERWRITE" and t.read().num_rows == 0


def test_writes_that_do_not_fit_the_table_fail_naming_table_and_column(spark, wh):
    """An extra column, a missing NOT NULL column and a null in a NOT NULL column (key or not) fail with an error
    naming the table and the column, through the data source, write_table and SQL INSERT INTO a view; nothing is
    committed. A missing nullable column is written as null."""
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string(), nullable=False),
                        ("n", pa.int32())])
    t = wh.create_table("db.strict", schema, ["id"], [], {"bucket": "1"})
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW strict USING lakemerge OPTIONS (path '{t.root}')")
    writes = [lambda df: df.write.format("lakemerge").mode("append").save(t.root),
              lambda df: spark_glue.write_table(df, t.root)]
    bad = {r"not in the table.*'w'|'w'.*not in the table": "SELECT 1L id, 'a' v, 1 n, 2 w",
           r"missing column.*'v'": "SELECT 1L id, 1 n",
           r"primary-key column 'id' contains nulls": "SELECT CAST(NULL AS BIGINT) id, 'a' v, 1 n",
           r"column 'v' is NOT NULL but the input contains nulls": "SELECT 1L id, CAST(NULL AS STRING) v, 1 n"}
    for message, sql in bad.items():
        for write in writes:
            with pytest.raises(Exception, match=message) as err:
                write(spark.sql(sql))
            assert "db.strict" in str(err.value)
    with pytest.raises(Exception, match=r"db\.strict.*column 'v' is NOT NULL"):
        spark.sql("INSERT INTO strict VALUES (1, NULL, 1)")
    assert t.latest_snapshot_id() is None
    writes[0](spark.sql("SELECT 1L id, 'a' v"))
    assert t.read().to_pylist() == [{"id": 1, "v": "a", "n": None}]
