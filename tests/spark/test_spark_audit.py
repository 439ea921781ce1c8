"""Regression tests for Spark glue bugs found by a user-side audit (one small table per test, shared session)."""
from __future__ import annotations

import pyarrow as pa
import pytest

import spark_glue
from engine import Catalog

pytestmark = pytest.mark.spark


def _catalog(tmp_path):
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    return cat


def _sorted(rows):
    return sorted((tuple(r) for r in rows), key=repr)


def test_append_table_with_a_null_partition_reads_through_spark(spark, tmp_path):
    """Spark read append tables with the primary-key merge reader, which refused their files (no system
    columns): every read of an append table failed."""
    t = _catalog(tmp_path).create_table("db.log", pa.schema([("p", pa.string()), ("x", pa.int64())]), [], ["p"], {})
    spark_glue.write_table(spark.createDataFrame([("a", 1), (None, 2), ("b", 3), (None, 4)], "p string, x long"),
                           t.root)
    df = spark.read.format("lakemerge").load(t.root)
    assert _sorted(df.collect()) == _sorted([("a", 1), (None, 2), ("b", 3), (None, 4)])
    assert _sorted(spark_glue.read_table(spark, t.root).where("p IS NULL").collect()) == [(None, 2), (None, 4)]
    assert _sorted(spark_glue.read_table(spark, t.root).where("p <> 'a'").collect()) == [("b", 3)]
    only_p = spark.read.format("lakemerge").option("columns", "p").load(t.root).collect()
    assert _sorted(only_p) == _sorted([("a",), (None,), ("b",), (None,)])


ORDERS = pa.schema([("region", pa.string()), ("id", pa.int64()), ("qty", pa.int32())])


@pytest.fixture
def orders(spark, tmp_path):
    t = _catalog(tmp_path).create_table("db.orders", ORDERS, ["region", "id"], ["region"], {"bucket": "2"})
    rows = [("eu", i, i % 7) for i in range(20)] + [("us", i, 1) for i in range(10)]
    spark_glue.write_table(spark.createDataFrame(rows, "region string, id long, qty int"), t.root)
    return t


def _count(spark, sql):
    return spark.sql(sql).collect()[0][0]


def test_scans_of_one_dataframe_never_share_a_pruned_plan(spark, orders):
    """Spark 4.3.0 reads every scan of one Python-source relation with the plan of the last filter push: the
    union of two filtered subsets of one read_table DataFrame returned one subset twice (10 rows, not 30), and a
    view with the filter-pushdown option answered an unfiltered count with the previous query's filtered rows."""
    df = spark_glue.read_table(spark, orders.root)
    assert df.where("region = 'eu'").unionAll(df.where("region = 'us'")).count() == 30
    assert df.where("region = 'eu'").alias("a").join(df.where("region = 'us'").alias("b"), "id").count() == 10
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW audit_pushdown USING lakemerge "
              f"OPTIONS (path '{orders.root}', 'filter-pushdown' 'true')")
    assert _count(spark, "SELECT count(*) FROM audit_pushdown WHERE id < 5") == 10
    assert _count(spark, "SELECT count(*) FROM audit_pushdown") == 30
    # a view made from read_table re-plans every query: it sees a commit made after its first query
    df.createOrReplaceTempView("audit_fresh")
    assert _count(spark, "SELECT count(*) FROM audit_fresh") == 30
    spark_glue.write_table(spark.createDataFrame([("us", 99, 1)], "region string, id long, qty int"), orders.root)
    assert _count(spark, "SELECT count(*) FROM audit_fresh") == 31


def test_merge_into_null_source_keys_and_key_moves(spark, orders):
    """A null source key to insert failed inside a Spark task (retried, wrapped); two null-key rows were reported as
    a duplicate key although a null never matches; 'update' on a subset of the key silently kept the target's
    partition column instead of refusing to update a primary-key column, as Paimon's MERGE INTO does."""
    from engine.errors import InvalidInput, NullPrimaryKey
    ddl = "region string, id long, qty int"
    before = orders.latest_snapshot_id()
    with pytest.raises(NullPrimaryKey, match=r"db\.orders.*'id'") as err:
        spark_glue.merge_into(spark, orders.root, spark.createDataFrame([("eu", None, 5), ("eu", 1, 50)], ddl),
                              on=["region", "id"])
    assert err.value.column == "id" and orders.latest_snapshot_id() == before
    with pytest.raises(InvalidInput, match="primary-key column.*region"):
        spark_glue.merge_into(spark, orders.root, spark.createDataFrame([("us", 2, 9)], ddl), on="id")
    # without an insert clause, null-key rows match nothing and are ignored, duplicates or not
    nulls = spark.createDataFrame([("eu", None, 5), ("eu", None, 6), ("eu", 1, 50)], ddl)
    spark_glue.merge_into(spark, orders.root, nulls, on=["region", "id"], when_not_matched=None)
    rows = {(r["region"], r["id"]): r["qty"] for r in orders.read().to_pylist()}
    assert len(rows) == 30 and rows[("eu", 1)] == 50 and rows[("us", 2)] == 1


def test_row_level_helpers_refuse_tables_they_cannot_change(spark, tmp_path):
    """UPDATE of an aggregation table folded the new value into the old one (SET s = 100 gave 105), of a first-row
    table was ignored; on an append table every helper failed inside Spark tasks. Paimon's Spark UPDATE / MERGE
    INTO refuse aggregation and first-row tables; the helpers now refuse all of these before running a job.
    DELETE wrote -D rows the aggregation folded as retractions (sum 5 - 5 = 0, the row stayed): like Paimon it now
    deletes the rows from the files of tables that cannot take deletes (tests/spark/test_spark_pk_delete.py)."""
    from engine.errors import InvalidInput
    cat = _catalog(tmp_path)
    schema = pa.schema([("id", pa.int64()), ("s", pa.int64())])
    agg = cat.create_table("db.agg", schema, ["id"], None, {"bucket": "1", "merge-engine": "aggregation",
                                                             "fields.s.aggregate-function": "sum"})
    first = cat.create_table("db.first", schema, ["id"], None, {"bucket": "1", "merge-engine": "first-row"})
    source = spark.createDataFrame([(1, 100)], "id long, s long")
    for t, calls, match in [
            (agg, ["update", "merge"], "merge-engine=aggregation"),
            (first, ["update", "merge"], "merge-engine=first-row")]:
        for call in calls:
            with pytest.raises(InvalidInput, match=match):
                {"update": lambda: spark_glue.update_where(spark, t.root, {"s": "100"}, "id = 1"),
                 "merge": lambda: spark_glue.merge_into(spark, t.root, source, on="id")}[call]()
    for t in (agg, first):
        t.write(pa.table({"id": [1, 2], "s": [5, 6]}, schema=schema))
        assert spark_glue.delete_where(spark, t.root, "id = 1") is not None
        assert t.read().to_pylist() == [{"id": 2, "s": 6}]


def test_write_schema_is_checked_before_any_task_runs(spark, orders):
    """A string column for an INT column was cast by value (written for '5', a task failure for 'abc'), and an
    empty DataFrame with a column the table lacks was accepted; Spark's ANSI store assignment (as Paimon's writes
    use) refuses both by type. Checked on the driver for write_table and the data source."""
    from engine.errors import SchemaMismatch
    before = orders.latest_snapshot_id()
    text_qty = spark.createDataFrame([("eu", 1, "5")], "region string, id long, qty string")
    with pytest.raises(SchemaMismatch, match=r"db\.orders.*'qty'") as err:
        spark_glue.write_table(text_qty, orders.root)
    assert err.value.column == "qty"
    with pytest.raises(Exception, match=r"db\.orders.*'qty'"):
        text_qty.write.format("lakemerge").mode("append").save(orders.root)
    empty_extra = spark.createDataFrame([], "region string, id long, qty int, extra string")
    with pytest.raises(SchemaMismatch, match=r"db\.orders.*extra"):
        spark_glue.write_table(empty_extra, orders.root)
    assert orders.latest_snapshot_id() == before


def test_read_table_of_non_key_columns_sees_new_commits(spark, orders):
    """Without a key column in ``columns`` the guard was ``qty IS NOT NULL OR qty IS NULL``, which Spark never
    pushes to a Python source: the reused DataFrame kept its first snapshot (30 rows after a commit made 31)."""
    df = spark_glue.read_table(spark, orders.root, columns=["qty"])
    assert df.columns == ["qty"] and df.count() == 30
    spark_glue.write_table(spark.createDataFrame([("us", 99, 1)], "region string, id long, qty int"), orders.root)
    assert df.count() == 31 and df.where("qty = 1").count() == 14


def _nanos_table(tmp_path, name, options):
    t = _catalog(tmp_path).create_table(name, pa.schema([("id", pa.int64()), ("ts", pa.timestamp("ns")),
                                                         ("v", pa.string())]), ["id"], None, {"bucket": "1", **options})
    nanos = [1_700_000_000_123_456_789, -1_001]
    t.write(pa.table({"id": [1, 2], "ts": pa.array(nanos, pa.timestamp("ns")), "v": ["a", "b"]}))
    return t


def test_nanosecond_timestamps_read_floored_to_microseconds(spark, tmp_path):
    """A TIMESTAMP(9) value with sub-microsecond digits failed every Spark read (a safe Arrow cast to Spark's
    microseconds); Paimon's Spark connector floors to microseconds (Timestamp.toMicros)."""
    import datetime as dt
    t = _nanos_table(tmp_path, "db.nanos", {})
    got = {r.id: r.ts for r in spark.read.format("lakemerge").load(t.root).collect()}
    epoch = dt.datetime(1970, 1, 1)
    assert got == {1: epoch + dt.timedelta(microseconds=1_700_000_000_123_456),
                   2: epoch - dt.timedelta(microseconds=2)}


def test_row_level_helpers_refuse_a_nanosecond_sequence_field(spark, tmp_path):
    """Spark floors the sequence.field's nanoseconds, so update_where / delete_where rewrote the rows with an older
    sequence value: the commit landed and changed nothing (the stored rows won)."""
    from engine.errors import InvalidInput
    t = _nanos_table(tmp_path, "db.seq", {"sequence.field": "ts"})
    for call in (lambda: spark_glue.update_where(spark, t.root, {"v": "'new'"}, "id = 1"),
                 lambda: spark_glue.delete_where(spark, t.root, "id = 2"),
                 lambda: spark_glue.merge_into(spark, t.root, spark.createDataFrame([(1, "m")], "id long, v string"),
                                               on="id", when_matched={"v": "s.v"}, when_not_matched=None)):
        with pytest.raises(InvalidInput, match=r"db\.seq.*sequence\.field 'ts'"):
            call()
    assert t.latest_snapshot_id() == 1


def test_append_table_streams_its_full_first_read(spark, tmp_path):
    """The first micro-batch of a stream (scan.mode latest-full) read append files with the key-merge reader
    and failed on every append table."""
    t = _catalog(tmp_path).create_table("db.events", pa.schema([("p", pa.string()), ("x", pa.int64())]), [], ["p"],
                                        {})
    spark_glue.write_table(spark.createDataFrame([("a", 1), (None, 2)], "p string, x long"), t.root)
    spark_glue.write_table(spark.createDataFrame([("a", 3)], "p string, x long"), t.root)
    query = (spark_glue.read_stream(spark, t.root).writeStream.format("memory").queryName("audit_events")
             .trigger(availableNow=True).start())
    query.awaitTermination(120)
    assert query.exception() is None
    got = spark.sql("SELECT p, x, _row_kind FROM audit_events").collect()
    assert _sorted(got) == _sorted([("a", 1, "+I"), (None, 2, "+I"), ("a", 3, "+I")])


def test_nanosecond_timestamps_stream_and_system_tables(spark, tmp_path):
    """Streaming reads and the $audit_log system table cast to Spark's microseconds with a safe cast too: both
    failed on a TIMESTAMP(9) value with sub-microsecond digits."""
    t = _nanos_table(tmp_path, "db.nanos", {})
    want = {1: 1_700_000_000_123_456, 2: -2}
    audit = spark.read.format("lakemerge").load(t.root + "$audit_log").selectExpr("id", "unix_micros(ts) AS us")
    assert {r.id: r.us for r in audit.collect()} == want
    query = (spark_glue.read_stream(spark, t.root).writeStream.format("memory").queryName("audit_nanos")
             .trigger(availableNow=True).start())
    query.awaitTermination(120)
    assert query.exception() is None
    got = spark.sql("SELECT id, unix_micros(cast(ts AS timestamp)) AS us FROM audit_nanos").collect()
    assert {r.id: r.us for r in got} == want


def test_audit_log_time_travel_reads_through_the_snapshots_schema(spark, tmp_path):
    """$audit_log with a time-travel option has the columns of the schema that snapshot was committed under, as
    a time-travel read of the table (and Paimon's AuditLogTable over the time-travelled table); it had the
    latest schema's columns."""
    t = _catalog(tmp_path).create_table("db.t", pa.schema([pa.field("k", pa.int64(), False), ("v", pa.string())]),
                                        ["k"], options={"bucket": "1"})
    t.write(pa.table({"k": [1], "v": ["a"]}, schema=t.arrow_schema))
    t.alter().rename_column("v", "w").add_column("z", pa.int32()).commit()
    t.write(pa.table({"k": [2], "w": ["b"], "z": pa.array([7], pa.int32())}))
    old = spark.read.format("lakemerge").option("scan.snapshot-id", "1").load(t.root + "$audit_log")
    assert old.columns == ["rowkind", "k", "v"]
    assert _sorted(old.collect()) == [("+I", 1, "a")]
    now = spark.read.format("lakemerge").load(t.root + "$audit_log")
    assert now.columns == ["rowkind", "k", "w", "z"]
    assert _sorted(now.collect()) == _sorted([("+I", 1, "a", None), ("+I", 2, "b", 7)])


def test_audit_log_without_time_travel_has_the_current_schema(spark, tmp_path):
    """Without a time-travel option $audit_log reads the table as it is now (Paimon's AuditLogTable over the
    table's latest schema): after an ALTER TABLE with no commit since, the renamed and added columns show. It had
    the columns of the schema the latest snapshot was committed under."""
    t = _catalog(tmp_path).create_table("db.t", pa.schema([pa.field("k", pa.int64(), False), ("v", pa.string())]),
                                        ["k"], options={"bucket": "1"})
    t.write(pa.table({"k": [1], "v": ["a"]}, schema=t.arrow_schema))
    t.alter().rename_column("v", "w").add_column("z", pa.int32()).commit()
    now = spark.read.format("lakemerge").load(t.root + "$audit_log")
    assert now.columns == ["rowkind", "k", "w", "z"]
    assert _sorted(now.collect()) == [("+I", 1, "a", None)]


def test_audit_log_at_a_tag_whose_snapshot_expired(spark, tmp_path):
    """scan.tag-name travels to the snapshot the tag file keeps, also after snapshot expiration removed it (as a
    time-travel read of the table, and Paimon's AuditLogTable over the time-travelled table); it raised
    SnapshotNotFound, looking the tag's snapshot up by id."""
    from tests.conftest import table_with_an_expired_tagged_snapshot
    t = table_with_an_expired_tagged_snapshot(_catalog(tmp_path), "db.t")
    assert t.snapshot_manager.earliest_id() == 2
    old = spark.read.format("lakemerge").option("scan.tag-name", "t1").load(t.root + "$audit_log")
    assert old.columns == ["rowkind", "k", "v"]
    assert _sorted(old.collect()) == [("+I", 1, "a")]
