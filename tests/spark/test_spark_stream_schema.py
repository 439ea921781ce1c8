"""The Spark streaming source keeps the schema its query started with across ALTER TABLE; a restart from the
checkpoint continues under the table's schema then."""
from __future__ import annotations

import glob
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import spark_glue
from engine import Catalog

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([pa.field("k", pa.int64(), False), pa.field("v", pa.string()), pa.field("n", pa.int32())])


def _out(out):
    rows = [r for f in sorted(glob.glob(os.path.join(out, "*.parquet"))) for r in pq.read_table(f).to_pylist()]
    return sorted(rows, key=lambda r: r["k"])


def test_spark_stream_across_alter_table_and_a_checkpoint_restart(spark, tmp_path):
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    t = cat.create_table("db.t", SCHEMA, ["k"], options={"bucket": "1"})
    t.write(pa.table({"k": [1], "v": ["a"], "n": pa.array([1], pa.int32())}, schema=SCHEMA))
    out, ck = str(tmp_path / "out"), str(tmp_path / "ck")

    def start():
        return (spark_glue.read_stream(spark, t.root).writeStream.format("parquet").option("checkpointLocation", ck)
                .option("path", out).start())

    q = start()
    try:
        q.processAllAvailable()
        # while the query runs: rename v -> w, a new column v, n widened; then the renamed column is dropped
        t.alter().rename_column("v", "w").add_column("v", pa.string()).update_column_type("n", pa.int64()).commit()
        t.write(pa.table({"k": [2], "w": ["b"], "n": [2], "v": ["new"]}))
        t.alter().drop_column("w").commit()
        t.write(pa.table({"k": [3], "n": [3], "v": ["newer"]}))
        q.processAllAvailable()
        assert q.exception() is None
    finally:
        q.stop()
    # the running query kept its columns: v is the renamed column's values (by field id), null after its drop
    assert _out(out) == [{"k": 1, "v": "a", "n": 1, "_row_kind": "+I"}, {"k": 2, "v": "b", "n": 2, "_row_kind": "+I"},
                         {"k": 3, "v": None, "n": 3, "_row_kind": "+I"}]
    t.write(pa.table({"k": [4], "n": [4], "v": ["x"]}))
    q = start()  # restarted from the checkpoint with a DataFrame of the current schema: only snapshot 4's change
    try:
        q.processAllAvailable()
        assert q.exception() is None
    finally:
        q.stop()
    assert _out(out)[3:] == [{"k": 4, "n": 4, "v": "x", "_row_kind": "+I"}]
    assert len(_out(out)) == 4


def test_spark_stream_of_a_dataframe_older_than_an_alter_reads_through_its_schema(spark, tmp_path):
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    t = cat.create_table("db.t", SCHEMA, ["k"], options={"bucket": "1"})
    t.write(pa.table({"k": [1], "v": ["a"], "n": pa.array([1], pa.int32())}, schema=SCHEMA))
    df = spark_glue.read_stream(spark, t.root)  # created before the ALTER, started after it
    t.alter().rename_column("v", "w").add_column("v", pa.string()).commit()
    t.write(pa.table({"k": [2], "w": ["b"], "n": pa.array([2], pa.int32()), "v": ["new"]}))
    out, ck = str(tmp_path / "out"), str(tmp_path / "ck")
    q = df.writeStream.format("parquet").option("checkpointLocation", ck).option("path", out) \
        .trigger(availableNow=True).start()
    q.awaitTermination(120)
    assert q.exception() is None
    assert _out(out) == [{"k": 1, "v": "a", "n": 1, "_row_kind": "+I"}, {"k": 2, "v": "b", "n": 2, "_row_kind": "+I"}]
    # a stream of a column no schema of the table has fails naming the table and the column
    bad = spark.readStream.format("lakemerge").schema("k bigint, zz string").load(t.root)
    q = bad.writeStream.format("parquet").option("checkpointLocation", str(tmp_path / "ck2")) \
        .option("path", str(tmp_path / "out2")).trigger(availableNow=True).start()
    with pytest.raises(Exception, match="SchemaMismatch.*column 'zz'"):
        q.awaitTermination(120)


def test_a_stream_from_a_snapshot_reads_through_the_latest_schema(spark, tmp_path):
    """A batch read with scan.snapshot-id reads that snapshot's schema (time travel); a stream started from a
    snapshot keeps reading through the latest schema (Spark asks the source for its schema before it knows the read
    is a stream: an option only streams use, scan.mode here, tells them apart)."""
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    t = cat.create_table("db.t", SCHEMA, ["k"], options={"bucket": "1"})
    t.write(pa.table({"k": [1], "v": ["a"], "n": pa.array([1], pa.int32())}, schema=SCHEMA))
    t.alter().add_column("x", pa.string()).commit()
    t.write(pa.table({"k": [2], "v": ["b"], "n": pa.array([2], pa.int32()), "x": ["new"]}, schema=t.arrow_schema))
    opts = {"scan.mode": "from-snapshot-full", "scan.snapshot-id": "1"}
    df = spark.readStream.format("lakemerge").options(**opts).load(t.root)
    assert df.columns == ["k", "v", "n", "x"]
    out, ck = str(tmp_path / "out"), str(tmp_path / "ck")
    q = df.writeStream.format("parquet").option("checkpointLocation", ck).option("path", out) \
        .trigger(availableNow=True).start()
    q.awaitTermination(120)
    assert q.exception() is None
    assert _out(out) == [{"k": 1, "v": "a", "n": 1, "x": None}, {"k": 2, "v": "b", "n": 2, "x": "new"}]
    assert spark.read.format("lakemerge").option("scan.snapshot-id", "1").load(t.root).columns == ["k", "v", "n"]
